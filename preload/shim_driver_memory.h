/* shim_driver_memory.h: the driver calls that take device memory for the driver itself, outside
 *   every allocation cuprof sees: kernel code (module and library loads, and under CUDA's lazy
 *   loading a kernel's first lookup or launch), texture arrays (mipmapped ones too), a larger
 *   thread stack (cuCtxSetLimit), a graph's memory nodes (its first upload or launch), a context
 *   of the program's own (cuCtxCreate, on the device it is made for). Without cuprof the memory a
 *   program freed is the driver's again; in cache mode cuprof's cache keeps it, so when such a
 *   call fails with CUDA_ERROR_OUT_OF_MEMORY while the cache holds memory it could hand back, the
 *   cache hands it back (segment_free entries, as empty_cache()) and the call is made once more.
 *   Never during a stream capture; one log line, once; a refusal that stands gets its own line
 *   (once) and the first-OOM snapshot, in every mode but off.
 * Locking: none on success; a refusal takes that device's allocator lock to release.
 * Hot path: launches pass through with one comparison of the result. */
#ifndef CUPROF_SHIM_DRIVER_MEMORY_H
#define CUPROF_SHIM_DRIVER_MEMORY_H

#include "preload/entry_points.h"

/* One wrapper per DRIVER_RETRY row of preload/entry_points.def, named in its `wrapper` column,
 * with the row's parameters. */
#define DRIVER_LOOKUP   ENTRY_POINT_IGNORE
#define DRIVER_WRAPPER  ENTRY_POINT_IGNORE
#define DRIVER_CALLED   ENTRY_POINT_IGNORE
#define RUNTIME_WRAPPER ENTRY_POINT_IGNORE
#define DRIVER_RETRY(field, exported, lookup, min_version, max_version, ptsz, pfn, wrapper,        \
                     params, args)                                                                 \
    CUresult wrapper params;
#include "preload/entry_points.def"
#undef DRIVER_LOOKUP
#undef DRIVER_WRAPPER
#undef DRIVER_CALLED
#undef RUNTIME_WRAPPER
#undef DRIVER_RETRY

/* cuCtxCreate in each ABI: the same, for the device the context is made for. */
CUresult shim_driver_memory_ctx_create_v2(CUcontext *ctx, unsigned int flags, CUdevice dev);
CUresult shim_driver_memory_ctx_create_v3(CUcontext *ctx, CUexecAffinityParam *params, int count,
                                          unsigned int flags, CUdevice dev);
CUresult shim_driver_memory_ctx_create_v4(CUcontext *ctx, CUctxCreateParams *params,
                                          unsigned int flags, CUdevice dev);

#endif
