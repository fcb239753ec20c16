/* device_ops.h: what the allocator asks of a device (segments, free memory, events, sync).
 * Locking: implementations must be callable with the allocator's device lock held and must not
 *   call back into the allocator.
 * Hot path: segment_alloc/free and vmm_* only on a cache miss or a release; event_* on
 *   stream-ordered frees. */
#ifndef CUPROF_DEVICE_OPS_H
#define CUPROF_DEVICE_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The allocator never names a CUDA function: preload/ implements these over the real driver,
 * unit tests over an in-process fake. Every function returns 0 on success, -CUPROF_ENOMEM when
 * the device is out of memory, or a positive backend error code that the allocator hands up
 * unchanged. `device` is a device ordinal; `stream` is the raw stream handle value. */
struct device_ops {
    void *ctx;
    /* Pre: size > 0 (rounded by the caller's rules; trace mode asks for the request itself).
     * Post on 0: *addr starts a new range of `size` bytes on `device` (a range that cannot be
     * right is the caller's to refuse). */
    int (*segment_alloc)(void *ctx, int device, size_t size, uint64_t *addr);
    /* Pre: [addr, addr + size) is exactly one range segment_alloc returned and nothing uses it. */
    int (*segment_free)(void *ctx, int device, uint64_t addr, size_t size);
    /* Post on 0: *free_bytes <= *total_bytes, the device's own view (other processes count). */
    int (*mem_info)(void *ctx, int device, size_t *free_bytes, size_t *total_bytes);
    /* Events: an opaque handle per recorded point in a stream. event_query returns 0 and sets
     * *complete (true: the work before the event finished; false: still pending), or returns an
     * error and leaves *complete alone. "Pending" is never a return value: a positive value is
     * always a backend error (CUDA_ERROR_INVALID_VALUE is 1, which once read as "pending" kept a
     * block out of the cache forever). */
    /* Post on 0: *event is a handle no other live event has. */
    int (*event_create)(void *ctx, int device, void **event);
    /* Pre: event from event_create on the stream's device, not destroyed. */
    int (*event_record)(void *ctx, void *event, uint64_t stream);
    /* Pre: event recorded. Post: 0 and *complete set, or an error and *complete untouched. */
    int (*event_query)(void *ctx, void *event, bool *complete);
    /* Pre: event recorded. Post on 0: the work before it finished. */
    int (*event_synchronize)(void *ctx, void *event);
    /* Pre: event from event_create; it is not used again. */
    int (*event_destroy)(void *ctx, void *event);
    /* Post on 0: all work queued on the device has finished. */
    int (*synchronize)(void *ctx, int device);
    /* Optional: true when `error`, from synchronize, means the calling thread may not make the
     * call at all now (a CUDA graph capture forbids it): a free is then refused with that error
     * and changes nothing, as the device's own free would be. */
    bool (*call_refused)(void *ctx, int error);

    /* Expandable segments (PyTorch's ExpandableSegment). Optional: a backend that leaves
     * vmm_reserve NULL serves expandable_segments:True with ordinary segments. Addresses and
     * sizes given to vmm_map/vmm_unmap/vmm_release are multiples of the granularity.
     * vmm_granularity: the device's mapping granularity (cuMemGetAllocationGranularity, minimum).
     * vmm_reserve: reserves `size` bytes of virtual address space, nothing mapped
     *   (cuMemAddressReserve); -CUPROF_ENOMEM when no range is left.
     * vmm_map: backs [addr, addr + count * page) with `count` physical allocations of `page`
     *   bytes each, one per page (cuMemCreate, cuMemMap), readable and writable by `device`
     *   (cuMemSetAccess). All or nothing: on any failure every page created or mapped by this
     *   call is unmapped and released again before it returns, so the range is as it was;
     *   -CUPROF_ENOMEM when the device has no memory for a page, else a backend error.
     * vmm_unmap: unmaps the `count` pages at addr, mapped by earlier vmm_map calls, and returns
     *   their memory to the device (cuMemUnmap, cuMemRelease). Does not wait for the device: the
     *   allocator calls stream_synchronize first, as PyTorch does.
     * vmm_release: gives back a reservation with nothing mapped in it (cuMemAddressFree).
     * vmm_set_access: makes [addr, addr + size), pages vmm_map mapped for `device`, readable and
     *   writable by device `peer` too (cuMemSetAccess with one descriptor): PyTorch's setAccess
     *   for a peer device. Optional: NULL gives peers no access.
     * vmm_supported: optional; false when `device` cannot map memory (a driver without the
     *   virtual memory calls, a device that says it has no virtual memory management): that
     *   device serves expandable_segments:True with ordinary segments. Asked once per device,
     *   when the allocator is made.
     * stream_synchronize: waits for the work queued on `stream` (cudaStreamSynchronize). */
    int (*vmm_granularity)(void *ctx, int device, size_t *granularity);
    int (*vmm_reserve)(void *ctx, int device, size_t size, uint64_t *addr);
    int (*vmm_map)(void *ctx, int device, uint64_t addr, size_t page, size_t count);
    int (*vmm_unmap)(void *ctx, int device, uint64_t addr, size_t page, size_t count);
    int (*vmm_release)(void *ctx, int device, uint64_t addr, size_t size);
    int (*vmm_set_access)(void *ctx, int device, uint64_t addr, size_t size, int peer);
    bool (*vmm_supported)(void *ctx, int device);
    int (*stream_synchronize)(void *ctx, int device, uint64_t stream);
};

#endif
