/* allocator_inspect.c: consistent copies of a device's block table for snapshots, and the
 * invariant walker (tiling, merging, ordering, stats against a recount). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "allocator/alloc_expand.h"
#include "allocator/allocator.h"
#include "allocator/allocator_state.h"
#include "allocator/cuprof_errors.h"

static struct alloc_segment *
seg_of(struct avl_node *n)
{
    return n ? (struct alloc_segment *)(void *)((char *)n - offsetof(struct alloc_segment, node))
             : NULL;
}

void
allocator_count_locked(struct allocator *alloc, int device, size_t *segments, size_t *blocks)
{
    size_t ns = 0, nb = 0;
    if (alloc != NULL && device >= 0 && device < alloc->device_count) {
        struct alloc_device *dev = &alloc->devices[device];
        ALLOC_ASSERT_HELD(&dev->lock);
        for (struct avl_node *n = avl_first(&dev->segments); n != NULL; n = avl_next(n)) {
            struct alloc_segment *seg = seg_of(n);
            ns += !seg->expandable;
            for (struct alloc_block *b = seg->head; b != NULL; b = b->next) {
                nb += !b->unmapped;
                /* An expandable segment counts once per run of mapped blocks. */
                ns += seg->expandable && !b->unmapped && (b->prev == NULL || b->prev->unmapped);
            }
        }
    }
    *segments = ns;
    *blocks = nb;
}

/* Whole pages of `seg` inside [start, end), in bytes (0 for an empty range). */
static size_t
whole_pages(const struct alloc_segment *seg, uint64_t start, uint64_t end)
{
    uint64_t first, last;
    if (end <= start || !alloc_expand_pages_inside(seg, start, end - start, &first, &last))
        return 0;
    return (size_t)(last - first) * seg->page;
}

/* What alloc_free_release_cached_locked would take from `seg`: all of it when no block is the
 * program's; of an expandable one, the pages its free runs cover once merged and unmapped. */
static size_t
releasable_in_locked(const struct alloc_segment *seg)
{
    if (seg->external)
        return 0;
    if (!seg->expandable) {
        for (const struct alloc_block *b = seg->head; b != NULL; b = b->next)
            if (b->allocated)
                return 0;
        return seg->size;
    }
    size_t bytes = 0;
    uint64_t run_start = 0, run_end = 0;
    for (const struct alloc_block *b = seg->head; b != NULL; b = b->next) {
        if (b->allocated || b->unmapped) {
            bytes += whole_pages(seg, run_start, run_end);
            run_start = run_end = 0;
            continue;
        }
        if (run_end != b->addr) /* a run starts here (the previous block ended no run) */
            run_start = b->addr;
        run_end = b->addr + b->size;
    }
    return bytes + whole_pages(seg, run_start, run_end);
}

size_t
allocator_releasable_bytes(struct allocator *alloc, int device)
{
    if (alloc == NULL || device < 0 || device >= alloc->device_count)
        return 0;
    struct alloc_device *dev = &alloc->devices[device];
    size_t bytes = 0;
    alloc_lock_acquire(&dev->lock);
    for (struct avl_node *n = avl_first(&dev->segments); n != NULL; n = avl_next(n))
        bytes += releasable_in_locked(seg_of(n));
    alloc_lock_release(&dev->lock);
    return bytes;
}

