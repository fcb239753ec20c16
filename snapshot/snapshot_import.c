/* snapshot_import.c: value tree -> snapshot model, schema-driven (never recursive on the input),
 * so shared or cyclic containers in a hostile pickle cannot make it loop. A scalar field whose
 * value cannot be used costs a warning (once per field name) and, where the record needs it, the
 * record: never the file. A record of the wrong shape (a segment or entry that is not a dict, a
 * `blocks` that is not a list) is skipped the same way; only a file that is no memory snapshot at
 * all (no `segments` list) is refused. */
#include "snapshot/snapshot_import.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/allocator.h"
#include "allocator/cuprof_errors.h"
#include "snapshot/snapshot_usage.h"
#include "allocator/trace_sink.h"
#include "snapshot/snapshot_field.h"
#include "snapshot/snapshot_write.h"

/* Pointer -> index cache: a frame dict or frame list shared through the pickle memo is
 * converted once. */
struct ptr_slot {
    const void *key;
    uint32_t value;
};

struct imp {
    struct snapshot *snap;
    char *err;
    size_t err_len;
    struct ptr_slot *slots;
    size_t slot_cap, slot_used;
    uint32_t *frame_buf;
    size_t frame_buf_cap;
    struct snap_block *blocks; /* one segment's blocks, staged until the segment is usable */
    size_t block_cap;
    uint64_t *reserved;       /* per device: the sizes of its segments read so far */
    struct snapshot_fields f; /* warnings, once per field name */
};

static int
fail(struct imp *im, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(im->err, im->err_len, fmt, ap);
    va_end(ap);
    return code;
}

static int
oom(struct imp *im)
{
    return fail(im, -CUPROF_EHOSTMEM, "out of memory");
}

static bool
cache_get(struct imp *im, const void *key, uint32_t *value)
{
    if (im->slot_cap == 0)
        return false;
    size_t mask = im->slot_cap - 1, j = (size_t)(((uintptr_t)key >> 4) * 0x9e3779b97f4a7c15ull);
    for (j &= mask; im->slots[j].key != NULL; j = (j + 1) & mask) {
        if (im->slots[j].key == key) {
            *value = im->slots[j].value;
            return true;
        }
    }
    return false;
}

static int
cache_put(struct imp *im, const void *key, uint32_t value)
{
    if ((im->slot_used + 1) * 2 > im->slot_cap) {
        size_t cap = im->slot_cap ? im->slot_cap * 2 : 1024;
        struct ptr_slot *s = calloc(cap, sizeof(*s));
        if (s == NULL)
            return -CUPROF_EHOSTMEM;
        struct ptr_slot *old = im->slots;
        size_t old_cap = im->slot_cap;
        im->slots = s;
        im->slot_cap = cap;
        im->slot_used = 0;
        for (size_t i = 0; i < old_cap; i++)
            if (old[i].key != NULL && cache_put(im, old[i].key, old[i].value) != 0)
                return -CUPROF_EHOSTMEM;
        free(old);
    }
    size_t mask = im->slot_cap - 1, j = (size_t)(((uintptr_t)key >> 4) * 0x9e3779b97f4a7c15ull);
    for (j &= mask; im->slots[j].key != NULL; j = (j + 1) & mask)
        ;
    im->slots[j] = (struct ptr_slot){key, value};
    im->slot_used++;
    return 0;
}

/* ---- Frames and stacks: cosmetic, so nothing in them refuses a record. */

/* A frame's line: 1..INT32_MAX (CPython's line numbers are C ints), else unknown. PyTorch writes
 * an unknown line as size_t -1 (18446744073709551615), others write -1: both are read silently. */
static int
frame_line(struct imp *im, const char *where, const struct sval *f, int64_t *line)
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
    int rc = snapshot_field_warn(&im->f, where, "line", v, why, "read as unknown");
    return rc < 0 ? rc : 0;
}

