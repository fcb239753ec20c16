/* nvcc_freed_card: built by nvcc -cudart shared. Allocates all the device's free memory (in one
 * request where the driver serves it, else in 256 MiB and then 2 MiB pieces), frees it, and only
 * then launches its kernel for the first time: under CUDA's lazy loading (the default since 12.2)
 * that launch is when the driver loads the kernel's code into device memory. Without cuprof the
 * freed memory is the driver's again and the launch succeeds; under cuprof's cache the launch
 * must succeed too (the cache hands the memory back when the driver finds none).
 * Output: one "name=error" line per step (no sizes: compared with a run without cuprof). */
#include <cstdbool>
#include <cstdio>
#include <cuda_runtime.h>

#define MIB        ((size_t)1 << 20)
#define MAX_CHUNKS 8192

__global__ void
touch(int *flag)
{
    if (flag != nullptr)
        *flag = 1;
}

static void *chunk[MAX_CHUNKS];

int
main()
{
    size_t free_bytes = 0, total = 0;
    printf("mem_info=%s\n", cudaGetErrorName(cudaMemGetInfo(&free_bytes, &total)));
    size_t n = 0;
    bool whole = free_bytes > 0 && cudaMalloc(&chunk[0], free_bytes) == cudaSuccess;
    if (whole)
        n = 1;
    for (size_t piece = 256 * MIB; !whole && piece >= 2 * MIB;
         piece = piece > 2 * MIB ? 2 * MIB : 0)
        while (n < MAX_CHUNKS && cudaMalloc(&chunk[n], piece) == cudaSuccess)
            n++;
    (void)cudaGetLastError(); /* the request that did not fit */
    printf("filled=%s\n", n > 0 ? "yes" : "no");
    cudaError_t freed = cudaSuccess;
    for (size_t i = 0; i < n; i++)
        if (cudaFree(chunk[i]) != cudaSuccess)
            freed = cudaErrorInvalidValue;
    printf("free=%s\n", cudaGetErrorName(freed));
    touch<<<1, 1>>>(nullptr);
    printf("launch=%s\n", cudaGetErrorName(cudaGetLastError()));
    printf("synchronize=%s\n", cudaGetErrorName(cudaDeviceSynchronize()));
    return 0;
}
