/* alloc_malloc.c: PyTorch's malloc path from the lock on (get_free_block, alloc_block, the retry
 * order, the OOM message, alloc_found_block) and the entry that enters the block in the pointer
 * map. The free side is alloc_free.c; what both share is alloc_device.c. */
#include "allocator/alloc_malloc.h"

#include <stdio.h>
#include <string.h>

#include "allocator/alloc_expand.h"
#include "allocator/alloc_free.h"
#include "allocator/alloc_policy.h"
#include "allocator/cuprof_errors.h"

/* PyTorch's get_free_block: lower_bound on (stream, size), same stream, two oversize guards. */
static struct alloc_block *
get_free_block_locked(struct alloc_device *dev, struct alloc_pool *pool, uint64_t stream,
                      size_t size)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    if (dev->collects_garbage)
        pool->get_free_blocks_call_count++;
    struct alloc_block *b = alloc_device_pool_lower_bound_locked(pool, stream, size);
    if (b == NULL || b->stream != stream)
        return NULL;
    if (b->seg->expandable && (b = alloc_expand_pick_locked(dev, pool, stream, size, b)) == NULL)
        return NULL;
    if (!alloc_policy_may_use(dev->config, size, b->size))
        return NULL;
    return b; /* still in the pool: alloc_found_block_locked rekeys or erases it */
}

static void
new_segment_stats_locked(struct alloc_device *dev, enum stat_pool sp, size_t size)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    memory_stats_add_pool(dev->stats.segment, sp, 1);
    memory_stats_add_pool(dev->stats.reserved_bytes, sp, (int64_t)size);
    if (size >= dev->config->max_split_size)
        memory_stats_increase(&dev->stats.oversize_segments, 1);
}

/* A new segment of exactly alloc_size from the device, as one free block not in the pool:
 * cudaMalloc, stats and the segment_alloc entry of PyTorch's alloc_block. */
static int
device_segment_locked(struct alloc_device *dev, struct alloc_pool *pool, size_t alloc_size,
                      uint64_t stream, uint32_t stack_id, struct alloc_block **out)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    uint64_t addr = 0;
    bool is_small = pool->is_small;
    int rc = dev->ops->segment_alloc(dev->ops->ctx, dev->index, alloc_size, &addr);
    if (rc != 0)
        return rc;
    if (!alloc_device_new_range_plausible_locked(dev, addr, alloc_size))
        return -CUPROF_EDRIVER;
    dev->total_allocated += alloc_size;
    struct alloc_block *b = alloc_device_new_segment_locked(dev, addr, alloc_size, stream, is_small,
                                                            TRACE_POOL_DEFAULT);
    b->seg->stack_id = stack_id;
    new_segment_stats_locked(dev, memory_stats_pool(is_small), alloc_size);
    dev->stats.num_device_alloc++;
    alloc_device_trace_locked(dev, TRACE_SEGMENT_ALLOC, TRACE_POOL_DEFAULT, addr, alloc_size,
                              stream, stack_id, 0, dev->request_owner);
    *out = b;
    return 0;
}

/* PyTorch's alloc_block: a new segment of alloc_size, as one free block not in the pool; with
 * expandable segments, pages mapped for the rounded `size` instead. */
static int
alloc_block_locked(struct alloc_device *dev, struct alloc_pool *pool, size_t size,
                   size_t alloc_size, uint64_t stream, uint32_t stack_id, bool is_retry,
                   struct alloc_block **out)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    if (is_retry)
        dev->stats.num_alloc_retries++;
    /* PyTorch: the fraction limit fails the request without asking the device (checked against
     * the segment size even when expandable segments map less). */
    if (dev->set_fraction && dev->total_allocated + alloc_size > dev->allowed_max)
        return -CUPROF_ENOMEM;
    if (dev->expandable)
        return alloc_expand_allocate_locked(dev, pool, stream, size, stack_id, out);
    return device_segment_locked(dev, pool, alloc_size, stream, stack_id, out);
}