static int
import_frame(struct imp *im, const char *where, const struct sval *f, uint32_t *index)
{
    const char *name = "??", *filename = "??";
    int64_t line = SNAP_LINE_UNKNOWN;
    int rc;
    if (f->type != SVAL_DICT) {
        if ((rc = snapshot_field_warn(&im->f, where, "frames", f, "a frame that is not a dict",
                                      "read as ??")) < 0)
            return rc;
    } else {
        if (cache_get(im, f->u.seq, index))
            return 0;
        if ((rc = snapshot_field_str(&im->f, where, f, "name", "read as ??", &name)) < 0 ||
            (rc = snapshot_field_str(&im->f, where, f, "filename", "read as ??", &filename)) < 0 ||
            (rc = frame_line(im, where, f, &line)) < 0)
            return rc;
    }
    if (snapshot_add_frame(im->snap, name, filename, line, index) != 0 ||
        (f->type == SVAL_DICT && cache_put(im, f->u.seq, *index) != 0))
        return oom(im);
    return 0;
}

/* A frames list (absent or None: the empty stack). */
static int
import_stack(struct imp *im, const char *where, const struct sval *frames, uint32_t *index)
{
    *index = 0;
    if (frames == NULL || frames->type == SVAL_NONE)
        return 0;
    if (frames->type != SVAL_LIST && frames->type != SVAL_TUPLE) {
        int rc =
            snapshot_field_warn(&im->f, where, "frames", frames, "not a list", "read as no stack");
        return rc < 0 ? rc : 0;
    }
    size_t n = sval_len(frames);
    if (n == 0 || cache_get(im, frames->u.seq, index))
        return 0;
    if (n > im->frame_buf_cap) {
        uint32_t *b = realloc(im->frame_buf, n * sizeof(*b));
        if (b == NULL)
            return oom(im);
        im->frame_buf = b;
        im->frame_buf_cap = n;
    }
    for (size_t i = 0; i < n; i++) {
        int rc = import_frame(im, where, sval_at(frames, i), &im->frame_buf[i]);
        if (rc != 0)
            return rc;
    }
    if (snapshot_add_stack(im->snap, im->frame_buf, n, index) != 0 ||
        cache_put(im, frames->u.seq, *index) != 0)
        return oom(im);
    return 0;
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
import_block(struct imp *im, const char *where, const struct sval *b, uint64_t seg_addr,
             uint64_t offset, struct snap_block *blk)
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
    const struct sval *frames = sval_get(b, "frames");
    if (frames == NULL && hist != NULL)
        frames = sval_get(hist, "frames");
    return import_stack(im, where, frames, &blk->stack);
}

/* Stages the segment's blocks in im->blocks: a block without a usable size drops the segment
 * before it is added. 0 (*offset = the blocks' sum), 1 (segment to be skipped: warned) or a
 * negative error. */
static int
stage_blocks(struct imp *im, const char *where, const struct sval *blocks, uint64_t seg_addr,
             uint64_t *offset)
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

static int
import_segment(struct imp *im, size_t i, const struct sval *s)
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
    seg.is_small = type != NULL && strcmp(type, "small") == 0;
    const struct sval *exp = sval_get(s, "is_expandable");
    seg.is_expandable = exp != NULL && exp->type == SVAL_BOOL && exp->u.b;
    const struct sval *pid = sval_get(s, "segment_pool_id");
    for (size_t k = 0; k < 2 && k < sval_len(pid); k++) {
        bool neg;
        uint64_t mag;
        const char *why;
        if (snapshot_field_integer(sval_at(pid, k), &neg, &mag,
                                   &why)) /* MempoolId: two 64-bit ids */
            memcpy(&seg.pool_id[k], &(uint64_t){neg ? 0 - mag : mag}, sizeof(uint64_t));
    }
    if (pool != NULL && parse_pool(pool) >= 0)
        seg.cuprof_pool = (uint8_t)parse_pool(pool);
    if ((rc = import_stack(im, where, sval_get(s, "frames"), &seg.stack)) != 0)
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

