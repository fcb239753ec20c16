/* alloc_expand.h: PyTorch's expandable segments (expandable_segments:True): one reserved range
 *   per stream and pool that grows by mapping pages at its lowest fitting address and shrinks by
 *   unmapping the whole free pages of its free blocks, all through struct device_ops' vmm_* calls.
 * Locking: every function needs dev->lock held (they end in _locked); one may drop it (says so).
 * Hot path: no: growth only on a cache miss, shrinking only in release_cached_blocks. */
#ifndef CUPROF_ALLOC_EXPAND_H
#define CUPROF_ALLOC_EXPAND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "allocator/alloc_device.h"
#include "allocator/alloc_policy.h"

/* PyTorch: 2 MiB pages for the small pool, 20 MiB for the large one. */
static inline size_t
alloc_expand_page_size(bool is_small)
{
    return is_small ? ALLOC_SMALL_BUFFER : ALLOC_LARGE_BUFFER;
}

/* The whole pages of expandable segment `seg` inside [addr, addr + size), as page indexes
 * [*first, *end) from its start (PyTorch's unmap_block: what a release unmaps of a free block).
 * False when none lies inside. */
static inline bool
alloc_expand_pages_inside(const struct alloc_segment *seg, uint64_t addr, size_t size,
                          uint64_t *first, uint64_t *end)
{
    uint64_t off = addr - seg->addr;
    *first = (off + seg->page - 1) / seg->page;
    *end = (off + size) / seg->page;
    return *first < *end;
}

/* PyTorch's reservation: enough pages for 1 1/8 of the device's total memory. */
static inline size_t
alloc_expand_reservation_size(size_t total, size_t page)
{
    size_t space = total + total / 8;
    return (space / page + (space % page != 0)) * page;
}

/* get_free_block's expandable rule, for the candidate `b` (lower bound of (stream, size), on
 * `stream`, in an expandable segment): with expandable segments on, a block's size counts the
 * unmapped block behind it, and the walk moves on while the next block of the stream counts
 * less; with them off, expandable blocks are skipped. Returns the block to use or NULL. */
struct alloc_block *alloc_expand_pick_locked(struct alloc_device *dev, struct alloc_pool *pool,
                                             uint64_t stream, size_t size, struct alloc_block *b);

/* PyTorch's try_allocate_expandable_block: maps pages (reserving a new range when no unmapped
 * space of the stream fits) until a free mapped block of at least `size` bytes exists; returns 0
 * with it in *out, taken out of the pool; -CUPROF_ENOMEM (what was mapped before the failing
 * page stays mapped and cached, as in PyTorch), -CUPROF_EDRIVER, or a backend error. */
__attribute__((warn_unused_result)) int
alloc_expand_allocate_locked(struct alloc_device *dev, struct alloc_pool *pool, uint64_t stream,
                             size_t size, uint32_t stack_id, struct alloc_block **out);

/* For a tool that rebuilds a recorded state (cuprof replay): maps the pages [addr, addr + size)
 * of the (stream, pool) reservation whose unmapped space holds them, reserving a new range first
 * when none does (the device picks its address); they become one free cached block, counted and
 * traced as map_block does. Needs 4 spare blocks and 1 segment. Returns 0, -CUPROF_EINVAL when the
 * range is not whole unmapped pages of one reservation, or the backend's error. */
__attribute__((warn_unused_result)) int alloc_expand_map_at_locked(struct alloc_device *dev,
                                                                   struct alloc_pool *pool,
                                                                   uint64_t stream, uint64_t addr,
                                                                   size_t size);

/* For the same tools: unmaps the whole pages [addr, addr + size) inside one free mapped block of
 * an expandable segment, as unmap_block does for them (the pieces before and after stay cached).
 * Needs 2 spare blocks. Returns 0, -CUPROF_EINVAL when the range is not whole pages inside one
 * free mapped block, or the backend's error (nothing changed). */
__attribute__((warn_unused_result)) int alloc_expand_unmap_at_locked(struct alloc_device *dev,
                                                                     uint64_t addr, size_t size);

/* PyTorch's addPeerAccess for this device: `peer` (another device) joins dev->peers, which must
 * have room, unless it is there already; then it gets access to every mapped run of every
 * expandable segment (ExpandableSegment::addPeer), and every later mapping gives it access too.
 * Returns 0 or the first backend error (the other runs still get access). */
__attribute__((warn_unused_result)) int alloc_expand_add_peer_locked(struct alloc_device *dev,
                                                                     int peer);

/* `peer` leaves dev->peers (its context, or this device's, went: cuprof forgets the device). */
void alloc_expand_drop_peer_locked(struct alloc_device *dev, int peer);

/* Spare blocks that alloc_expand_release_pool_locked may take on both pools: two per free
 * mapped expandable block (the free pieces before and after the pages it unmaps). */
size_t alloc_expand_release_blocks_needed_locked(struct alloc_device *dev);

/* release_blocks' expandable half for one pool: after the ordinary segments were released,
 * unmaps the whole free pages of each free expandable block, in the pool's (stream, size, addr)
 * order, and gives back a reservation left with nothing mapped. The spares must be ready. */
void alloc_expand_release_pool_locked(struct alloc_device *dev, struct alloc_pool *pool);

/* Context reset: the driver dropped the pages and the range. Every block of `seg` must be free
 * already; records segment_unmap for each mapped run (stats as unmap_block), then forgets it. */
void alloc_expand_forget_segment_locked(struct alloc_device *dev, struct alloc_segment *seg);

#endif