/* Not PyTorch: cuprof's shim (config->fit_segment_on_oom) must never be why a program runs out
 * of memory, and the segment PyTorch asks for (2 MiB for 512 B, 20 MiB for 1-10 MiB, 20 MiB
 * pages with expandable segments) can fail where the program's own cudaMalloc would not. After
 * PyTorch's last retry failed, one ordinary segment of just the rounded request: with the default
 * rounding that is what the program itself would have asked (the driver aligns to 512 B anyway).
 * The small pool too: the driver packs small allocations into pages it already holds, so 512 B
 * can succeed where 2 MiB cannot. Counted as any new segment (num_device_alloc, segment,
 * reserved_bytes); not as another num_alloc_retries (the retry that released the cache was
 * counted once) nor, when it succeeds, as an OOM. */
static int
alloc_fit_block_locked(struct alloc_device *dev, struct alloc_pool *pool, size_t size,
                       size_t alloc_size, uint64_t stream, uint32_t stack_id,
                       struct alloc_block **out)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    if (!dev->config->fit_segment_on_oom || (size == alloc_size && !dev->expandable))
        return -CUPROF_ENOMEM; /* nothing smaller to ask for */
    if (dev->set_fraction && dev->total_allocated + size > dev->allowed_max)
        return -CUPROF_ENOMEM;
    if (!alloc_device_spares_ready_locked(dev, 0)) {
        /* Failed expandable growth may have used the spare segment on a reservation; without
         * host memory for another, the OOM stands. */
        uint16_t owner = dev->request_owner;
        int rc = alloc_device_refill_unlocking(dev, 0);
        dev->request_owner = owner;
        if (rc != 0)
            return -CUPROF_ENOMEM;
    }
    return device_segment_locked(dev, pool, size, stream, stack_id, out);
}

/* PyTorch's alloc_found_block: split if asked, mark allocated, trace, stats. `pool` is b's
 * (the one it was found in, or the one its new segment belongs to). */
static struct alloc_block *
alloc_found_block_locked(struct alloc_device *dev, struct alloc_pool *pool, struct alloc_block *b,
                         size_t size, size_t orig_size, uint32_t stack_id, bool split)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    enum stat_pool sp = memory_stats_pool(b->is_small);
    struct memory_stats *st = &dev->stats;
    /* PyTorch: expandable blocks never count as inactive splits (their free pages can go). */
    bool already_split = (b->prev != NULL || b->next != NULL) && !b->seg->expandable;
    if (split) {
        /* PyTorch: a new block takes the front; the old one stays as the remainder. */
        struct alloc_block *front = alloc_device_take_block_locked(dev);
        struct alloc_block *rest = b;
        front->seg = rest->seg;
        front->addr = rest->addr;
        front->size = size;
        front->stream = rest->stream;
        front->is_small = rest->is_small;
        front->prev = rest->prev;
        if (front->prev)
            front->prev->next = front;
        else
            rest->seg->head = front;
        front->next = rest;
        rest->prev = front;
        rest->addr += size;
        rest->size -= size;
        if (rest->in_pool)
            alloc_device_pool_shrunk_locked(pool, rest);
        else
            alloc_device_pool_insert_locked(pool, rest);
        if (already_split) {
            memory_stats_sub_pool(st->inactive_split_bytes, sp, (int64_t)size);
        } else if (!rest->seg->expandable) {
            memory_stats_add_pool(st->inactive_split_bytes, sp, (int64_t)rest->size);
            memory_stats_add_pool(st->inactive_split, sp, 1);
        }
        b = front;
    } else {
        if (b->in_pool)
            alloc_device_pool_erase_locked(pool, b);
        if (already_split) {
            memory_stats_sub_pool(st->inactive_split_bytes, sp, (int64_t)b->size);
            memory_stats_sub_pool(st->inactive_split, sp, 1);
        }
    }
    b->allocated = true;
    b->requested_size = orig_size;
    b->stack_id = stack_id;
    b->free_stack_id = 0;
    b->owner = dev->request_owner;
    alloc_device_owner_alloc_locked(dev, b->owner, orig_size);
    alloc_device_trace_locked(dev, TRACE_ALLOC, TRACE_POOL_DEFAULT, b->addr, orig_size, b->stream,
                              stack_id, 0, b->owner);
    memory_stats_add_pool(st->allocation, sp, 1);
    memory_stats_add_pool(st->allocated_bytes, sp, (int64_t)b->size);
    memory_stats_add_pool(st->active, sp, 1);
    memory_stats_add_pool(st->active_bytes, sp, (int64_t)b->size);
    memory_stats_add_pool(st->requested_bytes, sp, (int64_t)orig_size);
    if (b->size >= dev->config->max_split_size)
        memory_stats_increase(&st->oversize_allocations, 1);
    return b;
}