static int
import_entry(struct imp *im, size_t d, size_t i, const struct sval *t)
{
    char where[64];
    snprintf(where, sizeof(where), "device_traces[%zu][%zu]", d, i);
    if (t->type != SVAL_DICT)
        return snapshot_field_warn(&im->f, where, "device_traces[][]", t, "not a dict", SKIP_ENTRY);
    const char *action = NULL, *label = NULL, *pool = NULL;
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
    rc = snapshot_field_u64(&im->f, where, t, "addr", FIELD_BITS, SKIP_ENTRY, &e.addr);
    if (rc == FIELD_ABSENT && a != TRACE_OOM &&
        (rc = snapshot_field_warn(&im->f, where, "addr", NULL, "", SKIP_ENTRY)) == 0)
        rc = FIELD_BAD;
    if (rc == FIELD_OK || rc == FIELD_ABSENT)
        rc = snapshot_field_u64(&im->f, where, t, "size", a == TRACE_OOM ? FIELD_BITS : FIELD_BYTES,
                                SKIP_ENTRY, &e.size);
    if (rc != FIELD_OK && rc != FIELD_ABSENT)
        return rc < 0 ? rc : 0;
    if ((rc = snapshot_field_u64(&im->f, where, t, "device_free", FIELD_BITS, "ignored",
                                 &e.device_free)) < 0 ||
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
        (rc = snapshot_field_str(&im->f, where, t, "cuprof_pool", "ignored", &pool)) < 0)
        return rc;
    if (label != NULL && (label[0] != '\0' || a == TRACE_ANNOTATE))
        e.label = label;
    if (pool != NULL && parse_pool(pool) >= 0)
        e.pool = (uint8_t)parse_pool(pool);
    if ((rc = import_stack(im, where, sval_get(t, "frames"), &e.stack)) != 0)
        return rc;
    if (snapshot_add_entry(im->snap, d, &e) != 0)
        return oom(im);
    return 0;
}

/* ---- allocator_settings and cuprof's section: only shown, so a bad value is ignored. */

/* PyTorch writes SIZE_MAX ("no limit") as -1; Python code may write it as 2^64-1. */
static int
size_max_field(struct imp *im, const char *where, const char *key, const struct sval *v,
               int64_t *out)
{
    if (v != NULL && v->type == SVAL_UINT && v->u.u == UINT64_MAX) {
        *out = -1;
        return FIELD_OK;
    }
    return snapshot_field_i64_value(&im->f, where, key, v, -1, INT64_MAX, "ignored", out);
}

static int
import_settings(struct imp *im, const struct sval *a)
{
    const char *w = "allocator_settings";
    if (a->type != SVAL_DICT) {
        int rc = snapshot_field_warn(&im->f, "snapshot", w, a, "not a dict", "ignored");
        return rc < 0 ? rc : 0;
    }
    struct snap_allocator_settings *s = &im->snap->allocator_settings;
    im->snap->has_allocator_settings = true;
    int64_t v = 0;
    int rc;
    if ((rc = snapshot_field_str(&im->f, w, a, "PYTORCH_CUDA_ALLOC_CONF", "ignored",
                                 &s->alloc_conf)) < 0 ||
        (rc = size_max_field(im, w, "max_split_size", sval_get(a, "max_split_size"),
                             &s->max_split_size)) < 0 ||
        (rc = snapshot_field_i64(&im->f, w, a, "pinned_num_register_threads", 0, INT32_MAX,
                                 "ignored", &s->pinned_num_register_threads)) < 0 ||
        (rc = snapshot_field_bool(&im->f, w, a, "expandable_segments", &s->expandable_segments)) <
            0 ||
        (rc = snapshot_field_bool(&im->f, w, a, "release_lock_on_cudamalloc",
                                  &s->release_lock_on_cudamalloc)) < 0 ||
        (rc = snapshot_field_bool(&im->f, w, a, "pinned_use_cuda_host_register",
                                  &s->pinned_use_cuda_host_register)) < 0)
        return rc;
    const struct sval *g = sval_get(a, "garbage_collection_threshold");
    if (g != NULL && g->type == SVAL_FLOAT && isfinite(g->u.f))
        s->garbage_collection_threshold = g->u.f;
    else if (g != NULL && g->type == SVAL_INT)
        s->garbage_collection_threshold = (double)g->u.i;
    else if (g != NULL && (rc = snapshot_field_warn(&im->f, w, "garbage_collection_threshold", g,
                                                    "not a number", "ignored")) < 0)
        return rc;
    const struct sval *r = sval_get(a, "roundup_power2_divisions");
    for (int i = 0; i < 16 && r != NULL && r->type == SVAL_DICT; i++) {
        char key[8];
        snprintf(key, sizeof(key), "%d", 1 << i);
        if ((rc = snapshot_field_i64(&im->f, w, r, key, 0, UINT32_MAX, "ignored", &v)) < 0)
            return rc;
        if (rc == FIELD_OK)
            s->roundup_power2_divisions[i] = (uint32_t)v;
    }
    return 0;
}

