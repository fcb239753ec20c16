/* snapshot_import.c: value tree -> snapshot model, schema-driven (never recursive on the input),
 * so shared or cyclic containers in a hostile pickle cannot make it loop. A scalar field whose
 * value cannot be used costs a warning (once per field name) and, where the record needs it, the
 * record: never the file. A record of the wrong shape (a segment or entry that is not a dict, a
 * `blocks` that is not a list) is skipped the same way; only a file that is no memory snapshot at
 * all (no `segments` list) is refused.
 *
 * Speed (10^7 entries in about a second): the pickle reader hands over segments and trace entries
 * a batch at a time as it reads them (snapshot_import_take), and a plain entry by itself, from
 * the reader's decoded items (snapshot_import_take_record); dict keys are interned strings,
 * compared by address; a frame list or frame dict the pickle memoizes is converted once; and an
 * entry or frame whose fields are all plain takes a path that formats no message. Anything else
 * goes through the checked path, which gives the same result or the warnings. */
#include "snapshot/snapshot_import.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/allocator.h"
#include "allocator/cuprof_errors.h"
#include "allocator/trace_sink.h"
#include "snapshot/snapshot_arena.h"
#include "snapshot/snapshot_field.h"
#include "snapshot/snapshot_import_annotations.h"
#include "snapshot/snapshot_import_meta.h"
#include "snapshot/snapshot_import_stack.h"
#include "snapshot/snapshot_write.h"

/* The keys the fast paths look for, in the order cuprof and PyTorch write them. */
enum {
    K_ACTION,
    K_ADDR,
    K_SIZE,
    K_STREAM,
    K_TIME_US,
    K_FRAMES,
    K_DEVICE_FREE,
    K_USER_METADATA,
    K_LABEL,
    K_CUPROF_POOL,
    ENTRY_KEYS
};
static const char *const entry_key_names[ENTRY_KEYS] = {
    "action", "addr",        "size",          "stream", "time_us",
    "frames", "device_free", "user_metadata", "label",  "cuprof_pool"};

/* A list whose items the pickle reader handed over: where it must turn out to be. */
struct taken_list {
    const struct sval_seq *list;
    size_t next; /* index of its next item (for messages) */
    size_t room; /* entries taken one by one before the next reservation */
};

/* Records handed over one by one: room is made (and its pages mapped) this many at a time. */
#define TAKE_AHEAD 4096

struct snapshot_importer {
    struct snapshot *snap;
    char *err;
    size_t err_len;
    struct snapshot_import_stacks stacks; /* frames and stacks */
    struct snap_block *blocks; /* one segment's blocks, staged until the segment is usable */
    size_t block_cap;
    uint64_t *reserved;                      /* per device: the sizes of its segments read so far */
    struct snapshot_fields f;                /* warnings, once per field name */
    const char *entry_keys[ENTRY_KEYS];      /* interned */
    const char *actions[TRACE_ACTION_COUNT]; /* interned action names */
    struct taken_list segments;              /* streaming: root["segments"] */
    struct taken_list *traces;               /* streaming: root["device_traces"][d] */
    size_t trace_cap;
    bool conflict; /* two lists were handed over for one place */
};

static int
fail(struct snapshot_importer *im, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(im->err, im->err_len, fmt, ap);
    va_end(ap);
    return code;
}

static int
oom(struct snapshot_importer *im)
{
    return fail(im, -CUPROF_EHOSTMEM, "out of memory");
}

static int
parse_state(const char *s)
{
    for (unsigned i = 0; snapshot_state_name(i) != NULL; i++)
        if (strcmp(s, snapshot_state_name(i)) == 0)
            return (int)i;
    if (strcmp(s, "active_awaiting_free") == 0) /* the name in PyTorch's docstring */
        return BLOCK_ACTIVE_PENDING_FREE;
    return -1;
}

static int
parse_pool(const char *s)
{
    for (unsigned i = 0; snapshot_pool_name(i) != NULL; i++)
        if (strcmp(s, snapshot_pool_name(i)) == 0)
            return (int)i;
    return -1;
}

