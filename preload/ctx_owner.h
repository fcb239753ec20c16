/* ctx_owner.h: which of the program's contexts each device's cache belongs to.
 *   Memory of one context is not memory of another (a kernel of context B cannot use context A's
 *   allocations, and destroying A frees only A's). The cache hands out one context's memory per
 *   device: that of the first context that allocated through it (the primary context for the
 *   runtime, PyTorch and every library on it). An allocation made while another context of the
 *   device is current goes to the driver and is recorded as external memory tagged with its
 *   context, so that the end of either context drops exactly its own memory.
 * Locking: lock-free (one atomic per device).
 * Hot path: a cached cudaMalloc asks the driver for the current context (standing in for
 *   cuCtxGetDevice) and ctx_owner_device_of scans the owners (one, usually). */
#ifndef CUPROF_CTX_OWNER_H
#define CUPROF_CTX_OWNER_H

#include <cuda.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "preload/real_cuda.h"

/* Devices past this many are served for any context, as before contexts were told apart. */
#define CTX_OWNER_DEVICES 64

/* The calling thread's current context and its device. False without a current context (the
 * real call then reports its own error). */
bool ctx_owner_current(const struct real_cuda *real, CUcontext *ctx, int *device);

/* Device 0's owner: read inline on the hot path (one device, usually). */
extern _Atomic(CUcontext) ctx_owner_of_device[CTX_OWNER_DEVICES];

/* ctx_owner_device_of for the devices past 0. */
int ctx_owner_device_of_others(CUcontext ctx);

/* The device whose cache `ctx` owns, or -1 (NULL, or no cache's owner). Inline: the hot path's
 * test, with no driver query. */
static inline int
ctx_owner_device_of(CUcontext ctx)
{
    if (atomic_load_explicit(&ctx_owner_of_device[0], memory_order_relaxed) == ctx && ctx != NULL)
        return 0;
    return ctx_owner_device_of_others(ctx);
}

/* True when the cache of `device` hands out memory of `ctx`: ctx owns it, or nobody did and ctx
 * now does. */
bool ctx_owner_claim(int device, CUcontext ctx);

/* True when `ctx` owns the cache of `device`. */
bool ctx_owner_is(int device, CUcontext ctx);

/* The cache of `device` was dropped with its context: the next allocation claims it again. */
void ctx_owner_clear(int device);

/* The external-memory tag of `ctx` (allocator_track_external_in): never 0. */
static inline uint64_t
ctx_owner_tag(CUcontext ctx)
{
    return (uint64_t)(uintptr_t)ctx;
}

#endif
