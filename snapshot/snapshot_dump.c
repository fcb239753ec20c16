/* snapshot_dump.c: copy under the device lock, symbolize and build outside it (issue 5). */
#include "snapshot/snapshot_dump.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/allocator.h"
#include "allocator/cuprof_errors.h"
#include "snapshot/program_pools.h"
#include "snapshot/python_frames.h"
#include "snapshot/stacks.h"
#include "snapshot/symbolize.h"
#include "snapshot/snapshot_oom.h"
#include "snapshot/snapshot_usage.h"
#include "snapshot/snapshot_write.h"
#include "snapshot/trace_ring.h"
#include "stats/memory_stats.h"

#define DUMP_MAX_RETRIES 64
#define DUMP_MAX_INLINE  64 /* frames one ip may expand to (inlining) */

/* Copies of one device, reused for every device. */
struct dump_buffers {
    struct segment_info *segments;
    struct block_info *blocks;
    struct trace_record *records;
    size_t segment_cap, block_cap, record_cap;
    size_t segment_count, block_count, record_count;
    uint64_t dropped;
    uint64_t end;                 /* the ring's next position when the records were copied */
    struct memory_stats stats;    /* copied under the same lock as the blocks */
    struct pool_heap_info *heaps; /* the program's own pools (NVTX), same lock */
    struct pool_region_info *regions;
    size_t heap_cap, region_cap, heap_count, region_count;
};

/* Stack-id -> model stack index (+1), and the symbolizer state. */
struct dump_stacks {
    uint32_t *map;
    size_t map_cap;
    struct symbolizer *sym;
    uint32_t *frames;
    size_t frame_cap;
};

static int
grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t n = need + need / 4 + 16; /* headroom: allocations may continue while unlocked */
    if (n > SIZE_MAX / elem)
        return -CUPROF_EHOSTMEM;
    void *q = realloc(*p, n * elem);
    if (q == NULL)
        return -CUPROF_EHOSTMEM;
    *p = q;
    *cap = n;
    return 0;
}

/* Locks the device only with buffers already big enough: count, unlock, allocate, relock. */
static int
copy_device(struct allocator *alloc, struct trace_ring *ring, struct program_pools *pools,
            int device, struct dump_buffers *b)
{
    for (int attempt = 0; attempt < DUMP_MAX_RETRIES; attempt++) {
        size_t ns = 0, nb = 0, ne = 0, nh = 0, nr = 0;
        allocator_lock_device(alloc, device);
        allocator_count_locked(alloc, device, &ns, &nb);
        if (ring != NULL)
            ne = trace_ring_count_locked(ring, device);
        program_pools_count_locked(pools, device, &nh, &nr);
        if (ns <= b->segment_cap && nb <= b->block_cap && ne <= b->record_cap &&
            nh <= b->heap_cap && nr <= b->region_cap &&
            allocator_copy_locked(alloc, device, b->segments, b->segment_cap, b->blocks,
                                  b->block_cap, &b->segment_count, &b->block_count) == 0 &&
            program_pools_copy_locked(pools, device, b->heaps, b->heap_cap, &b->heap_count,
                                      b->regions, b->region_cap, &b->region_count)) {
            allocator_get_stats_locked(alloc, device, &b->stats);
            b->record_count = 0;
            b->dropped = 0;
            b->end = 0;
            if (ring != NULL)
                b->record_count = trace_ring_copy_newest(ring, device, b->records, b->record_cap,
                                                         &b->dropped, &b->end);
            uint64_t active = 0;
            for (size_t i = 0; i < b->block_count; i++)
                if (b->blocks[i].state != BLOCK_INACTIVE)
                    active += b->blocks[i].size;
            if (ring != NULL) {
                /* PyTorch: the trace is read first, then `snapshot` is recorded. */
                struct trace_event ev = {
                    .action = TRACE_SNAPSHOT, .device = (int16_t)device, .size = active};
                trace_ring_record(ring, &ev);
            }
            allocator_unlock_device(alloc, device);
            return 0;
        }
        allocator_unlock_device(alloc, device);
        if (grow((void **)&b->segments, &b->segment_cap, ns, sizeof(*b->segments)) != 0 ||
            grow((void **)&b->blocks, &b->block_cap, nb, sizeof(*b->blocks)) != 0 ||
            grow((void **)&b->records, &b->record_cap, ne, sizeof(*b->records)) != 0 ||
            grow((void **)&b->heaps, &b->heap_cap, nh, sizeof(*b->heaps)) != 0 ||
            grow((void **)&b->regions, &b->region_cap, nr, sizeof(*b->regions)) != 0)
            return -CUPROF_EHOSTMEM;
    }
    return -CUPROF_EHOSTMEM; /* the state kept outgrowing the buffers */
}