/* One device's memory_stats: counters are never negative, except max_split_size's -1. */
static int
import_stats(struct imp *im, size_t d, const struct sval *st)
{
    char w[48];
    snprintf(w, sizeof(w), "cuprof.stats[%zu]", d);
    if (st->type != SVAL_DICT) {
        int rc =
            snapshot_field_warn(&im->f, "snapshot", "cuprof.stats", st, "not a dict", "ignored");
        return rc < 0 ? rc : 0;
    }
    size_t n = st->u.seq->len, used = 0;
    struct snap_stat *kv = n ? calloc(n, sizeof(*kv)) : NULL;
    if (n && kv == NULL)
        return oom(im);
    int rc = 0;
    for (size_t i = 0; i < n && rc >= 0; i++) {
        const struct sval *k = &st->u.seq->items[2 * i];
        int64_t v = 0;
        if (k->type != SVAL_STR)
            continue;
        if (strcmp(k->u.s, "max_split_size") == 0)
            rc = size_max_field(im, w, k->u.s, k + 1, &v);
        else
            rc = snapshot_field_i64_value(&im->f, w, k->u.s, k + 1, 0, INT64_MAX, "ignored", &v);
        if (rc == FIELD_OK)
            kv[used++] = (struct snap_stat){k->u.s, v};
    }
    if (rc >= 0 && snapshot_set_stats(im->snap, d, kv, used) != 0)
        rc = oom(im);
    free(kv);
    return rc < 0 ? rc : 0;
}

static int
import_cuprof(struct imp *im, const struct sval *c)
{
    const char *w = "cuprof";
    struct snapshot *snap = im->snap;
    if (c->type != SVAL_DICT) {
        int rc = snapshot_field_warn(&im->f, "snapshot", w, c, "not a dict", "ignored");
        return rc < 0 ? rc : 0;
    }
    snap->cuprof.present = true;
    int rc;
    if ((rc = snapshot_field_str(&im->f, w, c, "version", "ignored", &snap->cuprof.version)) < 0 ||
        (rc = snapshot_field_str(&im->f, w, c, "mode", "ignored", &snap->cuprof.mode)) < 0 ||
        (rc = snapshot_field_str(&im->f, w, c, "host", "ignored", &snap->cuprof.host)) < 0 ||
        (rc = snapshot_field_i64(&im->f, w, c, "pid", INT64_MIN, INT64_MAX, "ignored",
                                 &snap->cuprof.pid)) < 0 ||
        (rc = snapshot_field_i64(&im->f, w, c, "rank", -1, INT64_MAX, "ignored",
                                 &snap->cuprof.rank)) < 0)
        return rc;
    const struct sval *py = sval_get(c, "python");
    if (py != NULL && py->type == SVAL_DICT) {
        struct snap_python *p = &snap->cuprof.python;
        const char *pw = "cuprof.python";
        p->present = true;
        if ((rc = snapshot_field_str(&im->f, pw, py, "interpreter", "ignored", &p->interpreter)) <
                0 ||
            (rc = snapshot_field_str(&im->f, pw, py, "frames", "ignored", &p->frames)) < 0 ||
            (rc = snapshot_field_i64(&im->f, pw, py, "captures_gil_held", 0, INT64_MAX, "ignored",
                                     &p->captures_gil_held)) < 0 ||
            (rc = snapshot_field_i64(&im->f, pw, py, "captures_gil_released", 0, INT64_MAX,
                                     "ignored", &p->captures_gil_released)) < 0)
            return rc;
    }
    const struct sval *cfg = sval_get(c, "config");
    for (uint32_t i = 0; cfg != NULL && cfg->type == SVAL_DICT && i < cfg->u.seq->len; i++) {
        const struct sval *k = &cfg->u.seq->items[2 * i], *v = k + 1;
        if (k->type != SVAL_STR || v->type != SVAL_STR) {
            if ((rc = snapshot_field_warn(&im->f, w, "config", v, "not a dict of strings",
                                          "entry ignored")) < 0)
                return rc;
            continue;
        }
        if (snapshot_add_config(snap, k->u.s, v->u.s) != 0)
            return oom(im);
    }
    const struct sval *argv = sval_get(c, "argv");
    size_t argc = sval_len(argv), used = 0;
    const char **args = argc ? calloc(argc, sizeof(*args)) : NULL;
    if (argc && args == NULL)
        return oom(im);
    for (size_t i = 0; i < argc; i++) {
        if (sval_at(argv, i)->type == SVAL_STR)
            args[used++] = sval_at(argv, i)->u.s;
        else if ((rc = snapshot_field_warn(&im->f, w, "argv", sval_at(argv, i), "not a string",
                                           "ignored")) < 0)
            break;
    }
    rc = rc < 0 ? rc : snapshot_set_argv(snap, args, used) != 0 ? oom(im) : 0;
    free(args);
    if (rc < 0)
        return rc;
    const struct sval *stats = sval_get(c, "stats");
    for (size_t d = 0; d < sval_len(stats) && d < SNAPSHOT_MAX_DEVICES; d++)
        if ((rc = import_stats(im, d, sval_at(stats, d))) < 0)
            return rc;
    const struct sval *drops = sval_get(c, "dropped_entries");
    for (size_t d = 0; d < sval_len(drops) && d < SNAPSHOT_MAX_DEVICES; d++) {
        const struct sval *v = sval_at(drops, d);
        bool neg = false;
        uint64_t n = 0;
        const char *why = "negative";
        if (!snapshot_field_integer(v, &neg, &n, &why) || neg || n > INT64_MAX) {
            why = neg ? "negative" : n > INT64_MAX ? "out of range" : why;
            if ((rc = snapshot_field_warn(&im->f, w, "dropped_entries", v, why, "read as 0")) < 0)
                return rc;
            n = 0;
        }
        if (snapshot_set_device_count(snap, d + 1) != 0)
            return oom(im);
        snap->device_traces[d].dropped = n;
        snap->cuprof.dropped_entries[d] = n;
    }
    return snapshot_usage_import(&im->f, c);
}

