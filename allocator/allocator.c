/* allocator.c: the public entry points: argument checks and device selection (malloc and free
 * hand over to alloc_malloc_on_device and alloc_free_by_address), trace mode and external memory,
 * the owner of a pointer, fraction, stats copies. */
#include "allocator/allocator.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/alloc_expand.h"
#include "allocator/alloc_free.h"
#include "allocator/alloc_malloc.h"
#include "allocator/alloc_policy.h"
#include "allocator/allocator_state.h"
#include "allocator/cuprof_errors.h"

static struct alloc_device *
device_at(struct allocator *alloc, int device)
{
    /* One unsigned compare covers device < 0 too. */
    if (alloc == NULL || (unsigned)device >= (unsigned)alloc->device_count)
        return NULL;
    return &alloc->devices[device];
}

/* Sets a device's fraction limit from its total memory (PyTorch 2.4: always active once set). */
static int
set_fraction_locked(struct allocator *alloc, struct alloc_device *dev, double fraction)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    size_t free_b = 0, total_b = 0;
    int rc = alloc->ops.mem_info(alloc->ops.ctx, dev->index, &free_b, &total_b);
    if (rc != 0)
        return rc;
    /* A device of no memory, or with more free than total, is a wrong answer: no limit from it
     * (a limit of 0 would refuse every request the device would serve). */
    if (total_b == 0 || free_b > total_b)
        return -CUPROF_EDRIVER;
    /* fraction * SIZE_MAX rounds up to 2^64, which no size_t holds (the conversion is UB). */
    double allowed = fraction * (double)total_b;
    dev->allowed_max = allowed >= 0x1p64 ? SIZE_MAX : (size_t)allowed;
    dev->set_fraction = true;
    dev->collects_garbage = dev->config->garbage_collection_threshold > 0.0;
    return 0;
}

struct allocator *
allocator_create(const struct alloc_config *config, const struct device_ops *ops,
                 const struct trace_sink *sink, int device_count)
{
    if (config == NULL || ops == NULL || device_count <= 0 || device_count > INT16_MAX)
        return NULL;
    struct allocator *alloc = calloc(1, sizeof(*alloc));
    if (alloc == NULL)
        return NULL;
    /* aligned_alloc: struct alloc_device is cache-line aligned (alloc_device_init zeroes it). */
    alloc->devices = aligned_alloc(_Alignof(struct alloc_device),
                                   (size_t)device_count * sizeof(*alloc->devices));
    if (alloc->devices == NULL) {
        free(alloc);
        return NULL;
    }
    alloc->config = *config;
    alloc->sync_on_free = config->caching && config->free_sync == FREE_SYNC_DEVICE;
    alloc->ops = *ops;
    if (sink != NULL) {
        alloc->sink = *sink;
        alloc->has_sink = true;
    }
    alloc->device_count = device_count;
    for (int d = 0; d < device_count; d++) {
        if (alloc_device_init(&alloc->devices[d], d, &alloc->config, &alloc->ops,
                              alloc->has_sink ? &alloc->sink : NULL) != 0) {
            for (int e = 0; e < d; e++)
                alloc_device_destroy(&alloc->devices[e]);
            free(alloc->devices);
            free(alloc);
            return NULL;
        }
        if (config->per_process_memory_fraction > 0.0) {
            /* No other thread knows the allocator yet; the lock keeps the helper's contract. */
            alloc_lock_acquire(&alloc->devices[d].lock);
            (void)set_fraction_locked(alloc, &alloc->devices[d],
                                      config->per_process_memory_fraction);
            alloc_lock_release(&alloc->devices[d].lock);
        }
    }
    return alloc;
}

void
allocator_destroy(struct allocator *alloc)
{
    if (alloc == NULL)
        return;
    for (int d = 0; d < alloc->device_count; d++) {
        free(alloc->devices[d].peers);
        alloc_device_destroy(&alloc->devices[d]);
    }
    free(alloc->devices);
    free(alloc);
}

/* What lock_owner does with the block it finds. */
enum owner_mode {
    OWNER_GET,           /* leave it in the map */
    OWNER_TAKE_CACHED,   /* remove it if it is a cached (non-external) block */
    OWNER_TAKE_EXTERNAL, /* remove it if it is an external block */
};

/* Finds the device holding the block at exactly addr and returns it locked with the block in
 * *out, or NULL. Only devices whose address range holds addr are asked, so a pointer's lookup
 * locks just its own device. */