/* The model stack for an interned stack id, symbolizing each ip once (cached). */
static int
stack_index(struct snapshot *snap, struct dump_stacks *ds, uint32_t id, uint32_t *out)
{
    *out = 0;
    const uintptr_t *ips;
    size_t n;
    if (id == 0 || !stacks_get(id, &ips, &n) || n == 0)
        return 0;
    if (id < ds->map_cap && ds->map[id] != 0) {
        *out = ds->map[id] - 1;
        return 0;
    }
    if (id >= ds->map_cap) {
        size_t cap = ds->map_cap;
        if (grow((void **)&ds->map, &cap, (size_t)id + 1, sizeof(*ds->map)) != 0)
            return -CUPROF_EHOSTMEM;
        memset(ds->map + ds->map_cap, 0, (cap - ds->map_cap) * sizeof(*ds->map));
        ds->map_cap = cap;
    }
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        struct symbolized_frame fr[DUMP_MAX_INLINE];
        size_t k = 0;
        char name[40];
        if (ds->sym == NULL || symbolizer_lookup(ds->sym, ips[i], fr, DUMP_MAX_INLINE, &k) != 0 ||
            k == 0) {
            snprintf(name, sizeof(name), "0x%llx", (unsigned long long)ips[i]);
            fr[0] = (struct symbolized_frame){name, "??", 0};
            k = 1;
        }
        if (k > DUMP_MAX_INLINE)
            k = DUMP_MAX_INLINE;
        if (grow((void **)&ds->frames, &ds->frame_cap, count + k, sizeof(*ds->frames)) != 0)
            return -CUPROF_EHOSTMEM;
        for (size_t j = 0; j < k; j++)
            if (snapshot_add_frame(snap, fr[j].name ? fr[j].name : "<unknown>",
                                   fr[j].filename ? fr[j].filename : "??", fr[j].line,
                                   &ds->frames[count++]) != 0)
                return -CUPROF_EHOSTMEM;
    }
    if (snapshot_add_stack(snap, ds->frames, count, out) != 0)
        return -CUPROF_EHOSTMEM;
    ds->map[id] = *out + 1;
    return 0;
}

/* A block of the program's own pool: a region (allocated, its stack and name) or a gap. */
static int
add_pool_block(struct snapshot *snap, struct trace_ring *ring, struct dump_stacks *ds,
               struct snap_segment *seg, uint64_t addr, uint64_t size,
               const struct pool_region_info *region)
{
    struct snap_block blk = {.addr = addr, .size = size, .pool = TRACE_POOL_NVTX};
    int rc = 0;
    if (region != NULL) {
        blk.requested_size = size;
        blk.state = BLOCK_ACTIVE_ALLOCATED;
        const char *name = trace_ring_label(ring, region->name_id);
        if (name != NULL && (blk.label = snapshot_intern(snap, name)) == NULL)
            return -CUPROF_EHOSTMEM;
        rc = stack_index(snap, ds, region->stack_id, &blk.stack);
        seg->allocated_size += size;
        seg->active_size += size;
        seg->requested_size += size;
    }
    return rc != 0 ? rc : snapshot_add_block(snap, &blk);
}