/* ---- Segments and blocks. A block's size is needed to place every later block, so a block
 * without a usable size drops its whole segment (with a warning), never the file. */

#define SKIP_SEGMENT "segment skipped"

/* Returns 0 (block staged in *blk), 1 (segment to be skipped: warned) or a negative error. */
static int
import_block(struct snapshot_importer *im, const char *where, const struct sval *b,
             uint64_t seg_addr, uint64_t offset, struct snap_block *blk)
{
    if (b->type != SVAL_DICT) {
        int rc = snapshot_field_warn(&im->f, where, "blocks[]", b, "not a dict", SKIP_SEGMENT);
        return rc < 0 ? rc : 1;
    }
    *blk = (struct snap_block){.addr = seg_addr + offset};
    int rc = snapshot_field_u64(&im->f, where, b, "size", FIELD_BYTES, SKIP_SEGMENT, &blk->size);
    if (rc == FIELD_ABSENT &&
        (rc = snapshot_field_warn(&im->f, where, "size", NULL, "", SKIP_SEGMENT)) == 0)
        rc = FIELD_BAD;
    if (rc != FIELD_OK)
        return rc < 0 ? rc : 1;
    if ((rc = snapshot_field_u64(&im->f, where, b, "address", FIELD_BITS,
                                 "ignored; placed after the previous block", &blk->addr)) < 0)
        return rc;
    /* PyTorch 1.13/2.0 blocks: no address and no frames, but an optional history list. */
    const struct sval *hist = sval_at(sval_get(b, "history"), 0);
    if (hist != NULL && hist->type != SVAL_DICT)
        hist = NULL;
    const char *used = "ignored; the block size is used";
    rc = snapshot_field_u64(&im->f, where, b, "requested_size", FIELD_BYTES, used,
                            &blk->requested_size);
    if (rc == FIELD_ABSENT && hist != NULL)
        rc = snapshot_field_u64(&im->f, where, hist, "real_size", FIELD_BYTES, used,
                                &blk->requested_size);
    if (rc < 0)
        return rc;
    if (rc != FIELD_OK)
        blk->requested_size = blk->size;
    const char *state = "inactive";
    if ((rc = snapshot_field_str(&im->f, where, b, "state", "read as inactive", &state)) < 0)
        return rc;
    int st = parse_state(state);
    if (st < 0) {
        const struct sval *v = sval_get(b, "state");
        if ((rc = snapshot_field_warn(&im->f, where, "state", v, "not a block state cuprof knows",
                                      "read as inactive")) < 0)
            return rc;
        st = BLOCK_INACTIVE;
    }
    blk->state = (uint8_t)st;
    /* A live block's request was rounded up to its size, never down (an inactive block's is
     * stale, PyTorch keeps it). */
    if (st != BLOCK_INACTIVE && blk->requested_size > blk->size) {
        const struct sval *v = sval_get(b, "requested_size");
        if ((rc = snapshot_field_warn(&im->f, where, "requested_size",
                                      v != NULL ? v : sval_get(hist, "real_size"),
                                      "larger than the block", used)) < 0)
            return rc;
        blk->requested_size = blk->size;
    }
    const char *label = NULL, *pool = NULL;
    if ((rc = snapshot_field_str(&im->f, where, b, "user_metadata", "ignored", &label)) < 0 ||
        (rc = snapshot_field_str(&im->f, where, b, "cuprof_pool", "ignored", &pool)) < 0)
        return rc;
    if (label != NULL && label[0] != '\0' &&
        (blk->label = snapshot_intern(im->snap, label)) == NULL)
        return oom(im);
    if (pool != NULL && parse_pool(pool) >= 0)
        blk->pool = (uint8_t)parse_pool(pool);
    const struct sval *frames = sval_get(b, "frames");
    if (frames == NULL && hist != NULL)
        frames = sval_get(hist, "frames");
    struct snapshot_import_where w = {.text = where};
    return snapshot_import_stack(&im->stacks, &w, frames, &blk->stack);
}