static struct alloc_device *
lock_owner(struct allocator *alloc, uint64_t addr, enum owner_mode mode, struct alloc_block **out)
{
    for (int d = 0; d < alloc->device_count; d++) {
        struct alloc_device *dev = &alloc->devices[d];
        if (!alloc_device_may_own(dev, addr))
            continue;
        alloc_lock_acquire(&dev->lock);
        struct alloc_block *b = mode == OWNER_GET
                                    ? block_map_get(&dev->map, addr)
                                    : block_map_take(&dev->map, addr, mode == OWNER_TAKE_EXTERNAL);
        if (b != NULL) {
            *out = b;
            return dev;
        }
        alloc_lock_release(&dev->lock);
    }
    return NULL;
}

/* A build with ALLOC_CHECK_EVERY=N (allocator_checked_dep, for tests) checks every invariant
 * after each N-th malloc or free of the process and aborts with the broken one. */
#ifdef ALLOC_CHECK_EVERY
static _Atomic unsigned long checked_ops;

static int
checked(struct allocator *alloc, int rc)
{
    if (atomic_fetch_add(&checked_ops, 1) % ALLOC_CHECK_EVERY != 0)
        return rc;
    char msg[512];
    if (allocator_check_invariants(alloc, msg, sizeof msg) != 0) {
        fprintf(stderr, "cuprof: allocator invariant broken: %s\n", msg);
        abort();
    }
    return rc;
}
#define CHECKED(alloc, call) checked(alloc, call)
#else
#define CHECKED(alloc, call) (call)
#endif

int
allocator_malloc(struct allocator *alloc, int device, size_t size, uint64_t stream,
                 uint32_t stack_id, uint64_t *addr)
{
    return allocator_malloc_owned(alloc, device, size, stream, stack_id, 0, addr);
}

/* The checks every malloc makes, each once (the cached-only entry is the shim's fast path);
 * `alloc` is not NULL. */
static int
malloc_reaching(struct allocator *alloc, int device, size_t size, uint64_t stream,
                uint32_t stack_id, uint16_t owner, enum alloc_reach reach, bool stream_ordered,
                uint64_t *addr)
{
    if ((unsigned)device >= (unsigned)alloc->device_count || addr == NULL)
        return -CUPROF_EINVAL;
    *addr = 0;
    if (size == 0) /* PyTorch: malloc(0) hands out NULL and records nothing */
        return 0;
    return CHECKED(alloc, alloc_malloc_on_device(&alloc->devices[device], reach, size, stream,
                                                 stack_id, owner, stream_ordered, addr));
}

/* A request as the configuration serves it: from the cache, or (trace mode) a segment of its
 * own. */
static int
malloc_as_configured(struct allocator *alloc, int device, size_t size, uint64_t stream,
                     uint32_t stack_id, uint16_t owner, bool stream_ordered, uint64_t *addr)
{
    if (alloc == NULL)
        return -CUPROF_EINVAL;
    return malloc_reaching(alloc, device, size, stream, stack_id, owner,
                           alloc->config.caching ? ALLOC_REACH_CACHE : ALLOC_REACH_SEGMENT,
                           stream_ordered, addr);
}

int
allocator_malloc_owned(struct allocator *alloc, int device, size_t size, uint64_t stream,
                       uint32_t stack_id, uint16_t owner, uint64_t *addr)
{
    return malloc_as_configured(alloc, device, size, stream, stack_id, owner, false, addr);
}

int
allocator_malloc_stream_ordered(struct allocator *alloc, int device, size_t size, uint64_t stream,
                                uint32_t stack_id, uint16_t owner, uint64_t *addr)
{
    return malloc_as_configured(alloc, device, size, stream, stack_id, owner, true, addr);
}

int
allocator_malloc_cached(struct allocator *alloc, int device, size_t size, uint64_t stream,
                        uint32_t stack_id, uint16_t owner, uint64_t *addr)
{
    if (alloc == NULL || !alloc->config.caching)
        return -CUPROF_EUNCACHED;
    return malloc_reaching(alloc, device, size, stream, stack_id, owner, ALLOC_REACH_CACHED_ONLY,
                           false, addr);
}

int
allocator_free(struct allocator *alloc, uint64_t addr, uint32_t stack_id)
{
    return CHECKED(alloc, alloc_free_by_address(alloc, addr, false, 0, stack_id));
}