/* The block `bi` that a registered heap occupies, shown as the pool sees it: its regions and the
 * free gaps between them (the program's own allocator's blocks, beneath cuprof's). */
static int
add_heap_blocks(struct snapshot *snap, struct trace_ring *ring, struct dump_stacks *ds,
                struct snap_segment *seg, const struct block_info *bi,
                const struct pool_heap_info *heap, const struct dump_buffers *b)
{
    uint64_t at = bi->addr, end = bi->addr + bi->size;
    int rc = 0;
    for (size_t k = 0; rc == 0 && k < heap->region_count; k++) {
        const struct pool_region_info *r = &b->regions[heap->first_region + k];
        if (r->addr < at || r->addr + r->size > end)
            continue; /* (the tables promise neither) */
        if (r->addr > at)
            rc = add_pool_block(snap, ring, ds, seg, at, r->addr - at, NULL);
        if (rc == 0)
            rc = add_pool_block(snap, ring, ds, seg, r->addr, r->size, r);
        at = r->addr + r->size;
    }
    if (rc == 0 && at < end)
        rc = add_pool_block(snap, ring, ds, seg, at, end - at, NULL);
    return rc;
}

static int
add_device(struct snapshot *snap, struct trace_ring *ring, struct dump_stacks *ds, int device,
           const struct dump_buffers *b)
{
    int rc;
    size_t heap = 0; /* heaps and blocks both go by address */
    for (size_t i = 0; i < b->segment_count; i++) {
        const struct segment_info *si = &b->segments[i];
        struct snap_segment seg = {.device = device,
                                   .addr = si->addr,
                                   .total_size = si->total_size,
                                   .stream = si->stream,
                                   .is_small = si->is_small != 0,
                                   .is_expandable = si->expandable != 0,
                                   .cuprof_pool = si->pool};
        if ((rc = stack_index(snap, ds, si->stack_id, &seg.stack)) != 0 ||
            (rc = snapshot_add_segment(snap, &seg)) != 0)
            return rc;
        struct snap_segment *out = &snap->segments[snap->segment_count - 1];
        for (uint32_t k = 0; k < si->block_count && si->first_block + k < b->block_count; k++) {
            const struct block_info *bi = &b->blocks[si->first_block + k];
            while (heap < b->heap_count && b->heaps[heap].addr < bi->addr)
                heap++;
            if (heap < b->heap_count && b->heaps[heap].addr == bi->addr &&
                bi->state == BLOCK_ACTIVE_ALLOCATED && b->heaps[heap].size <= bi->size) {
                if ((rc = add_heap_blocks(snap, ring, ds, out, bi, &b->heaps[heap], b)) != 0)
                    return rc;
                continue;
            }
            struct snap_block blk = {.addr = bi->addr,
                                     .size = bi->size,
                                     .requested_size = bi->requested_size,
                                     .state = bi->state};
            if ((rc = stack_index(snap, ds, bi->stack_id, &blk.stack)) != 0 ||
                (rc = snapshot_add_block(snap, &blk)) != 0)
                return rc;
            if (blk.state == BLOCK_ACTIVE_ALLOCATED)
                out->allocated_size += blk.size;
            if (blk.state != BLOCK_INACTIVE) {
                out->active_size += blk.size;
                out->requested_size += blk.requested_size;
            }
        }
    }
    if ((rc = snapshot_reserve_entries(snap, (size_t)device, b->record_count)) != 0)
        return rc;
    for (size_t i = 0; i < b->record_count; i++) {
        const struct trace_record *r = &b->records[i];
        struct snap_entry e = {.action = r->action,
                               .pool = r->pool,
                               .has_time = true,
                               .time_us = r->time_us,
                               .addr = r->addr,
                               .size = r->size,
                               .stream = r->stream};
        /* The ring keeps an oom entry's device_free where the model does: in addr. */
        if (r->action == TRACE_ANNOTATE) {
            enum snap_stage stage = SNAP_STAGE_MARK;
            const char *label = trace_ring_label_stage(ring, r->stack_id, &stage);
            rc = snapshot_add_annotation(snap, (size_t)device, &e, label != NULL ? label : "",
                                         stage);
        } else if ((rc = stack_index(snap, ds, r->stack_id, &e.stack)) == 0) {
            rc = snapshot_add_entry(snap, (size_t)device, &e);
        }
        if (rc != 0)
            return rc;
    }
    snap->device_traces[device].dropped = b->dropped;
    snap->cuprof.dropped_entries[device] = b->dropped;
    return 0;
}