/* Stages the segment's blocks in im->blocks: a block without a usable size drops the segment
 * before it is added. 0 (*offset = the blocks' sum), 1 (segment to be skipped: warned) or a
 * negative error. */
static int
stage_blocks(struct snapshot_importer *im, const char *where, const struct sval *blocks,
             uint64_t seg_addr, uint64_t *offset)
{
    size_t n = sval_len(blocks);
    if (n > im->block_cap) {
        struct snap_block *b = realloc(im->blocks, n * sizeof(*b));
        if (b == NULL)
            return oom(im);
        im->blocks = b;
        im->block_cap = n;
    }
    *offset = 0;
    for (size_t b = 0; b < n; b++) {
        char bw[96];
        snprintf(bw, sizeof(bw), "%s.blocks[%zu]", where, b);
        int rc = import_block(im, bw, sval_at(blocks, b), seg_addr, *offset, &im->blocks[b]);
        if (rc != 0)
            return rc;
        *offset += im->blocks[b].size;
        if (*offset > SNAP_MAX_BYTES) {
            rc = snapshot_field_warn(&im->f, where, "blocks", blocks,
                                     "sizes that sum past 2^57 bytes", SKIP_SEGMENT);
            return rc < 0 ? rc : 1;
        }
    }
    return 0;
}

/* The segment's allocated, active and requested sums, from its blocks (older layouts lack some
 * of them). */
static void
sum_blocks(struct snap_segment *seg, const struct snap_block *blocks, size_t n)
{
    for (size_t b = 0; b < n; b++) {
        if (blocks[b].state == BLOCK_ACTIVE_ALLOCATED)
            seg->allocated_size += blocks[b].size;
        if (blocks[b].state != BLOCK_INACTIVE) {
            seg->active_size += blocks[b].size;
            seg->requested_size += blocks[b].requested_size;
        }
    }
}

/* A segment's kind: small or large, expandable, its pool (PyTorch's id, cuprof's tag). */
static void
segment_kind(const struct sval *s, const char *type, const char *pool, struct snap_segment *seg)
{
    seg->is_small = type != NULL && strcmp(type, "small") == 0;
    const struct sval *exp = sval_get(s, "is_expandable");
    seg->is_expandable = exp != NULL && exp->type == SVAL_BOOL && exp->u.b;
    const struct sval *pid = sval_get(s, "segment_pool_id");
    for (size_t k = 0; k < 2 && k < sval_len(pid); k++) {
        bool neg;
        uint64_t mag;
        const char *why;
        if (snapshot_field_integer(sval_at(pid, k), &neg, &mag,
                                   &why)) /* MempoolId: two 64-bit ids */
            memcpy(&seg->pool_id[k], &(uint64_t){neg ? 0 - mag : mag}, sizeof(uint64_t));
    }
    if (pool != NULL && parse_pool(pool) >= 0)
        seg->cuprof_pool = (uint8_t)parse_pool(pool);
}