int
allocator_free_on_stream(struct allocator *alloc, uint64_t addr, uint64_t stream, uint32_t stack_id)
{
    return CHECKED(alloc, alloc_free_by_address(alloc, addr, true, stream, stack_id));
}

int
allocator_record_stream(struct allocator *alloc, uint64_t addr, uint64_t stream)
{
    struct alloc_block *b = NULL;
    struct alloc_device *dev = alloc ? lock_owner(alloc, addr, OWNER_GET, &b) : NULL;
    if (dev == NULL)
        return -CUPROF_ENOTOWNED;
    while (!alloc_device_spares_ready_locked(dev, 1)) {
        int rc = alloc_device_refill_unlocking(dev, 1);
        if (rc != 0) {
            alloc_lock_release(&dev->lock);
            return rc;
        }
    }
    int rc = 0;
    /* Looked up again: the lock was dropped for spares, so the block may have been freed. */
    b = block_map_get(&dev->map, addr);
    if (b == NULL || b->seg->external || !b->allocated) {
        rc = -CUPROF_ENOTOWNED;
    } else if (stream != b->stream && b->seg->pool == TRACE_POOL_DEFAULT) {
        bool present = false;
        for (struct alloc_aux *a = b->stream_uses; a != NULL; a = a->next)
            present = present || a->stream == stream;
        if (!present) {
            struct alloc_aux *a = alloc_device_take_aux_locked(dev);
            a->stream = stream;
            a->next = b->stream_uses;
            b->stream_uses = a;
        }
        alloc_device_note_stream_locked(dev, stream);
    }
    alloc_lock_release(&dev->lock);
    return rc;
}

int
allocator_track_external(struct allocator *alloc, int device, uint64_t addr, size_t size,
                         uint64_t stream, uint8_t pool, uint32_t stack_id)
{
    return allocator_track_external_in(alloc, device, addr, size, stream, pool, stack_id, 0);
}

int
allocator_track_external_in(struct allocator *alloc, int device, uint64_t addr, size_t size,
                            uint64_t stream, uint8_t pool, uint32_t stack_id, uint64_t context)
{
    struct alloc_device *dev = device_at(alloc, device);
    struct alloc_block *b = NULL;
    if (dev == NULL || addr == 0)
        return -CUPROF_EINVAL;
    int rc = alloc_device_lock_with_spares(dev, 0);
    if (rc != 0)
        return rc;
    rc = alloc_malloc_whole_segment_locked(dev, size, addr, stream, pool, stack_id, &b);
    if (rc == 0) {
        b->seg->context = context;
        b->buffer_id = 0;
        b->stream_ordered = false;
    }
    size_t grow = rc == 0 && block_map_insert(&dev->map, b) ? block_map_grow_count(&dev->map) : 0;
    alloc_lock_release(&dev->lock);
    if (grow)
        alloc_device_grow_map(dev, grow);
    return rc;
}

int
allocator_note_external_oom(struct allocator *alloc, int device, size_t size, uint64_t stream,
                            uint8_t pool, uint32_t stack_id, const char *api)
{
    struct alloc_device *dev = device_at(alloc, device);
    /* 1 EiB and more: no memory could serve it, and PyTorch counts no OOM for it either. */
    if (dev == NULL || (uint64_t)size >= ALLOC_MAX_REQUEST)
        return -CUPROF_EINVAL;
    alloc_malloc_external_oom(dev, size, stream, pool, stack_id, api);
    return 0;
}

int
allocator_untrack_external(struct allocator *alloc, uint64_t addr, uint32_t stack_id)
{
    if (alloc == NULL)
        return -CUPROF_EINVAL;
    struct alloc_block *b = NULL;
    struct alloc_device *dev = lock_owner(alloc, addr, OWNER_TAKE_EXTERNAL, &b);
    if (dev == NULL)
        return -CUPROF_ENOTOWNED;
    (void)alloc_free_whole_segment_locked(dev, b, stack_id);
    alloc_lock_release(&dev->lock);
    return 0;
}

/* The block (live, cached or unmapped) containing addr on one device, or NULL when no segment
 * of the device holds addr. */
