/* shim_query.h: the query wrappers that must see through sub-allocation: cuMemGetInfo_v2 (the
 *   driver's figures, plus in cache mode the cached memory no block of the program uses, which
 *   the cache hands back when the driver runs short), cuMemGetAddressRange_v2 and
 *   cuPointerGetAttribute(s): a block answers as an allocation of its own of the size asked for,
 *   with a buffer ID of its own and the IPC capability cuIpcGetMemHandle grants it, and cuprof's
 *   memory outside every block the program holds (cached, freed, a block's rounding) as the
 *   driver answers where nothing is; cuIpcGetMemHandle, whose handle names a whole driver
 *   allocation.
 * Locking: allocator_range_of takes the device lock of the device holding the address,
 *   allocator_releasable_bytes that of the current device.
 * Hot path: no. */
#ifndef CUPROF_SHIM_QUERY_H
#define CUPROF_SHIM_QUERY_H

#include <cuda.h>

CUresult shim_query_mem_get_info(size_t *free_bytes, size_t *total_bytes);
CUresult shim_query_address_range(CUdeviceptr *base, size_t *size, CUdeviceptr dptr);
CUresult shim_query_pointer_attribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr);
CUresult shim_query_pointer_attributes(unsigned int count, CUpointer_attribute *attributes,
                                       void **data, CUdeviceptr ptr);
/* cuIpcGetMemHandle: refused (CUDA_ERROR_NOT_SUPPORTED, one log line) for a block cut from the
 * middle of a cuprof segment, whose handle would open at the segment's start elsewhere, and
 * (CUDA_ERROR_INVALID_VALUE, as the driver refuses stream-ordered memory) for a block the cache
 * served to cuMemAllocAsync. */
CUresult shim_query_ipc_handle(CUipcMemHandle *handle, CUdeviceptr dptr);

#endif
