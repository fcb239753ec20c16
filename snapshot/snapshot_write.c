/* snapshot_write.c: one walk of a snapshot model through an emitter, in PyTorch's key layout
 * (reference/pytorch-allocator.md §5.2-5.8), and the atomic file write. */
#include "snapshot/snapshot_write.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allocator/allocator.h"
#include "allocator/cuprof_errors.h"
#include "snapshot/file_writer.h"
#include "snapshot/snapshot_arena.h"
#include "snapshot/snapshot_oom.h"
#include "snapshot/snapshot_usage.h"
#include "allocator/trace_sink.h"

static const char *const state_names[] = {
    [BLOCK_INACTIVE] = "inactive",
    [BLOCK_ACTIVE_ALLOCATED] = "active_allocated",
    [BLOCK_ACTIVE_PENDING_FREE] = "active_pending_free",
};

static const char *const pool_names[] = {
    [TRACE_POOL_DEFAULT] = "default", [TRACE_POOL_TRACE] = "trace",
    [TRACE_POOL_MANAGED] = "managed", [TRACE_POOL_VMM] = "vmm",
    [TRACE_POOL_ASYNC] = "async",     [TRACE_POOL_NVTX] = "nvtx",
};

/* The 16 roundup_power2_divisions interval names, "1" .. "32768" (MiB), as PyTorch writes them. */
static const char *const roundup_keys[16] = {"1",    "2",    "4",     "8",    "16",   "32",
                                             "64",   "128",  "256",   "512",  "1024", "2048",
                                             "4096", "8192", "16384", "32768"};

const char *
snapshot_action_name(unsigned action)
{
    return trace_action_name(action);
}

const char *
snapshot_state_name(unsigned state)
{
    return state < sizeof(state_names) / sizeof(state_names[0]) ? state_names[state] : NULL;
}

const char *
snapshot_pool_name(unsigned pool)
{
    return pool < sizeof(pool_names) / sizeof(pool_names[0]) ? pool_names[pool] : NULL;
}

enum snapshot_format
snapshot_format_for_path(const char *path)
{
    size_t n = strlen(path);
    if (n >= 5 && strcmp(path + n - 5, ".json") == 0)
        return SNAPSHOT_FORMAT_JSON;
    return SNAPSHOT_FORMAT_PICKLE;
}

static const char *
str_or_empty(const char *s)
{
    return s != NULL ? s : "";
}

/* A frame list; each distinct frame dict and list is written once, then referenced (pickle). */
static void
emit_stack(const struct snapshot *snap, struct emitter *e, uint32_t stack)
{
    if (stack == 0 || stack >= snap->stack_count) {
        emitter_begin_list(e); /* frames: [] */
        emitter_end(e);
        return;
    }
    if (emitter_memo_get(e, EMITTER_MEMO_STACK, stack))
        return;
    const struct snap_stack *st = &snap->stacks[stack];
    emitter_begin_list(e);
    emitter_memo_put(e, EMITTER_MEMO_STACK, stack);
    for (uint32_t i = 0; i < st->count; i++) {
        uint32_t f = snap->stack_frames[st->first + i];
        if (emitter_memo_get(e, EMITTER_MEMO_FRAME, f))
            continue;
        const struct snap_frame *fr = &snap->frames[f];
        emitter_begin_dict(e);
        emitter_memo_put(e, EMITTER_MEMO_FRAME, f);
        emitter_key(e, "name");
        emitter_string(e, str_or_empty(fr->name));
        emitter_key(e, "filename");
        emitter_string(e, str_or_empty(fr->filename));
        emitter_key(e, "line");
        emitter_int(e, fr->line);
        emitter_end(e);
    }
    emitter_end(e);
}