static struct alloc_block *
block_at_locked(struct alloc_device *dev, uint64_t addr)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    struct avl_node *n = dev->segments.root;
    struct alloc_segment *seg = NULL;
    while (n != NULL) {
        struct alloc_segment *s =
            (struct alloc_segment *)(void *)((char *)n - offsetof(struct alloc_segment, node));
        if (s->addr <= addr) {
            seg = s;
            n = n->right;
        } else {
            n = n->left;
        }
    }
    if (seg == NULL || addr >= seg->addr + seg->size)
        return NULL;
    for (struct alloc_block *b = seg->head; b != NULL; b = b->next) {
        if (addr >= b->addr && addr < b->addr + b->size)
            return b;
    }
    return NULL;
}

/* The block (live, cached or unmapped) holding addr, with its device's lock held: the caller
 * releases it. NULL (nothing locked) when no segment of this allocator holds addr. */
static struct alloc_device *
lock_block_at(struct allocator *alloc, uint64_t addr, struct alloc_block **out)
{
    for (int d = 0; alloc != NULL && d < alloc->device_count; d++) {
        struct alloc_device *dev = &alloc->devices[d];
        if (!alloc_device_may_own(dev, addr))
            continue;
        alloc_lock_acquire(&dev->lock);
        struct alloc_block *b = block_map_get(&dev->map, addr);
        if (b == NULL)
            b = block_at_locked(dev, addr);
        if (b != NULL) {
            *out = b;
            return dev;
        }
        alloc_lock_release(&dev->lock);
    }
    return NULL;
}

/* The cache's buffer IDs drawn so far, counted from ALLOC_BUFFER_ID_FIRST: process-wide (IDs are
 * unique in the process, and tests run several allocators), touched only by queries. */
static _Atomic uint64_t buffer_ids_drawn;

enum alloc_range
allocator_range_of(struct allocator *alloc, uint64_t addr, struct alloc_range_block *block)
{
    struct alloc_block *b = NULL;
    struct alloc_device *dev = lock_block_at(alloc, addr, &b);
    if (dev == NULL)
        return ALLOC_RANGE_NOT_OURS;
    enum alloc_range range = ALLOC_RANGE_NONE;
    if (b->allocated && addr - b->addr < b->requested_size) {
        bool whole = b->seg->external || b->seg->pool == TRACE_POOL_TRACE;
        /* Drawn here rather than at malloc: the hot path only zeroes it. */
        if (!whole && b->buffer_id == 0)
            b->buffer_id = ALLOC_BUFFER_ID_FIRST +
                           atomic_fetch_add_explicit(&buffer_ids_drawn, 1, memory_order_relaxed);
        if (block != NULL)
            *block = (struct alloc_range_block){.base = b->addr,
                                                .size = b->requested_size,
                                                .segment = b->seg->addr,
                                                .whole = whole,
                                                .stream_ordered = b->stream_ordered,
                                                .buffer_id = whole ? 0 : b->buffer_id};
        range = ALLOC_RANGE_BLOCK;
    }
    alloc_lock_release(&dev->lock);
    return range;
}

bool
allocator_lookup(struct allocator *alloc, uint64_t addr, int *device, uint64_t *block_addr,
                 size_t *block_size)
{
    struct alloc_block *b = NULL;
    struct alloc_device *dev = lock_block_at(alloc, addr, &b);
    if (dev == NULL)
        return false;
    bool live = b->allocated;
    if (live) {
        *device = (int)(dev - alloc->devices);
        *block_addr = b->addr;
        *block_size = b->size;
    }
    alloc_lock_release(&dev->lock);
    return live;
}

int
allocator_lock_live_block(struct allocator *alloc, uint64_t addr, struct live_block *out)
{
    struct alloc_block *b = NULL;
    struct alloc_device *dev = lock_block_at(alloc, addr, &b);
    if (dev == NULL)
        return -1;
    if (!b->allocated) {
        alloc_lock_release(&dev->lock);
        return -1;
    }
    *out = (struct live_block){.addr = b->addr,
                               .size = b->size,
                               .requested = b->requested_size,
                               .stream = b->stream,
                               .stack_id = b->stack_id,
                               .owner = b->owner};
    return (int)(dev - alloc->devices);
}

int
allocator_empty_cache(struct allocator *alloc, int device)
{
    if (alloc == NULL || device < -1 || device >= alloc->device_count)
        return -CUPROF_EINVAL;
    for (int d = 0; d < alloc->device_count; d++) {
        if (device != -1 && d != device)
            continue;
        struct alloc_device *dev = &alloc->devices[d];
        alloc_lock_acquire(&dev->lock);
        alloc_free_release_cached_locked(dev);
        alloc_lock_release(&dev->lock);
    }
    return 0;
}