static int
import_segment(struct snapshot_importer *im, size_t i, const struct sval *s)
{
    char where[64];
    snprintf(where, sizeof(where), "segments[%zu]", i);
    if (s->type != SVAL_DICT)
        return snapshot_field_warn(&im->f, "segments", "segments[]", s, "not a dict", SKIP_SEGMENT);
    const struct sval *blocks = sval_get(s, "blocks");
    if (blocks != NULL && blocks->type != SVAL_LIST)
        return snapshot_field_warn(&im->f, where, "blocks", blocks, "not a list", SKIP_SEGMENT);
    struct snap_segment seg = {0};
    int64_t device = 0;
    const char *type = NULL, *pool = NULL;
    int rc = snapshot_field_i64(&im->f, where, s, "device", 0, SNAPSHOT_MAX_DEVICES - 1,
                                SKIP_SEGMENT, &device);
    if (rc == FIELD_OK || rc == FIELD_ABSENT) {
        rc = snapshot_field_u64(&im->f, where, s, "address", FIELD_BITS, SKIP_SEGMENT, &seg.addr);
        if (rc == FIELD_ABSENT &&
            (rc = snapshot_field_warn(&im->f, where, "address", NULL, "", SKIP_SEGMENT)) == 0)
            rc = FIELD_BAD;
    }
    if (rc != FIELD_OK)
        return rc < 0 ? rc : 0;
    if ((rc = snapshot_field_u64(&im->f, where, s, "stream", FIELD_BITS, "read as 0",
                                 &seg.stream)) < 0 ||
        (rc = snapshot_field_str(&im->f, where, s, "segment_type", "ignored", &type)) < 0 ||
        (rc = snapshot_field_str(&im->f, where, s, "cuprof_pool", "ignored", &pool)) < 0)
        return rc;
    seg.device = (int32_t)device;
    segment_kind(s, type, pool, &seg);
    struct snapshot_import_where w = {.text = where};
    if ((rc = snapshot_import_stack(&im->stacks, &w, sval_get(s, "frames"), &seg.stack)) != 0)
        return rc;
    size_t n = sval_len(blocks);
    uint64_t offset = 0;
    if ((rc = stage_blocks(im, where, blocks, seg.addr, &offset)) != 0)
        return rc < 0 ? rc : 0;
    const char *sum = "ignored; the sum of its blocks is used";
    rc = snapshot_field_u64(&im->f, where, s, "total_size", FIELD_BYTES, n > 0 ? sum : SKIP_SEGMENT,
                            &seg.total_size);
    if (rc < 0)
        return rc;
    if (n == 0 && rc != FIELD_OK) {
        if (rc == FIELD_ABSENT &&
            (rc = snapshot_field_warn(&im->f, where, "total_size", NULL, "", SKIP_SEGMENT)) < 0)
            return rc;
        return 0;
    }
    if (n > 0 && rc == FIELD_OK && seg.total_size != offset) {
        char why[80];
        snprintf(why, sizeof(why), "its blocks sum to %" PRIu64, offset);
        if ((rc = snapshot_field_warn(&im->f, where, "total_size", sval_get(s, "total_size"), why,
                                      sum)) < 0)
            return rc;
    }
    if (n > 0)
        seg.total_size = offset;
    sum_blocks(&seg, im->blocks, n);
    /* A device's segments fit its address space: this bounds every per-device sum (stats,
     * reserved bytes) far from int64 overflow. */
    if (im->reserved == NULL && (im->reserved = calloc(SNAPSHOT_MAX_DEVICES, 8)) == NULL)
        return oom(im);
    if (seg.total_size > SNAP_MAX_BYTES - im->reserved[device]) {
        rc = snapshot_field_warn(&im->f, where, "total_size", sval_get(s, "total_size"),
                                 "the device's segments sum past 2^57 bytes", SKIP_SEGMENT);
        return rc < 0 ? rc : 0;
    }
    im->reserved[device] += seg.total_size;
    if (snapshot_add_segment(im->snap, &seg) != 0)
        return oom(im);
    for (size_t b = 0; b < n; b++)
        if (snapshot_add_block(im->snap, &im->blocks[b]) != 0)
            return oom(im);
    return 0;
}

/* ---- Trace entries: one that lacks a usable address or size is skipped (warned). */

static int
parse_action(const char *s)
{
    for (unsigned i = 0; snapshot_action_name(i) != NULL; i++)
        if (strcmp(s, snapshot_action_name(i)) == 0)
            return (int)i;
    return -1;
}

#define SKIP_ENTRY "entry skipped"

