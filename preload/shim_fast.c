/* shim_fast.c: the cached fast path at the runtime's exports (see shim_fast.h). */
#include "preload/shim_fast.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <string.h>

#include "allocator/allocator.h"
#include "allocator/cuprof_errors.h"
#include "preload/call_tag.h"
#include "preload/cuda_backend.h"
#include "preload/device_footprint.h"
#include "preload/guard.h"
#include "preload/library_usage.h"
#include "preload/real_cuda.h"
#include "preload/real_dl.h"
#include "preload/runtime.h"
#include "preload/shim_call.h"

/* Since CUDA 12 cudaSetDevice makes the device's primary context current at once, so the
 * thread's current context is the one the runtime serves. An older runtime switched lazily, at
 * its next call: there a cudaMalloc right after cudaSetDevice must reach the runtime. Asked once
 * (0: not yet, 1: version 12 or later, -1: older or unknown). */
static _Atomic int runtime_binds_at_set;

static bool
runtime_context_is_current(void)
{
    int known = atomic_load_explicit(&runtime_binds_at_set, memory_order_relaxed);
    if (known == 0) {
        void *sym = real_dl_dlsym(RTLD_NEXT, "cudaRuntimeGetVersion");
        cudaError_t (*get_version)(int *) = NULL;
        int version = 0;
        memcpy(&get_version, &sym, sizeof sym);
        known = get_version != NULL && get_version(&version) == cudaSuccess && version >= 12000
                    ? 1
                    : -1;
        atomic_store_explicit(&runtime_binds_at_set, known, memory_order_relaxed);
    }
    return known == 1;
}

/* The runtime in cache mode once a wrapper initialised it, or NULL: the fast path never
 * initialises anything itself. */
static struct cuprof_runtime *
cache_runtime(void)
{
    struct cuprof_runtime *rt = shim_call_runtime_if_ready();
    if (rt == NULL || rt->mode != CUPROF_MODE_CACHE)
        return NULL;
    return rt;
}

bool
shim_fast_malloc(void **ptr, size_t size, const void *caller, cudaError_t *result,
                 uint32_t *stack_id, bool *has_stack)
{
    *has_stack = false;
    /* A NULL pointer or size 0 gets the runtime's own answer. */
    struct cuprof_runtime *rt = ptr != NULL && size != 0 ? cache_runtime() : NULL;
    if (rt == NULL)
        return false;
    /* The runtime serves the thread's current context, as the driver wrapper does; without one
     * the runtime has its own work to do (initialise, make the device's primary context
     * current). */
    const struct real_cuda *real = real_cuda_get();
    CUdevice dev;
    if (!runtime_context_is_current() || real == NULL || real->cuCtxGetDevice == NULL ||
        real->cuCtxGetDevice(&dev) != CUDA_SUCCESS || dev < 0 || dev >= rt->device_count)
        return false;
    guard_enter();
    lifecycle_resume_after_fork(rt);
    *stack_id = shim_call_stack(SHIM_CALL_ALLOC);
    *has_stack = true;
    device_footprint_note_start(dev);
    uint16_t owner = library_usage_begin_alloc(
        *stack_id, call_tag_current.caller != NULL ? call_tag_current.caller : caller);
    uint64_t addr = 0;
    int rc = allocator_malloc_cached(rt->alloc, dev, size, 0, *stack_id, owner, &addr);
    library_usage_end_call();
    cuda_backend_log_faults();
    guard_leave();
    if (rc != 0)
        return false; /* -CUPROF_EUNCACHED: nothing happened; the long way may reach the device */
    *ptr = (void *)(uintptr_t)addr;
    *result = cudaSuccess;
    return true;
}

bool
shim_fast_free(void *ptr, cudaError_t *result, uint32_t *stack_id, bool *has_stack)
{
    *has_stack = false;
    /* cudaFree(NULL) is the runtime's way to initialise: always the runtime's. */
    struct cuprof_runtime *rt = ptr != NULL ? cache_runtime() : NULL;
    if (rt == NULL)
        return false;
    guard_enter();
    lifecycle_resume_after_fork(rt);
    *stack_id = shim_call_stack(SHIM_CALL_FREE);
    *has_stack = true;
    /* Synchronizes the block's device first, as the real cudaFree does. */
    int rc = allocator_free(rt->alloc, (uint64_t)(uintptr_t)ptr, *stack_id);
    cuda_backend_log_faults();
    guard_leave();
    if (rc == -CUPROF_ENOTOWNED)
        return false; /* external memory, a stale pointer, the driver's: the long way decides */
    /* In cache mode a block's free answers 0; a device error while recording its streams' events
     * comes back as the driver's code, which the runtime's codes share for those errors. */
    *result = rc == 0 ? cudaSuccess : rc > 0 ? (cudaError_t)rc : cudaErrorInvalidValue;
    return true;
}