/* Whether a context's end drops `seg`: its tagged external memory, and with the cache everything
 * untagged (the cache's segments, external memory nobody tagged). Never virtual-memory or
 * stream-ordered memory the driver handed out: cuda.h's cuCtxDestroy does not destroy what
 * cuMemCreate, cuMemAllocAsync and cuMemAllocFromPoolAsync made. */
static bool
forgotten_with(const struct alloc_segment *seg, uint64_t context, bool with_cache)
{
    if (seg->external && (seg->pool == TRACE_POOL_VMM || seg->pool == TRACE_POOL_ASYNC))
        return false;
    if (seg->external && seg->context != 0)
        return seg->context == context;
    return with_cache;
}

/* The first segment of the device a context's end drops, or NULL. */
static struct alloc_segment *
first_forgotten_locked(struct alloc_device *dev, uint64_t context, bool with_cache, bool all)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    for (struct avl_node *n = avl_first(&dev->segments); n != NULL; n = avl_next(n)) {
        struct alloc_segment *seg =
            (struct alloc_segment *)(void *)((char *)n - offsetof(struct alloc_segment, node));
        if (all || forgotten_with(seg, context, with_cache))
            return seg;
    }
    return NULL;
}

/* allocator_forget_device (all) and allocator_forget_context. */
static void
forget_segments(struct allocator *alloc, int device, uint64_t context, bool with_cache, bool all)
{
    struct alloc_device *dev = device_at(alloc, device);
    if (dev == NULL)
        return;
    alloc_lock_acquire(&dev->lock);
    /* The history must still replay (MemoryViz undoes it from the segments), so everything the
     * driver dropped is recorded as freed: pending frees complete, then each live block is freed
     * and each segment released, with the stats moving exactly as on those paths. Forgetting one
     * segment may merge and drop others' spare records, so each search starts again. */
    if (with_cache)
        alloc_free_forget_events_locked(dev);
    struct alloc_segment *seg;
    while ((seg = first_forgotten_locked(dev, context, with_cache, all)) != NULL)
        alloc_free_forget_segment_locked(dev, seg);
    if (!with_cache) {
        alloc_lock_release(&dev->lock);
        return;
    }
    dev->stream_count = 0;
    dev->streams_overflow = false;
    /* Peer access is the contexts': gone both ways with this device's. */
    dev->peer_count = 0;
    alloc_lock_release(&dev->lock);
    for (int d = 0; d < alloc->device_count; d++) {
        struct alloc_device *other = &alloc->devices[d];
        if (d == device)
            continue;
        alloc_lock_acquire(&other->lock);
        alloc_expand_drop_peer_locked(other, device);
        alloc_lock_release(&other->lock);
    }
}

void
allocator_forget_device(struct allocator *alloc, int device)
{
    forget_segments(alloc, device, 0, true, true);
}

void
allocator_forget_context(struct allocator *alloc, int device, uint64_t context, bool with_cache)
{
    forget_segments(alloc, device, context, with_cache, false);
}

void
allocator_forget_stream(struct allocator *alloc, uint64_t stream)
{
    for (int d = 0; alloc != NULL && d < alloc->device_count; d++) {
        struct alloc_device *dev = &alloc->devices[d];
        alloc_lock_acquire(&dev->lock);
        alloc_device_forget_stream_locked(dev, stream);
        alloc_lock_release(&dev->lock);
    }
}

void
allocator_destroy_idle_events(struct allocator *alloc, int device)
{
    struct alloc_device *dev = device_at(alloc, device);
    if (dev == NULL)
        return;
    alloc_lock_acquire(&dev->lock);
    while (dev->event_pool != NULL) {
        struct alloc_aux *a = dev->event_pool;
        dev->event_pool = a->next;
        (void)dev->ops->event_destroy(dev->ops->ctx, a->event);
        alloc_device_put_aux_locked(dev, a);
    }
    alloc_lock_release(&dev->lock);
}

void
allocator_reset_after_fork(struct allocator *alloc)
{
    /* The parent's waiters and bias owners do not exist here: a plain reset, no futex wake. */
    for (int d = 0; alloc != NULL && d < alloc->device_count; d++)
        alloc_lock_reset_after_fork(&alloc->devices[d].lock);
}

