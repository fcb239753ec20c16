/* cuda_backend.h: the allocator's device_ops over the real driver (cuMemAlloc_v2/cuMemFree_v2/
 *   cuMemGetInfo_v2, events, synchronize), each run with a context of the right device current,
 *   plus the set of segments cuprof holds (so a stale pointer into one never reaches cuMemFree).
 * Locking: the segment set has its own mutex (addr_map); device_ops calls take no other lock and
 *   may run under the allocator's device lock.
 * Hot path: only on cache misses (segments) and stream-ordered frees (events). */
#ifndef CUPROF_CUDA_BACKEND_H
#define CUPROF_CUDA_BACKEND_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "allocator/device_ops.h"

/* CUDA_ERROR_OUT_OF_MEMORY becomes -CUPROF_ENOMEM; other CUresults are passed up as positive
 * codes. A cuMemAlloc_v2 success with a NULL, misaligned, wrapping or overlapping pointer is
 * -CUPROF_EDRIVER (the pointer is left alone). Every call goes to the real driver, never
 * through cuprof's wrappers. */
const struct device_ops *cuda_backend_ops(void);

/* cuDeviceGetCount, or 0 when there is no usable driver (not initialised, no device). */
int cuda_backend_device_count(void);

/* True when addr lies inside a segment cuprof allocated and still holds (its own table; no
 * driver call). */
bool cuda_backend_owns(uint64_t addr);

/* Logs, once per process, a driver error that a device_ops call met under an allocator lock
 * (where nothing may be logged): today a cuEventQuery error. Call with no cuprof lock held.
 * Inline: one relaxed load when there is nothing to say (cuda_backend_fault: the CUresult waiting
 * to be logged, 0 none, -1 logged already). */
extern atomic_int cuda_backend_fault __attribute__((visibility("hidden")));
void cuda_backend_log_faults_slow(void);
static inline void
cuda_backend_log_faults(void)
{
    if (__builtin_expect(atomic_load_explicit(&cuda_backend_fault, memory_order_relaxed) > 0, 0))
        cuda_backend_log_faults_slow();
}

/* The driver freed everything of `device` (context reset/destroy): forget its segments. */
void cuda_backend_forget_device(int device);

/* Fork: the owned-segment table is locked across fork (after the device locks: a segment
 * alloc updates it under one) and re-created in the child. */
void cuda_backend_fork_prepare(void);
void cuda_backend_fork_parent(void);
void cuda_backend_reset_after_fork(void);

#endif