static int
import_all(struct imp *im, const struct sval *root)
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
    int rc;
    for (size_t i = 0; i < sval_len(segs); i++)
        if ((rc = import_segment(im, i, sval_at(segs, i))) != 0)
            return rc;
    if (traces != NULL && traces->type != SVAL_LIST) {
        if ((rc = snapshot_field_warn(&im->f, "snapshot", "device_traces", traces, "not a list",
                                      "read as no history")) < 0)
            return rc;
        traces = NULL;
    }
    size_t nt = sval_len(traces);
    if (nt > SNAPSHOT_MAX_DEVICES)
        return fail(im, -CUPROF_EFORMAT, "'device_traces' has %zu devices", nt);
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
        if (snapshot_reserve_entries(im->snap, d, sval_len(t)) != 0)
            return oom(im);
        for (size_t i = 0; i < sval_len(t); i++)
            if ((rc = import_entry(im, d, i, sval_at(t, i))) != 0)
                return rc;
    }
    const struct sval *a = sval_get(root, "allocator_settings");
    if (a != NULL && (rc = import_settings(im, a)) != 0)
        return rc;
    const struct sval *c = sval_get(root, "cuprof");
    if (c != NULL && (rc = import_cuprof(im, c)) != 0)
        return rc;
    return 0;
}

int
snapshot_import(struct snapshot *snap, const struct sval *root, const char *name, char *err,
                size_t err_len)
{
    struct imp im = {
        .snap = snap, .err = err, .err_len = err_len, .f = {.snap = snap, .name = name}};
    int rc = import_all(&im, root);
    if (rc == 0)
        rc = snapshot_field_publish(&im.f);
    if (rc == -CUPROF_EHOSTMEM)
        oom(&im);
    free(im.slots);
    free(im.frame_buf);
    free(im.blocks);
    free(im.reserved);
    snapshot_field_free(&im.f);
    return rc;
}
