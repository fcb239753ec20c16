/* shim_query.c: query wrappers (see shim_query.h). */
#include "preload/shim_query.h"

#include "preload/real_cuda.h"

CUresult
shim_query_mem_get_info(size_t *free_bytes, size_t *total_bytes)
{
    /* Pass-through: cached segments are real device allocations, so the device's numbers are
     * the process footprint the program would see. */
    REAL_CUDA_OR_FAIL(real, cuMemGetInfo_v2)
    return real->cuMemGetInfo_v2(free_bytes, total_bytes);
}

CUresult
shim_query_address_range(CUdeviceptr *base, size_t *size, CUdeviceptr dptr)
{
    REAL_CUDA_OR_FAIL(real, cuMemGetAddressRange_v2)
    return real->cuMemGetAddressRange_v2(base, size, dptr);
}

CUresult
shim_query_pointer_attribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    REAL_CUDA_OR_FAIL(real, cuPointerGetAttribute)
    return real->cuPointerGetAttribute(data, attribute, ptr);
}

CUresult
shim_query_pointer_attributes(unsigned int count, CUpointer_attribute *attributes, void **data,
                              CUdeviceptr ptr)
{
    REAL_CUDA_OR_FAIL(real, cuPointerGetAttributes)
    return real->cuPointerGetAttributes(count, attributes, data, ptr);
}
