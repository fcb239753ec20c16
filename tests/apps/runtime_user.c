/* runtime_user.c: libruntime_user.so, a library that allocates through the CUDA runtime. */
#include <cuda_runtime_api.h>

#include "lib_users.h"

#define EXPORT __attribute__((visibility("default")))

/* Live allocations, kept like a real library's bookkeeping; it also keeps each call below from
 * being a tail call, so this library's frame is on the stack when cudaMalloc runs. */
static int live;

EXPORT int
runtime_user_alloc(void **ptr, size_t size)
{
    cudaError_t r = cudaMalloc(ptr, size);
    live += r == cudaSuccess;
    return (int)r;
}

EXPORT int
runtime_user_free(void *ptr)
{
    cudaError_t r = cudaFree(ptr);
    live -= r == cudaSuccess;
    return (int)r;
}
