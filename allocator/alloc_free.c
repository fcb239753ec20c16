/* alloc_free.c: PyTorch's free side (free from the address on, free_block, try_merge_blocks,
 * insert_events, process_events, synchronize_and_free_events, release_block,
 * release_cached_blocks, release_available_cached_blocks, garbage_collect_cached_blocks). */
#include "allocator/alloc_free.h"

#include "allocator/alloc_expand.h"
#include "allocator/alloc_policy.h"
#include "allocator/allocator_state.h"
#include "allocator/cuprof_errors.h"

static bool
is_split(const struct alloc_block *b)
{
    return b->prev != NULL || b->next != NULL;
}

static bool
has_use(const struct alloc_block *b, uint64_t stream)
{
    for (const struct alloc_aux *a = b->stream_uses; a != NULL; a = a->next) {
        if (a->stream == stream)
            return true;
    }
    return false;
}

static void
add_use_locked(struct alloc_device *dev, struct alloc_block *b, uint64_t stream)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    if (has_use(b, stream))
        return;
    struct alloc_aux *a = alloc_device_take_aux_locked(dev);
    a->stream = stream;
    a->next = b->stream_uses;
    b->stream_uses = a;
}

/* An idle event from the device's pool, or a new one; NULL if the device cannot make one. */
static void *
take_event_locked(struct alloc_device *dev)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    void *ev = NULL;
    struct alloc_aux *a = dev->event_pool;
    if (a != NULL) {
        dev->event_pool = a->next;
        ev = a->event;
        alloc_device_put_aux_locked(dev, a);
        return ev;
    }
    if (dev->ops->event_create(dev->ops->ctx, dev->index, &ev) != 0)
        return NULL;
    return ev;
}

/* Keeps the event for reuse; the record node becomes its pool entry. */
static void
recycle_event_locked(struct alloc_device *dev, struct alloc_aux *a)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    a->block = NULL;
    a->next = dev->event_pool;
    dev->event_pool = a;
}

/* PyTorch's insert_events: one event per stream use, each queued with the block. */
static void
insert_events_locked(struct alloc_device *dev, struct alloc_block *b)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    struct alloc_aux *a = b->stream_uses;
    bool synced = false;
    b->stream_uses = NULL;
    while (a != NULL) {
        struct alloc_aux *next = a->next;
        void *ev = take_event_locked(dev);
        if (ev != NULL && dev->ops->event_record(dev->ops->ctx, ev, a->stream) == 0) {
            a->event = ev;
            a->block = b;
            a->next = NULL;
            if (dev->events_tail != NULL)
                dev->events_tail->next = a;
            else
                dev->events = a;
            dev->events_tail = a;
            b->event_count++;
        } else {
            /* No event to wait on: waiting for the whole device is the safe substitute. */
            if (ev != NULL)
                (void)dev->ops->event_destroy(dev->ops->ctx, ev);
            if (!synced)
                (void)dev->ops->synchronize(dev->ops->ctx, dev->index);
            synced = true;
            alloc_device_put_aux_locked(dev, a);
        }
        a = next;
    }
    if (b->event_count == 0)
        alloc_free_block_locked(dev, b);
}

/* PyTorch's try_merge_blocks: dst absorbs its free neighbour src; returns the bytes taken.
 * src stays linked in its pool: the caller erases it or lets dst take its place. */
static size_t
try_merge_locked(struct alloc_block *dst, struct alloc_block *src)
{
    if (src == NULL || src->allocated || src->event_count > 0 || src->stream_uses != NULL ||
        !src->in_pool)
        return 0;
    if (dst->prev == src) {
        dst->addr = src->addr;
        dst->prev = src->prev;
        if (dst->prev)
            dst->prev->next = dst;
        else
            dst->seg->head = dst;
    } else {
        dst->next = src->next;
        if (dst->next)
            dst->next->prev = dst;
    }
    dst->size += src->size;
    return src->size;
}

