/* snapshot_import_stack.c: frame lists of a snapshot's value tree -> the model's frames and
 * stacks. Cosmetic, so nothing in them refuses a record. A frame list or frame dict the pickle
 * memoizes is converted once: its index is kept in its sval_seq.tag (the header a use reads
 * anyway, where a table by address cost a cache miss an entry); a frame whose fields are plain
 * formats no message. */
#include "snapshot/snapshot_import_stack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/cuprof_errors.h"
#include "snapshot/snapshot_arena.h"

enum { K_NAME, K_FILENAME, K_LINE };
static const char *const frame_key_names[SNAPSHOT_IMPORT_FRAME_KEYS] = {"name", "filename", "line"};

const char *
snapshot_import_where_text(struct snapshot_import_where *w)
{
    if (w->text == NULL) {
        snprintf(w->buf, sizeof(w->buf), "device_traces[%zu][%zu]", w->d, w->i);
        w->text = w->buf;
    }
    return w->text;
}

void
snapshot_import_fields(const struct sval *dict, const char *const *keys, size_t n,
                       const struct sval **out)
{
    for (size_t j = 0; j < n; j++)
        out[j] = NULL;
    const struct sval_seq *s = dict->u.seq;
    size_t next = 0;
    for (uint32_t i = 0; i < s->len; i++) {
        const struct sval *k = &s->items[2 * i];
        if (k->type != SVAL_STR)
            continue;
        size_t j = next;
        if (j >= n || keys[j] != k->u.s) { /* not in the order writers use: search */
            for (j = 0; j < n && keys[j] != k->u.s; j++)
                ;
            if (j == n)
                continue;
        }
        out[j] = k + 1;
        next = j + 1;
    }
}

/* A frame's line: 1..INT32_MAX (CPython's line numbers are C ints), else unknown. PyTorch writes
 * an unknown line as size_t -1 (18446744073709551615), others write -1: both are read silently. */
static int
frame_line(struct snapshot_import_stacks *st, const char *where, const struct sval *f,
           int64_t *line)
{
    *line = SNAP_LINE_UNKNOWN;
    const struct sval *v = sval_get(f, "line");
    if (v == NULL || v->type == SVAL_NONE)
        return 0;
    const char *why = "not a line number";
    bool neg = false;
    uint64_t mag = 0;
    if (snapshot_field_integer(v, &neg, &mag, &why)) {
        if (!neg && mag <= INT32_MAX) {
            *line = (int64_t)mag;
            return 0;
        }
        if ((neg && mag == 1) || (!neg && mag == UINT64_MAX))
            return 0;
        why = "not a line number";
    }
    int rc = snapshot_field_warn(st->f, where, "line", v, why, "read as unknown");
    return rc < 0 ? rc : 0;
}

static bool
plain_text_field(const struct sval *v, const char **out)
{
    if (v == NULL || v->type == SVAL_NONE)
        return true; /* keeps the "??" default */
    if (v->type != SVAL_STR)
        return false;
    *out = v->u.s;
    return true;
}

/* A frame dict whose name, filename and line need no message (frame_line's silent cases). */
static bool
frame_plain(const struct snapshot_import_stacks *st, const struct sval *f, const char **name,
            const char **filename, int64_t *line)
{
    const struct sval *v[SNAPSHOT_IMPORT_FRAME_KEYS];
    snapshot_import_fields(f, st->frame_keys, SNAPSHOT_IMPORT_FRAME_KEYS, v);
    if (!plain_text_field(v[K_NAME], name) || !plain_text_field(v[K_FILENAME], filename))
        return false;
    const struct sval *l = v[K_LINE];
    *line = SNAP_LINE_UNKNOWN;
    if (l == NULL || l->type == SVAL_NONE || (l->type == SVAL_INT && l->u.i == -1) ||
        (l->type == SVAL_UINT && l->u.u == UINT64_MAX))
        return true;
    if (l->type == SVAL_INT && l->u.i >= 0 && l->u.i <= INT32_MAX) {
        *line = l->u.i;
        return true;
    }
    return false;
}

