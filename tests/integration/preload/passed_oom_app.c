/* passed_oom_app.c: memory cuprof passes through to the driver, asked for while cuprof's cache
 * holds a free segment. On a 100 MiB simulated device a 60 MiB cudaMalloc freed again is, under
 * cache mode, a cached 60 MiB segment; a 60 MiB cudaMallocManaged, then (with the 60 MiB cached
 * again) a 60 MiB cudaMallocFromPoolAsync from a pool of the program's own must succeed as
 * without cuprof. Last, 200 MiB of managed memory, which no one can serve. Prints one line per
 * call with its error; the test runs it without cuprof and under it and compares. */
#include <cuda_runtime_api.h>
#include <stdio.h>

#define MIB ((size_t)1 << 20)

/* 60 MiB allocated and freed: cached by cuprof's cache mode, back to the driver without it. */
static void
cache_some(void)
{
    void *p = NULL;
    printf("malloc=%s\n", cudaGetErrorName(cudaMalloc(&p, 60 * MIB)));
    printf("free=%s\n", cudaGetErrorName(cudaFree(p)));
}

int
main(void)
{
    void *managed = NULL, *pooled = NULL, *huge = NULL;
    cache_some();
    cudaError_t e = cudaMallocManaged(&managed, 60 * MIB, cudaMemAttachGlobal);
    printf("managed=%s\n", cudaGetErrorName(e));
    (void)cudaGetLastError();
    if (managed != NULL)
        (void)cudaFree(managed);
    cache_some();
    cudaMemPool_t pool = NULL;
    struct cudaMemPoolProps props = {0};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    printf("pool=%s\n", cudaGetErrorName(cudaMemPoolCreate(&pool, &props)));
    e = cudaMallocFromPoolAsync(&pooled, 60 * MIB, pool, 0);
    printf("from_pool=%s\n", cudaGetErrorName(e));
    (void)cudaGetLastError();
    if (pooled != NULL)
        (void)cudaFreeAsync(pooled, 0);
    (void)cudaStreamSynchronize(0);
    (void)cudaMemPoolDestroy(pool);
    e = cudaMallocManaged(&huge, 200 * MIB, cudaMemAttachGlobal);
    printf("huge=%s\n", cudaGetErrorName(e));
    (void)cudaGetLastError();
    return 0;
}