void
allocator_process_events(struct allocator *alloc, int device)
{
    for (int d = 0; alloc != NULL && d < alloc->device_count; d++) {
        if (device != -1 && d != device)
            continue;
        struct alloc_device *dev = &alloc->devices[d];
        alloc_lock_acquire(&dev->lock);
        alloc_free_process_events_locked(dev);
        alloc_lock_release(&dev->lock);
    }
}

int
allocator_set_memory_fraction(struct allocator *alloc, int device, double fraction)
{
    struct alloc_device *dev = device_at(alloc, device);
    if (dev == NULL || !(fraction >= 0.0 && fraction <= 1.0))
        return -CUPROF_EINVAL;
    alloc_lock_acquire(&dev->lock);
    int rc = set_fraction_locked(alloc, dev, fraction);
    alloc_lock_release(&dev->lock);
    return rc;
}

void
allocator_apply_settings(struct allocator *alloc, const struct alloc_config *config)
{
    /* Every device reads alloc->config under its own lock: hold them all (in index order). */
    for (int d = 0; d < alloc->device_count; d++)
        alloc_lock_acquire(&alloc->devices[d].lock);
    struct alloc_config *c = &alloc->config;
    memcpy(c->roundup_power2_divisions, config->roundup_power2_divisions,
           sizeof(c->roundup_power2_divisions));
    c->max_split_size = config->max_split_size;
    c->max_non_split_rounding_size = config->max_non_split_rounding_size;
    c->garbage_collection_threshold = config->garbage_collection_threshold;
    c->expandable_segments = config->expandable_segments;
    for (int d = 0; d < alloc->device_count; d++) {
        struct alloc_device *dev = &alloc->devices[d];
        dev->expandable = alloc_device_serves_expandable(dev);
        dev->collects_garbage = dev->set_fraction && c->garbage_collection_threshold > 0.0;
        dev->stats.max_split_size = c->max_split_size == SIZE_MAX ? -1 : (int64_t)c->max_split_size;
    }
    for (int d = alloc->device_count; d-- > 0;)
        alloc_lock_release(&alloc->devices[d].lock);
}

int
allocator_map_expandable(struct allocator *alloc, int device, uint64_t stream, bool is_small,
                         uint64_t addr, size_t size)
{
    struct alloc_device *dev = device_at(alloc, device);
    if (dev == NULL || dev->ops->vmm_reserve == NULL || dev->ops->vmm_map == NULL)
        return -CUPROF_EINVAL;
    int rc = alloc_device_lock_with_spares(dev, 0);
    if (rc != 0)
        return rc;
    /* A new reservation's block, the unmapped pieces before and after the range. */
    rc = alloc_device_reserve_blocks_unlocking(dev, 4);
    if (rc == 0)
        rc = alloc_expand_map_at_locked(dev, alloc_device_pool_of(dev, is_small), stream, addr,
                                        size);
    alloc_lock_release(&dev->lock);
    return rc;
}

int
allocator_unmap_expandable(struct allocator *alloc, int device, uint64_t addr, size_t size)
{
    struct alloc_device *dev = device_at(alloc, device);
    if (dev == NULL || dev->ops->vmm_unmap == NULL)
        return -CUPROF_EINVAL;
    int rc = alloc_device_lock_with_spares(dev, 0);
    if (rc != 0)
        return rc;
    /* The free pieces before and after the pages. */
    rc = alloc_device_reserve_blocks_unlocking(dev, 2);
    if (rc == 0)
        rc = alloc_expand_unmap_at_locked(dev, addr, size);
    alloc_lock_release(&dev->lock);
    return rc;
}

int
allocator_add_peer(struct allocator *alloc, int device, int peer)
{
    struct alloc_device *dev = device_at(alloc, device);
    if (dev == NULL || peer < 0 || peer >= alloc->device_count || peer == device)
        return -CUPROF_EINVAL;
    int16_t *fresh = NULL;
    alloc_lock_acquire(&dev->lock);
    if (dev->peers == NULL) {
        /* Room for every other device, made outside the lock. */
        alloc_lock_release(&dev->lock);
        fresh = calloc((size_t)alloc->device_count, sizeof(*fresh));
        if (fresh == NULL)
            return -CUPROF_EHOSTMEM;
        alloc_lock_acquire(&dev->lock);
        if (dev->peers == NULL) {
            dev->peers = fresh;
            fresh = NULL;
        }
    }
    int rc = alloc_expand_add_peer_locked(dev, peer);
    alloc_lock_release(&dev->lock);
    free(fresh);
    return rc;
}