int
allocator_copy_locked(struct allocator *alloc, int device, struct segment_info *segments,
                      size_t segment_cap, struct block_info *blocks, size_t block_cap,
                      size_t *segment_count, size_t *block_count)
{
    size_t ns = 0, nb = 0;
    *segment_count = *block_count = 0;
    if (alloc == NULL || device < 0 || device >= alloc->device_count)
        return -CUPROF_EINVAL;
    struct alloc_device *dev = &alloc->devices[device];
    ALLOC_ASSERT_HELD(&dev->lock);
    for (struct avl_node *n = avl_first(&dev->segments); n != NULL; n = avl_next(n)) {
        struct alloc_segment *seg = seg_of(n);
        struct segment_info *si = NULL;
        for (struct alloc_block *b = seg->head; b != NULL; b = b->next) {
            if (b->unmapped) {
                si = NULL; /* PyTorch: a snapshot segment is a contiguous mapped run */
                continue;
            }
            if (si == NULL) {
                if (ns >= segment_cap)
                    return -CUPROF_EINVAL;
                si = &segments[ns++];
                si->addr = b->addr;
                si->total_size = 0;
                si->stream = seg->stream;
                /* The segment's stack stays with the run at its start. */
                si->stack_id = b->addr == seg->addr ? seg->stack_id : 0;
                si->first_block = (uint32_t)nb;
                si->block_count = 0;
                si->is_small = seg->is_small;
                si->pool = seg->pool;
                si->expandable = seg->expandable;
            }
            if (nb >= block_cap)
                return -CUPROF_EINVAL;
            struct block_info *bi = &blocks[nb++];
            bi->addr = b->addr;
            bi->size = b->size;
            bi->requested_size = b->requested_size;
            if (b->allocated) {
                bi->state = BLOCK_ACTIVE_ALLOCATED;
                bi->stack_id = b->stack_id;
            } else if (!b->in_pool) {
                bi->state = BLOCK_ACTIVE_PENDING_FREE;
                bi->stack_id = b->stack_id;
            } else {
                bi->state = BLOCK_INACTIVE;
                bi->stack_id = 0;
            }
            si->total_size += b->size;
            si->block_count++;
        }
    }
    *segment_count = ns;
    *block_count = nb;
    return 0;
}

__attribute__((format(printf, 3, 4))) static int
fail(char *msg, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (msg != NULL && len > 0)
        vsnprintf(msg, len, fmt, ap);
    va_end(ap);
    return -CUPROF_EINVAL;
}

static bool
key_less(const struct alloc_block *a, const struct alloc_block *b)
{
    if (a->stream != b->stream)
        return a->stream < b->stream;
    if (a->size != b->size)
        return a->size < b->size;
    return a->addr < b->addr;
}

static int
check_pool(const struct alloc_pool *pool, int d, char *msg, size_t len)
{
    const struct alloc_block *prev = NULL;
    if (avl_check(&pool->blocks) != 0)
        return fail(msg, len, "device %d: %s pool tree is unbalanced or miscounted", d,
                    pool->is_small ? "small" : "large");
    for (struct avl_node *n = avl_first(&pool->blocks); n != NULL; n = avl_next(n)) {
        const struct alloc_block *b = alloc_block_or_null(n);
        if (prev != NULL && !key_less(prev, b))
            return fail(msg, len, "device %d: free set out of order at 0x%llx", d,
                        (unsigned long long)b->addr);
        if (!b->in_pool || b->allocated || b->is_small != pool->is_small)
            return fail(msg, len, "device %d: block 0x%llx in the wrong free set", d,
                        (unsigned long long)b->addr);
        prev = b;
    }
    const struct alloc_block *r = pool->recent;
    if (r != NULL && (!r->in_pool || r->allocated || r->is_small != pool->is_small))
        return fail(msg, len, "device %d: recent block 0x%llx in the wrong free set", d,
                    (unsigned long long)r->addr);
    if (avl_check(&pool->unmapped) != 0)
        return fail(msg, len, "device %d: unmapped tree is unbalanced or miscounted", d);
    prev = NULL;
    for (struct avl_node *n = avl_first(&pool->unmapped); n != NULL; n = avl_next(n)) {
        const struct alloc_block *b = alloc_block_or_null(n);
        if (prev != NULL &&
            (prev->stream > b->stream || (prev->stream == b->stream && prev->addr >= b->addr)))
            return fail(msg, len, "device %d: unmapped set out of order at 0x%llx", d,
                        (unsigned long long)b->addr);
        if (!b->unmapped || b->in_pool || b->allocated || b->is_small != pool->is_small ||
            b->seg == NULL || !b->seg->expandable)
            return fail(msg, len, "device %d: block 0x%llx in the wrong unmapped set", d,
                        (unsigned long long)b->addr);
        prev = b;
    }
    return 0;
}