/* The checked path: every field read with its range, warnings formatted. */
static int
import_entry_checked(struct snapshot_importer *im, struct snapshot_import_where *w, size_t d,
                     const struct sval *t)
{
    const char *where = snapshot_import_where_text(w);
    const char *action = NULL, *label = NULL, *pool = NULL, *stage = NULL;
    int rc = snapshot_field_str(&im->f, where, t, "action", SKIP_ENTRY, &action);
    if (rc == FIELD_ABSENT)
        rc = snapshot_field_warn(&im->f, where, "action", NULL, "", SKIP_ENTRY);
    if (action == NULL)
        return rc < 0 ? rc : 0;
    int a = parse_action(action);
    if (a < 0) { /* an action from a newer PyTorch */
        rc = snapshot_field_warn(&im->f, where, "action", sval_get(t, "action"),
                                 "an action cuprof does not know", SKIP_ENTRY);
        return rc < 0 ? rc : 0;
    }
    struct snap_entry e = {.action = (uint8_t)a};
    uint64_t addr = 0; /* an oom entry keeps device_free in its place */
    rc = snapshot_field_u64(&im->f, where, t, "addr", FIELD_BITS, SKIP_ENTRY, &addr);
    if (rc == FIELD_ABSENT && a != TRACE_OOM &&
        (rc = snapshot_field_warn(&im->f, where, "addr", NULL, "", SKIP_ENTRY)) == 0)
        rc = FIELD_BAD;
    if (rc == FIELD_OK || rc == FIELD_ABSENT)
        rc = snapshot_field_u64(&im->f, where, t, "size", a == TRACE_OOM ? FIELD_BITS : FIELD_BYTES,
                                SKIP_ENTRY, &e.size);
    if (rc != FIELD_OK && rc != FIELD_ABSENT)
        return rc < 0 ? rc : 0;
    uint64_t device_free = 0;
    if ((rc = snapshot_field_u64(&im->f, where, t, "device_free", FIELD_BITS, "ignored",
                                 &device_free)) < 0 ||
        (rc = snapshot_field_u64(&im->f, where, t, "stream", FIELD_BITS, "read as 0", &e.stream)) <
            0)
        return rc;
    /* Unix-epoch microseconds; the bound keeps every difference of two times in an int64. */
    rc = snapshot_field_i64(&im->f, where, t, "time_us", INT64_MIN / 4, INT64_MAX / 4, "ignored",
                            &e.time_us);
    if (rc < 0)
        return rc;
    e.has_time = rc == FIELD_OK;
    if ((rc = snapshot_field_str(&im->f, where, t, "user_metadata", "ignored", &label)) < 0 ||
        (label == NULL &&
         (rc = snapshot_field_str(&im->f, where, t, "label", "ignored", &label)) < 0) ||
        (rc = snapshot_field_str(&im->f, where, t, "cuprof_pool", "ignored", &pool)) < 0 ||
        (rc = snapshot_field_str(&im->f, where, t, "stage", "ignored", &stage)) < 0)
        return rc;
    if (a == TRACE_OOM)
        e.device_free = device_free;
    else
        e.addr = addr;
    if (label != NULL && label[0] == '\0' && a != TRACE_ANNOTATE)
        label = NULL;
    if (pool != NULL && parse_pool(pool) >= 0)
        e.pool = (uint8_t)parse_pool(pool);
    if ((rc = snapshot_import_stack(&im->stacks, w, sval_get(t, "frames"), &e.stack)) != 0)
        return rc;
    /* cuprof's own key: an annotation that starts or ends a range (an NVTX range). */
    enum snap_stage st = SNAP_STAGE_MARK;
    if (a == TRACE_ANNOTATE && stage != NULL)
        st = strcmp(stage, "START") == 0 ? SNAP_STAGE_START
             : strcmp(stage, "END") == 0 ? SNAP_STAGE_END
                                         : SNAP_STAGE_MARK;
    if ((label != NULL ? snapshot_add_annotation(im->snap, d, &e, label, st)
                       : snapshot_add_entry(im->snap, d, &e)) != 0)
        return oom(im);
    return 0;
}

