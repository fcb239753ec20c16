/* alloc_free.h: PyTorch's free side: free/free_block/try_merge, events for stream uses,
 *   release_cached_blocks, release_available_cached_blocks and garbage collection.
 * Locking: every function needs dev->lock held (they end in _locked).
 * Hot path: alloc_free_by_address (no malloc under the lock, no I/O). */
#ifndef CUPROF_ALLOC_FREE_H
#define CUPROF_ALLOC_FREE_H

#include <stdbool.h>
#include <stdint.h>

#include "allocator/alloc_device.h"

/* How many spare aux records freeing `b` needs (events for stream uses, free_sync:events). */
static inline size_t
alloc_free_aux_needed_locked(const struct alloc_device *dev, const struct alloc_block *b,
                             bool has_stream, uint64_t stream)
{
    if (has_stream)
        return stream != b->stream ? 1 : 0;
    if (b->stream_uses == NULL && dev->config->free_sync == FREE_SYNC_EVENTS)
        return dev->stream_count;
    return 0;
}
struct allocator;

/* allocator_free and allocator_free_on_stream: finds the device holding the block at exactly
 * addr (synchronizing it first for a plain free under free_sync:device), then PyTorch's free()
 * with its lock held. One function, so that the hit path is one call frame. Returns 0,
 * -CUPROF_ENOTOWNED, -CUPROF_EINVAL or a trace-mode device error. */
__attribute__((warn_unused_result)) int alloc_free_by_address(struct allocator *alloc,
                                                              uint64_t addr, bool has_stream,
                                                              uint64_t stream, uint32_t stack_id);
/* PyTorch's free(): free_requested, allocation stats, then events or free_block. With
 * has_stream (cudaFreeAsync), `stream` is where the program stops using the block. */
void alloc_free_request_locked(struct alloc_device *dev, struct alloc_block *b, uint32_t stack_id,
                               bool has_stream, uint64_t stream);
/* PyTorch's free_block(): free_completed, merge with free neighbours, back into the pool. */
void alloc_free_block_locked(struct alloc_device *dev, struct alloc_block *b);
/* Trace mode / external memory: the whole one-block segment goes (free events, stats, and the
 * device free unless external). Returns the device's error, if any. */
int alloc_free_whole_segment_locked(struct alloc_device *dev, struct alloc_block *b,
                                    uint32_t stack_id);
/* Context reset: the driver destroyed the events and freed the memory. Completes every pending
 * free now (free_completed) and drops the idle events, without device calls. */
void alloc_free_forget_events_locked(struct alloc_device *dev);
/* Context reset, after alloc_free_forget_events_locked: frees every live block of `seg` as a free
 * plus free_block would (free_requested + free_completed, alloc stack as the free stack), then the
 * segment as release_block would (segment_free, stats), without calling the device. */
void alloc_free_forget_segment_locked(struct alloc_device *dev, struct alloc_segment *seg);
/* PyTorch's process_events(): completes frees whose events finished. */
void alloc_free_process_events_locked(struct alloc_device *dev);
/* PyTorch's synchronize_and_free_events(). */
void alloc_free_sync_events_locked(struct alloc_device *dev);
/* PyTorch's release_block(): segment_free, device free, stats. */
void alloc_free_release_block_locked(struct alloc_device *dev, struct alloc_block *b);
/* PyTorch's release_cached_blocks(): sync events, free every whole free segment. */
void alloc_free_release_cached_locked(struct alloc_device *dev);
/* PyTorch's release_available_cached_blocks(): true if enough oversize blocks were released. */
bool alloc_free_release_available_locked(struct alloc_device *dev, struct alloc_pool *pool,
                                         uint64_t stream, size_t size);
/* PyTorch's garbage_collect_cached_blocks(). */
void alloc_free_garbage_collect_locked(struct alloc_device *dev);

#endif
