/* mem_info_app.c: a program that sizes its work by the free memory cudaMemGetInfo reports (as
 * inference servers size their caches): half the device allocated and freed with a small block,
 * the same through the default pool (cudaMallocAsync), then all the free memory but 64 MiB in one
 * request. Prints each call's error and how far the free memory is from where it started (no
 * sizes: the test and scripts/gpu-check compare the output with a run without cuprof, where
 * freed memory is the driver's again). */
#include <cuda_runtime_api.h>
#include <stdio.h>

#define MIB ((size_t)1 << 20)

static size_t start_free;

/* The free memory's distance from the start, in MiB (negative: less free than at the start). */
static long long
free_delta_mib(void)
{
    size_t free_b = 0, total = 0;
    if (cudaMemGetInfo(&free_b, &total) != cudaSuccess)
        return -1000000;
    return ((long long)free_b - (long long)start_free) / (long long)MIB;
}

int
main(void)
{
    size_t total = 0;
    if (cudaMemGetInfo(&start_free, &total) != cudaSuccess)
        return 2;
    size_t half = start_free / 2 / (2 * MIB) * (2 * MIB);
    void *p = NULL, *small = NULL;
    printf("malloc=%s\n", cudaGetErrorName(cudaMalloc(&p, half)));
    printf("malloc_small=%s\n", cudaGetErrorName(cudaMalloc(&small, 1000)));
    printf("free=%s\n", cudaGetErrorName(cudaFree(p)));
    printf("free_small=%s\n", cudaGetErrorName(cudaFree(small)));
    printf("after_free: free_delta_mib=%lld\n", free_delta_mib());
    p = NULL;
    printf("malloc_async=%s\n", cudaGetErrorName(cudaMallocAsync(&p, half, 0)));
    printf("free_async=%s\n", cudaGetErrorName(cudaFreeAsync(p, 0)));
    printf("sync=%s\n", cudaGetErrorName(cudaStreamSynchronize(0)));
    printf("after_async: free_delta_mib=%lld\n", free_delta_mib());
    size_t free_b = 0;
    if (cudaMemGetInfo(&free_b, &total) != cudaSuccess || free_b < 128 * MIB)
        return 3;
    p = NULL;
    printf("malloc_most=%s\n", cudaGetErrorName(cudaMalloc(&p, free_b - 64 * MIB)));
    printf("free_most=%s\n", cudaGetErrorName(cudaFree(p)));
    printf("after_most: free_delta_mib=%lld\n", free_delta_mib());
    return 0;
}