/* Recounted values of the stats a walk can see, per pool (index: enum stat_pool). */
struct recount {
    int64_t allocation[3], allocated_bytes[3], active[3], active_bytes[3], requested_bytes[3];
    int64_t segment[3], reserved_bytes[3], inactive_split[3], inactive_split_bytes[3];
    int64_t oversize_allocations, oversize_segments;
};

static void
add3(int64_t *a, enum stat_pool sp, int64_t v)
{
    a[STAT_ALL] += v;
    a[sp] += v;
}

static int
check_segment(struct alloc_device *dev, struct alloc_segment *seg, struct recount *rc,
              size_t *in_pool, size_t *unmapped, int *events, char *msg, size_t len)
{
    int d = dev->index;
    size_t ms = dev->config->max_split_size;
    enum stat_pool sp = memory_stats_pool(seg->is_small);
    uint64_t at = seg->addr;
    struct alloc_block *prev = NULL;
    if (seg->head == NULL || seg->head->prev != NULL)
        return fail(msg, len, "device %d: segment 0x%llx has no head block", d,
                    (unsigned long long)seg->addr);
    for (struct alloc_block *b = seg->head; b != NULL; prev = b, b = b->next) {
        bool pending = !b->allocated && !b->in_pool && !b->unmapped;
        if (b->seg != seg || b->prev != prev || b->addr != at || b->size == 0 ||
            b->stream != seg->stream || b->is_small != seg->is_small || b->device != d)
            return fail(msg, len, "device %d: blocks do not tile segment 0x%llx at 0x%llx", d,
                        (unsigned long long)seg->addr, (unsigned long long)at);
        if (prev != NULL && ((prev->in_pool && b->in_pool) || (prev->unmapped && b->unmapped)))
            return fail(msg, len, "device %d: free blocks 0x%llx and 0x%llx left unmerged", d,
                        (unsigned long long)prev->addr, (unsigned long long)b->addr);
        if (b->unmapped) {
            /* Unmapped blocks are whole pages of an expandable segment, nothing else. */
            if (!seg->expandable || b->allocated || b->event_count != 0 ||
                (b->addr - seg->addr) % seg->page != 0 || b->size % seg->page != 0)
                return fail(msg, len, "device %d: bad unmapped block 0x%llx", d,
                            (unsigned long long)b->addr);
            *unmapped += 1;
            at += b->size;
            continue;
        }
        if (seg->expandable)
            add3(rc->reserved_bytes, sp, (int64_t)b->size);
        if (pending != (b->event_count > 0))
            return fail(msg, len, "device %d: block 0x%llx pending without events", d,
                        (unsigned long long)b->addr);
        if (b->allocated) {
            add3(rc->allocation, sp, 1);
            add3(rc->allocated_bytes, sp, (int64_t)b->size);
            rc->oversize_allocations += b->size >= ms;
        }
        if (b->allocated || pending) {
            add3(rc->active, sp, 1);
            add3(rc->active_bytes, sp, (int64_t)b->size);
            add3(rc->requested_bytes, sp, (int64_t)b->requested_size);
        } else if ((b->prev != NULL || b->next != NULL) && !seg->expandable) {
            add3(rc->inactive_split, sp, 1);
            add3(rc->inactive_split_bytes, sp, (int64_t)b->size);
        }
        *in_pool += b->in_pool;
        *events += b->event_count;
        at += b->size;
    }
    if (at != seg->addr + seg->size)
        return fail(msg, len, "device %d: blocks of segment 0x%llx cover %llu of %zu bytes", d,
                    (unsigned long long)seg->addr, (unsigned long long)(at - seg->addr), seg->size);
    if (seg->expandable)
        return 0; /* PyTorch: mappings move reserved_bytes only, never the segment counts */
    add3(rc->segment, sp, 1);
    add3(rc->reserved_bytes, sp, (int64_t)seg->size);
    rc->oversize_segments += seg->size >= ms;
    return 0;
}