/* free_block's body, inline into free() (its hot caller) and behind alloc_free_block_locked. */
__attribute__((always_inline)) static inline void
free_block_locked(struct alloc_device *dev, struct alloc_block *b)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    enum stat_pool sp = memory_stats_pool(b->is_small);
    struct memory_stats *st = &dev->stats;
    struct alloc_pool *pool = alloc_device_pool_of(dev, b->is_small);
    alloc_device_trace_locked(dev, TRACE_FREE_COMPLETED, TRACE_POOL_DEFAULT, b->addr,
                              b->requested_size, b->stream,
                              b->free_stack_id ? b->free_stack_id : b->stack_id, 0, b->owner);
    size_t original_size = b->size;
    size_t requested = b->requested_size;
    int64_t net_blocks = 0, net_bytes = 0;
    struct alloc_block *candidates[2] = {b->prev, b->next}, *merged[2];
    int merged_count = 0;
    for (int i = 0; i < 2; i++) {
        size_t subsumed = try_merge_locked(b, candidates[i]);
        if (subsumed > 0) {
            net_blocks -= 1;
            net_bytes -= (int64_t)subsumed;
            merged[merged_count++] = candidates[i];
        }
    }
    /* PyTorch erases the merged neighbours and inserts b; b taking the place of one of them
     * leaves the same ordered set. */
    if (merged_count == 0) {
        alloc_device_pool_insert_locked(pool, b);
    } else {
        if (merged_count == 2)
            alloc_device_pool_erase_locked(pool, merged[0]);
        alloc_device_pool_grown_over_locked(pool, merged[merged_count - 1], b);
        for (int i = 0; i < merged_count; i++)
            alloc_device_put_block_locked(dev, merged[i]);
    }
    if (is_split(b)) {
        net_blocks += 1;
        net_bytes += (int64_t)b->size;
    }
    /* PyTorch: expandable blocks are left out of inactive_split (their free pages can go). */
    if (!b->seg->expandable) {
        memory_stats_net_pool(st->inactive_split, sp, net_blocks);
        memory_stats_net_pool(st->inactive_split_bytes, sp, net_bytes);
    }
    memory_stats_sub_pool(st->active, sp, 1);
    memory_stats_sub_pool(st->active_bytes, sp, (int64_t)original_size);
    memory_stats_sub_pool(st->requested_bytes, sp, (int64_t)requested);
}

void
alloc_free_block_locked(struct alloc_device *dev, struct alloc_block *b)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    free_block_locked(dev, b);
}

/* free()'s body, inline into alloc_free_by_address (its hot caller) and behind
 * alloc_free_request_locked. */
__attribute__((always_inline)) static inline void
free_request_locked(struct alloc_device *dev, struct alloc_block *b, uint32_t stack_id,
                    bool has_stream, uint64_t stream)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    enum stat_pool sp = memory_stats_pool(b->is_small);
    alloc_device_trace_locked(dev, TRACE_FREE_REQUESTED, TRACE_POOL_DEFAULT, b->addr,
                              b->requested_size, b->stream, stack_id ? stack_id : b->stack_id, 0,
                              b->owner);
    alloc_device_owner_free_locked(dev, b->owner, b->requested_size);
    b->free_stack_id = stack_id;
    b->allocated = false;
    memory_stats_sub_pool(dev->stats.allocation, sp, 1);
    memory_stats_sub_pool(dev->stats.allocated_bytes, sp, (int64_t)b->size);
    if (b->size >= dev->config->max_split_size)
        memory_stats_decrease(&dev->stats.oversize_allocations, 1);
    if (has_stream) {
        /* cudaFreeAsync: reusable on its own stream at once, elsewhere after `stream`'s work. */
        if (stream != b->stream)
            add_use_locked(dev, b, stream);
    } else if (b->stream_uses == NULL) {
        switch (dev->config->free_sync) {
        case FREE_SYNC_DEVICE:
            /* allocator_free synchronized the device before taking the lock. */
            break;
        case FREE_SYNC_EVENTS:
            if (dev->streams_overflow) {
                (void)dev->ops->synchronize(dev->ops->ctx, dev->index);
                break;
            }
            for (size_t i = 0; i < dev->stream_count; i++)
                add_use_locked(dev, b, dev->streams[i]);
            break;
        case FREE_SYNC_NONE:
            break;
        }
    }
    if (b->stream_uses != NULL)
        insert_events_locked(dev, b);
    else
        free_block_locked(dev, b);
}

