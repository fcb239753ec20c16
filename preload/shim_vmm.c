/* shim_vmm.c: VMM wrappers (see shim_vmm.h). Physical handles are remembered with their device
 * at cuMemCreate; each successful cuMemMap is recorded as a segment of pool VMM and each
 * cuMemUnmap of that exact range forgets it. Nothing here is ever cached. */
#include "preload/shim_vmm.h"

#include "allocator/allocator.h"
#include "preload/addr_map.h"
#include "preload/real_cuda.h"
#include "preload/shim_call.h"

/* handle -> (device, size) */
static struct addr_map handles = ADDR_MAP_INIT;

CUresult
shim_vmm_create(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                unsigned long long flags)
{
    REAL_CUDA_OR_FAIL(real, cuMemCreate)
    CUresult result = real->cuMemCreate(handle, size, prop, flags);
    struct shim_call call;
    if (result == CUDA_ERROR_OUT_OF_MEMORY && prop != NULL &&
        prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
        SHIM_CALL_BEGIN(&call, SHIM_CALL_ALLOC)) {
        if (shim_call_release_for_driver(&call, result, prop->location.id))
            result = real->cuMemCreate(handle, size, prop, flags);
        shim_call_note_refusal(&call, result, prop->location.id, size, 0, TRACE_POOL_VMM,
                               "cuMemCreate");
        shim_call_end(&call);
    }
    /* Out of host memory for the table: the handle's mappings just go unrecorded. */
    if (result == CUDA_SUCCESS && prop != NULL &&
        prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
        !addr_map_put(&handles, *handle, (uint64_t)prop->location.id, size))
        return result;
    return result;
}

CUresult
shim_vmm_release(CUmemGenericAllocationHandle handle)
{
    REAL_CUDA_OR_FAIL(real, cuMemRelease)
    CUresult result = real->cuMemRelease(handle);
    if (result == CUDA_SUCCESS)
        (void)addr_map_remove(&handles, handle, NULL, NULL);
    return result;
}

CUresult
shim_vmm_map(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
             unsigned long long flags)
{
    REAL_CUDA_OR_FAIL(real, cuMemMap)
    struct shim_call call;
    if (!SHIM_CALL_BEGIN(&call, SHIM_CALL_ALLOC))
        return real->cuMemMap(ptr, size, offset, handle, flags);
    CUresult result = real->cuMemMap(ptr, size, offset, handle, flags);
    uint64_t device = 0;
    /* The memory lives on the handle's device, whichever context is current. */
    if (result == CUDA_SUCCESS && addr_map_get(&handles, handle, &device, NULL) &&
        device < (uint64_t)allocator_device_count(call.rt->alloc))
        shim_call_track_external(&call, (int)device, ptr, size, 0, TRACE_POOL_VMM, "cuMemMap");
    shim_call_end(&call);
    return result;
}

CUresult
shim_vmm_unmap(CUdeviceptr ptr, size_t size)
{
    REAL_CUDA_OR_FAIL(real, cuMemUnmap)
    struct shim_call call;
    if (!SHIM_CALL_BEGIN(&call, SHIM_CALL_FREE))
        return real->cuMemUnmap(ptr, size);
    CUresult result = real->cuMemUnmap(ptr, size);
    if (result == CUDA_SUCCESS)
        (void)allocator_untrack_external(call.rt->alloc, ptr, call.stack_id);
    shim_call_end(&call);
    return result;
}

CUresult
shim_vmm_address_reserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                         unsigned long long flags)
{
    /* Reserving address space uses no device memory: nothing to record. */
    REAL_CUDA_OR_FAIL(real, cuMemAddressReserve)
    return real->cuMemAddressReserve(ptr, size, alignment, addr, flags);
}

void
shim_vmm_fork_prepare(void)
{
    addr_map_fork_prepare(&handles);
}

void
shim_vmm_fork_parent(void)
{
    addr_map_fork_parent(&handles);
}

void
shim_vmm_reset_after_fork(void)
{
    /* The child keeps the handles (its copy of the allocator keeps their mappings too). */
    addr_map_reset_after_fork(&handles);
}

CUresult
shim_vmm_address_free(CUdeviceptr ptr, size_t size)
{
    REAL_CUDA_OR_FAIL(real, cuMemAddressFree)
    return real->cuMemAddressFree(ptr, size);
}
