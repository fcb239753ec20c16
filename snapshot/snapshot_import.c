/* snapshot_import.c: value tree -> snapshot model, schema-driven (never recursive on the input),
 * so shared or cyclic containers in a hostile pickle cannot make it loop. */
#include "snapshot/snapshot_import.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/allocator.h"
#include "allocator/cuprof_errors.h"
#include "allocator/trace_sink.h"
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

/* Reads an optional int (bools count, as in Python). Returns 1 if absent, 0 if read. */
static int
get_int(struct imp *im, const char *where, const struct sval *dict, const char *key, bool required,
        int64_t *out)
{
    const struct sval *v = sval_get(dict, key);
    if (v == NULL) {
        if (required)
            return fail(im, -CUPROF_EFORMAT, "%s: missing key '%s'", where, key);
        return 1;
    }
    if (v->type == SVAL_INT)
        *out = v->u.i;
    else if (v->type == SVAL_BOOL)
        *out = v->u.b;
    else
        return fail(im, -CUPROF_EFORMAT, "%s: '%s' is %s, expected int", where, key,
                    sval_type_name(v));
    return 0;
}

static int
get_u64(struct imp *im, const char *where, const struct sval *dict, const char *key, bool required,
        uint64_t *out)
{
    int64_t v = 0;
    int rc = get_int(im, where, dict, key, required, &v);
    if (rc == 0)
        *out = (uint64_t)v; /* PyTorch writes SIZE_MAX as -1: the cast restores it */
    return rc;
}

/* Reads an optional string. Returns 1 if absent (or None), 0 if read. */
static int
get_str(struct imp *im, const char *where, const struct sval *dict, const char *key,
        const char **out)
{
    const struct sval *v = sval_get(dict, key);
    if (v == NULL || v->type == SVAL_NONE)
        return 1;
    if (v->type != SVAL_STR)
        return fail(im, -CUPROF_EFORMAT, "%s: '%s' is %s, expected str", where, key,
                    sval_type_name(v));
    *out = v->u.s;
    return 0;
}

