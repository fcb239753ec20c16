/* driver_user.c: libdriver_user.so, a library that allocates through the driver API (with the
 * context its caller made current), like NCCL or cuBLAS's workspace code. */
#include <cuda.h>

#include "lib_users.h"

#define EXPORT __attribute__((visibility("default")))

EXPORT int
driver_user_alloc(uint64_t *ptr, size_t size)
{
    CUdeviceptr p = 0;
    CUresult r = cuMemAlloc(&p, size);
    *ptr = (uint64_t)p;
    return (int)r;
}

EXPORT int
driver_user_alloc_managed(uint64_t *ptr, size_t size)
{
    CUdeviceptr p = 0;
    CUresult r = cuMemAllocManaged(&p, size, CU_MEM_ATTACH_GLOBAL);
    *ptr = (uint64_t)p;
    return (int)r;
}

EXPORT int
driver_user_free(uint64_t ptr)
{
    return (int)cuMemFree((CUdeviceptr)ptr);
}
