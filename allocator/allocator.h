/* allocator.h: the caching allocator's public interface (PyTorch's CUDACachingAllocator rules).
 * Locking: one lock per device inside; pointer lookups do not serialize devices. Callers hold no
 *   cuprof lock when calling in.
 * Hot path: allocator_malloc/allocator_free are the hot path: no malloc, I/O or logging inside
 *   the device lock. */
#ifndef CUPROF_ALLOCATOR_H
#define CUPROF_ALLOCATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "allocator/alloc_config.h"
#include "allocator/device_ops.h"
#include "allocator/trace_sink.h"
#include "stats/memory_stats.h"

struct allocator;

/* Creates an allocator for `device_count` devices. `config`, `ops` and `sink` are copied; `sink`
 * may be NULL (no trace). Returns NULL when host memory runs out. */
struct allocator *allocator_create(const struct alloc_config *config, const struct device_ops *ops,
                                   const struct trace_sink *sink, int device_count);
/* Frees cuprof's bookkeeping only: device memory is not returned (at exit the driver may be gone).
 */
void allocator_destroy(struct allocator *alloc);

/* Serves `size` bytes on `device` for `stream`. `stack_id` is kept on the block (0 = none).
 * Returns 0 and sets *addr (NULL-equivalent 0 for size 0), -CUPROF_ENOMEM after PyTorch's retry
 * sequence failed (the `oom` event was recorded), -CUPROF_EDRIVER when the device answered a
 * segment request with a range that cannot be right (NULL, wrapping, overlapping a segment of
 * the device: nothing recorded, the range left alone), or a positive backend error. */
__attribute__((warn_unused_result)) int allocator_malloc(struct allocator *alloc, int device,
                                                         size_t size, uint64_t stream,
                                                         uint32_t stack_id, uint64_t *addr);
/* allocator_malloc with an owner tag of the caller's choosing (cuprof: the calling library), kept
 * on the block and carried by its trace events (trace_event.owner) until it is freed. */
__attribute__((warn_unused_result)) int allocator_malloc_owned(struct allocator *alloc, int device,
                                                               size_t size, uint64_t stream,
                                                               uint32_t stack_id, uint16_t owner,
                                                               uint64_t *addr);
/* allocator_malloc_owned for a stream-ordered request (cuMemAllocAsync, cudaMallocAsync): the
 * block remembers it (alloc_range_block.stream_ordered) until it is freed. */
__attribute__((warn_unused_result)) int
allocator_malloc_stream_ordered(struct allocator *alloc, int device, size_t size, uint64_t stream,
                                uint32_t stack_id, uint16_t owner, uint64_t *addr);
/* allocator_malloc_owned served only from blocks the cache holds: when that needs the device (a
 * new segment, an OOM and its retries, expandable pages, trace mode, 1 EiB or more) it returns
 * -CUPROF_EUNCACHED and nothing was recorded or counted, so the caller can ask again through a
 * path that may reach the device. */
__attribute__((warn_unused_result)) int allocator_malloc_cached(struct allocator *alloc, int device,
                                                                size_t size, uint64_t stream,
                                                                uint32_t stack_id, uint16_t owner,
                                                                uint64_t *addr);
/* Frees a block this allocator handed out. Blocks used on other streams (allocator_record_stream)
 * become free_requested now and free_completed when their events complete. Returns
 * -CUPROF_ENOTOWNED for a pointer it does not own (including a double free). */
__attribute__((warn_unused_result)) int allocator_free(struct allocator *alloc, uint64_t addr,
                                                       uint32_t stack_id);
/* Stream-ordered free (cudaFreeAsync): the block may be reused on its own stream at once, and on
 * other streams once an event recorded on `stream` now has completed. */
__attribute__((warn_unused_result)) int allocator_free_on_stream(struct allocator *alloc,
                                                                 uint64_t addr, uint64_t stream,
                                                                 uint32_t stack_id);
/* PyTorch's recordStream(): the block at addr is also used on `stream`. */
__attribute__((warn_unused_result)) int allocator_record_stream(struct allocator *alloc,
                                                                uint64_t addr, uint64_t stream);

/* Records a device allocation made outside the cache (managed, VMM, the driver's own async pool,
 * or every allocation in trace mode's caller) as a one-block segment tagged with `pool`
 * (enum trace_pool): segment_alloc + alloc events and the stats, never cached. Returns 0,
 * -CUPROF_EDRIVER when [addr, addr + size) is NULL, wraps or overlaps a segment the device holds
 * (the driver's answer cannot be right: nothing recorded), or another -CUPROF_E*. */