/* The sentence after PyTorch's message when cuprof's cache, not the program, ran the device out
 * (alloc_policy_cache_caused); empty otherwise, and in trace mode (no cache). */
static void
cache_caused_note(const struct alloc_device *dev, size_t size, size_t free_b, char *out, size_t len)
{
    out[0] = '\0';
    int64_t reserved = dev->stats.reserved_bytes[STAT_ALL].current;
    int64_t live = dev->stats.requested_bytes[STAT_ALL].current;
    uint64_t reach = 0;
    if (!dev->config->caching || live < 0 || reserved < 0 ||
        !alloc_policy_cache_caused((uint64_t)live, size, (uint64_t)reserved, free_b,
                                   dev->set_fraction ? dev->allowed_max : 0, &reach))
        return;
    char s_live[32], s_size[32], s_need[32], s_reach[32];
    alloc_policy_format_size((uint64_t)live, s_live, sizeof(s_live));
    alloc_policy_format_size(size, s_size, sizeof(s_size));
    alloc_policy_format_size((uint64_t)live + size, s_need, sizeof(s_need));
    alloc_policy_format_size(reach, s_reach, sizeof(s_reach));
    snprintf(out, len,
             " Without cuprof's cache this request could have fit: %s live + %s requested = %s "
             "of the %s that cuprof's segments and the driver's free memory hold; "
             "CUPROF_MODE=trace records the program without a cache.",
             s_live, s_size, s_need, s_reach);
}

/* PyTorch's OOM message (its current advice: expandable segments return free pages), with
 * cuprof as the owner of the cache, and cuprof's own sentence when its cache is the cause. A
 * request cuprof passed through (`passed`: the call that made it) or made in trace mode ends with
 * the driver's refusal instead: no cache setting applies to it. */
static void
build_oom_message_locked(struct alloc_device *dev, size_t size, size_t alloc_size, size_t free_b,
                         size_t total_b, const char *passed)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    char s_alloc[32], s_total[32], s_free[32], s_allowed[48] = "", s_used[32], s_cached[32];
    char note[320];
    memory_stats_settle_all(&dev->stats);
    int64_t allocated = dev->stats.allocated_bytes[STAT_ALL].current;
    int64_t reserved = dev->stats.reserved_bytes[STAT_ALL].current;
    alloc_policy_format_size(alloc_size, s_alloc, sizeof(s_alloc));
    alloc_policy_format_size(total_b, s_total, sizeof(s_total));
    alloc_policy_format_size(free_b, s_free, sizeof(s_free));
    alloc_policy_format_size((uint64_t)allocated, s_used, sizeof(s_used));
    alloc_policy_format_size((uint64_t)(reserved - allocated), s_cached, sizeof(s_cached));
    if (dev->set_fraction) {
        alloc_policy_format_size(dev->allowed_max, s_allowed, sizeof(s_allowed));
        strcat(s_allowed, " allowed; ");
    }
    cache_caused_note(dev, size, free_b, note, sizeof(note));
    /* Trace mode gives every request a segment of its own: no cache setting applies either. */
    if (passed == NULL && !dev->config->caching)
        passed = "cuMemAlloc_v2 in trace mode";
    if (passed != NULL) {
        snprintf(dev->oom_message, sizeof(dev->oom_message),
                 "CUDA out of memory. Tried to allocate %s. GPU %d has a total capacity of %s of "
                 "which %s is free. %sOf the allocated memory %s is allocated by cuprof, and %s is "
                 "reserved by cuprof but unallocated. The driver refused this request itself "
                 "(%.64s, which cuprof passes through without caching).%s",
                 s_alloc, dev->index, s_total, s_free, s_allowed, s_used, s_cached, passed, note);
        return;
    }
    snprintf(dev->oom_message, sizeof(dev->oom_message),
             "CUDA out of memory. Tried to allocate %s. GPU %d has a total capacity of %s of "
             "which %s is free. %sOf the allocated memory %s is allocated by cuprof, and %s is "
             "reserved by cuprof but unallocated. If reserved but unallocated memory is large "
             "try setting CUPROF_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  "
             "See documentation for Memory Management  "
             "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)%s",
             s_alloc, dev->index, s_total, s_free, s_allowed, s_used, s_cached, note);
}