static void
set_allocator_settings(struct snapshot *snap, const struct alloc_config *c)
{
    struct alloc_config defaults;
    if (c == NULL) {
        alloc_config_defaults(&defaults);
        c = &defaults;
    }
    struct snap_allocator_settings *s = &snap->allocator_settings;
    snap->has_allocator_settings = true;
    s->alloc_conf = snapshot_intern(snap, c->raw);
    if (s->alloc_conf == NULL)
        s->alloc_conf = "";
    s->max_split_size = (int64_t)(uint64_t)c->max_split_size; /* SIZE_MAX -> -1, as PyTorch */
    s->garbage_collection_threshold = c->garbage_collection_threshold;
    s->expandable_segments = c->expandable_segments;
    s->release_lock_on_cudamalloc = c->release_lock_on_cudamalloc;
    for (int i = 0; i < 16 && i < ALLOC_CONFIG_ROUNDUP_INTERVALS; i++)
        s->roundup_power2_divisions[i] = c->roundup_power2_divisions[i];
}

static int
set_device_stats(struct snapshot *snap, int device, const struct memory_stats *ms)
{
    struct memory_stat_kv kv[MEMORY_STATS_KEY_COUNT];
    struct snap_stat st[MEMORY_STATS_KEY_COUNT];
    size_t n = memory_stats_flatten(ms, kv, MEMORY_STATS_KEY_COUNT);
    if (n > MEMORY_STATS_KEY_COUNT)
        n = MEMORY_STATS_KEY_COUNT;
    for (size_t i = 0; i < n; i++)
        st[i] = (struct snap_stat){kv[i].key, kv[i].value};
    return snapshot_set_stats(snap, (size_t)device, st, n) != 0 ? -CUPROF_EHOSTMEM : 0;
}

/* The OOM messages, each history position made an index into its device's trace (the records of
 * device d were positions [first[d], first[d] + count)). */
static int
set_oom_messages(struct snapshot *snap, const struct dump_info *info, const uint64_t *first,
                 size_t devices)
{
    size_t n = info->oom_message_count;
    struct snap_oom_message *rows = n > 0 ? calloc(n, sizeof(*rows)) : NULL;
    if (n > 0 && rows == NULL)
        return -CUPROF_EHOSTMEM;
    for (size_t i = 0; i < n; i++) {
        const struct dump_oom_message *m = &info->oom_messages[i];
        size_t d = (size_t)m->device;
        int64_t index = -1;
        /* A driver's own call has no entry: its index may be the trace's end. */
        uint64_t past = m->api != NULL ? 1 : 0;
        if (m->device >= 0 && d < devices && d < snap->device_count && m->position != UINT64_MAX &&
            m->position >= first[d] && m->position - first[d] < snap->device_traces[d].count + past)
            index = (int64_t)(m->position - first[d]);
        rows[i] = (struct snap_oom_message){m->device, index, m->time_us, m->message, m->api};
    }
    int rc = snapshot_set_oom_messages(snap, rows, n);
    free(rows);
    return rc;
}