int allocator_track_external(struct allocator *alloc, int device, uint64_t addr, size_t size,
                             uint64_t stream, uint8_t pool, uint32_t stack_id);
/* allocator_track_external for memory of one of the program's contexts (`context`: a nonzero tag
 * the caller picks): allocator_forget_context drops it when that context ends. */
int allocator_track_external_in(struct allocator *alloc, int device, uint64_t addr, size_t size,
                                uint64_t stream, uint8_t pool, uint32_t stack_id, uint64_t context);
/* The driver refused an allocation made outside the cache (managed memory, the driver's pools,
 * trace mode's pass-through calls) with out-of-memory: an oom event tagged with `pool`, counted
 * in num_ooms, and an OOM message naming `api` (allocator_last_oom_message), as the cache's own
 * OOMs have. Returns 0, or -CUPROF_EINVAL with nothing recorded (no such device, or a request of
 * 1 EiB or more: no memory could serve it, and PyTorch counts no OOM for one). */
int allocator_note_external_oom(struct allocator *alloc, int device, size_t size, uint64_t stream,
                                uint8_t pool, uint32_t stack_id, const char *api);
/* Forgets an external allocation (free_requested + free_completed + segment_free). Returns
 * -CUPROF_ENOTOWNED when addr is not a tracked external allocation. */
int allocator_untrack_external(struct allocator *alloc, uint64_t addr, uint32_t stack_id);

/* True when addr lies inside a block this allocator handed out and not yet freed; fills the
 * block's device, base address and size (for cuMemGetAddressRange/cuPointerGetAttribute). */
bool allocator_lookup(struct allocator *alloc, uint64_t addr, int *device, uint64_t *block_addr,
                      size_t *block_size);

/* What the driver would answer about addr if every block this allocator handed out were an
 * allocation of its own, of the size asked for (cuMemGetAddressRange, the pointer range
 * attributes). */
enum alloc_range {
    ALLOC_RANGE_NOT_OURS, /* no segment of this allocator holds addr: ask the driver */
    ALLOC_RANGE_BLOCK,    /* inside a live block's requested bytes: *base, *size are its range */
    ALLOC_RANGE_NONE,     /* in a segment, outside every live block's requested bytes (cached,
                             freed, or a block's rounding): there is no allocation there */
};
/* The buffer IDs of blocks the cache serves (CU_POINTER_ATTRIBUTE_BUFFER_ID) count up from here,
 * one process-wide counter. Below it lies every ID a driver can be expected to hand out: a count
 * of its allocations would need 2^63 of them (centuries at a billion a second), and an ID made
 * from an address stays below 2^57, the top of any canonical user address. */
#define ALLOC_BUFFER_ID_FIRST (UINT64_C(1) << 63)
/* What allocator_range_of says about the live block holding the address (ALLOC_RANGE_BLOCK). */
struct alloc_range_block {
    uint64_t base;       /* the block's address */
    size_t size;         /* the bytes asked for */
    uint64_t segment;    /* the address of the segment it was cut from */
    bool whole;          /* a driver allocation of its own, freed with the block (trace mode,
                            external memory): the driver's answers about it are right */
    bool stream_ordered; /* allocator_malloc_stream_ordered served it */
    uint64_t buffer_id;  /* !whole: the allocation's own ID, drawn at its first query from
                            ALLOC_BUFFER_ID_FIRST up: unique in the process, new for each
                            allocation (a cached reuse of the same block too); whole: 0 */
};
/* Fills *block for ALLOC_RANGE_BLOCK (block may be NULL when only the kind is wanted). */
enum alloc_range allocator_range_of(struct allocator *alloc, uint64_t addr,
                                    struct alloc_range_block *block);

/* A live block as the program's own pools see it (NVTX heaps, snapshot/program_pools.h). */
struct live_block {
    uint64_t addr, size, requested, stream;
    uint32_t stack_id;
    uint16_t owner;
};
/* Locks the device holding the live (allocated) block that contains addr and describes it;
 * returns the device (unlock it with allocator_unlock_device), or -1 with nothing locked. */
int allocator_lock_live_block(struct allocator *alloc, uint64_t addr, struct live_block *out);

