/* shim_rt.h: runtime-level wrappers (cudaMalloc, cudaFree, ...; reached only with a shared
 *   libcudart). They tag the thread (API name, outermost stack) and call the real runtime, whose
 *   driver calls come back through the driver wrappers and are counted there; except that in
 *   cache mode cudaMalloc and cudaFree answer at once what the cache alone can answer (a cached
 *   block fits; a block the cache handed out), which the runtime would only have forwarded to
 *   cuprof's driver wrapper for the same answer.
 * Locking: none of their own (thread-local tag; real pointers published atomically); the fast
 *   path takes the device lock inside the allocator.
 * Hot path: yes. */
#ifndef CUPROF_SHIM_RT_H
#define CUPROF_SHIM_RT_H

#include <cuda_runtime_api.h>
#include <stdatomic.h>

#include "preload/entry_points.h"

/* Where each runtime export goes: exports.c's stubs load it and jump (acquire: what the target
 * reads was published before it; hidden, so the load is one instruction). At first the shim_rt_*
 * wrapper below; in off mode, the runtime's own function once a call looked it up, so off mode
 * costs one load and a jump; for cudaMalloc and cudaFree, their cached-path entries once the fast
 * path may answer. */
#define DRIVER_LOOKUP  ENTRY_POINT_IGNORE
#define DRIVER_WRAPPER ENTRY_POINT_IGNORE
#define DRIVER_CALLED  ENTRY_POINT_IGNORE
#define RUNTIME_WRAPPER(exported, wrapper, params, args)                                           \
    typedef cudaError_t(*shim_rt_##exported##_fn) params;                                          \
    extern _Atomic(shim_rt_##exported##_fn) shim_rt_route_##exported                               \
        __attribute__((visibility("hidden")));
#include "preload/entry_points.def"
#undef DRIVER_LOOKUP
#undef DRIVER_WRAPPER
#undef DRIVER_CALLED
#undef RUNTIME_WRAPPER

cudaError_t shim_rt_malloc(void **ptr, size_t size);
cudaError_t shim_rt_free(void *ptr);
cudaError_t shim_rt_malloc_async(void **ptr, size_t size, cudaStream_t stream);
cudaError_t shim_rt_malloc_async_ptsz(void **ptr, size_t size, cudaStream_t stream);
cudaError_t shim_rt_free_async(void *ptr, cudaStream_t stream);
cudaError_t shim_rt_free_async_ptsz(void *ptr, cudaStream_t stream);
cudaError_t shim_rt_malloc_from_pool_async(void **ptr, size_t size, cudaMemPool_t pool,
                                           cudaStream_t stream);
cudaError_t shim_rt_malloc_from_pool_async_ptsz(void **ptr, size_t size, cudaMemPool_t pool,
                                                cudaStream_t stream);
cudaError_t shim_rt_malloc_pitch(void **ptr, size_t *pitch, size_t width, size_t height);
cudaError_t shim_rt_malloc_3d(struct cudaPitchedPtr *pitched, struct cudaExtent extent);
cudaError_t shim_rt_malloc_managed(void **ptr, size_t size, unsigned int flags);
cudaError_t shim_rt_mem_get_info(size_t *free_bytes, size_t *total_bytes);
cudaError_t shim_rt_device_reset(void);
cudaError_t shim_rt_device_enable_peer_access(int peer, unsigned int flags);

#endif
