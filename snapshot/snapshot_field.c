/* snapshot_field.c: one scalar field of a snapshot's value tree, read with the range its meaning
 * allows; an unusable value becomes a warning line, once per field name. */
#include "snapshot/snapshot_field.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/cuprof_errors.h"

int
snapshot_field_warn(struct snapshot_fields *f, const char *where, const char *key,
                    const struct sval *v, const char *why, const char *then)
{
    for (size_t i = 0; i < f->warned_len; i++) {
        if (strcmp(f->warnings[i].key, key) == 0) {
            f->warnings[i].count++;
            return 0;
        }
    }
    if (f->warned_len == SNAPSHOT_FIELD_MAX_WARNINGS) {
        f->unlisted++;
        return 0;
    }
    if (f->warned_len == f->warned_cap) {
        size_t cap = f->warned_cap ? f->warned_cap * 2 : 16;
        struct snapshot_field_warning *w = realloc(f->warnings, cap * sizeof(*w));
        if (w == NULL)
            return -CUPROF_EHOSTMEM;
        f->warnings = w;
        f->warned_cap = cap;
    }
    char val[96], line[512];
    if (v == NULL)
        snprintf(line, sizeof(line), "%s: %s: field \"%s\" is missing; %s", f->name, where, key,
                 then);
    else
        snprintf(line, sizeof(line), "%s: %s: field \"%s\" is %s: %s; %s", f->name, where, key,
                 sval_text(v, val, sizeof(val)), why, then);
    for (char *c = line; *c != '\0'; c++) /* one printable line, whatever the file holds */
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    const char *k = snapshot_intern(f->snap, key), *t = snapshot_intern(f->snap, line);
    if (k == NULL || t == NULL)
        return -CUPROF_EHOSTMEM;
    f->warnings[f->warned_len++] = (struct snapshot_field_warning){k, t, 1};
    return 0;
}

int
snapshot_field_publish(struct snapshot_fields *f)
{
    if (f->warned_len == 0)
        return 0;
    struct snapshot *snap = f->snap;
    snap->warnings = calloc(f->warned_len + 1, sizeof(*snap->warnings));
    if (snap->warnings == NULL)
        return -CUPROF_EHOSTMEM;
    for (size_t i = 0; i < f->warned_len; i++) {
        const struct snapshot_field_warning *w = &f->warnings[i];
        char line[600];
        if (w->count > 1)
            snprintf(line, sizeof(line), "%s (and in %zu more records)", w->text, w->count - 1);
        else
            snprintf(line, sizeof(line), "%s", w->text);
        if ((snap->warnings[i] = snapshot_intern(snap, line)) == NULL)
            return -CUPROF_EHOSTMEM;
        snap->warning_count = i + 1;
    }
    if (f->unlisted > 0) {
        char line[300];
        snprintf(line, sizeof(line),
                 "%s: %zu more values in other fields could not be used; ignored", f->name,
                 f->unlisted);
        for (char *c = line; *c != '\0'; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                *c = '?';
        if ((snap->warnings[snap->warning_count] = snapshot_intern(snap, line)) == NULL)
            return -CUPROF_EHOSTMEM;
        snap->warning_count++;
    }
    return 0;
}

bool
snapshot_field_integer(const struct sval *v, bool *neg, uint64_t *mag, const char **why)
{
    switch (v->type) {
    case SVAL_BOOL:
        *neg = false;
        *mag = v->u.b;
        return true;
    case SVAL_INT:
        *neg = v->u.i < 0;
        *mag = *neg ? (uint64_t)(-(v->u.i + 1)) + 1 : (uint64_t)v->u.i;
        return true;
    case SVAL_UINT:
        *neg = false;
        *mag = v->u.u;
        return true;
    case SVAL_FLOAT:
        if (isfinite(v->u.f) && v->u.f == floor(v->u.f) && fabs(v->u.f) < 0x1p64) {
            *neg = v->u.f < 0;
            *mag = (uint64_t)fabs(v->u.f);
            return true;
        }
        *why = !isfinite(v->u.f) || fabs(v->u.f) >= 0x1p64 ? "not a 64-bit integer"
                                                           : "not a whole number";
        return false;
    case SVAL_BIGINT:
        *why = "wider than 64 bits";
        return false;
    default:
        *why = "not an integer";
        return false;
    }
}

int
snapshot_field_u64(struct snapshot_fields *f, const char *where, const struct sval *d,
                   const char *key, enum snapshot_field_kind k, const char *then, uint64_t *out)
{
    const struct sval *v = sval_get(d, key);
    if (v == NULL || v->type == SVAL_NONE)
        return FIELD_ABSENT;
    const char *why = NULL;
    bool neg = false;
    uint64_t mag = 0;
    if (snapshot_field_integer(v, &neg, &mag, &why)) {
        if (k == FIELD_BITS && (!neg || mag <= (uint64_t)INT64_MAX + 1)) {
            *out = neg ? 0 - mag : mag;
            return FIELD_OK;
        }
        if (!neg && mag <= SNAP_MAX_BYTES) {
            *out = mag;
            return FIELD_OK;
        }
        why = neg ? "negative" : "larger than any memory (2^57 bytes)";
    }
    int rc = snapshot_field_warn(f, where, key, v, why, then);
    return rc < 0 ? rc : FIELD_BAD;
}

int
snapshot_field_i64(struct snapshot_fields *f, const char *where, const struct sval *d,
                   const char *key, int64_t lo, int64_t hi, const char *then, int64_t *out)
{
    return snapshot_field_i64_value(f, where, key, sval_get(d, key), lo, hi, then, out);
}

int
snapshot_field_i64_value(struct snapshot_fields *f, const char *where, const char *key,
                         const struct sval *v, int64_t lo, int64_t hi, const char *then,
                         int64_t *out)
{
    if (v == NULL || v->type == SVAL_NONE)
        return FIELD_ABSENT;
    const char *why = NULL;
    bool neg = false;
    uint64_t mag = 0;
    if (snapshot_field_integer(v, &neg, &mag, &why)) {
        why = "out of range";
        if (mag <= INT64_MAX || (neg && mag == (uint64_t)INT64_MAX + 1)) {
            int64_t x = !neg ? (int64_t)mag : mag > INT64_MAX ? INT64_MIN : -(int64_t)mag;
            if (x >= lo && x <= hi) {
                *out = x;
                return FIELD_OK;
            }
            if (x < 0 && lo >= 0)
                why = "negative";
        }
    }
    int rc = snapshot_field_warn(f, where, key, v, why, then);
    return rc < 0 ? rc : FIELD_BAD;
}

int
snapshot_field_str(struct snapshot_fields *f, const char *where, const struct sval *d,
                   const char *key, const char *then, const char **out)
{
    const struct sval *v = sval_get(d, key);
    if (v == NULL || v->type == SVAL_NONE)
        return FIELD_ABSENT;
    if (v->type == SVAL_STR) {
        *out = v->u.s;
        return FIELD_OK;
    }
    int rc = snapshot_field_warn(f, where, key, v, "not a string", then);
    return rc < 0 ? rc : FIELD_BAD;
}

int
snapshot_field_bool(struct snapshot_fields *f, const char *where, const struct sval *d,
                    const char *key, bool *out)
{
    int64_t v = 0;
    int rc = snapshot_field_i64(f, where, d, key, INT64_MIN, INT64_MAX, "ignored", &v);
    if (rc == FIELD_OK)
        *out = v != 0;
    return rc;
}

void
snapshot_field_free(struct snapshot_fields *f)
{
    free(f->warnings);
    f->warnings = NULL;
    f->warned_len = f->warned_cap = 0;
}