void
allocator_get_stats(struct allocator *alloc, int device, struct memory_stats *out)
{
    struct alloc_device *dev = device_at(alloc, device);
    if (dev == NULL) {
        memory_stats_init(out, -1);
        return;
    }
    alloc_lock_acquire(&dev->lock);
    memory_stats_settle_all(&dev->stats);
    *out = dev->stats;
    alloc_lock_release(&dev->lock);
}

void
allocator_get_stats_locked(struct allocator *alloc, int device, struct memory_stats *out)
{
    struct alloc_device *dev = device_at(alloc, device);
    if (dev == NULL) {
        memory_stats_init(out, -1);
        return;
    }
    ALLOC_ASSERT_HELD(&dev->lock);
    memory_stats_settle_all(&dev->stats);
    *out = dev->stats;
}

void
allocator_reset_peak_stats(struct allocator *alloc, int device)
{
    struct alloc_device *dev = device_at(alloc, device);
    if (dev == NULL)
        return;
    alloc_lock_acquire(&dev->lock);
    memory_stats_settle_all(&dev->stats);
    memory_stats_reset_peak(&dev->stats);
    alloc_lock_release(&dev->lock);
}

void
allocator_reset_accumulated_stats(struct allocator *alloc, int device)
{
    struct alloc_device *dev = device_at(alloc, device);
    if (dev == NULL)
        return;
    alloc_lock_acquire(&dev->lock);
    memory_stats_settle_all(&dev->stats);
    memory_stats_reset_accumulated(&dev->stats);
    alloc_lock_release(&dev->lock);
}

void
allocator_last_oom_message(struct allocator *alloc, int device, char *buf, size_t len)
{
    struct alloc_device *dev = device_at(alloc, device);
    if (buf == NULL || len == 0)
        return;
    buf[0] = '\0';
    if (dev == NULL)
        return;
    alloc_lock_acquire(&dev->lock);
    snprintf(buf, len, "%s", dev->oom_message);
    alloc_lock_release(&dev->lock);
}

uint64_t
allocator_last_oom_locked(struct allocator *alloc, int device, char *buf, size_t len)
{
    struct alloc_device *dev = device_at(alloc, device);
    if (buf != NULL && len > 0)
        buf[0] = '\0';
    if (dev == NULL)
        return 0;
    ALLOC_ASSERT_HELD(&dev->lock);
    if (buf != NULL && len > 0)
        snprintf(buf, len, "%s", dev->oom_message);
    return (uint64_t)dev->stats.num_ooms;
}

int
allocator_device_count(const struct allocator *alloc)
{
    return alloc ? alloc->device_count : 0;
}

bool
allocator_device_expandable(const struct allocator *alloc, int device)
{
    return alloc != NULL && device >= 0 && device < alloc->device_count &&
           alloc->devices[device].expandable;
}

void
allocator_set_traced_actions(struct allocator *alloc, uint32_t actions)
{
    for (int d = 0; alloc != NULL && d < alloc->device_count; d++) {
        struct alloc_device *dev = &alloc->devices[d];
        alloc_lock_acquire(&dev->lock);
        dev->traced = dev->sink != NULL ? actions & TRACE_ACTIONS_ALL : 0;
        alloc_lock_release(&dev->lock);
    }
}

void
allocator_owner_bytes_locked(struct allocator *alloc, int device, struct alloc_owner_bytes *out,
                             size_t count)
{
    struct alloc_device *dev = device_at(alloc, device);
    if (count > ALLOC_OWNERS_COUNTED)
        count = ALLOC_OWNERS_COUNTED;
    if (dev == NULL) {
        memset(out, 0, count * sizeof(*out));
        return;
    }
    ALLOC_ASSERT_HELD(&dev->lock);
    memcpy(out, dev->owners, count * sizeof(*out));
}

void
allocator_lock_device(struct allocator *alloc, int device)
{
    struct alloc_device *dev = device_at(alloc, device);
    if (dev != NULL)
        alloc_lock_acquire(&dev->lock);
}

void
allocator_unlock_device(struct allocator *alloc, int device)
{
    struct alloc_device *dev = device_at(alloc, device);
    if (dev != NULL)
        alloc_lock_release(&dev->lock);
}