#define CHECK_ARRAY(name)                                                                          \
    for (int p = 0; p < 3; p++) {                                                                  \
        if (st->name[p].current != rc.name[p])                                                     \
            return fail(msg, len, "device %d: " #name "[%d].current is %lld, recount %lld", d, p,  \
                        (long long)st->name[p].current, (long long)rc.name[p]);                    \
    }

static int
check_device_locked(struct alloc_device *dev, char *msg, size_t len)
{
    ALLOC_ASSERT_HELD(&dev->lock);
    int d = dev->index;
    struct recount rc;
    size_t in_pool = 0, unmapped = 0, expandable = 0;
    int events = 0, queued = 0;
    uint64_t end = 0;
    memset(&rc, 0, sizeof(rc));
    if (avl_check(&dev->segments) != 0)
        return fail(msg, len, "device %d: segment tree is unbalanced or miscounted", d);
    if (check_pool(&dev->small, d, msg, len) != 0 || check_pool(&dev->large, d, msg, len) != 0)
        return -CUPROF_EINVAL;
    for (struct avl_node *n = avl_first(&dev->segments); n != NULL; n = avl_next(n)) {
        struct alloc_segment *seg = seg_of(n);
        if (seg->addr < end)
            return fail(msg, len, "device %d: segment 0x%llx overlaps the one before", d,
                        (unsigned long long)seg->addr);
        end = seg->addr + seg->size;
        expandable += seg->expandable;
        int r = check_segment(dev, seg, &rc, &in_pool, &unmapped, &events, msg, len);
        if (r != 0)
            return r;
    }
    size_t pooled = alloc_device_pool_count(&dev->small) + alloc_device_pool_count(&dev->large);
    if (in_pool != pooled)
        return fail(msg, len, "device %d: %zu free blocks but %zu in the free sets", d, in_pool,
                    pooled);
    if (unmapped != dev->small.unmapped.count + dev->large.unmapped.count)
        return fail(msg, len, "device %d: %zu unmapped blocks but %zu in the unmapped sets", d,
                    unmapped, dev->small.unmapped.count + dev->large.unmapped.count);
    if (expandable != dev->expandable_count)
        return fail(msg, len, "device %d: %zu expandable segments, %zu counted", d, expandable,
                    dev->expandable_count);
    for (struct alloc_aux *a = dev->events; a != NULL; a = a->next)
        queued++;
    if (queued != events)
        return fail(msg, len, "device %d: %d events queued, blocks wait on %d", d, queued, events);
    memory_stats_settle_all(&dev->stats);
    const struct memory_stats *st = &dev->stats;
    CHECK_ARRAY(allocation)
    CHECK_ARRAY(allocated_bytes)
    CHECK_ARRAY(active)
    CHECK_ARRAY(active_bytes)
    CHECK_ARRAY(requested_bytes)
    CHECK_ARRAY(segment)
    CHECK_ARRAY(reserved_bytes)
    CHECK_ARRAY(inactive_split)
    CHECK_ARRAY(inactive_split_bytes)
    if (st->oversize_allocations.current != rc.oversize_allocations ||
        st->oversize_segments.current != rc.oversize_segments)
        return fail(msg, len, "device %d: oversize counts differ from a recount", d);
    if ((int64_t)dev->total_allocated != rc.reserved_bytes[STAT_ALL])
        return fail(msg, len, "device %d: total_allocated %zu, segments hold %lld", d,
                    dev->total_allocated, (long long)rc.reserved_bytes[STAT_ALL]);
    return 0;
}

int
allocator_check_invariants(struct allocator *alloc, char *msg, size_t msg_len)
{
    if (msg != NULL && msg_len > 0)
        msg[0] = '\0';
    if (alloc == NULL)
        return fail(msg, msg_len, "no allocator");
    for (int d = 0; d < alloc->device_count; d++) {
        struct alloc_device *dev = &alloc->devices[d];
        alloc_lock_acquire(&dev->lock);
        int rc = check_device_locked(dev, msg, msg_len);
        alloc_lock_release(&dev->lock);
        if (rc != 0)
            return rc;
    }
    return 0;
}