static void
emit_segment(const struct snapshot *snap, struct emitter *e, const struct snap_segment *s)
{
    emitter_begin_dict(e);
    emitter_key(e, "device");
    emitter_int(e, s->device);
    emitter_key(e, "address");
    emitter_uint(e, s->addr);
    emitter_key(e, "total_size");
    emitter_uint(e, s->total_size);
    emitter_key(e, "allocated_size");
    emitter_uint(e, s->allocated_size);
    emitter_key(e, "active_size");
    emitter_uint(e, s->active_size);
    emitter_key(e, "requested_size");
    emitter_uint(e, s->requested_size);
    emitter_key(e, "stream");
    emitter_uint(e, s->stream);
    emitter_key(e, "segment_type");
    emitter_symbol(e, s->is_small ? "small" : "large");
    emitter_key(e, "segment_pool_id");
    emitter_begin_tuple(e);
    emitter_int(e, s->pool_id[0]);
    emitter_int(e, s->pool_id[1]);
    emitter_end(e);
    emitter_key(e, "is_expandable");
    emitter_bool(e, s->is_expandable);
    if (s->cuprof_pool != TRACE_POOL_DEFAULT && snapshot_pool_name(s->cuprof_pool) != NULL) {
        emitter_key(e, "cuprof_pool"); /* cuprof's own: managed, VMM, trace-mode memory */
        emitter_symbol(e, snapshot_pool_name(s->cuprof_pool));
    }
    emitter_key(e, "frames");
    emit_stack(snap, e, s->stack);
    emitter_key(e, "blocks");
    emitter_begin_list(e);
    for (uint32_t i = 0; i < s->block_count && s->first_block + i < snap->block_count; i++) {
        const struct snap_block *b = &snap->blocks[s->first_block + i];
        const char *state = snapshot_state_name(b->state);
        emitter_begin_dict(e);
        emitter_key(e, "address");
        emitter_uint(e, b->addr);
        emitter_key(e, "size");
        emitter_uint(e, b->size);
        emitter_key(e, "requested_size");
        emitter_uint(e, b->requested_size);
        emitter_key(e, "state");
        emitter_symbol(e, state != NULL ? state : "inactive");
        emitter_key(e, "frames");
        emit_stack(snap, e, b->stack);
        if (b->label != NULL) {
            emitter_key(e, "user_metadata"); /* an NVTX region's name */
            emitter_string(e, b->label);
        }
        if (b->pool != TRACE_POOL_DEFAULT && snapshot_pool_name(b->pool) != NULL) {
            emitter_key(e, "cuprof_pool"); /* cuprof's: a block of the program's own pool */
            emitter_symbol(e, snapshot_pool_name(b->pool));
        }
        emitter_end(e);
    }
    emitter_end(e);
    emitter_end(e);
}

/* PyTorch's external_annotations "stage" values; NULL for a mark. */
static const char *
stage_name(enum snap_stage stage)
{
    return stage == SNAP_STAGE_START ? "START" : stage == SNAP_STAGE_END ? "END" : NULL;
}

static void
emit_entry(const struct snapshot *snap, struct emitter *e, const struct snap_entry *t,
           const char *label, enum snap_stage stage)
{
    const char *action = snapshot_action_name(t->action);
    emitter_begin_dict(e);
    emitter_key(e, "action");
    emitter_symbol(e, action != NULL ? action : "unknown");
    if (t->action == TRACE_OOM) {
        emitter_key(e, "device_free"); /* PyTorch: oom entries carry device_free, not addr */
        emitter_uint(e, t->device_free);
    } else {
        emitter_key(e, "addr");
        emitter_uint(e, t->addr);
    }
    emitter_key(e, "size");
    emitter_uint(e, t->size);
    emitter_key(e, "stream");
    emitter_uint(e, t->stream);
    if (t->has_time) {
        emitter_key(e, "time_us");
        emitter_int(e, t->time_us);
    }
    emitter_key(e, "frames");
    emit_stack(snap, e, t->stack);
    if (label != NULL) {
        emitter_key(e, "user_metadata"); /* PyTorch's key for an annotation's text */
        emitter_string(e, label);
    }
    if (t->action == TRACE_ANNOTATE && stage_name(stage) != NULL) {
        emitter_key(e, "stage"); /* cuprof's: a range's start or end, as external_annotations */
        emitter_symbol(e, stage_name(stage));
    }
    if (t->pool != TRACE_POOL_DEFAULT && snapshot_pool_name(t->pool) != NULL) {
        emitter_key(e, "cuprof_pool");
        emitter_symbol(e, snapshot_pool_name(t->pool));
    }
    emitter_end(e);
}

static void
emit_settings(struct emitter *e, const struct snap_allocator_settings *a)
{
    emitter_begin_dict(e);
    emitter_key(e, "PYTORCH_CUDA_ALLOC_CONF");
    emitter_string(e, str_or_empty(a->alloc_conf));
    emitter_key(e, "max_split_size");
    emitter_int(e, a->max_split_size);
    emitter_key(e, "garbage_collection_threshold");
    emitter_float(e, a->garbage_collection_threshold);
    emitter_key(e, "expandable_segments");
    emitter_bool(e, a->expandable_segments);
    emitter_key(e, "pinned_num_register_threads");
    emitter_int(e, a->pinned_num_register_threads);
    emitter_key(e, "release_lock_on_cudamalloc");
    emitter_bool(e, a->release_lock_on_cudamalloc);
    emitter_key(e, "pinned_use_cuda_host_register");
    emitter_bool(e, a->pinned_use_cuda_host_register);
    emitter_key(e, "roundup_power2_divisions");
    emitter_begin_dict(e);
    for (int i = 0; i < 16; i++) {
        emitter_key(e, roundup_keys[i]);
        emitter_int(e, a->roundup_power2_divisions[i]);
    }
    emitter_end(e);
    emitter_end(e);
}