void
alloc_free_request_locked(struct alloc_device *dev, struct alloc_block *b, uint32_t stack_id,
                          bool has_stream, uint64_t stream)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    free_request_locked(dev, b, stack_id, has_stream, stream);
}

int
alloc_free_by_address(struct allocator *alloc, uint64_t addr, bool has_stream, uint64_t stream,
                      uint32_t stack_id)
{
    if (alloc == NULL)
        return -CUPROF_EINVAL;
    /* The real cudaFree/cuMemFree synchronizes the device before returning, and programs rely
     * on that barrier: keep it, outside the lock, before the block becomes reusable. (Trace
     * mode frees through the real call, which synchronizes by itself.) */
    bool sync = !has_stream && alloc->sync_on_free;
    struct alloc_block *b = NULL;
    struct alloc_device *dev = NULL;
    for (int d = 0; d < alloc->device_count && dev == NULL; d++) {
        struct alloc_device *cand = &alloc->devices[d];
        if (!alloc_device_may_own(cand, addr))
            continue;
        if (sync) {
            int rc = alloc->ops.synchronize(alloc->ops.ctx, d);
            if (rc > 0 && alloc->ops.call_refused != NULL &&
                alloc->ops.call_refused(alloc->ops.ctx, rc))
                return rc; /* nothing changed: the block is still the program's */
        }
        alloc_lock_acquire(&cand->lock);
        b = block_map_take(&cand->map, addr, false);
        if (b != NULL)
            dev = cand;
        else
            alloc_lock_release(&cand->lock);
    }
    if (dev == NULL)
        return -CUPROF_ENOTOWNED;
    if (b->seg->pool == TRACE_POOL_TRACE) {
        int rc = alloc_free_whole_segment_locked(dev, b, stack_id);
        alloc_lock_release(&dev->lock);
        return rc > 0 ? rc : 0;
    }
    /* The block left the map, so it is ours while the lock is dropped for spares. */
    for (;;) {
        size_t need = alloc_free_aux_needed_locked(dev, b, has_stream, stream);
        if (dev->spare_aux_count >= need)
            break;
        if (alloc_device_refill_unlocking(dev, need) != 0) {
            /* No host memory for event records: wait for the device instead. */
            (void)dev->ops->synchronize(dev->ops->ctx, dev->index);
            has_stream = true;
            stream = b->stream;
            break;
        }
    }
    if (has_stream)
        alloc_device_note_stream_locked(dev, stream);
    free_request_locked(dev, b, stack_id, has_stream, stream);
    alloc_lock_release(&dev->lock);
    return 0;
}

/* Segment bookkeeping shared by release_block and the one-block segments. `call_device` is
 * false when the driver already freed the memory (context reset). */
static int
segment_gone_locked(struct alloc_device *dev, struct alloc_segment *seg, uint32_t stack_id,
                    bool call_device)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    enum stat_pool sp = memory_stats_pool(seg->is_small);
    int rc = 0;
    if (!seg->external)
        dev->stats.num_device_free++;
    alloc_device_trace_locked(dev, TRACE_SEGMENT_FREE, seg->pool, seg->addr, seg->size, seg->stream,
                              stack_id ? stack_id : seg->stack_id, 0, 0);
    if (!seg->external && call_device)
        rc = dev->ops->segment_free(dev->ops->ctx, dev->index, seg->addr, seg->size);
    dev->total_allocated -= seg->size;
    memory_stats_sub_pool(dev->stats.segment, sp, 1);
    memory_stats_sub_pool(dev->stats.reserved_bytes, sp, (int64_t)seg->size);
    if (seg->size >= dev->config->max_split_size)
        memory_stats_decrease(&dev->stats.oversize_segments, 1);
    alloc_device_drop_segment_locked(dev, seg);
    return rc;
}

