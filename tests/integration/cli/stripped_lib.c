/* stripped_lib.c: a library built the way vendors ship theirs (NVIDIA's cuBLAS among them):
 * stripped, so only its exported entry points have names. sblasCreate, the one entry point, asks
 * for its workspace through two internal functions, as cublasCreate_v2 does through offsets that
 * a stack shows as `libstripped_lib.so+0x1a2b`. */
#include <cuda_runtime_api.h>
#include <stddef.h>

#define SBLAS_WORKSPACE (4u << 20)

__attribute__((noinline)) static int
workspace_alloc(void **ws, size_t bytes)
{
    return cudaMalloc(ws, bytes) == cudaSuccess ? 0 : 1;
}

__attribute__((noinline)) static int
handle_init(void **ws)
{
    int rc = workspace_alloc(ws, SBLAS_WORKSPACE);
    __asm__ volatile("" ::: "memory"); /* no tail call: this frame stays on the stack */
    return rc;
}

__attribute__((visibility("default"))) int
sblasCreate(void **handle)
{
    int rc = handle_init(handle);
    __asm__ volatile("" ::: "memory");
    return rc;
}
