/* alloc_device.h: one device's caching state (pools, segments, spares, events, stats) and the
 *   helpers the malloc path (alloc_malloc.h) and the free side (alloc_free.h) share.
 * Locking: every field marked so is protected by dev->lock; *_locked functions need it held.
 * Hot path: yes (spares, pool sets, trace); nothing here calls malloc under the lock (spares are
 *   refilled outside it). */
#ifndef CUPROF_ALLOC_DEVICE_H
#define CUPROF_ALLOC_DEVICE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "allocator/alloc_block.h"
#include "allocator/alloc_config.h"
#include "allocator/alloc_lock.h"
#include "allocator/allocator.h"
#include "allocator/avl.h"
#include "allocator/block_map.h"
#include "allocator/device_ops.h"
#include "allocator/trace_sink.h"
#include "stats/memory_stats.h"

#define ALLOC_DEVICE_MAX_STREAMS 32 /* streams remembered for free_sync:events */
#define ALLOC_OOM_MESSAGE_LEN    1024

/* Lowest and highest+1 address of every segment a device ever held (they never shrink), read
 * without the lock to find which device a freed pointer can belong to. Every free on any device
 * reads every device's range, so it fills a cache line of its own: were it to share one with
 * fields a device's lock holder writes on each call, threads on different devices would bounce
 * that line between their cores (5x slower pairs, measured). */
struct alloc_addr_range {
    _Alignas(64) _Atomic uint64_t lo;
    _Atomic uint64_t hi;
};

struct alloc_pool {
    struct avl_tree blocks; /* free blocks by (stream, size, addr), but for `recent` */
    /* The last block put in the pool, in it but not linked in `blocks`: a malloc that takes it
     * back (the usual free-then-malloc of one size) skips a tree insert and a tree remove. The
     * pool's set is `blocks` plus `recent`; whoever walks `blocks` flushes `recent` first. */
    struct alloc_block *recent;
    uint64_t get_free_blocks_call_count;
    struct avl_tree unmapped; /* expandable segments' unmapped blocks by (stream, addr) */
    bool is_small;
};

struct alloc_chunk { /* host memory behind spares, kept for allocator_destroy */
    struct alloc_chunk *next;
};

struct alloc_device {
    /* Each device starts a cache line: threads on different devices share no line. */
    _Alignas(64) struct alloc_lock lock;
    int index;
    const struct alloc_config *config; /* read-only */
    const struct device_ops *ops;      /* read-only */
    const struct trace_sink *sink;     /* read-only; NULL = no trace (or no record callback) */

    uint32_t traced;           /* protected by lock: actions handed to the sink (0 without one) */
    uint16_t request_owner;    /* protected by lock: the owner tag of the request being served */
    struct alloc_pool small;   /* protected by lock */
    struct alloc_pool large;   /* protected by lock */
    struct avl_tree segments;  /* protected by lock */
    struct memory_stats stats; /* protected by lock; `all` kept lazily: settle before reading */
    size_t total_allocated;    /* protected by lock: PyTorch's total_allocated_memory */
    size_t allowed_max;        /* protected by lock */
    bool set_fraction;         /* protected by lock */
    bool collects_garbage;     /* protected by lock: set_fraction and a GC threshold */
    bool expandable;           /* protected by lock: expandable_segments:True, a VMM backend */
    size_t expandable_count;   /* protected by lock: live expandable segments */
    uint64_t expandable_made;  /* protected by lock: expandable segments ever made (serials) */
    struct alloc_aux *events;  /* protected by lock: outstanding events, oldest first */
    struct alloc_aux *events_tail;
    struct alloc_aux *event_pool;               /* protected by lock: idle created events */
    uint64_t streams[ALLOC_DEVICE_MAX_STREAMS]; /* protected by lock */
    size_t stream_count;                        /* protected by lock */
    bool streams_overflow;                      /* protected by lock */
    struct block_map map; /* protected by lock: blocks handed out, by address */
    struct alloc_addr_range range;

    struct alloc_block *spare_blocks; /* protected by lock */
    size_t spare_block_count;
    struct alloc_segment *spare_segments; /* protected by lock */
    size_t spare_segment_count;
    struct alloc_aux *spare_aux; /* protected by lock */
    size_t spare_aux_count;
    struct alloc_chunk *chunks; /* protected by lock */