void
alloc_free_release_block_locked(struct alloc_device *dev, struct alloc_block *b)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    alloc_device_pool_erase_locked(alloc_device_pool_of(dev, b->is_small), b);
    /* A failed device free leaves nothing to undo: PyTorch raises, cuprof forgets the memory. */
    (void)segment_gone_locked(dev, b->seg, 0, true);
    alloc_device_put_block_locked(dev, b);
}

static int
whole_segment_gone_locked(struct alloc_device *dev, struct alloc_block *b, uint32_t stack_id,
                          bool call_device)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    struct alloc_segment *seg = b->seg;
    enum stat_pool sp = memory_stats_pool(b->is_small);
    struct memory_stats *st = &dev->stats;
    uint32_t stack = stack_id ? stack_id : b->stack_id;
    alloc_device_trace_locked(dev, TRACE_FREE_REQUESTED, seg->pool, b->addr, b->requested_size,
                              b->stream, stack, 0, b->owner);
    alloc_device_trace_locked(dev, TRACE_FREE_COMPLETED, seg->pool, b->addr, b->requested_size,
                              b->stream, stack, 0, b->owner);
    memory_stats_sub_pool(st->allocation, sp, 1);
    memory_stats_sub_pool(st->allocated_bytes, sp, (int64_t)b->size);
    memory_stats_sub_pool(st->active, sp, 1);
    memory_stats_sub_pool(st->active_bytes, sp, (int64_t)b->size);
    memory_stats_sub_pool(st->requested_bytes, sp, (int64_t)b->requested_size);
    if (b->size >= dev->config->max_split_size)
        memory_stats_decrease(&st->oversize_allocations, 1);
    int rc = segment_gone_locked(dev, seg, stack_id, call_device);
    alloc_device_put_block_locked(dev, b);
    return rc;
}

int
alloc_free_whole_segment_locked(struct alloc_device *dev, struct alloc_block *b, uint32_t stack_id)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    return whole_segment_gone_locked(dev, b, stack_id, true);
}

void
alloc_free_forget_events_locked(struct alloc_device *dev)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    struct alloc_aux *a = dev->events;
    dev->events = dev->events_tail = NULL;
    while (a != NULL) {
        struct alloc_aux *next = a->next;
        struct alloc_block *b = a->block;
        alloc_device_put_aux_locked(dev, a); /* the event died with the context: not recycled */
        if (--b->event_count == 0)
            alloc_free_block_locked(dev, b);
        a = next;
    }
    while (dev->event_pool != NULL) {
        a = dev->event_pool;
        dev->event_pool = a->next;
        alloc_device_put_aux_locked(dev, a);
    }
}

void
alloc_free_forget_segment_locked(struct alloc_device *dev, struct alloc_segment *seg)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    if (seg->external || seg->pool == TRACE_POOL_TRACE) {
        /* One-block segment (trace mode, external memory): always live until untracked. */
        struct alloc_block *b = seg->head;
        block_map_remove(&dev->map, b);
        (void)whole_segment_gone_locked(dev, b, 0, false);
        return;
    }
    /* A freed block absorbs its free neighbours (their structs go back to the spares), so the
     * walk goes on from the block itself, which survives its free. */
    for (struct alloc_block *b = seg->head; b != NULL; b = b->next) {
        if (b->allocated) {
            /* Stream uses would need events on a context that is gone. */
            while (b->stream_uses != NULL) {
                struct alloc_aux *a = b->stream_uses;
                b->stream_uses = a->next;
                alloc_device_put_aux_locked(dev, a);
            }
            block_map_remove(&dev->map, b);
            /* No free stack exists: free_requested/free_completed fall back to the alloc stack. */
            alloc_free_request_locked(dev, b, 0, true, b->stream);
        }
    }
    if (seg->expandable) {
        alloc_expand_forget_segment_locked(dev, seg);
        return;
    }
    /* Every block is free and merged now: one cached block spans the segment. */
    struct alloc_block *b = seg->head;
    alloc_device_pool_erase_locked(alloc_device_pool_of(dev, b->is_small), b);
    (void)segment_gone_locked(dev, seg, 0, false);
    alloc_device_put_block_locked(dev, b);
}

