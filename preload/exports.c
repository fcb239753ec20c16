/* exports.c: every CUDA symbol libcuprof.so exports, as one-line stubs that hand over to the
 *   core (PipeWire's v4l2 shim style). The list must match libcuprof.map and the export test.
 * Locking: none here.
 * Hot path: yes (one extra call per intercepted function). */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include "preload/hooks.h"
#include "preload/real_dl.h"
#include "preload/shim_ctx.h"
#include "preload/shim_mem.h"
#include "preload/shim_peer.h"
#include "preload/shim_query.h"
#include "preload/shim_rt.h"
#include "preload/shim_vmm.h"

#define EXPORT __attribute__((visibility("default")))

/* libcuda exports the older ABIs under their plain names too; cuda.h maps those names to _v2. */
#undef cuGetProcAddress
#undef cuDevicePrimaryCtxReset
#undef cuDevicePrimaryCtxRelease

/* ---- dlsym: the program's return address identifies the caller for RTLD_NEXT. */
EXPORT REAL_DL_UNINSTRUMENTED void *
dlsym(void *handle, const char *name)
{
    return hooks_dlsym(handle, name, __builtin_return_address(0));
}

/* ---- Driver API (names as libcuda.so.1 exports them; cuda.h's macros add the _v2). */
EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int version,
                                         cuuint64_t flags);
EXPORT CUresult CUDAAPI
cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    return hooks_get_proc_address(symbol, pfn, version, flags);
}

EXPORT CUresult CUDAAPI
cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                    CUdriverProcAddressQueryResult *status)
{
    return hooks_get_proc_address_v2(symbol, pfn, version, flags, status);
}

EXPORT CUresult CUDAAPI
cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    return shim_mem_alloc(dptr, bytesize);
}

EXPORT CUresult CUDAAPI
cuMemFree_v2(CUdeviceptr dptr)
{
    return shim_mem_free(dptr);
}

EXPORT CUresult CUDAAPI
cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                   unsigned int element_size)
{
    return shim_mem_alloc_pitch(dptr, pitch, width, height, element_size);
}

EXPORT CUresult CUDAAPI
cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    return shim_mem_alloc_managed(dptr, bytesize, flags);
}

EXPORT CUresult CUDAAPI
cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
    return shim_query_mem_get_info(free_bytes, total_bytes);
}

EXPORT CUresult CUDAAPI
cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream stream)
{
    return shim_mem_alloc_async(dptr, bytesize, stream);
}

EXPORT CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream stream);
EXPORT CUresult CUDAAPI
cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream stream)
{
    return shim_mem_alloc_async_ptsz(dptr, bytesize, stream);
}

EXPORT CUresult CUDAAPI
cuMemFreeAsync(CUdeviceptr dptr, CUstream stream)
{
    return shim_mem_free_async(dptr, stream);
}

EXPORT CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream);
EXPORT CUresult CUDAAPI
cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream)
{
    return shim_mem_free_async_ptsz(dptr, stream);
}

EXPORT CUresult CUDAAPI
cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream stream)
{
    return shim_mem_alloc_from_pool_async(dptr, bytesize, pool, stream);
}

EXPORT CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                     CUmemoryPool pool, CUstream stream);
EXPORT CUresult CUDAAPI
cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream stream)
{
    return shim_mem_alloc_from_pool_async_ptsz(dptr, bytesize, pool, stream);
}

EXPORT CUresult CUDAAPI
cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
            unsigned long long flags)
{
    return shim_vmm_create(handle, size, prop, flags);
}

EXPORT CUresult CUDAAPI
cuMemRelease(CUmemGenericAllocationHandle handle)
{
    return shim_vmm_release(handle);
}

EXPORT CUresult CUDAAPI
cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
         unsigned long long flags)
{
    return shim_vmm_map(ptr, size, offset, handle, flags);
}

EXPORT CUresult CUDAAPI
cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    return shim_vmm_unmap(ptr, size);
}

EXPORT CUresult CUDAAPI
cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                    unsigned long long flags)
{
    return shim_vmm_address_reserve(ptr, size, alignment, addr, flags);
}

EXPORT CUresult CUDAAPI
cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    return shim_vmm_address_free(ptr, size);
}

EXPORT CUresult CUDAAPI
cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr dptr)
{
    return shim_query_address_range(base, size, dptr);
}

EXPORT CUresult CUDAAPI
cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    return shim_query_pointer_attribute(data, attribute, ptr);
}