static void
emit_cuprof(const struct snapshot *snap, struct emitter *e)
{
    const struct snap_cuprof *c = &snap->cuprof;
    emitter_begin_dict(e);
    emitter_key(e, "version");
    emitter_string(e, str_or_empty(c->version));
    emitter_key(e, "mode");
    emitter_string(e, str_or_empty(c->mode));
    emitter_key(e, "config");
    emitter_begin_dict(e);
    for (size_t i = 0; i < c->config_count; i++) {
        emitter_key_string(e, str_or_empty(c->config[i].key));
        emitter_string(e, str_or_empty(c->config[i].value));
    }
    emitter_end(e);
    emitter_key(e, "pid");
    emitter_int(e, c->pid);
    emitter_key(e, "rank");
    emitter_int(e, c->rank);
    emitter_key(e, "host");
    emitter_string(e, str_or_empty(c->host));
    emitter_key(e, "argv");
    emitter_begin_list(e);
    for (size_t i = 0; i < c->argc; i++)
        emitter_string(e, str_or_empty(c->argv[i]));
    emitter_end(e);
    emitter_key(e, "stats");
    emitter_begin_list(e);
    for (size_t d = 0; d < snap->device_count; d++) {
        emitter_begin_dict(e);
        for (size_t i = 0; c->stats != NULL && i < c->stats_count[d]; i++) {
            emitter_key_string(e, str_or_empty(c->stats[d][i].key));
            emitter_int(e, c->stats[d][i].value);
        }
        emitter_end(e);
    }
    emitter_end(e);
    bool overflowed = false;
    emitter_key(e, "dropped_entries");
    emitter_begin_list(e);
    for (size_t d = 0; d < snap->device_count; d++) {
        emitter_uint(e, snap->device_traces[d].dropped);
        overflowed = overflowed || snap->device_traces[d].dropped != 0;
    }
    emitter_end(e);
    emitter_key(e, "trace_alloc_overflowed");
    emitter_bool(e, overflowed);
    emitter_key(e, "fit_segment_on_oom");
    emitter_bool(e, c->fit_segment_on_oom);
    if (c->python.present) {
        emitter_key(e, "python");
        emitter_begin_dict(e);
        emitter_key(e, "interpreter");
        emitter_string(e, str_or_empty(c->python.interpreter));
        emitter_key(e, "frames");
        emitter_string(e, str_or_empty(c->python.frames));
        emitter_key(e, "captures_gil_held");
        emitter_int(e, c->python.captures_gil_held);
        emitter_key(e, "captures_gil_released");
        emitter_int(e, c->python.captures_gil_released);
        emitter_end(e);
    }
    snapshot_usage_emit(snap, e);
    snapshot_oom_emit(snap, e);
    emitter_end(e);
}

/* PyTorch's external_annotations (its record_function ranges: {"name", "stage", "device",
 * "time_us"}), one per range start or end of each device's trace, written when there is one. */
static void
emit_external_annotations(const struct snapshot *snap, struct emitter *e)
{
    bool any = false;
    for (size_t d = 0; d < snap->device_count; d++) {
        const struct snap_device_trace *t = &snap->device_traces[d];
        for (size_t k = 0; k < t->label_count && e->error == 0; k++) {
            const struct snap_label *l = &t->labels[k];
            const struct snap_entry *en = &t->entries[l->entry];
            const char *stage = stage_name((enum snap_stage)l->stage);
            if (en->action != TRACE_ANNOTATE || stage == NULL)
                continue;
            if (!any) {
                emitter_key(e, "external_annotations");
                emitter_begin_list(e);
                any = true;
            }
            emitter_begin_dict(e);
            emitter_key(e, "name");
            emitter_string(e, str_or_empty(l->text));
            emitter_key(e, "stage");
            emitter_symbol(e, stage);
            emitter_key(e, "device");
            emitter_uint(e, d);
            emitter_key(e, "time_us");
            emitter_int(e, en->has_time ? en->time_us : 0);
            emitter_end(e);
        }
    }
    if (any)
        emitter_end(e);
}

int
snapshot_emit(const struct snapshot *snap, struct emitter *e)
{
    emitter_begin_dict(e);
    emitter_key(e, "segments");
    emitter_begin_list(e);
    for (size_t i = 0; i < snap->segment_count; i++)
        emit_segment(snap, e, &snap->segments[i]);
    emitter_end(e);
    emitter_key(e, "device_traces");
    emitter_begin_list(e);
    for (size_t d = 0; d < snap->device_count; d++) {
        const struct snap_device_trace *t = &snap->device_traces[d];
        emitter_begin_list(e);
        for (size_t i = 0; i < t->count && e->error == 0; i++)
            emit_entry(snap, e, &t->entries[i], snapshot_entry_label(t, i),
                       snapshot_entry_stage(t, i));
        emitter_end(e);
    }
    emitter_end(e);
    emit_external_annotations(snap, e);
    if (snap->has_allocator_settings) {
        emitter_key(e, "allocator_settings");
        emit_settings(e, &snap->allocator_settings);
    }
    if (snap->cuprof.present) {
        emitter_key(e, "cuprof");
        emit_cuprof(snap, e);
    }
    emitter_end(e);
    return e->error;
}