/* Completes one outstanding event record: the block's free finishes when its count hits 0. */
static void
event_done_locked(struct alloc_device *dev, struct alloc_aux *a)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    struct alloc_block *b = a->block;
    recycle_event_locked(dev, a);
    if (--b->event_count == 0)
        alloc_free_block_locked(dev, b);
}

/* True while the work before a's event is still running. An error from the query says nothing
 * about that work. PyTorch raises it (cudaEventQuery other than cudaErrorNotReady); a profiler
 * must not break the program, and neither "pending" (the block would stay out of the cache for
 * good, its memory never reused nor released) nor "complete" unchecked (a kernel may still use
 * the memory the next request gets) is safe. So cuprof waits: for the event, else for the whole
 * device. If that fails too the context has a sticky error and runs no more work, so reusing the
 * memory cannot race a kernel: the block completes either way. The backend logs the error once
 * (outside this lock). */
static bool
event_pending_locked(struct alloc_device *dev, struct alloc_aux *a)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    bool complete = false;
    int rc = dev->ops->event_query(dev->ops->ctx, a->event, &complete);
    if (rc == 0)
        return !complete;
    if (dev->ops->event_synchronize(dev->ops->ctx, a->event) != 0)
        (void)dev->ops->synchronize(dev->ops->ctx, dev->index);
    return false;
}

void
alloc_free_process_events_locked(struct alloc_device *dev)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    /* PyTorch polls each stream's FIFO until its first unfinished event; streams that already
     * hit one are skipped. Only the first few such streams are remembered, so a later one may
     * be polled again, which is harmless. */
    uint64_t blocked[16];
    size_t nblocked = 0;
    struct alloc_aux **link = &dev->events, *prev = NULL;
    while (*link != NULL) {
        struct alloc_aux *a = *link;
        bool skip = false;
        for (size_t i = 0; i < nblocked; i++)
            skip = skip || blocked[i] == a->stream;
        if (!skip && event_pending_locked(dev, a)) {
            if (nblocked < sizeof(blocked) / sizeof(blocked[0]))
                blocked[nblocked++] = a->stream;
            skip = true;
        }
        if (skip) {
            prev = a;
            link = &a->next;
            continue;
        }
        *link = a->next;
        if (dev->events_tail == a)
            dev->events_tail = prev;
        event_done_locked(dev, a);
    }
}

void
alloc_free_sync_events_locked(struct alloc_device *dev)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    dev->stats.num_sync_all_streams++;
    struct alloc_aux *a = dev->events;
    dev->events = dev->events_tail = NULL;
    while (a != NULL) {
        struct alloc_aux *next = a->next;
        (void)dev->ops->event_synchronize(dev->ops->ctx, a->event);
        event_done_locked(dev, a);
        a = next;
    }
}

/* PyTorch's release_blocks: whole free segments go first, then (in a second pass, as PyTorch
 * gathers them before unmapping) the free pages of expandable blocks. */
static void
release_blocks_locked(struct alloc_device *dev, struct alloc_pool *pool, bool unmap)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    alloc_device_pool_flush_locked(pool);
    struct alloc_block *b = alloc_block_or_null(avl_first(&pool->blocks));
    while (b != NULL) {
        struct alloc_block *next = alloc_block_or_null(avl_next(&b->node));
        if (!is_split(b) && !b->seg->expandable)
            alloc_free_release_block_locked(dev, b);
        b = next;
    }
    if (unmap)
        alloc_expand_release_pool_locked(dev, pool);
}

