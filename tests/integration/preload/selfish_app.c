/* selfish_app.c: allocates, asks for the memory info, frees, and prints each call's result (run
 * on tests/integration/preload/selfish/, a driver without cuMemGetInfo_v2 of its own). */
#include <cuda_runtime_api.h>
#include <stdio.h>

int
main(void)
{
    void *p = NULL;
    size_t free_bytes = 0, total_bytes = 0;
    cudaError_t alloc = cudaMalloc(&p, 1 << 20);
    cudaError_t info = cudaMemGetInfo(&free_bytes, &total_bytes);
    cudaError_t release = cudaFree(p);
    printf("selfish_app: malloc=%d meminfo=%d free=%d\n", (int)alloc, (int)info, (int)release);
    return alloc == cudaSuccess && release == cudaSuccess ? 0 : 1;
}