EXPORT CUresult CUDAAPI
cuPointerGetAttributes(unsigned int count, CUpointer_attribute *attributes, void **data,
                       CUdeviceptr ptr)
{
    return shim_query_pointer_attributes(count, attributes, data, ptr);
}

/* cuda.h maps the unsuffixed names to _v2; the 7.0 ABIs keep their plain names in libcuda. */
EXPORT CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev);
EXPORT CUresult CUDAAPI
cuDevicePrimaryCtxReset(CUdevice dev)
{
    return shim_ctx_primary_reset(dev);
}

EXPORT CUresult CUDAAPI
cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    return shim_ctx_primary_reset_v2(dev);
}

EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev);
EXPORT CUresult CUDAAPI
cuDevicePrimaryCtxRelease(CUdevice dev)
{
    return shim_ctx_primary_release(dev);
}

EXPORT CUresult CUDAAPI
cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    return shim_ctx_primary_release_v2(dev);
}

EXPORT CUresult CUDAAPI
cuCtxDestroy_v2(CUcontext ctx)
{
    return shim_ctx_destroy(ctx);
}

EXPORT CUresult CUDAAPI
cuStreamDestroy_v2(CUstream stream)
{
    return shim_stream_destroy(stream);
}

EXPORT CUresult CUDAAPI
cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
    return shim_peer_ctx_enable(peerContext, Flags);
}

/* ---- Runtime API (only reached with a shared libcudart; unversioned names interpose
 * cudaMalloc@libcudart.so.13). */
EXPORT cudaError_t CUDARTAPI
cudaMalloc(void **ptr, size_t size)
{
    return shim_rt_malloc(ptr, size);
}

EXPORT cudaError_t CUDARTAPI
cudaFree(void *ptr)
{
    return shim_rt_free(ptr);
}

EXPORT cudaError_t CUDARTAPI
cudaMallocAsync(void **ptr, size_t size, cudaStream_t stream)
{
    return shim_rt_malloc_async(ptr, size, stream);
}

EXPORT cudaError_t CUDARTAPI cudaMallocAsync_ptsz(void **ptr, size_t size, cudaStream_t stream);
EXPORT cudaError_t CUDARTAPI
cudaMallocAsync_ptsz(void **ptr, size_t size, cudaStream_t stream)
{
    return shim_rt_malloc_async_ptsz(ptr, size, stream);
}

EXPORT cudaError_t CUDARTAPI
cudaFreeAsync(void *ptr, cudaStream_t stream)
{
    return shim_rt_free_async(ptr, stream);
}

EXPORT cudaError_t CUDARTAPI cudaFreeAsync_ptsz(void *ptr, cudaStream_t stream);
EXPORT cudaError_t CUDARTAPI
cudaFreeAsync_ptsz(void *ptr, cudaStream_t stream)
{
    return shim_rt_free_async_ptsz(ptr, stream);
}

EXPORT cudaError_t CUDARTAPI
cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream)
{
    return shim_rt_malloc_from_pool_async(ptr, size, pool, stream);
}

EXPORT cudaError_t CUDARTAPI cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size,
                                                          cudaMemPool_t pool, cudaStream_t stream);
EXPORT cudaError_t CUDARTAPI
cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream)
{
    return shim_rt_malloc_from_pool_async_ptsz(ptr, size, pool, stream);
}

EXPORT cudaError_t CUDARTAPI
cudaMallocPitch(void **ptr, size_t *pitch, size_t width, size_t height)
{
    return shim_rt_malloc_pitch(ptr, pitch, width, height);
}

EXPORT cudaError_t CUDARTAPI
cudaMalloc3D(struct cudaPitchedPtr *pitched, struct cudaExtent extent)
{
    return shim_rt_malloc_3d(pitched, extent);
}

EXPORT cudaError_t CUDARTAPI
cudaMallocManaged(void **ptr, size_t size, unsigned int flags)
{
    return shim_rt_malloc_managed(ptr, size, flags);
}

EXPORT cudaError_t CUDARTAPI
cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    return shim_rt_mem_get_info(free_bytes, total_bytes);
}

EXPORT cudaError_t CUDARTAPI
cudaDeviceReset(void)
{
    return shim_rt_device_reset();
}

EXPORT cudaError_t CUDARTAPI
cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags)
{
    return shim_rt_device_enable_peer_access(peerDevice, flags);
}
