/* shim_query.c: query wrappers (see shim_query.h). */
#include "preload/shim_query.h"

#include "allocator/allocator.h"
#include "preload/guard.h"
#include "preload/real_cuda.h"
#include "preload/shim_call.h"

CUresult
shim_query_mem_get_info(size_t *free_bytes, size_t *total_bytes)
{
    /* Pass-through: cached segments are real device allocations, so the device's numbers are
     * the process footprint the program would see with the memory held by its own cache. */
    REAL_CUDA_OR_FAIL(real, cuMemGetInfo_v2)
    return real->cuMemGetInfo_v2(free_bytes, total_bytes);
}

/* The block cuprof handed out that contains ptr (a sub-allocation of a cached segment). */
static bool
lookup_block(CUdeviceptr ptr, uint64_t *base, size_t *size)
{
    struct cuprof_runtime *rt = shim_call_runtime_if_ready();
    int device;
    return !guard_active() && rt != NULL && rt->alloc != NULL &&
           allocator_lookup(rt->alloc, ptr, &device, base, size);
}

CUresult
shim_query_address_range(CUdeviceptr *base, size_t *size, CUdeviceptr dptr)
{
    REAL_CUDA_OR_FAIL(real, cuMemGetAddressRange_v2)
    uint64_t block_base;
    size_t block_size;
    if (!lookup_block(dptr, &block_base, &block_size))
        return real->cuMemGetAddressRange_v2(base, size, dptr);
    if (base != NULL)
        *base = (CUdeviceptr)block_base;
    if (size != NULL)
        *size = block_size;
    return CUDA_SUCCESS;
}

static bool
is_range_attribute(CUpointer_attribute attribute)
{
    return attribute == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR ||
           attribute == CU_POINTER_ATTRIBUTE_RANGE_SIZE;
}

static void
write_range(void *data, CUpointer_attribute attribute, uint64_t base, size_t size)
{
    if (attribute == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
        *(CUdeviceptr *)data = (CUdeviceptr)base;
    else
        *(size_t *)data = size;
}

CUresult
shim_query_pointer_attribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    REAL_CUDA_OR_FAIL(real, cuPointerGetAttribute)
    uint64_t base;
    size_t size;
    if (data == NULL || !is_range_attribute(attribute) || !lookup_block(ptr, &base, &size))
        return real->cuPointerGetAttribute(data, attribute, ptr);
    write_range(data, attribute, base, size);
    return CUDA_SUCCESS;
}

CUresult
shim_query_pointer_attributes(unsigned int count, CUpointer_attribute *attributes, void **data,
                              CUdeviceptr ptr)
{
    REAL_CUDA_OR_FAIL(real, cuPointerGetAttributes)
    /* The driver answers every attribute (and validates them); only the range is corrected. */
    CUresult result = real->cuPointerGetAttributes(count, attributes, data, ptr);
    uint64_t base;
    size_t size;
    if (result != CUDA_SUCCESS || attributes == NULL || data == NULL ||
        !lookup_block(ptr, &base, &size))
        return result;
    for (unsigned int i = 0; i < count; i++)
        if (data[i] != NULL && is_range_attribute(attributes[i]))
            write_range(data[i], attributes[i], base, size);
    return result;
}