static int
add_cuprof(struct snapshot *snap, const struct dump_info *info)
{
    struct snap_cuprof *c = &snap->cuprof;
    c->present = true;
    c->version = CUPROF_VERSION;
    c->mode = snapshot_intern(snap, info->mode ? info->mode : "cache");
    c->host = snapshot_intern(snap, info->host ? info->host : "");
    c->pid = info->pid;
    c->rank = info->rank;
    c->fit_segment_on_oom = info->fit_segment_on_oom;
    if (c->mode == NULL || c->host == NULL)
        return -CUPROF_EHOSTMEM;
    for (size_t i = 0; i < info->config_count; i++)
        if (snapshot_add_config(snap, info->config[i].key, info->config[i].value) != 0)
            return -CUPROF_EHOSTMEM;
    if (info->argv != NULL && snapshot_set_argv(snap, info->argv, info->argc) != 0)
        return -CUPROF_EHOSTMEM;
    struct python_frames_status py;
    python_frames_status(&py);
    if (py.interpreter != NULL) {
        c->python = (struct snap_python){
            .present = true,
            .interpreter = snapshot_intern(snap, py.interpreter),
            .frames = snapshot_intern(snap, py.frames != NULL ? py.frames : ""),
            .captures_gil_held = (int64_t)py.captures_gil_held,
            .captures_gil_released = (int64_t)py.captures_gil_released,
        };
        if (c->python.interpreter == NULL || c->python.frames == NULL)
            return -CUPROF_EHOSTMEM;
    }
    if (snapshot_set_libraries(snap, info->libraries, info->library_count) != 0 ||
        snapshot_set_footprints(snap, info->footprints, info->footprint_count) != 0)
        return -CUPROF_EHOSTMEM;
    return 0;
}

int
snapshot_dump_build(struct allocator *alloc, struct trace_ring *ring, const struct dump_info *info,
                    struct snapshot **out)
{
    static const struct dump_info no_info = {.rank = -1};
    if (info == NULL)
        info = &no_info;
    int devices = allocator_device_count(alloc);
    struct snapshot *snap = snapshot_create(devices > 0 ? (size_t)devices : 0);
    if (snap == NULL)
        return -CUPROF_EHOSTMEM;
    struct dump_buffers b = {0};
    struct dump_stacks ds = {.sym = info->symbolizer};
    bool own_sym = false;
    uint64_t *first = calloc((size_t)(devices > 0 ? devices : 0) + 1, sizeof(uint64_t));
    int rc = first != NULL ? 0 : -CUPROF_EHOSTMEM;
    for (int d = 0; d < devices && rc == 0; d++) {
        rc = copy_device(alloc, ring, info->pools, d, &b);
        if (rc == 0)
            first[d] = b.end - b.record_count;
        /* Symbolization starts only once something needs it, and never under a lock. */
        if (rc == 0 && ds.sym == NULL && !own_sym && (b.block_count > 0 || b.record_count > 0)) {
            ds.sym = symbolizer_create();
            own_sym = true;
        }
        if (rc == 0)
            rc = add_device(snap, ring, &ds, d, &b);
        if (rc == 0)
            rc = set_device_stats(snap, d, &b.stats);
    }
    if (rc == 0) {
        set_allocator_settings(snap, info->alloc_config);
        rc = add_cuprof(snap, info);
    }
    if (rc == 0)
        rc = set_oom_messages(snap, info, first, devices > 0 ? (size_t)devices : 0);
    free(first);
    if (own_sym && ds.sym != NULL)
        symbolizer_destroy(ds.sym);
    free(ds.map);
    free(ds.frames);
    free(b.segments);
    free(b.blocks);
    free(b.records);
    free(b.heaps);
    free(b.regions);
    if (rc != 0) {
        snapshot_free(snap);
        return rc;
    }
    *out = snap;
    return 0;
}

int
snapshot_dump_live(struct allocator *alloc, struct trace_ring *ring, const struct dump_info *info,
                   const char *path, enum file_publish_mode mode, char *chosen, size_t chosen_len)
{
    struct snapshot *snap = NULL;
    int rc = snapshot_dump_build(alloc, ring, info, &snap);
    if (rc != 0) {
        errno = ENOMEM;
        return rc;
    }
    rc = snapshot_write_file(path, snap, SNAPSHOT_FORMAT_AUTO, mode, chosen, chosen_len);
    int saved = errno;
    snapshot_free(snap);
    errno = saved;
    return rc;
}