/* The OOM event (tagged with `pool`), num_ooms and the message; `passed` as for the message. */
static void
record_oom_locked(struct alloc_device *dev, size_t size, size_t alloc_size, uint64_t stream,
                  uint8_t pool, uint32_t stack_id, const char *passed)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    size_t free_b = 0, total_b = 0;
    if (dev->ops->mem_info(dev->ops->ctx, dev->index, &free_b, &total_b) != 0)
        free_b = total_b = 0;
    alloc_device_trace_locked(dev, TRACE_OOM, pool, 0, size, stream, stack_id, free_b,
                              dev->request_owner);
    dev->stats.num_ooms++;
    build_oom_message_locked(dev, size, alloc_size, free_b, total_b, passed);
}

static int
report_oom_locked(struct alloc_device *dev, size_t size, size_t alloc_size, uint64_t stream,
                  uint32_t stack_id)
{
    record_oom_locked(dev, size, alloc_size, stream, TRACE_POOL_DEFAULT, stack_id, NULL);
    return -CUPROF_ENOMEM;
}

void
alloc_malloc_external_oom(struct alloc_device *dev, size_t size, uint64_t stream, uint8_t pool,
                          uint32_t stack_id, const char *api)
{
    alloc_lock_acquire(&dev->lock);
    record_oom_locked(dev, size, size, stream, pool, stack_id, api);
    alloc_lock_release(&dev->lock);
}

/* PyTorch's malloc from process_events to alloc_found_block. `size` > 0 and < 2^60.
 * Returns 0 with *out allocated, -CUPROF_ENOMEM after the OOM event (message kept in
 * dev->oom_message), or a positive backend error; `cached_only`: -CUPROF_EUNCACHED instead of
 * asking the device. The spares must be ready. */
static int
malloc_locked(struct alloc_device *dev, size_t orig_size, uint64_t stream, uint32_t stack_id,
              bool cached_only, struct alloc_block **out)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    const struct alloc_config *cfg = dev->config;
    if (dev->events != NULL)
        alloc_free_process_events_locked(dev);
    size_t size = alloc_policy_round_size(cfg, orig_size);
    struct alloc_pool *pool = alloc_device_pool_of(dev, alloc_policy_is_small(size));
    struct alloc_block *b = get_free_block_locked(dev, pool, stream, size);
    if (b == NULL && cached_only) {
        /* The caller asks again with the device allowed: count that search once. */
        if (dev->collects_garbage)
            pool->get_free_blocks_call_count--;
        return -CUPROF_EUNCACHED;
    }
    if (b == NULL) {
        size_t alloc_size = alloc_policy_segment_size(size);
        if (dev->collects_garbage)
            alloc_free_garbage_collect_locked(dev);
        int rc = alloc_block_locked(dev, pool, size, alloc_size, stream, stack_id, false, &b);
        if (rc == -CUPROF_ENOMEM && alloc_free_release_available_locked(dev, pool, stream, size))
            rc = alloc_block_locked(dev, pool, size, alloc_size, stream, stack_id, false, &b);
        if (rc == -CUPROF_ENOMEM) {
            alloc_free_release_cached_locked(dev);
            rc = alloc_block_locked(dev, pool, size, alloc_size, stream, stack_id, true, &b);
        }
        if (rc == -CUPROF_ENOMEM)
            rc = alloc_fit_block_locked(dev, pool, size, alloc_size, stream, stack_id, &b);
        if (rc == -CUPROF_ENOMEM)
            return report_oom_locked(dev, size, alloc_size, stream, stack_id);
        if (rc != 0)
            return rc;
    }
    alloc_device_note_stream_locked(dev, stream);
    *out = alloc_found_block_locked(dev, pool, b, size, orig_size, stack_id,
                                    alloc_policy_should_split(cfg, b->is_small, b->size, size));
    return 0;
}

