/* sval.c: containers and lookups of the readers' value tree. */
#include "snapshot/sval.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "allocator/cuprof_errors.h"
#include "snapshot/snapshot_arena.h"

struct sval_seq *
sval_seq_new(struct snapshot_arena *arena)
{
    struct sval_seq *seq = snapshot_arena_alloc_bytes(arena, sizeof(struct sval_seq));
    if (seq != NULL)
        *seq = (struct sval_seq){0};
    return seq;
}

/* The slots an array of `used` items has: 8, then powers of two. */
static size_t
seq_room(size_t used)
{
    size_t cap = used > 0 ? 8 : 0;
    while (cap < used)
        cap *= 2;
    return cap;
}

int
sval_seq_append(struct snapshot_arena *arena, struct sval_seq *seq, const struct sval *vals,
                size_t n, bool pairs)
{
    size_t used = pairs ? (size_t)seq->len * 2 : seq->len;
    if (n > UINT32_MAX - used)
        return -CUPROF_EFORMAT;
    if (used + n > seq_room(used)) {
        /* Arena memory: the old array is abandoned; doubling keeps the waste below the total. */
        size_t cap = seq_room(used + n);
        if (cap > SIZE_MAX / sizeof(struct sval))
            return -CUPROF_EHOSTMEM;
        struct sval *items = snapshot_arena_alloc_bytes(arena, cap * sizeof(struct sval));
        if (items == NULL)
            return -CUPROF_EHOSTMEM;
        if (used > 0)
            memcpy(items, seq->items, used * sizeof(struct sval));
        seq->items = items;
    }
    if (n > 0)
        memcpy(seq->items + used, vals, n * sizeof(struct sval));
    seq->len += (uint32_t)(pairs ? n / 2 : n);
    return 0;
}

const struct sval *
sval_get(const struct sval *dict, const char *key)
{
    if (dict == NULL || dict->type != SVAL_DICT)
        return NULL;
    const struct sval_seq *s = dict->u.seq;
    for (uint32_t i = s->len; i-- > 0;) {
        const struct sval *k = &s->items[2 * i];
        if (k->type == SVAL_STR && strcmp(k->u.s, key) == 0)
            return &s->items[2 * i + 1];
    }
    return NULL;
}

size_t
sval_len(const struct sval *v)
{
    if (v == NULL || (v->type != SVAL_LIST && v->type != SVAL_TUPLE))
        return 0;
    return v->u.seq->len;
}

const struct sval *
sval_at(const struct sval *v, size_t i)
{
    return i < sval_len(v) ? &v->u.seq->items[i] : NULL;
}

const char *
sval_type_name(const struct sval *v)
{
    static const char *const names[] = {"None",  "bool", "int",  "int",   "int",
                                        "float", "str",  "list", "tuple", "dict"};
    if (v == NULL)
        return "missing";
    return v->type < sizeof(names) / sizeof(names[0]) ? names[v->type] : "?";
}

const char *
sval_text(const struct sval *v, char *buf, size_t len)
{
    if (len == 0)
        return buf;
    if (v == NULL) {
        snprintf(buf, len, "missing");
        return buf;
    }
    switch (v->type) {
    case SVAL_BOOL:
        snprintf(buf, len, "%s", v->u.b ? "True" : "False");
        break;
    case SVAL_INT:
        snprintf(buf, len, "%" PRId64, v->u.i);
        break;
    case SVAL_UINT:
        snprintf(buf, len, "%" PRIu64, v->u.u);
        break;
    case SVAL_BIGINT:
        snprintf(buf, len, "%s", v->u.s);
        break;
    case SVAL_FLOAT:
        snprintf(buf, len, "%.17g", v->u.f);
        break;
    case SVAL_STR: {
        size_t n = strlen(v->u.s), cut = n > 40 ? 40 : n;
        while (cut < n && cut > 0 && ((unsigned char)v->u.s[cut] & 0xc0) == 0x80)
            cut--; /* not inside a UTF-8 sequence */
        snprintf(buf, len, "\"%.*s%s\"", (int)cut, v->u.s, cut < n ? "..." : "");
        break;
    }
    default:
        snprintf(buf, len, "a %s", sval_type_name(v));
        break;
    }
    return buf;
}