/* Releases every fully free cached segment of one device (-1: all devices). */
int allocator_empty_cache(struct allocator *alloc, int device);
/* The bytes allocator_empty_cache(device) would hand back to the device now: every cached
 * segment none of whose blocks the program holds (pending frees count as free: the release waits
 * for their events first) and, in an expandable segment, the whole pages inside each run of such
 * blocks that is mapped. Memory tracked as external is the program's and never counts. Without
 * cuprof's cache the device would have these bytes free (cuMemGetInfo adds them). Takes the
 * device lock; 0 for a device out of range. */
size_t allocator_releasable_bytes(struct allocator *alloc, int device);
/* Drops every block of `device` without calling the device (after a context reset the driver
 * already freed them). The trace records it as the program would see it: pending frees get
 * free_completed, live blocks free_requested + free_completed (their alloc stack standing in for
 * the free stack), every segment segment_free; the stats move as on the free and release paths
 * (num_device_free counts the segments too: the device no longer holds them). */
void allocator_forget_device(struct allocator *alloc, int device);
/* One context of `device` ended: drops, as allocator_forget_device drops everything, the external
 * memory tagged `context` and, with `with_cache` (the cache held that context's memory), the rest
 * of the device but the external memory tagged with other contexts, which lives on. External
 * memory of pools TRACE_POOL_VMM and TRACE_POOL_ASYNC outlives every context (cuda.h). */
void allocator_forget_context(struct allocator *alloc, int device, uint64_t context,
                              bool with_cache);
/* The program is destroying `stream`: no device records free_sync:events' events on it any more
 * (call it before the real destroy; a free holding a device's lock finishes with it first). */
void allocator_forget_stream(struct allocator *alloc, uint64_t stream);
/* Destroys the device's idle cached events. Call it while the device's context still exists
 * (before a reset or context destruction, after allocator_empty_cache completed the outstanding
 * ones): once the context is gone the handles are dead and forget_device just drops them. */
void allocator_destroy_idle_events(struct allocator *alloc, int device);
/* In a fork child whose parent's prepare handler held every device lock (allocator_lock_device):
 * marks them free. No other thread exists in the child, so nobody is woken. */
void allocator_reset_after_fork(struct allocator *alloc);
/* Polls pending events now (also done at the start of every malloc). */
void allocator_process_events(struct allocator *alloc, int device);
/* PyTorch's set_per_process_memory_fraction. */
int allocator_set_memory_fraction(struct allocator *alloc, int device, double fraction);

/* Replaces the settings later requests follow, as PyTorch's
 * torch.cuda.memory._set_allocator_settings does at run time: roundup_power2_divisions,
 * max_split_size, max_non_split_rounding_size, garbage_collection_threshold and
 * expandable_segments (where the backend has the VMM calls). Segments and blocks already made
 * keep their kind and size; a cached expandable block serves no new request once expandable
 * segments are turned off (PyTorch's rule). A tool that rebuilds a recorded state block by block
 * (cuprof replay) builds it under the recorded settings, then switches to the replayed ones.
 * Takes every device lock. */
void allocator_apply_settings(struct allocator *alloc, const struct alloc_config *config);

/* For a tool that rebuilds a recorded state (cuprof replay): maps the whole pages [addr, addr +
 * size) of the expandable reservation of (stream, pool) that holds them unmapped, reserving one
 * first when none does (vmm_reserve picks its base); they become one free cached block, counted
 * as PyTorch's map_block counts. Returns 0, -CUPROF_EINVAL (no vmm calls, or not whole unmapped
 * pages of one reservation), or the device's error. */
__attribute__((warn_unused_result)) int allocator_map_expandable(struct allocator *alloc,
                                                                 int device, uint64_t stream,
                                                                 bool is_small, uint64_t addr,
                                                                 size_t size);

/* The reverse, for the same tools: unmaps the whole pages [addr, addr + size) lying inside one
 * free mapped block of an expandable reservation, as PyTorch's unmap_block unmaps pages (the free
 * pieces before and after stay cached; counted and traced likewise). Returns 0, -CUPROF_EINVAL
 * (not whole pages inside one free mapped block), or the device's error (nothing changed). */
__attribute__((warn_unused_result)) int
allocator_unmap_expandable(struct allocator *alloc, int device, uint64_t addr, size_t size);

/* PyTorch's enablePeerAccess(dev, dev_to_access) after the driver call succeeded: `peer` (dev)
 * may now access `device`'s memory (dev_to_access), so device's expandable segments give it
 * access to every page mapped now and later (cuMemSetAccess through vmm_set_access), in the
 * order peers were added. Adding a peer twice does nothing. Returns 0, -CUPROF_EINVAL (a device
 * out of range, or peer == device), -CUPROF_EHOSTMEM, or the first backend error. */
