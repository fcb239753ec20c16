/* shim_vmm.c: VMM wrappers (see shim_vmm.h). */
#include "preload/shim_vmm.h"

#include "preload/real_cuda.h"

CUresult
shim_vmm_create(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                unsigned long long flags)
{
    REAL_CUDA_OR_FAIL(real, cuMemCreate)
    return real->cuMemCreate(handle, size, prop, flags);
}

CUresult
shim_vmm_release(CUmemGenericAllocationHandle handle)
{
    REAL_CUDA_OR_FAIL(real, cuMemRelease)
    return real->cuMemRelease(handle);
}

CUresult
shim_vmm_map(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
             unsigned long long flags)
{
    REAL_CUDA_OR_FAIL(real, cuMemMap)
    return real->cuMemMap(ptr, size, offset, handle, flags);
}

CUresult
shim_vmm_unmap(CUdeviceptr ptr, size_t size)
{
    REAL_CUDA_OR_FAIL(real, cuMemUnmap)
    return real->cuMemUnmap(ptr, size);
}

CUresult
shim_vmm_address_reserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                         unsigned long long flags)
{
    REAL_CUDA_OR_FAIL(real, cuMemAddressReserve)
    return real->cuMemAddressReserve(ptr, size, alignment, addr, flags);
}

CUresult
shim_vmm_address_free(CUdeviceptr ptr, size_t size)
{
    REAL_CUDA_OR_FAIL(real, cuMemAddressFree)
    return real->cuMemAddressFree(ptr, size);
}