    char oom_message[ALLOC_OOM_MESSAGE_LEN]; /* protected by lock */

    /* PyTorch's devices_with_peer_access_: devices that may access this one's memory, in the
     * order they were added (each mapping gives them access); NULL until the first. */
    int16_t *peers;    /* protected by lock; [device count] */
    size_t peer_count; /* protected by lock */

    struct alloc_owner_bytes owners[ALLOC_OWNERS_COUNTED]; /* protected by lock */
};

/* Sets up an empty device; returns 0 or -CUPROF_EHOSTMEM. */
__attribute__((warn_unused_result)) int alloc_device_init(struct alloc_device *dev, int index,
                                                          const struct alloc_config *config,
                                                          const struct device_ops *ops,
                                                          const struct trace_sink *sink);
/* Whether the device's config asks for expandable segments and its backend can map them (what
 * dev->expandable is set from, at init and by allocator_apply_settings). */
bool alloc_device_serves_expandable(const struct alloc_device *dev);
/* True when addr lies in the device's address range (no lock: see struct alloc_addr_range). */
static inline bool
alloc_device_may_own(const struct alloc_device *dev, uint64_t addr)
{
    return addr >= atomic_load_explicit(&dev->range.lo, memory_order_relaxed) &&
           addr < atomic_load_explicit(&dev->range.hi, memory_order_relaxed);
}

/* Frees host bookkeeping (spares, chunks, map); device memory is left alone. */
void alloc_device_destroy(struct alloc_device *dev);

/* Spare blocks one malloc may take: the split, the new segment's block; with expandable
 * segments also the new reservation's unmapped block and the one a partial mapping leaves. */
static inline size_t
alloc_device_blocks_per_malloc(const struct alloc_device *dev)
{
    return dev->expandable ? 4 : 2;
}

/* With the lock held: true when the spares can serve one malloc (alloc_device_blocks_per_malloc
 * blocks, 1 segment) and `aux` more stream-use/event records. */
static inline bool
alloc_device_spares_ready_locked(const struct alloc_device *dev, size_t aux)
{
    return dev->spare_block_count >= alloc_device_blocks_per_malloc(dev) &&
           dev->spare_segment_count >= 1 && dev->spare_aux_count >= aux;
}
/* Drops the lock, mallocs spares (blocks, segments, `aux` records), retakes the lock.
 * Returns 0 or -CUPROF_EHOSTMEM (lock held again either way). */
__attribute__((warn_unused_result)) int alloc_device_refill_unlocking(struct alloc_device *dev,
                                                                      size_t aux);

/* Drops the lock until at least `blocks` spare blocks are there (a release that unmaps pages
 * needs two per block it may cut). Returns 0 or -CUPROF_EHOSTMEM (lock held again either way). */
__attribute__((warn_unused_result)) int
alloc_device_reserve_blocks_unlocking(struct alloc_device *dev, size_t blocks);

/* A spare block, zeroed but for its device (inline: one per split, on the hot path). */
static inline struct alloc_block *
alloc_device_take_block_locked(struct alloc_device *dev)
{
    struct alloc_block *b = dev->spare_blocks;
    dev->spare_blocks = b->next;
    dev->spare_block_count--;
    *b = (struct alloc_block){.device = (int16_t)dev->index};
    return b;
}

static inline void
alloc_device_put_block_locked(struct alloc_device *dev, struct alloc_block *b)
{
    b->allocated = false;
    b->in_pool = false;
    b->seg = NULL;
    b->next = dev->spare_blocks;
    dev->spare_blocks = b;
    dev->spare_block_count++;
}
/* A spare segment, zeroed. */
struct alloc_segment *alloc_device_take_segment_locked(struct alloc_device *dev);
/* Adds a segment to dev->segments (ordered by address) and widens the device's range. */
void alloc_device_link_segment_locked(struct alloc_device *dev, struct alloc_segment *seg);
/* A new segment [addr, addr + size) made of one block (free, unpooled), linked into
 * dev->segments; returns the block. The caller sets what else its kind of segment needs. The
 * spares must be ready. */