__attribute__((warn_unused_result)) int allocator_add_peer(struct allocator *alloc, int device,
                                                           int peer);

/* Copies of the per-device counters (PyTorch's memory_stats), and their resets. */
void allocator_get_stats(struct allocator *alloc, int device, struct memory_stats *out);
/* The same with the device lock already held (a dump copies stats with the block table). */
void allocator_get_stats_locked(struct allocator *alloc, int device, struct memory_stats *out);
void allocator_reset_peak_stats(struct allocator *alloc, int device);
void allocator_reset_accumulated_stats(struct allocator *alloc, int device);

/* PyTorch's OOM message for the last OOM on `device`, written into buf (always NUL-terminated). */
void allocator_last_oom_message(struct allocator *alloc, int device, char *buf, size_t len);
/* The same under the caller's allocator_lock_device, returning how many OOMs the device had
 * (num_ooms) when it was read: the message is the one of the latest (a request of 1 EiB or more
 * gets a message and no OOM count). */
uint64_t allocator_last_oom_locked(struct allocator *alloc, int device, char *buf, size_t len);

int allocator_device_count(const struct allocator *alloc);

/* True when `device` serves expandable_segments:True with expandable segments (the setting is on
 * and the backend can map memory on that device). */
bool allocator_device_expandable(const struct allocator *alloc, int device);

/* Which trace events reach the sink: a set of TRACE_ACTION_BIT()s, all of them at create. A sink
 * that needs fewer says so, and each event it does not want costs the hot path one test. */
void allocator_set_traced_actions(struct allocator *alloc, uint32_t actions);

/* The requested bytes of one owner's live cached blocks (allocator_malloc_owned's tag) and their
 * peak, kept beside PyTorch's counters so that counting by owner needs no trace event. Tags from
 * ALLOC_OWNERS_COUNTED up are carried on blocks but not counted. */
#define ALLOC_OWNERS_COUNTED 256
struct alloc_owner_bytes {
    uint64_t requested;
    uint64_t requested_peak;
};
/* With the device lock held: copies the counters of owner tags [0, count) (count at most
 * ALLOC_OWNERS_COUNTED) into out. */
void allocator_owner_bytes_locked(struct allocator *alloc, int device,
                                  struct alloc_owner_bytes *out, size_t count);

/* ---- Consistent copies for snapshots. The dumper locks one device, copies the block table (and
 * the trace ring, which the sink fills under the same lock), then unlocks and works outside. */
enum block_state {
    BLOCK_INACTIVE = 0,
    BLOCK_ACTIVE_ALLOCATED = 1,
    BLOCK_ACTIVE_PENDING_FREE = 2,
};

struct block_info {
    uint64_t addr;
    uint64_t size;
    uint64_t requested_size;
    uint32_t stack_id;
    uint8_t state; /* enum block_state */
};

struct segment_info {
    uint64_t addr;
    uint64_t total_size;
    uint64_t stream;
    uint32_t stack_id;    /* stack of the segment's allocation */
    uint32_t first_block; /* index into the block array */
    uint32_t block_count;
    uint8_t is_small;   /* segment_type "small" vs "large" */
    uint8_t pool;       /* enum trace_pool */
    uint8_t expandable; /* is_expandable: one mapped run of an expandable segment */
};

void allocator_lock_device(struct allocator *alloc, int device);
void allocator_unlock_device(struct allocator *alloc, int device);
/* With the device lock held: how many segments and blocks a copy needs. */
void allocator_count_locked(struct allocator *alloc, int device, size_t *segments, size_t *blocks);
/* With the device lock held: copies segments (sorted by address) and their blocks (address
 * order). An expandable segment is copied as PyTorch's snapshot reports it: one segment per
 * contiguous run of mapped blocks, its unmapped blocks left out. Returns -CUPROF_EINVAL if the
 * arrays are too small (count again and retry). */
int allocator_copy_locked(struct allocator *alloc, int device, struct segment_info *segments,
                          size_t segment_cap, struct block_info *blocks, size_t block_cap,
                          size_t *segment_count, size_t *block_count);

/* Debug/test: walks every invariant (blocks tile segments, free neighbours merged, free sets
 * ordered, stats equal a recount). Returns 0 or writes the first violation into msg. */
int allocator_check_invariants(struct allocator *alloc, char *msg, size_t msg_len);

#endif
