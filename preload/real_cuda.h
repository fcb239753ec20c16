/* real_cuda.h: the real driver entry points (what wrappers forward to and what cuprof itself
 *   calls), each resolved once with an explicit version through the driver's cuGetProcAddress_v2.
 * Locking: resolved once behind pthread_once; read-only afterwards.
 * Hot path: real_cuda_get() is one pthread_once check plus a load. */
#ifndef CUPROF_REAL_CUDA_H
#define CUPROF_REAL_CUDA_H

#include <cudaTypedefs.h>
#include <stdatomic.h>
#include <stdbool.h>

/* X(field, base name for cuGetProcAddress, cudaVersion, flags, PFN type). Versions are the ones
 * cudart 13 asks for (reference/cuda-interposition.md §1.2, §10 C). The field is the name libcuda
 * exports, used when the driver has no cuGetProcAddress_v2 (the stub library, an old driver);
 * `_v1` marks the three whose plain names cuda.h redefines to _v2 (the name without `_v1`). */
#define REAL_CUDA_FUNCS(X)                                                                         \
    X(cuGetProcAddress_v1, "cuGetProcAddress", 11030, 0, PFN_cuGetProcAddress_v11030)              \
    X(cuMemAlloc_v2, "cuMemAlloc", 3020, 0, PFN_cuMemAlloc_v3020)                                  \
    X(cuMemFree_v2, "cuMemFree", 3020, 0, PFN_cuMemFree_v3020)                                     \
    X(cuMemAllocPitch_v2, "cuMemAllocPitch", 3020, 0, PFN_cuMemAllocPitch_v3020)                   \
    X(cuMemAllocManaged, "cuMemAllocManaged", 6000, 0, PFN_cuMemAllocManaged_v6000)                \
    X(cuMemGetInfo_v2, "cuMemGetInfo", 3020, 0, PFN_cuMemGetInfo_v3020)                            \
    X(cuMemGetAddressRange_v2, "cuMemGetAddressRange", 3020, 0, PFN_cuMemGetAddressRange_v3020)    \
    X(cuMemAllocAsync, "cuMemAllocAsync", 11020, 0, PFN_cuMemAllocAsync_v11020)                    \
    X(cuMemAllocAsync_ptsz, "cuMemAllocAsync", 11020, 2, PFN_cuMemAllocAsync_v11020_ptsz)          \
    X(cuMemFreeAsync, "cuMemFreeAsync", 11020, 0, PFN_cuMemFreeAsync_v11020)                       \
    X(cuMemFreeAsync_ptsz, "cuMemFreeAsync", 11020, 2, PFN_cuMemFreeAsync_v11020_ptsz)             \
    X(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 11020, 0,                                \
      PFN_cuMemAllocFromPoolAsync_v11020)                                                          \
    X(cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync", 11020, 2,                           \
      PFN_cuMemAllocFromPoolAsync_v11020_ptsz)                                                     \
    X(cuMemCreate, "cuMemCreate", 10020, 0, PFN_cuMemCreate_v10020)                                \
    X(cuMemRelease, "cuMemRelease", 10020, 0, PFN_cuMemRelease_v10020)                             \
    X(cuMemMap, "cuMemMap", 10020, 0, PFN_cuMemMap_v10020)                                         \
    X(cuMemUnmap, "cuMemUnmap", 10020, 0, PFN_cuMemUnmap_v10020)                                   \
    X(cuMemAddressReserve, "cuMemAddressReserve", 10020, 0, PFN_cuMemAddressReserve_v10020)        \
    X(cuMemAddressFree, "cuMemAddressFree", 10020, 0, PFN_cuMemAddressFree_v10020)                 \
    X(cuMemSetAccess, "cuMemSetAccess", 10020, 0, PFN_cuMemSetAccess_v10020)                       \
    X(cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity", 10020, 0,                    \
      PFN_cuMemGetAllocationGranularity_v10020)                                                    \
    X(cuStreamSynchronize, "cuStreamSynchronize", 2000, 0, PFN_cuStreamSynchronize_v2000)          \
    X(cuPointerGetAttribute, "cuPointerGetAttribute", 4000, 0, PFN_cuPointerGetAttribute_v4000)    \
    X(cuPointerGetAttributes, "cuPointerGetAttributes", 7000, 0, PFN_cuPointerGetAttributes_v7000) \
    X(cuDevicePrimaryCtxReset_v1, "cuDevicePrimaryCtxReset", 7000, 0,                              \
      PFN_cuDevicePrimaryCtxReset_v11000) /* same C signature */                                   \
    X(cuDevicePrimaryCtxReset_v2, "cuDevicePrimaryCtxReset", 11000, 0,                             \
      PFN_cuDevicePrimaryCtxReset_v11000)                                                          \
    X(cuDevicePrimaryCtxRelease_v1, "cuDevicePrimaryCtxRelease", 7000, 0,                          \
      PFN_cuDevicePrimaryCtxRelease_v11000) /* same C signature */                                 \
    X(cuDevicePrimaryCtxRelease_v2, "cuDevicePrimaryCtxRelease", 11000, 0,                         \
      PFN_cuDevicePrimaryCtxRelease_v11000)                                                        \
    X(cuCtxDestroy_v2, "cuCtxDestroy", 4000, 0, PFN_cuCtxDestroy_v4000)                            \
    X(cuStreamDestroy_v2, "cuStreamDestroy", 4000, 0, PFN_cuStreamDestroy_v4000)                   \
    X(cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess", 4000, 0, PFN_cuCtxEnablePeerAccess_v4000)    \
    /* cuprof's own use */                                                                         \
    X(cuDeviceGet, "cuDeviceGet", 2000, 0, PFN_cuDeviceGet_v2000)                                  \
    X(cuDeviceGetCount, "cuDeviceGetCount", 2000, 0, PFN_cuDeviceGetCount_v2000)                   \
    X(cuCtxGetCurrent, "cuCtxGetCurrent", 4000, 0, PFN_cuCtxGetCurrent_v4000)                      \
    X(cuCtxGetDevice, "cuCtxGetDevice", 2000, 0, PFN_cuCtxGetDevice_v2000)                         \
    X(cuCtxPushCurrent_v2, "cuCtxPushCurrent", 4000, 0, PFN_cuCtxPushCurrent_v4000)                \
    X(cuCtxPopCurrent_v2, "cuCtxPopCurrent", 4000, 0, PFN_cuCtxPopCurrent_v4000)                   \
    X(cuCtxSynchronize, "cuCtxSynchronize", 2000, 0, PFN_cuCtxSynchronize_v2000)                   \
    X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000, 0,                               \
      PFN_cuDevicePrimaryCtxRetain_v7000)                                                          \
    X(cuDevicePrimaryCtxGetState, "cuDevicePrimaryCtxGetState", 7000, 0,                           \
      PFN_cuDevicePrimaryCtxGetState_v7000)                                                        \
    X(cuEventCreate, "cuEventCreate", 2000, 0, PFN_cuEventCreate_v2000)                            \
    X(cuEventRecord, "cuEventRecord", 2000, 0, PFN_cuEventRecord_v2000)                            \
    X(cuEventQuery, "cuEventQuery", 2000, 0, PFN_cuEventQuery_v2000)                               \
    X(cuEventSynchronize, "cuEventSynchronize", 2000, 0, PFN_cuEventSynchronize_v2000)             \
    X(cuEventDestroy_v2, "cuEventDestroy", 4000, 0, PFN_cuEventDestroy_v4000)                      \
    X(cuStreamIsCapturing, "cuStreamIsCapturing", 10000, 0, PFN_cuStreamIsCapturing_v10000)        \
    X(cuDeviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool", 11020, 0,                            \
      PFN_cuDeviceGetDefaultMemPool_v11020)                                                        \
    X(cuMemPoolSetAttribute, "cuMemPoolSetAttribute", 11020, 0, PFN_cuMemPoolSetAttribute_v11020)