/* The common entry: an action cuprof knows (not oom), integer addr, a size in range, stream and
 * time_us integers or absent, no device_free, label or pool: what the checked path would read
 * without a message. False sends the entry there. */
static bool
entry_plain(const struct snapshot_importer *im, const struct sval *const *v, struct snap_entry *e)
{
    const struct sval *a = v[K_ACTION], *addr = v[K_ADDR], *size = v[K_SIZE], *stream = v[K_STREAM],
                      *t = v[K_TIME_US];
    if (a == NULL || a->type != SVAL_STR || v[K_DEVICE_FREE] != NULL ||
        v[K_USER_METADATA] != NULL || v[K_LABEL] != NULL || v[K_CUPROF_POOL] != NULL)
        return false;
    unsigned act = 0;
    while (act < TRACE_ACTION_COUNT && im->actions[act] != a->u.s)
        act++;
    if (act == TRACE_ACTION_COUNT || act == TRACE_OOM || addr == NULL || addr->type != SVAL_INT ||
        size == NULL || size->type != SVAL_INT || size->u.i < 0 ||
        (uint64_t)size->u.i > SNAP_MAX_BYTES ||
        (stream != NULL && stream->type != SVAL_INT && stream->type != SVAL_NONE))
        return false;
    bool timed = t != NULL && t->type != SVAL_NONE;
    if (timed && (t->type != SVAL_INT || t->u.i < INT64_MIN / 4 || t->u.i > INT64_MAX / 4))
        return false;
    *e = (struct snap_entry){
        .action = (uint8_t)act,
        .addr = (uint64_t)addr->u.i,
        .size = (uint64_t)size->u.i,
        .stream = stream != NULL && stream->type == SVAL_INT ? (uint64_t)stream->u.i : 0,
        .has_time = timed,
        .time_us = timed ? t->u.i : 0,
    };
    return true;
}

static int
import_entry(struct snapshot_importer *im, size_t d, size_t i, const struct sval *t)
{
    struct snapshot_import_where w; /* its text is formatted only if a message needs it */
    w.text = NULL;
    w.d = d;
    w.i = i;
    if (t->type != SVAL_DICT)
        return snapshot_field_warn(&im->f, snapshot_import_where_text(&w), "device_traces[][]", t,
                                   "not a dict", SKIP_ENTRY);
    const struct sval *v[ENTRY_KEYS];
    snapshot_import_fields(t, im->entry_keys, ENTRY_KEYS, v);
    struct snap_entry e;
    if (!entry_plain(im, v, &e))
        return import_entry_checked(im, &w, d, t);
    int rc = snapshot_import_stack(&im->stacks, &w, v[K_FRAMES], &e.stack);
    if (rc != 0)
        return rc;
    return snapshot_add_entry(im->snap, d, &e) != 0 ? oom(im) : 0;
}

/* ---- Streaming: the pickle reader hands over the items of what it takes for root["segments"]
 * and root["device_traces"][d]; the finished tree must show those lists in those places. */

/* The d-th trace's record of what was taken (*out), with room for n more entries in the model: 0,
 * 1 when d is past SNAPSHOT_MAX_DEVICES (declined: kept in the tree, refused by import_all), or
 * a negative error. */
static int
taken_trace(struct snapshot_importer *im, uint32_t d, const struct sval_seq *list, size_t n,
            struct taken_list **out)
{
    if (d >= SNAPSHOT_MAX_DEVICES)
        return 1;
    if (d >= im->trace_cap) {
        size_t cap = im->trace_cap ? im->trace_cap : 8;
        while (cap <= d)
            cap *= 2;
        struct taken_list *tl = realloc(im->traces, cap * sizeof(*tl));
        if (tl == NULL)
            return oom(im);
        memset(tl + im->trace_cap, 0, (cap - im->trace_cap) * sizeof(*tl));
        im->traces = tl;
        im->trace_cap = cap;
    }
    struct taken_list *t = &im->traces[d];
    if (snapshot_set_device_count(im->snap, (size_t)d + 1) != 0 ||
        snapshot_reserve_entries(im->snap, d, n) != 0)
        return oom(im);
    if (t->list != NULL && t->list != list)
        im->conflict = true;
    t->list = list;
    *out = t;
    return 0;
}