struct alloc_block *alloc_device_new_segment_locked(struct alloc_device *dev, uint64_t addr,
                                                    size_t size, uint64_t stream, bool is_small,
                                                    uint8_t pool);
/* True when [addr, addr + size) can be new memory: not NULL, not wrapping, no overlap. */
bool alloc_device_new_range_plausible_locked(const struct alloc_device *dev, uint64_t addr,
                                             size_t size);
/* Unlinks a segment from dev->segments and keeps its struct as a spare. */
void alloc_device_drop_segment_locked(struct alloc_device *dev, struct alloc_segment *seg);
struct alloc_aux *alloc_device_take_aux_locked(struct alloc_device *dev);
void alloc_device_put_aux_locked(struct alloc_device *dev, struct alloc_aux *a);

/* Pool of a block: small or large. */
static inline struct alloc_pool *
alloc_device_pool_of(struct alloc_device *dev, bool is_small)
{
    return is_small ? &dev->small : &dev->large;
}
static inline struct alloc_block *
alloc_block_of(struct avl_node *n)
{
    return (struct alloc_block *)(void *)((char *)n - offsetof(struct alloc_block, node));
}

/* The block of a tree node, or NULL for none (the end of a walk). */
static inline struct alloc_block *
alloc_block_or_null(struct avl_node *n)
{
    return n ? alloc_block_of(n) : NULL;
}

/* PyTorch's BlockComparatorSize: (stream, size, addr) < b's. */
static inline bool
alloc_block_less(uint64_t stream, size_t size, uint64_t addr, const struct alloc_block *b)
{
    if (stream != b->stream)
        return stream < b->stream;
    if (size != b->size)
        return size < b->size;
    return addr < b->addr;
}

/* Links b into pool->blocks (no flag or stamp: the callers below set those). */
void alloc_device_pool_link_locked(struct alloc_pool *pool, struct alloc_block *b);
/* Moves b (linked where its old key sorted) to where its new key sorts. */
void alloc_device_pool_move_locked(struct alloc_pool *pool, struct alloc_block *b);

/* PyTorch's insert_into_blocks (stamps gc_count_base for garbage collection). b becomes the
 * pool's `recent` block; the one it replaces is linked into the tree. */
static inline void
alloc_device_pool_insert_locked(struct alloc_pool *pool, struct alloc_block *b)
{
    b->gc_count_base = pool->get_free_blocks_call_count;
    b->in_pool = true;
    if (pool->recent != NULL)
        alloc_device_pool_link_locked(pool, pool->recent);
    pool->recent = b;
}

/* PyTorch's erase from the free set. */
static inline void
alloc_device_pool_erase_locked(struct alloc_pool *pool, struct alloc_block *b)
{
    if (pool->recent == b)
        pool->recent = NULL;
    else
        avl_remove(&pool->blocks, &b->node);
    b->in_pool = false;
}

/* Links `recent` into the tree, so that walking pool->blocks sees the whole set. */
static inline void
alloc_device_pool_flush_locked(struct alloc_pool *pool)
{
    if (pool->recent != NULL) {
        alloc_device_pool_link_locked(pool, pool->recent);
        pool->recent = NULL;
    }
}

/* Number of free blocks in the pool. */
static inline size_t
alloc_device_pool_count(const struct alloc_pool *pool)
{
    return pool->blocks.count + (pool->recent != NULL);
}

/* After a split shrank b, still in the pool where its old key sorted: its key only went down,
 * so it keeps its node unless it now sorts before its predecessor. Stamps gc_count_base as
 * PyTorch's insert_into_blocks does. (Most splits and merges keep a block's rank: this skips
 * a remove and an insert.) */
static inline void
alloc_device_pool_shrunk_locked(struct alloc_pool *pool, struct alloc_block *b)
{
    b->gc_count_base = pool->get_free_blocks_call_count;
    if (pool->recent == b)
        return;
    struct avl_node *p = avl_prev(&b->node);
    if (p != NULL && !alloc_block_less(alloc_block_of(p)->stream, alloc_block_of(p)->size,
                                       alloc_block_of(p)->addr, b))
        alloc_device_pool_move_locked(pool, b);
}

/* A merge: b (not in the pool) absorbed old (in it) and only grew past old's key; b takes
 * old's place unless it now sorts after old's successor. */