int
alloc_malloc_whole_segment_locked(struct alloc_device *dev, size_t size, uint64_t addr,
                                  uint64_t stream, uint8_t pool, uint32_t stack_id,
                                  struct alloc_block **out)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    bool external = addr != 0;
    bool is_small = alloc_policy_is_small(size);
    enum stat_pool sp = memory_stats_pool(is_small);
    struct memory_stats *st = &dev->stats;
    if (!external) {
        int rc = dev->ops->segment_alloc(dev->ops->ctx, dev->index, size, &addr);
        if (rc == -CUPROF_ENOMEM)
            return report_oom_locked(dev, size, size, stream, stack_id);
        if (rc != 0)
            return rc;
    }
    if (!alloc_device_new_range_plausible_locked(dev, addr, size))
        return -CUPROF_EDRIVER;
    if (!external)
        st->num_device_alloc++;
    dev->total_allocated += size;
    struct alloc_block *b =
        alloc_device_new_segment_locked(dev, addr, size, stream, is_small, pool);
    b->seg->stack_id = stack_id;
    b->seg->external = external;
    b->requested_size = size;
    b->allocated = true;
    b->stack_id = stack_id;
    b->owner = dev->request_owner;
    new_segment_stats_locked(dev, sp, size);
    alloc_device_trace_locked(dev, TRACE_SEGMENT_ALLOC, pool, addr, size, stream, stack_id, 0,
                              b->owner);
    alloc_device_trace_locked(dev, TRACE_ALLOC, pool, addr, size, stream, stack_id, 0, b->owner);
    memory_stats_add_pool(st->allocation, sp, 1);
    memory_stats_add_pool(st->allocated_bytes, sp, (int64_t)size);
    memory_stats_add_pool(st->active, sp, 1);
    memory_stats_add_pool(st->active_bytes, sp, (int64_t)size);
    memory_stats_add_pool(st->requested_bytes, sp, (int64_t)size);
    if (size >= dev->config->max_split_size)
        memory_stats_increase(&st->oversize_allocations, 1);
    *out = b;
    return 0;
}

int
alloc_malloc_on_device(struct alloc_device *dev, enum alloc_reach reach, size_t size,
                       uint64_t stream, uint32_t stack_id, uint16_t owner, bool stream_ordered,
                       uint64_t *addr)
{
    struct alloc_block *b = NULL;
    /* Expandable segments may map pages to serve even a cached block. */
    if (reach == ALLOC_REACH_CACHED_ONLY &&
        ((uint64_t)size >= ALLOC_MAX_REQUEST || dev->config->expandable_segments))
        return -CUPROF_EUNCACHED;
    if ((uint64_t)size >= ALLOC_MAX_REQUEST) {
        alloc_lock_acquire(&dev->lock);
        snprintf(dev->oom_message, sizeof(dev->oom_message),
                 "CUDA out of memory. Tried to allocate more than 1EB memory.");
        alloc_lock_release(&dev->lock);
        return -CUPROF_ENOMEM;
    }
    int rc = alloc_device_lock_with_spares(dev, 0);
    if (rc != 0)
        return rc;
    dev->request_owner = owner;
    if (reach != ALLOC_REACH_SEGMENT)
        rc = malloc_locked(dev, size, stream, stack_id, reach == ALLOC_REACH_CACHED_ONLY, &b);
    else
        rc =
            alloc_malloc_whole_segment_locked(dev, size, 0, stream, TRACE_POOL_TRACE, stack_id, &b);
    size_t grow = 0;
    if (rc == 0) {
        b->buffer_id = 0;
        b->stream_ordered = stream_ordered;
        if (block_map_insert(&dev->map, b))
            grow = block_map_grow_count(&dev->map);
        *addr = b->addr;
    }
    dev->request_owner = 0;
    alloc_lock_release(&dev->lock);
    if (grow)
        alloc_device_grow_map(dev, grow);
    return rc;
}
