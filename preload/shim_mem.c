/* shim_mem.c: driver allocation wrappers (see shim_mem.h). */
#include "preload/shim_mem.h"

#include "preload/real_cuda.h"

CUresult
shim_mem_alloc(CUdeviceptr *dptr, size_t size)
{
    REAL_CUDA_OR_FAIL(real, cuMemAlloc_v2)
    return real->cuMemAlloc_v2(dptr, size);
}

CUresult
shim_mem_free(CUdeviceptr dptr)
{
    REAL_CUDA_OR_FAIL(real, cuMemFree_v2)
    return real->cuMemFree_v2(dptr);
}

CUresult
shim_mem_alloc_pitch(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                     unsigned int element_size)
{
    REAL_CUDA_OR_FAIL(real, cuMemAllocPitch_v2)
    return real->cuMemAllocPitch_v2(dptr, pitch, width, height, element_size);
}

CUresult
shim_mem_alloc_managed(CUdeviceptr *dptr, size_t size, unsigned int flags)
{
    REAL_CUDA_OR_FAIL(real, cuMemAllocManaged)
    return real->cuMemAllocManaged(dptr, size, flags);
}

CUresult
shim_mem_alloc_async(CUdeviceptr *dptr, size_t size, CUstream stream)
{
    REAL_CUDA_OR_FAIL(real, cuMemAllocAsync)
    return real->cuMemAllocAsync(dptr, size, stream);
}

CUresult
shim_mem_alloc_async_ptsz(CUdeviceptr *dptr, size_t size, CUstream stream)
{
    REAL_CUDA_OR_FAIL(real, cuMemAllocAsync_ptsz)
    return real->cuMemAllocAsync_ptsz(dptr, size, stream);
}

CUresult
shim_mem_free_async(CUdeviceptr dptr, CUstream stream)
{
    REAL_CUDA_OR_FAIL(real, cuMemFreeAsync)
    return real->cuMemFreeAsync(dptr, stream);
}

CUresult
shim_mem_free_async_ptsz(CUdeviceptr dptr, CUstream stream)
{
    REAL_CUDA_OR_FAIL(real, cuMemFreeAsync_ptsz)
    return real->cuMemFreeAsync_ptsz(dptr, stream);
}

CUresult
shim_mem_alloc_from_pool_async(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream stream)
{
    REAL_CUDA_OR_FAIL(real, cuMemAllocFromPoolAsync)
    return real->cuMemAllocFromPoolAsync(dptr, size, pool, stream);
}

CUresult
shim_mem_alloc_from_pool_async_ptsz(CUdeviceptr *dptr, size_t size, CUmemoryPool pool,
                                    CUstream stream)
{
    REAL_CUDA_OR_FAIL(real, cuMemAllocFromPoolAsync_ptsz)
    return real->cuMemAllocFromPoolAsync_ptsz(dptr, size, pool, stream);
}
