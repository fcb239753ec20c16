/* pool_trim_app.c: a program that gives its freed stream-ordered memory back by trimming the
 * device's default pool (as PyTorch's cudaMallocAsync backend does on empty_cache):
 * an 8 MiB cudaMallocAsync freed, then cudaMemPoolTrimTo on a pool of its own (the default pool's
 * memory stays), on the default pool keeping 1 GiB (more than it holds: stays), on the default
 * pool keeping nothing (given back); then with a block live (its memory stays), and after a
 * cudaMalloc freed, through the driver's cuMemPoolTrimTo (everything given back). Prints
 * name=error per call (compared with a run without cuprof). */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdio.h>

#define MIB ((size_t)1 << 20)

static int failures;

static void
show(const char *name, cudaError_t e)
{
    printf("%s=%s\n", name, cudaGetErrorName(e));
    failures += e != cudaSuccess;
}

int
main(void)
{
    cudaStream_t stream;
    cudaMemPool_t own, fallback;
    void *p = NULL, *q = NULL;
    struct cudaMemPoolProps props = {.allocType = cudaMemAllocationTypePinned,
                                     .location = {.type = cudaMemLocationTypeDevice, .id = 0}};
    show("stream_create", cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    show("malloc_async", cudaMallocAsync(&p, 8 * MIB, stream));
    show("free_async", cudaFreeAsync(p, stream));
    show("synchronize", cudaStreamSynchronize(stream));
    show("pool_create", cudaMemPoolCreate(&own, &props));
    show("trim_own", cudaMemPoolTrimTo(own, 0));
    show("default_pool", cudaDeviceGetDefaultMemPool(&fallback, 0));
    show("trim_default_keep_1g", cudaMemPoolTrimTo(fallback, 1024 * MIB));
    show("trim_default", cudaMemPoolTrimTo(fallback, 0));
    show("malloc_async_kept", cudaMallocAsync(&p, 8 * MIB, stream));
    show("trim_default_live", cudaMemPoolTrimTo(fallback, 0));
    show("free_async_kept", cudaFreeAsync(p, stream));
    show("synchronize", cudaStreamSynchronize(stream));
    show("malloc", cudaMalloc(&q, 4 * MIB));
    show("free", cudaFree(q));
    CUresult r = cuMemPoolTrimTo((CUmemoryPool)fallback, 0);
    printf("driver_trim_default=%d\n", (int)r);
    failures += r != CUDA_SUCCESS;
    show("pool_destroy", cudaMemPoolDestroy(own));
    show("stream_destroy", cudaStreamDestroy(stream));
    return failures != 0;
}