static inline void
alloc_device_pool_grown_over_locked(struct alloc_pool *pool, struct alloc_block *old,
                                    struct alloc_block *b)
{
    old->in_pool = false;
    b->in_pool = true;
    b->gc_count_base = pool->get_free_blocks_call_count;
    if (pool->recent == old) {
        pool->recent = b;
        return;
    }
    avl_replace(&pool->blocks, &old->node, &b->node);
    struct avl_node *n = avl_next(&b->node);
    if (n != NULL && !alloc_block_less(b->stream, b->size, b->addr, alloc_block_of(n)))
        alloc_device_pool_move_locked(pool, b);
}

/* First free block >= (stream, size, addr 0) in the pool, or NULL. */
static inline struct alloc_block *
alloc_device_pool_lower_bound_locked(struct alloc_pool *pool, uint64_t stream, size_t size)
{
    struct avl_node *n = pool->blocks.root, *best = NULL;
    while (n != NULL) {
        if (alloc_block_less(stream, size, 0, alloc_block_of(n))) {
            best = n;
            n = n->left;
        } else {
            n = n->right;
        }
    }
    struct alloc_block *r = pool->recent;
    if (r != NULL && alloc_block_less(stream, size, 0, r) &&
        (best == NULL || alloc_block_less(r->stream, r->size, r->addr, alloc_block_of(best))))
        return r;
    return best ? alloc_block_of(best) : NULL;
}

/* Hands one trace event to the sink (alloc_device_trace_locked checks that it wants it). */
void alloc_device_record_locked(struct alloc_device *dev, enum trace_action action, uint8_t pool,
                                uint64_t addr, uint64_t size, uint64_t stream, uint32_t stack_id,
                                uint64_t device_free, uint16_t owner);

/* Emits one trace event if the sink wants that action (inline: otherwise it is one test of a
 * constant bit). `owner`: the block's for block events, dev->request_owner for what a request
 * causes, else 0. */
static inline void
alloc_device_trace_locked(struct alloc_device *dev, enum trace_action action, uint8_t pool,
                          uint64_t addr, uint64_t size, uint64_t stream, uint32_t stack_id,
                          uint64_t device_free, uint16_t owner)
{
    if (dev->traced & TRACE_ACTION_BIT(action))
        alloc_device_record_locked(dev, action, pool, addr, size, stream, stack_id, device_free,
                                   owner);
}

/* A cached block of `owner` was handed out (`requested` bytes asked for) or freed. */
static inline void
alloc_device_owner_alloc_locked(struct alloc_device *dev, uint16_t owner, uint64_t requested)
{
    if (owner >= ALLOC_OWNERS_COUNTED)
        return;
    struct alloc_owner_bytes *o = &dev->owners[owner];
    o->requested += requested;
    if (o->requested > o->requested_peak)
        o->requested_peak = o->requested;
}

static inline void
alloc_device_owner_free_locked(struct alloc_device *dev, uint16_t owner, uint64_t requested)
{
    if (owner < ALLOC_OWNERS_COUNTED)
        dev->owners[owner].requested -= requested;
}

/* Remembers a stream the device used (free_sync:events records on each). */
void alloc_device_note_stream_locked(struct alloc_device *dev, uint64_t stream);
/* Drops a stream the program destroyed from that list. */
void alloc_device_forget_stream_locked(struct alloc_device *dev, uint64_t stream);

/* Takes dev->lock with enough spares for one malloc and `aux` records. Returns 0 (locked) or
 * -CUPROF_EHOSTMEM (not locked). Inline: the malloc hit path takes it on every call. */
__attribute__((always_inline, warn_unused_result)) static inline int
alloc_device_lock_with_spares(struct alloc_device *dev, size_t aux)
{
    alloc_lock_acquire(&dev->lock);
    while (!alloc_device_spares_ready_locked(dev, aux)) {
        int rc = alloc_device_refill_unlocking(dev, aux);
        if (rc != 0) {
            alloc_lock_release(&dev->lock);
            return rc;
        }
    }
    return 0;
}
/* Doubles dev->map's buckets to `count` (from block_map_grow_count); mallocs unlocked. */
void alloc_device_grow_map(struct alloc_device *dev, size_t count);

#endif
