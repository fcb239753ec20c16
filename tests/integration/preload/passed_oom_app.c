/* passed_oom_app.c: memory cuprof passes through to the driver, asked for while cuprof's cache
 * holds a free segment. X is 3/5 of the device's free memory: X allocated with cudaMalloc and
 * freed again is, under cache mode, a cached segment the driver no longer has; X of managed
 * memory, then (with X cached again) X from a pool of the program's own must succeed as without
 * cuprof. Last, twice the device from that pool, which no one can serve. Prints one line per call
 * with its error (no sizes: the test and scripts/gpu-check compare the output with a run without
 * cuprof). */
#include <cuda_runtime_api.h>
#include <stdio.h>

#define TWO_MIB ((size_t)2 << 20)

/* X allocated and freed: cached by cuprof's cache mode, back to the driver without it. */
static void
cache_some(size_t x)
{
    void *p = NULL;
    printf("malloc=%s\n", cudaGetErrorName(cudaMalloc(&p, x)));
    printf("free=%s\n", cudaGetErrorName(cudaFree(p)));
}

int
main(void)
{
    size_t free_b = 0, total = 0;
    if (cudaMemGetInfo(&free_b, &total) != cudaSuccess)
        return 2;
    size_t x = free_b / 5 * 3 / TWO_MIB * TWO_MIB;
    void *managed = NULL, *pooled = NULL, *huge = NULL;
    cache_some(x);
    cudaError_t e = cudaMallocManaged(&managed, x, cudaMemAttachGlobal);
    printf("managed=%s\n", cudaGetErrorName(e));
    (void)cudaGetLastError();
    if (managed != NULL)
        (void)cudaFree(managed);
    cache_some(x);
    cudaMemPool_t pool = NULL;
    struct cudaMemPoolProps props = {0};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    printf("pool=%s\n", cudaGetErrorName(cudaMemPoolCreate(&pool, &props)));
    e = cudaMallocFromPoolAsync(&pooled, x, pool, 0);
    printf("from_pool=%s\n", cudaGetErrorName(e));
    (void)cudaGetLastError();
    if (pooled != NULL)
        (void)cudaFreeAsync(pooled, 0);
    e = cudaMallocFromPoolAsync(&huge, 2 * total, pool, 0);
    printf("huge=%s\n", cudaGetErrorName(e));
    (void)cudaGetLastError();
    printf("sync=%s\n", cudaGetErrorName(cudaStreamSynchronize(0)));
    (void)cudaMemPoolDestroy(pool);
    return 0;
}
