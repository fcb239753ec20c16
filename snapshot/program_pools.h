/* program_pools.h: the program's own pools, as NVTX's memory extension describes them: a heap the
 *   program registered on one of its device allocations, and the regions it carves from it. Each
 *   region is a block of the program's own allocator: an alloc when registered, a free when
 *   unregistered (free_requested + free_completed), an annotate naming it (PyTorch's user_metadata
 *   on a live allocation), all tagged TRACE_POOL_NVTX. While a heap is registered its own block's
 *   allocation is handed over to the pool (freed in the trace, given back when the heap goes), so
 *   live bytes count the regions, not the pool twice. The tables feed the snapshot: the heap's
 *   block shows as the regions and the free gaps between them (snapshot_dump.c).
 * Locking: a device's tables are protected by that device's allocator lock: the NVTX calls take it
 *   (allocator_lock_device), the sink runs under it, the dump copies under it. Nodes are
 *   allocated before the lock is taken and freed after it is dropped (the retired list).
 * Hot path: program_pools_sink is, with history on: one test per event until a heap exists. */
#ifndef CUPROF_PROGRAM_POOLS_H
#define CUPROF_PROGRAM_POOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "allocator/avl.h"
#include "allocator/trace_sink.h"

/* A heap or a region: allocated by the caller (malloc, outside the lock) and handed over. */
struct pool_node {
    struct avl_node node;      /* its device's heaps or regions, by addr */
    struct pool_node *retired; /* the retired list's link */
    uint64_t addr, size;
    uint32_t stack_id; /* region: its registration's stack; heap: the block's own */
    uint32_t name_id;  /* region: its name's label (0: none) */
    /* heap: the block it occupies, as the hand-over and the hand-back record it */
    uint64_t requested, stream;
    uint16_t owner;
};

/* A copy for the dump (snapshot_dump.c): heaps by address, each with its regions in order. */
struct pool_heap_info {
    uint64_t addr, size;
    size_t first_region, region_count; /* into the region copy */
};
struct pool_region_info {
    uint64_t addr, size;
    uint32_t stack_id, name_id;
};

struct program_pools;

/* Tables for `device_count` devices whose events go to `next` (the ring). NULL when out of
 * memory. */
struct program_pools *program_pools_create(int device_count, struct trace_sink next);
void program_pools_destroy(struct program_pools *pp);

/* The sink in front of `next`: passes every event on; a free_requested of a registered heap's
 * block (the program frees its pool without unregistering it) first frees the heap's regions
 * and gives the block back. */
struct trace_sink program_pools_sink(struct program_pools *pp);

/* Whether a heap was ever registered: the allocator must then hand the sink every
 * free_requested, history or not (runtime.c's traced actions). */
bool program_pools_active(const struct program_pools *pp);

/* ---- NVTX's operations; each with `device`'s allocator lock held. Returns 0, or -CUPROF_EINVAL
 * when the operation does not fit the tables (then nothing changed: a node handed over stays the
 * caller's). stack_id is the calling NVTX function's stack. */

/* heap->addr, size, stack_id (the block's allocation stack), requested, stream, owner filled: a
 * heap overlapping no other. */
__attribute__((warn_unused_result)) int program_pools_heap_add_locked(struct program_pools *pp,
                                                                      int device,
                                                                      struct pool_node *heap,
                                                                      uint32_t stack_id);
/* Frees the heap's regions, gives its block back (an alloc) and retires it; reset keeps the
 * heap (addr 0, NVTX's process-wide heap: every heap of the device). */
__attribute__((warn_unused_result)) int program_pools_heap_remove_locked(struct program_pools *pp,
                                                                         int device, uint64_t addr,
                                                                         uint32_t stack_id);
__attribute__((warn_unused_result)) int program_pools_heap_reset_locked(struct program_pools *pp,
                                                                        int device, uint64_t addr,
                                                                        uint32_t stack_id);
/* region->addr, size, stack_id filled: inside the heap at heap_addr, overlapping no region. */
__attribute__((warn_unused_result)) int program_pools_region_add_locked(struct program_pools *pp,
                                                                        int device,
                                                                        uint64_t heap_addr,
                                                                        struct pool_node *region);
/* The region starting at addr: its new size (a free of the old and an alloc of the new, the
 * registration's stack and name kept), removed, or named. */
__attribute__((warn_unused_result)) int
program_pools_region_resize_locked(struct program_pools *pp, int device, uint64_t addr,
                                   uint64_t size, uint32_t stack_id);
__attribute__((warn_unused_result)) int program_pools_region_remove_locked(struct program_pools *pp,
                                                                           int device,
                                                                           uint64_t addr,
                                                                           uint32_t stack_id);
__attribute__((warn_unused_result)) int program_pools_region_name_locked(struct program_pools *pp,
                                                                         int device, uint64_t addr,
                                                                         uint32_t name_id);
/* The heap holding addr (a heap's own address included), or 0. */
uint64_t program_pools_heap_of_locked(struct program_pools *pp, int device, uint64_t addr);

/* The nodes retired under the lock, to free with program_pools_free_retired once it is
 * dropped. */
struct pool_node *program_pools_take_retired_locked(struct program_pools *pp, int device);
void program_pools_free_retired(struct pool_node *list);

/* ---- The dump's copy (device lock held): counts, then up to the capacities; returns false when
 * a capacity is short (nothing is promised then). */
void program_pools_count_locked(struct program_pools *pp, int device, size_t *heaps,
                                size_t *regions);
bool program_pools_copy_locked(struct program_pools *pp, int device, struct pool_heap_info *heaps,
                               size_t heap_cap, size_t *heap_count,
                               struct pool_region_info *regions, size_t region_cap,
                               size_t *region_count);

#endif
