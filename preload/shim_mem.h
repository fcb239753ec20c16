/* shim_mem.h: the driver allocation wrappers (cuMemAlloc_v2, cuMemFree_v2, pitched, managed and
 *   stream-ordered calls, and the default pool's trim): the mode decides between the allocator,
 * record-only and pass-through. Locking: holds no cuprof lock itself; the allocator takes its
 * device lock inside. Hot path: yes. */
#ifndef CUPROF_SHIM_MEM_H
#define CUPROF_SHIM_MEM_H

#include <cuda.h>

CUresult shim_mem_alloc(CUdeviceptr *dptr, size_t size);
CUresult shim_mem_free(CUdeviceptr dptr);
/* The answer this thread's next cuMemFree_v2 of dptr gets from cuprof's wrapper, at once and
 * untouched by cuprof: cudaFree's cached fast path (shim_rt.c) tried the free itself and failed,
 * and hands the call to the runtime so that the runtime records the error as its own, without a
 * second try. shim_mem_free_answer_clear drops an answer no call took. Thread-local. */
void shim_mem_free_answer_next(CUdeviceptr dptr, CUresult result);
void shim_mem_free_answer_clear(void);
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
/* cuMemPoolTrimTo: a device's default pool trimmed in cache mode also empties cuprof's cache of
 * that device (which serves the pool's requests), unless the cache reserves no more than
 * min_bytes_to_keep. Takes the device's allocator lock then. */
CUresult shim_mem_pool_trim_to(CUmemoryPool pool, size_t min_bytes_to_keep);

#endif