void
alloc_free_release_cached_locked(struct alloc_device *dev)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    alloc_free_sync_events_locked(dev);
    /* Unmapping cuts blocks: the spares for it (and for the malloc that may follow) are made
     * with the lock dropped. Without host memory for them the pages stay mapped. */
    bool unmap = true;
    while (unmap && dev->expandable_count > 0) {
        size_t need =
            alloc_expand_release_blocks_needed_locked(dev) + alloc_device_blocks_per_malloc(dev);
        if (dev->spare_block_count >= need)
            break;
        unmap = alloc_device_reserve_blocks_unlocking(dev, need) == 0;
    }
    release_blocks_locked(dev, &dev->large, unmap);
    release_blocks_locked(dev, &dev->small, unmap);
}

bool
alloc_free_release_available_locked(struct alloc_device *dev, struct alloc_pool *pool,
                                    uint64_t stream, size_t size)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    size_t ms = dev->config->max_split_size;
    if (ms == SIZE_MAX)
        return false;
    size_t key = size < ms ? ms : size;
    alloc_device_pool_flush_locked(pool); /* the walk below steps through the tree */
    struct alloc_block *b = alloc_device_pool_lower_bound_locked(pool, stream, key);
    /* Expandable blocks are never released whole (PyTorch's newer allocators skip them). */
    while (b != NULL && b->stream == stream && b->seg->expandable)
        b = alloc_block_or_null(avl_next(&b->node));
    if (b != NULL && b->stream == stream) {
        if (is_split(b))
            return false;
        alloc_free_release_block_locked(dev, b);
        return true;
    }
    /* No single block is large enough: free oversize blocks from the largest down. */
    struct alloc_block *cur =
        b ? alloc_block_or_null(avl_prev(&b->node)) : alloc_block_or_null(avl_last(&pool->blocks));
    size_t released = 0;
    while (cur != NULL && released < key && cur->size >= ms && cur->stream == stream) {
        struct alloc_block *prev = alloc_block_or_null(avl_prev(&cur->node));
        if (!is_split(cur) && !cur->seg->expandable) {
            released += cur->size;
            alloc_free_release_block_locked(dev, cur);
        }
        cur = prev;
    }
    return released >= key;
}

void
alloc_free_garbage_collect_locked(struct alloc_device *dev)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    struct alloc_pool *pool = &dev->large;
    size_t gc_threshold =
        (size_t)(dev->config->garbage_collection_threshold * (double)dev->allowed_max);
    if (dev->total_allocated <= gc_threshold)
        return;
    size_t target = dev->total_allocated - gc_threshold;
    size_t reclaimed = 0, total_age = 0, count = 0;
    alloc_device_pool_flush_locked(pool);
    for (struct avl_node *n = avl_first(&pool->blocks); n != NULL; n = avl_next(n)) {
        struct alloc_block *b = alloc_block_or_null(n);
        if (!is_split(b) && !b->seg->expandable) {
            total_age += pool->get_free_blocks_call_count - b->gc_count_base;
            count++;
        }
    }
    bool freed = true;
    /* PyTorch: release every unsplit block at least as old as the average, pass after pass. */
    while (reclaimed < target && freed && count > 0) {
        double threshold = (double)total_age / (double)count;
        freed = false;
        struct alloc_block *b = alloc_block_or_null(avl_first(&pool->blocks));
        while (b != NULL) {
            struct alloc_block *next = alloc_block_or_null(avl_next(&b->node));
            size_t age = pool->get_free_blocks_call_count - b->gc_count_base;
            if (!is_split(b) && !b->seg->expandable && (double)age >= threshold) {
                freed = true;
                reclaimed += b->size;
                total_age -= age;
                count--;
                alloc_free_release_block_locked(dev, b);
            }
            b = next;
        }
    }
}