static struct emitter *
make_emitter(const struct snapshot *snap, enum snapshot_format format,
             int (*write)(void *ctx, const void *buf, size_t len), void *ctx)
{
    if (format == SNAPSHOT_FORMAT_JSON)
        return json_emitter_create_cached(write, ctx, snap->stack_count);
    return pickle_emitter_create(write, ctx, snap->frame_count, snap->stack_count);
}

/* `exchange`: NULL, or the sink takes whole buffers (emitter_exchange_buffers). */
static int
emit_all(const struct snapshot *snap, enum snapshot_format format,
         int (*write)(void *ctx, const void *buf, size_t len),
         int (*exchange)(void *ctx, unsigned char **buf, size_t len), void *ctx)
{
    struct emitter *e = make_emitter(snap, format, write, ctx);
    if (e == NULL)
        return -CUPROF_EHOSTMEM;
    if (exchange != NULL)
        emitter_exchange_buffers(e, exchange);
    int rc = snapshot_emit(snap, e);
    int frc = emitter_finish(e);
    emitter_destroy(e);
    return rc != 0 ? rc : frc;
}

struct mem_sink {
    unsigned char *data;
    size_t len, cap;
};

static int
mem_write(void *ctx, const void *buf, size_t len)
{
    struct mem_sink *m = ctx;
    if (len > m->cap - m->len) {
        size_t cap = m->cap ? m->cap : 65536;
        while (cap - m->len < len) {
            if (cap > SIZE_MAX / 2)
                return -CUPROF_EHOSTMEM;
            cap *= 2;
        }
        unsigned char *p = realloc(m->data, cap);
        if (p == NULL)
            return -CUPROF_EHOSTMEM;
        m->data = p;
        m->cap = cap;
    }
    if (m->cap >= (16u << 20)) /* fresh mmap'd memory: its pages in one call, not fault by fault */
        snapshot_arena_prefault(m->data + m->len, len);
    memcpy(m->data + m->len, buf, len);
    m->len += len;
    return 0;
}

int
snapshot_write_mem(const struct snapshot *snap, enum snapshot_format format, unsigned char **out,
                   size_t *len)
{
    struct mem_sink m = {0};
    int rc = emit_all(snap, format, mem_write, NULL, &m);
    if (rc != 0) {
        free(m.data);
        return rc;
    }
    *out = m.data;
    *len = m.len;
    return 0;
}

/* A file's emitter hands its buffers over (file_writer_exchange) and never writes a copy. */
static int
unused_write(void *ctx, const void *buf, size_t len)
{
    (void)ctx;
    (void)buf;
    (void)len;
    return -CUPROF_EINVAL;
}

int
snapshot_write_file(const char *path, const struct snapshot *snap, enum snapshot_format format,
                    enum file_publish_mode mode, char *chosen, size_t chosen_len)
{
    if (format == SNAPSHOT_FORMAT_AUTO)
        format = snapshot_format_for_path(path);
    size_t n = strlen(path) + 64;
    char *tmp = malloc(n);
    if (tmp == NULL) {
        errno = ENOMEM;
        return -CUPROF_EHOSTMEM;
    }
    int fd = file_publish_open_temp(path, tmp, n);
    if (fd < 0) {
        int saved = errno;
        free(tmp);
        errno = saved;
        return -CUPROF_EIO;
    }
    struct file_writer writer;
    file_writer_init(&writer, fd);
    int rc = emit_all(snap, format, unused_write, file_writer_exchange, &writer);
    int saved = errno;
    int wrc = file_writer_close(&writer); /* waits for the writes handed over */
    if (rc == 0 && wrc != 0) {
        saved = errno;
        rc = wrc;
    }
    if (rc == 0 && fsync(fd) != 0) {
        saved = errno;
        rc = -CUPROF_EIO;
    }
    if (close(fd) != 0 && rc == 0) {
        saved = errno;
        rc = -CUPROF_EIO;
    }
    if (rc == 0 && file_publish(tmp, path, mode, chosen, chosen_len) != 0) {
        saved = errno;
        rc = -CUPROF_EIO;
    }
    if (rc != 0) {
        file_publish_discard(tmp); /* the temporary file is ours: created exclusively above */
        errno = rc == -CUPROF_EHOSTMEM ? ENOMEM : saved;
    }
    free(tmp);
    return rc;
}