static int
import_frame(struct imp *im, const char *where, const struct sval *f, uint32_t *index)
{
    if (f->type != SVAL_DICT)
        return fail(im, -CUPROF_EFORMAT, "%s: a frame is %s, expected dict", where,
                    sval_type_name(f));
    if (cache_get(im, f->u.seq, index))
        return 0;
    const char *name = "??", *filename = "??";
    int64_t line = 0;
    if (get_str(im, where, f, "name", &name) < 0 ||
        get_str(im, where, f, "filename", &filename) < 0 ||
        get_int(im, where, f, "line", false, &line) < 0)
        return -CUPROF_EFORMAT;
    if (snapshot_add_frame(im->snap, name, filename, line, index) != 0 ||
        cache_put(im, f->u.seq, *index) != 0)
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
    if (frames->type != SVAL_LIST && frames->type != SVAL_TUPLE)
        return fail(im, -CUPROF_EFORMAT, "%s: 'frames' is %s, expected list", where,
                    sval_type_name(frames));
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

static int
import_block(struct imp *im, const char *where, const struct sval *b, uint64_t *offset,
             struct snap_segment *seg)
{
    if (b->type != SVAL_DICT)
        return fail(im, -CUPROF_EFORMAT, "%s: %s, expected dict", where, sval_type_name(b));
    struct snap_block blk = {.addr = seg->addr + *offset};
    const char *state = "inactive";
    /* PyTorch 1.13/2.0 blocks: no address and no frames, but an optional history list. */
    const struct sval *hist = sval_at(sval_get(b, "history"), 0);
    int64_t real = 0;
    if (get_u64(im, where, b, "address", false, &blk.addr) < 0 ||
        get_u64(im, where, b, "size", true, &blk.size) != 0 ||
        get_str(im, where, b, "state", &state) < 0)
        return -CUPROF_EFORMAT;
    int rc = get_u64(im, where, b, "requested_size", false, &blk.requested_size);
    if (rc < 0)
        return rc;
    if (rc == 1) {
        blk.requested_size = blk.size;
        if (hist != NULL && hist->type == SVAL_DICT &&
            get_int(im, where, hist, "real_size", false, &real) == 0)
            blk.requested_size = (uint64_t)real;
    }
    int st = parse_state(state);
    if (st < 0)
        return fail(im, -CUPROF_EFORMAT, "%s: unknown block state \"%s\"", where, state);
    blk.state = (uint8_t)st;
    const struct sval *frames = sval_get(b, "frames");
    if (frames == NULL && hist != NULL && hist->type == SVAL_DICT)
        frames = sval_get(hist, "frames");
    if ((rc = import_stack(im, where, frames, &blk.stack)) != 0)
        return rc;
    if (snapshot_add_block(im->snap, &blk) != 0)
        return oom(im);
    *offset += blk.size;
    if (blk.state == BLOCK_ACTIVE_ALLOCATED)
        seg->allocated_size += blk.size;
    if (blk.state != BLOCK_INACTIVE) {
        seg->active_size += blk.size;
        seg->requested_size += blk.requested_size;
    }
    return 0;
}

static int
import_segment(struct imp *im, size_t i, const struct sval *s)
{
    char where[64];
    snprintf(where, sizeof(where), "segments[%zu]", i);
    if (s->type != SVAL_DICT)
        return fail(im, -CUPROF_EFORMAT, "%s: %s, expected dict", where, sval_type_name(s));
    struct snap_segment seg = {0};
    int64_t device = 0;
    const char *type = NULL, *pool = NULL;
    if (get_int(im, where, s, "device", false, &device) < 0 ||
        get_u64(im, where, s, "address", true, &seg.addr) != 0 ||
        get_u64(im, where, s, "stream", false, &seg.stream) < 0 ||
        get_str(im, where, s, "segment_type", &type) < 0 ||
        get_str(im, where, s, "cuprof_pool", &pool) < 0)
        return -CUPROF_EFORMAT;
    if (device < 0 || device >= SNAPSHOT_MAX_DEVICES)
        return fail(im, -CUPROF_EFORMAT, "%s: device %lld out of range", where, (long long)device);
    seg.device = (int32_t)device;
    seg.is_small = type != NULL && strcmp(type, "small") == 0;
    const struct sval *exp = sval_get(s, "is_expandable");
    seg.is_expandable = exp != NULL && exp->type == SVAL_BOOL && exp->u.b;
    const struct sval *pid = sval_get(s, "segment_pool_id");
    for (size_t k = 0; k < 2 && k < sval_len(pid); k++)
        if (sval_at(pid, k)->type == SVAL_INT)
            seg.pool_id[k] = sval_at(pid, k)->u.i;
    if (pool != NULL && parse_pool(pool) >= 0)
        seg.cuprof_pool = (uint8_t)parse_pool(pool);
    int rc = import_stack(im, where, sval_get(s, "frames"), &seg.stack);
    if (rc != 0)
        return rc;
    if (snapshot_add_segment(im->snap, &seg) != 0)
        return oom(im);
    const struct sval *blocks = sval_get(s, "blocks");
    if (blocks != NULL && blocks->type != SVAL_LIST)
        return fail(im, -CUPROF_EFORMAT, "%s: 'blocks' is %s, expected list", where,
                    sval_type_name(blocks));
    /* The sums are recomputed from the blocks (older layouts lack some of them). */
    struct snap_segment *out = &im->snap->segments[im->snap->segment_count - 1];
    uint64_t offset = 0;
    for (size_t b = 0; b < sval_len(blocks); b++) {
        char bw[96];
        snprintf(bw, sizeof(bw), "%s.blocks[%zu]", where, b);
        if ((rc = import_block(im, bw, sval_at(blocks, b), &offset, out)) != 0)
            return rc;
    }
    out->total_size = offset;
    if ((rc = get_u64(im, where, s, "total_size", sval_len(blocks) == 0, &out->total_size)) < 0)
        return rc;
    if (out->total_size != offset && sval_len(blocks) > 0)
        return fail(im, -CUPROF_EFORMAT, "%s: total_size %llu but its blocks sum to %llu", where,
                    (unsigned long long)out->total_size, (unsigned long long)offset);
    return 0;
}

static int
parse_action(const char *s)
{
    for (unsigned i = 0; snapshot_action_name(i) != NULL; i++)
        if (strcmp(s, snapshot_action_name(i)) == 0)
            return (int)i;
    return -1;
}

static int
import_entry(struct imp *im, size_t d, size_t i, const struct sval *t)
{
    char where[64];
    snprintf(where, sizeof(where), "device_traces[%zu][%zu]", d, i);
    if (t->type != SVAL_DICT)
        return fail(im, -CUPROF_EFORMAT, "%s: %s, expected dict", where, sval_type_name(t));
    const char *action = NULL, *label = NULL, *pool = NULL;
    if (get_str(im, where, t, "action", &action) != 0)
        return fail(im, -CUPROF_EFORMAT, "%s: missing 'action' string", where);
    int a = parse_action(action);
    if (a < 0)
        return 0; /* an action from a newer PyTorch: skipped */
    struct snap_entry e = {.action = (uint8_t)a};
    int rc;
    if (get_u64(im, where, t, "addr", a != TRACE_OOM, &e.addr) < 0 ||
        get_u64(im, where, t, "device_free", false, &e.device_free) < 0 ||
        get_u64(im, where, t, "size", false, &e.size) < 0 ||
        get_u64(im, where, t, "stream", false, &e.stream) < 0 ||
        (rc = get_int(im, where, t, "time_us", false, &e.time_us)) < 0 ||
        get_str(im, where, t, "user_metadata", &label) < 0 ||
        get_str(im, where, t, "cuprof_pool", &pool) < 0)
        return -CUPROF_EFORMAT;
    e.has_time = rc == 0;
    if (label == NULL && get_str(im, where, t, "label", &label) < 0)
        return -CUPROF_EFORMAT;
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

static int
import_settings(struct imp *im, const struct sval *a)
{
    const char *w = "allocator_settings";
    if (a->type != SVAL_DICT)
        return fail(im, -CUPROF_EFORMAT, "%s: %s, expected dict", w, sval_type_name(a));
    struct snap_allocator_settings *s = &im->snap->allocator_settings;
    im->snap->has_allocator_settings = true;
    int64_t v = 0;
    if (get_str(im, w, a, "PYTORCH_CUDA_ALLOC_CONF", &s->alloc_conf) < 0 ||
        get_int(im, w, a, "max_split_size", false, &s->max_split_size) < 0 ||
        get_int(im, w, a, "pinned_num_register_threads", false, &s->pinned_num_register_threads) <
            0)
        return -CUPROF_EFORMAT;
    const struct sval *g = sval_get(a, "garbage_collection_threshold");
    if (g != NULL)
        s->garbage_collection_threshold = g->type == SVAL_FLOAT ? g->u.f
                                          : g->type == SVAL_INT ? (double)g->u.i
                                                                : 0.0;
    if (get_int(im, w, a, "expandable_segments", false, &v) == 0)
        s->expandable_segments = v != 0;
    if (get_int(im, w, a, "release_lock_on_cudamalloc", false, &v) == 0)
        s->release_lock_on_cudamalloc = v != 0;
    if (get_int(im, w, a, "pinned_use_cuda_host_register", false, &v) == 0)
        s->pinned_use_cuda_host_register = v != 0;
    const struct sval *r = sval_get(a, "roundup_power2_divisions");
    for (int i = 0; i < 16 && r != NULL && r->type == SVAL_DICT; i++) {
        char key[8];
        snprintf(key, sizeof(key), "%d", 1 << i);
        if (get_int(im, w, r, key, false, &v) == 0)
            s->roundup_power2_divisions[i] = (uint32_t)v;
    }
    return 0;
}

static int
import_cuprof(struct imp *im, const struct sval *c)
{
    const char *w = "cuprof";
    struct snapshot *snap = im->snap;
    if (c->type != SVAL_DICT)
        return fail(im, -CUPROF_EFORMAT, "%s: %s, expected dict", w, sval_type_name(c));
    snap->cuprof.present = true;
    if (get_str(im, w, c, "version", &snap->cuprof.version) < 0 ||
        get_str(im, w, c, "mode", &snap->cuprof.mode) < 0 ||
        get_str(im, w, c, "host", &snap->cuprof.host) < 0 ||
        get_int(im, w, c, "pid", false, &snap->cuprof.pid) < 0 ||
        get_int(im, w, c, "rank", false, &snap->cuprof.rank) < 0)
        return -CUPROF_EFORMAT;
    const struct sval *cfg = sval_get(c, "config");
    for (uint32_t i = 0; cfg != NULL && cfg->type == SVAL_DICT && i < cfg->u.seq->len; i++) {
        const struct sval *k = &cfg->u.seq->items[2 * i], *v = k + 1;
        if (k->type != SVAL_STR || v->type != SVAL_STR)
            return fail(im, -CUPROF_EFORMAT, "cuprof.config: not a dict of strings");
        if (snapshot_add_config(snap, k->u.s, v->u.s) != 0)
            return oom(im);
    }
    const struct sval *argv = sval_get(c, "argv");
    size_t argc = sval_len(argv);
    const char **args = argc ? calloc(argc, sizeof(*args)) : NULL;
    if (argc && args == NULL)
        return oom(im);
    for (size_t i = 0; i < argc; i++) {
        if (sval_at(argv, i)->type != SVAL_STR) {
            free(args);
            return fail(im, -CUPROF_EFORMAT, "cuprof.argv[%zu]: not a string", i);
        }
        args[i] = sval_at(argv, i)->u.s;
    }
    int rc = snapshot_set_argv(snap, args, argc);
    free(args);
    if (rc != 0)
        return oom(im);
    const struct sval *stats = sval_get(c, "stats");
    for (size_t d = 0; d < sval_len(stats) && d < SNAPSHOT_MAX_DEVICES; d++) {
        const struct sval *st = sval_at(stats, d);
        if (st->type != SVAL_DICT)
            return fail(im, -CUPROF_EFORMAT, "cuprof.stats[%zu]: not a dict", d);
        size_t n = st->u.seq->len;
        struct snap_stat *kv = n ? calloc(n, sizeof(*kv)) : NULL;
        if (n && kv == NULL)
            return oom(im);
        for (size_t i = 0; i < n; i++) {
            const struct sval *k = &st->u.seq->items[2 * i], *v = k + 1;
            if (k->type != SVAL_STR || v->type != SVAL_INT) {
                free(kv);
                return fail(im, -CUPROF_EFORMAT, "cuprof.stats[%zu]: not a dict of ints", d);
            }
            kv[i] = (struct snap_stat){k->u.s, v->u.i};
        }
        rc = snapshot_set_stats(snap, d, kv, n);
        free(kv);
        if (rc != 0)
            return oom(im);
    }
    const struct sval *drops = sval_get(c, "dropped_entries");
    for (size_t d = 0; d < sval_len(drops) && d < SNAPSHOT_MAX_DEVICES; d++) {
        const struct sval *v = sval_at(drops, d);
        if (v->type != SVAL_INT)
            return fail(im, -CUPROF_EFORMAT, "cuprof.dropped_entries[%zu]: not an int", d);
        if (snapshot_set_device_count(snap, d + 1) != 0)
            return oom(im);
        snap->device_traces[d].dropped = (uint64_t)v->u.i;
        snap->cuprof.dropped_entries[d] = (uint64_t)v->u.i;
    }
    return 0;
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
    if (traces != NULL && traces->type != SVAL_LIST)
        return fail(im, -CUPROF_EFORMAT, "'device_traces' is %s, expected list",
                    sval_type_name(traces));
    size_t nt = sval_len(traces);
    if (nt > SNAPSHOT_MAX_DEVICES)
        return fail(im, -CUPROF_EFORMAT, "'device_traces' has %zu devices", nt);
    if (snapshot_set_device_count(im->snap, nt) != 0)
        return oom(im);
    for (size_t d = 0; d < nt; d++) {
        const struct sval *t = sval_at(traces, d);
        if (t->type != SVAL_LIST)
            return fail(im, -CUPROF_EFORMAT, "device_traces[%zu]: %s, expected list", d,
                        sval_type_name(t));
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
snapshot_import(struct snapshot *snap, const struct sval *root, char *err, size_t err_len)
{
    struct imp im = {.snap = snap, .err = err, .err_len = err_len};
    int rc = import_all(&im, root);
    free(im.slots);
    free(im.frame_buf);
    return rc;
}