struct real_cuda {
    PFN_cuGetProcAddress_v12000 cuGetProcAddress_v2; /* NULL with a driver that lacks it */
#define REAL_CUDA_FIELD(field, base, version, flags, type) type field;
    REAL_CUDA_FUNCS(REAL_CUDA_FIELD)
#undef REAL_CUDA_FIELD
};

/* The driver's entry points, or NULL when libcuda.so.1 cannot be loaded. Entries the driver does
 * not have are NULL. Loads the driver with dlopen(RTLD_NOLOAD) first, then RTLD_NOW. Inline:
 * once resolved with a driver it is one load (every wrapper asks, some several times). */
extern _Atomic(const struct real_cuda *) real_cuda_resolved;
const struct real_cuda *real_cuda_get_slow(void);
static inline const struct real_cuda *
real_cuda_get(void)
{
    const struct real_cuda *r = atomic_load_explicit(&real_cuda_resolved, memory_order_acquire);
    return __builtin_expect(r != NULL, 1) ? r : real_cuda_get_slow();
}

/* The driver object's own definition of an exported name (dlsym on the libcuda.so.1 handle),
 * never one of cuprof's; NULL when it has none or the driver is not loaded yet. */
void *real_cuda_driver_own(const char *name);

/* What stands for one of cuprof's own exports that a lookup handed back as "real": the next
 * definition of `name` after libcuprof (a layer's own wrapper), else the driver's own; NULL when
 * neither exists. */
void *real_cuda_instead_of_self(const char *name);

/* True on the thread that is resolving the entry points right now: a driver that forwards to
 * another through dlsym reaches cuprof's own lookup again from inside the resolution. */
bool real_cuda_resolving(void);

/* The driver lookup cuprof forwards to (NULL before the resolution has found it); a plain read
 * for comparisons, without waiting for the resolution. */
void *real_cuda_lookup_in_use(void);

/* One line (the first time for each name, CUPROF_LOG=info) saying that the driver handed out
 * cuprof's own `name` and has no definition of its own to use instead. */
void real_cuda_say_missing(const char *name);

/* In a wrapper: declares `real` and returns CUDA_ERROR_NOT_INITIALIZED when the driver is
 * missing (a program cannot reach a wrapper without a driver; answer as an uninitialised driver
 * would), CUDA_ERROR_NOT_FOUND when it has no entry point of its own (what its lookup answers
 * for a missing one). */
#define REAL_CUDA_OR_FAIL(real, field)                                                             \
    const struct real_cuda *real = real_cuda_get();                                                \
    if (real == NULL)                                                                              \
        return CUDA_ERROR_NOT_INITIALIZED;                                                         \
    if (real->field == NULL)                                                                       \
        return CUDA_ERROR_NOT_FOUND;

#endif