static int
import_frame(struct snapshot_import_stacks *st, struct snapshot_import_where *w,
             const struct sval *f, uint32_t *index)
{
    const char *name = st->unknown, *filename = st->unknown;
    int64_t line = SNAP_LINE_UNKNOWN;
    int rc;
    bool memo = f->type == SVAL_DICT && (f->flags & SVAL_MEMO);
    if (memo && f->u.seq->tag != 0) {
        *index = f->u.seq->tag - 1;
        return 0;
    }
    if (f->type != SVAL_DICT) {
        if ((rc = snapshot_field_warn(st->f, snapshot_import_where_text(w), "frames", f,
                                      "a frame that is not a dict", "read as ??")) < 0)
            return rc;
    } else if (!frame_plain(st, f, &name, &filename, &line)) {
        const char *at = snapshot_import_where_text(w);
        name = filename = st->unknown;
        if ((rc = snapshot_field_str(st->f, at, f, "name", "read as ??", &name)) < 0 ||
            (rc = snapshot_field_str(st->f, at, f, "filename", "read as ??", &filename)) < 0 ||
            (rc = frame_line(st, at, f, &line)) < 0)
            return rc;
    }
    if (snapshot_add_frame_interned(st->snap, name, filename, line, index) != 0)
        return -CUPROF_EHOSTMEM;
    if (memo) /* the tree is the reader's scratch: its tag fields are ours */
        ((struct sval_seq *)f->u.seq)->tag = *index + 1;
    return 0;
}

/* A frames list (absent or None: the empty stack). */
int
snapshot_import_stack(struct snapshot_import_stacks *st, struct snapshot_import_where *w,
                      const struct sval *frames, uint32_t *index)
{
    *index = 0;
    if (frames == NULL || frames->type == SVAL_NONE)
        return 0;
    if (frames->type != SVAL_LIST && frames->type != SVAL_TUPLE) {
        int rc = snapshot_field_warn(st->f, snapshot_import_where_text(w), "frames", frames,
                                     "not a list", "read as no stack");
        return rc < 0 ? rc : 0;
    }
    size_t n = frames->u.seq->len;
    bool memo = (frames->flags & SVAL_MEMO) != 0;
    if (n == 0)
        return 0;
    if (memo && frames->u.seq->tag != 0) {
        *index = frames->u.seq->tag - 1;
        return 0;
    }
    if (n > st->frame_buf_cap) {
        uint32_t *b = realloc(st->frame_buf, n * sizeof(*b));
        if (b == NULL)
            return -CUPROF_EHOSTMEM;
        st->frame_buf = b;
        st->frame_buf_cap = n;
    }
    for (size_t i = 0; i < n; i++) {
        int rc = import_frame(st, w, &frames->u.seq->items[i], &st->frame_buf[i]);
        if (rc != 0)
            return rc;
    }
    if (snapshot_add_stack(st->snap, st->frame_buf, n, index) != 0)
        return -CUPROF_EHOSTMEM;
    if (memo)
        ((struct sval_seq *)frames->u.seq)->tag = *index + 1;
    return 0;
}

int
snapshot_import_stacks_init(struct snapshot_import_stacks *st, struct snapshot_fields *f)
{
    *st = (struct snapshot_import_stacks){.snap = f->snap, .f = f};
    for (size_t k = 0; k < SNAPSHOT_IMPORT_FRAME_KEYS; k++)
        if ((st->frame_keys[k] = snapshot_intern(f->snap, frame_key_names[k])) == NULL)
            return -CUPROF_EHOSTMEM;
    return (st->unknown = snapshot_intern(f->snap, "??")) != NULL ? 0 : -CUPROF_EHOSTMEM;
}

void
snapshot_import_stacks_free(struct snapshot_import_stacks *st)
{
    free(st->frame_buf);
}
