/* shim_mem.h: the driver allocation wrappers (cuMemAlloc_v2, cuMemFree_v2, pitched, managed and
 *   stream-ordered calls): the mode decides between the allocator, record-only and pass-through.
 * Locking: holds no cuprof lock itself; the allocator takes its device lock inside.
 * Hot path: yes. */
#ifndef CUPROF_SHIM_MEM_H
#define CUPROF_SHIM_MEM_H

#include <cuda.h>

CUresult shim_mem_alloc(CUdeviceptr *dptr, size_t size);
CUresult shim_mem_free(CUdeviceptr dptr);
CUresult shim_mem_alloc_pitch(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                              unsigned int element_size);
CUresult shim_mem_alloc_managed(CUdeviceptr *dptr, size_t size, unsigned int flags);
CUresult shim_mem_alloc_async(CUdeviceptr *dptr, size_t size, CUstream stream);
CUresult shim_mem_alloc_async_ptsz(CUdeviceptr *dptr, size_t size, CUstream stream);
CUresult shim_mem_free_async(CUdeviceptr dptr, CUstream stream);
CUresult shim_mem_free_async_ptsz(CUdeviceptr dptr, CUstream stream);
CUresult shim_mem_alloc_from_pool_async(CUdeviceptr *dptr, size_t size, CUmemoryPool pool,
                                        CUstream stream);
CUresult shim_mem_alloc_from_pool_async_ptsz(CUdeviceptr *dptr, size_t size, CUmemoryPool pool,
                                             CUstream stream);

#endif
