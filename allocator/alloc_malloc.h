/* alloc_malloc.h: PyTorch's malloc side over one device: get_free_block, alloc_block, the retry
 *   order (garbage collection, release_available_cached_blocks, release_cached_blocks, then for
 *   the shim only a segment of just the request: fit_segment_on_oom), the OOM event and message,
 *   alloc_found_block (split), and the one-block segments of trace mode.
 * Locking: alloc_malloc_on_device takes dev->lock itself; *_locked functions need it held.
 * Hot path: alloc_malloc_on_device (no malloc under the lock, no I/O). */
#ifndef CUPROF_ALLOC_MALLOC_H
#define CUPROF_ALLOC_MALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "allocator/alloc_block.h"
#include "allocator/alloc_device.h"

/* How alloc_malloc_on_device serves a request. */
enum alloc_reach {
    ALLOC_REACH_SEGMENT,     /* one segment of its own (trace mode) */
    ALLOC_REACH_CACHE,       /* PyTorch's malloc, the device when the cache has no block */
    ALLOC_REACH_CACHED_ONLY, /* PyTorch's malloc if a cached block fits without the device (no
                                new segment, no expandable pages), else -CUPROF_EUNCACHED with
                                nothing changed */
};

/* allocator_malloc on one device (size > 0): refuses 1 EiB and more as PyTorch does, takes the
 * lock, serves the request as `reach` says, enters the block in the pointer map, unlocks, and
 * grows the map afterwards when it is crowded. One function, so that the hit path is one call
 * frame. The block gets a new allocation's identity: no buffer ID yet, and `stream_ordered`.
 * Returns 0, -CUPROF_ENOMEM (message in dev->oom_message), -CUPROF_EUNCACHED (only for
 * ALLOC_REACH_CACHED_ONLY), -CUPROF_EHOSTMEM, -CUPROF_EDRIVER or a positive backend error. */
__attribute__((warn_unused_result)) int alloc_malloc_on_device(struct alloc_device *dev,
                                                               enum alloc_reach reach, size_t size,
                                                               uint64_t stream, uint32_t stack_id,
                                                               uint16_t owner, bool stream_ordered,
                                                               uint64_t *addr);

/* Trace mode and external memory: one block per segment of exactly `size`, never cached.
 * `addr` 0 asks the device for the memory (trace mode); otherwise it is the external address.
 * The spares must be ready (alloc_device_lock_with_spares). */
__attribute__((warn_unused_result)) int
alloc_malloc_whole_segment_locked(struct alloc_device *dev, size_t size, uint64_t addr,
                                  uint64_t stream, uint8_t pool, uint32_t stack_id,
                                  struct alloc_block **out);

/* The driver refused a request made outside the cache (`pool`: enum trace_pool of the memory it
 * asked for; `api`: the call, named in the message): an oom event tagged with `pool`, num_ooms
 * and the OOM message, as for the cache's own OOMs. Takes dev->lock. */
void alloc_malloc_external_oom(struct alloc_device *dev, size_t size, uint64_t stream, uint8_t pool,
                               uint32_t stack_id, const char *api);

#endif
