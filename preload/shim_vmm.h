/* shim_vmm.h: the virtual memory management wrappers (cuMemCreate/Release/Map/Unmap/
 *   AddressReserve/AddressFree): always passed through; mappings are recorded, never cached.
 * Locking: a small mutex protects the handle table (handle -> device), never held across a call.
 * Hot path: no. */
#ifndef CUPROF_SHIM_VMM_H
#define CUPROF_SHIM_VMM_H

#include <cuda.h>

CUresult shim_vmm_create(CUmemGenericAllocationHandle *handle, size_t size,
                         const CUmemAllocationProp *prop, unsigned long long flags);
CUresult shim_vmm_release(CUmemGenericAllocationHandle handle);
CUresult shim_vmm_map(CUdeviceptr ptr, size_t size, size_t offset,
                      CUmemGenericAllocationHandle handle, unsigned long long flags);
CUresult shim_vmm_unmap(CUdeviceptr ptr, size_t size);
CUresult shim_vmm_address_reserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                  unsigned long long flags);
CUresult shim_vmm_address_free(CUdeviceptr ptr, size_t size);

/* Fork handlers for the handle table (lifecycle.c): lock across fork, fresh lock in the child. */
void shim_vmm_fork_prepare(void);
void shim_vmm_fork_parent(void);
void shim_vmm_reset_after_fork(void);

#endif