int
snapshot_import_take_record(void *ctx, uint32_t d, const struct sval_seq *list,
                            const struct sval *items, size_t n)
{
    struct snapshot_importer *im = ctx;
    struct taken_list *t = d < im->trace_cap ? &im->traces[d] : NULL;
    if (t == NULL || t->list != list || t->room == 0) {
        int rc = taken_trace(im, d, list, TAKE_AHEAD, &t);
        if (rc != 0)
            return rc;
        t->room = TAKE_AHEAD;
    }
    t->room--;
    /* A dict over the reader's items: import_entry reads it and keeps nothing of it. */
    struct sval_seq seq = {.items = (struct sval *)items, .len = (uint32_t)(n / 2)};
    struct sval record = {.type = SVAL_DICT, .u.seq = &seq};
    return import_entry(im, d, t->next++, &record);
}

int
snapshot_import_take(void *ctx, enum pickle_list which, uint32_t d, const struct sval_seq *list,
                     const struct sval *items, size_t n)
{
    struct snapshot_importer *im = ctx;
    struct taken_list *t = &im->segments;
    if (which == PICKLE_TRACE) {
        int rc = taken_trace(im, d, list, n, &t);
        if (rc != 0)
            return rc;
    } else {
        if (t->list != NULL && t->list != list)
            im->conflict = true;
        t->list = list;
    }
    for (size_t k = 0; k < n; k++) {
        int rc = which == PICKLE_TRACE ? import_entry(im, d, t->next++, &items[k])
                                       : import_segment(im, t->next++, &items[k]);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* 1: `list` is the list taken for this place (its items are imported already); 0: none was
 * taken for it and `list` was not taken for another; SNAPSHOT_IMPORT_AGAIN: the reader's guess
 * was wrong for this file. */
static int
taken_here(const struct snapshot_importer *im, const struct sval *list, const struct taken_list *t)
{
    if (t != NULL && t->list != NULL)
        return list->u.seq == t->list ? 1 : SNAPSHOT_IMPORT_AGAIN;
    if (list->u.seq == im->segments.list)
        return SNAPSHOT_IMPORT_AGAIN;
    for (size_t d = 0; d < im->trace_cap; d++)
        if (list->u.seq == im->traces[d].list)
            return SNAPSHOT_IMPORT_AGAIN;
    return 0;
}

static int
import_traces(struct snapshot_importer *im, const struct sval *traces)
{
    int rc;
    size_t nt = sval_len(traces);
    if (nt > SNAPSHOT_MAX_DEVICES)
        return fail(im, -CUPROF_EFORMAT, "'device_traces' has %zu devices", nt);
    for (size_t d = 0; d < im->trace_cap; d++) { /* every taken list where it was thought to be */
        const struct sval *t = sval_at(traces, d);
        if (im->traces[d].list != NULL &&
            (t == NULL || t->type != SVAL_LIST || t->u.seq != im->traces[d].list))
            return SNAPSHOT_IMPORT_AGAIN;
    }
    if (snapshot_set_device_count(im->snap, nt) != 0)
        return oom(im);
    for (size_t d = 0; d < nt; d++) {
        const struct sval *t = sval_at(traces, d);
        if (t->type != SVAL_LIST) {
            if ((rc = snapshot_field_warn(&im->f, "device_traces", "device_traces[]", t,
                                          "not a list", "read as no history for that device")) < 0)
                return rc;
            continue;
        }
        if ((rc = taken_here(im, t, d < im->trace_cap ? &im->traces[d] : NULL)) != 0) {
            if (rc == 1)
                continue;
            return rc;
        }
        if (snapshot_reserve_entries(im->snap, d, sval_len(t)) != 0)
            return oom(im);
        for (size_t i = 0; i < sval_len(t); i++)
            if ((rc = import_entry(im, d, i, sval_at(t, i))) != 0)
                return rc;
    }
    return 0;
}

static int
import_all(struct snapshot_importer *im, const struct sval *root)
{
    const struct sval *segs = root, *traces = NULL;
    if (root->type == SVAL_DICT) {
        segs = sval_get(root, "segments");
        traces = sval_get(root, "device_traces");
        if (segs == NULL)
            return fail(im, -CUPROF_EFORMAT, "no 'segments' key: not a memory snapshot");
    }
    if (segs->type != SVAL_LIST)
        return fail(im, -CUPROF_EFORMAT, "'segments' is %s, expected list: not a memory snapshot",
                    sval_type_name(segs));
    int rc = taken_here(im, segs, &im->segments);
    if (rc == SNAPSHOT_IMPORT_AGAIN)
        return rc;
    for (size_t i = 0; rc == 0 && i < sval_len(segs); i++)
        if ((rc = import_segment(im, i, sval_at(segs, i))) != 0)
            return rc;
    if (traces != NULL && traces->type != SVAL_LIST) {
        if ((rc = snapshot_field_warn(&im->f, "snapshot", "device_traces", traces, "not a list",
                                      "read as no history")) < 0)
            return rc;
        traces = NULL;
    }
    if ((rc = import_traces(im, traces)) != 0)
        return rc;
    if ((rc = snapshot_import_annotations(&im->f, sval_get(root, "external_annotations"))) != 0)
        return rc;
    const struct sval *a = sval_get(root, "allocator_settings");
    if (a != NULL && (rc = snapshot_import_settings(&im->f, a)) != 0)
        return rc;
    const struct sval *c = sval_get(root, "cuprof");
    if (c != NULL && (rc = snapshot_import_cuprof(&im->f, c)) != 0)
        return rc;
    return 0;
}

struct snapshot_importer *
snapshot_import_begin(struct snapshot *snap, const char *name, char *err, size_t err_len)
{
    struct snapshot_importer *im = calloc(1, sizeof(*im));
    if (im == NULL)
        return NULL;
    *im = (struct snapshot_importer){
        .snap = snap, .err = err, .err_len = err_len, .f = {.snap = snap, .name = name}};
    bool ok = true;
    for (size_t k = 0; k < ENTRY_KEYS; k++)
        ok = ok && (im->entry_keys[k] = snapshot_intern(snap, entry_key_names[k])) != NULL;
    ok = ok && snapshot_import_stacks_init(&im->stacks, &im->f) == 0;
    for (unsigned k = 0; k < TRACE_ACTION_COUNT; k++)
        ok = ok && (im->actions[k] = snapshot_intern(snap, snapshot_action_name(k))) != NULL;
    if (!ok) {
        snapshot_import_free(im);
        return NULL;
    }
    return im;
}

int
snapshot_import_end(struct snapshot_importer *im, const struct sval *root, bool shared)
{
    int rc = shared || im->conflict ? SNAPSHOT_IMPORT_AGAIN : import_all(im, root);
    if (rc == 0)
        rc = snapshot_field_publish(&im->f);
    if (rc == -CUPROF_EHOSTMEM)
        oom(im);
    return rc;
}

void
snapshot_import_free(struct snapshot_importer *im)
{
    if (im == NULL)
        return;
    snapshot_import_stacks_free(&im->stacks);
    free(im->blocks);
    free(im->reserved);
    free(im->traces);
    snapshot_field_free(&im->f);
    free(im);
}

int
snapshot_import(struct snapshot *snap, const struct sval *root, const char *name, char *err,
                size_t err_len)
{
    struct snapshot_importer *im = snapshot_import_begin(snap, name, err, err_len);
    if (im == NULL) {
        snprintf(err, err_len, "out of memory");
        return -CUPROF_EHOSTMEM;
    }
    int rc = snapshot_import_end(im, root, false);
    snapshot_import_free(im);
    return rc;
}
