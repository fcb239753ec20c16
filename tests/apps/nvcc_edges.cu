// nvcc_edges: launches and memory calls at their edges (bad grids and blocks, functions that
// are no kernels, size 0, NULL, bogus, interior and double frees, an impossible request, async
// frees, cuMemAlloc/cuMemFree, an interior cuMemGetAddressRange). One line per case, compared
// with what NVIDIA's runtime 13.0 and driver 580 printed on an H200
// (tests/integration/nvcc/real/nvcc_edges.out).
#include <cstdio>
#include <cuda.h>
#include <cuda_runtime.h>

__global__ void
k(int *p)
{
    if (p)
        p[threadIdx.x] = 1;
}
static void
not_a_kernel(int *)
{
}

#define SHOW(name, expr)                                                                           \
    do {                                                                                           \
        cudaError_t e_ = (expr);                                                                   \
        cudaError_t l_ = cudaGetLastError();                                                       \
        printf("%s=%s last=%s\n", name, cudaGetErrorName(e_), cudaGetErrorName(l_));               \
    } while (0)
#define LAUNCH(name, g, b, s)                                                                      \
    do {                                                                                           \
        k<<<g, b, s>>>(nullptr);                                                                   \
        cudaError_t p_ = cudaPeekAtLastError();                                                    \
        cudaError_t l_ = cudaGetLastError();                                                       \
        printf("%s=%s last=%s after=%s\n", name, cudaGetErrorName(p_), cudaGetErrorName(l_),       \
               cudaGetErrorName(cudaGetLastError()));                                              \
    } while (0)
static const char *
cu(CUresult r)
{
    const char *s = nullptr;
    cuGetErrorName(r, &s);
    return s ? s : "?";
}

int
main()
{
    SHOW("init", cudaFree(0));
    LAUNCH("grid0", 0, 256, 0);
    LAUNCH("block0", 1, 0, 0);
    LAUNCH("block2048", 1, 2048, 0);
    LAUNCH("blockz65", dim3(1), dim3(1, 1, 65), 0);
    LAUNCH("gridy65536", dim3(1, 65536, 1), dim3(1), 0);
    LAUNCH("gridx2^31", dim3(2147483648u, 1, 1), dim3(1), 0);
    LAUNCH("smem200k", 1, 32, 200 * 1024);
    LAUNCH("smem48k", 1, 32, 48 * 1024);
    LAUNCH("ok", 1, 32, 0);
    void *args[] = {nullptr};
    int *np = nullptr;
    args[0] = &np;
    SHOW("launch_not_kernel",
         cudaLaunchKernel((const void *)not_a_kernel, dim3(1), dim3(1), args, 0, 0));
    SHOW("launch_null", cudaLaunchKernel((const void *)nullptr, dim3(1), dim3(1), args, 0, 0));
    cudaFuncAttributes fa;
    SHOW("attrs_not_kernel", cudaFuncGetAttributes(&fa, (const void *)not_a_kernel));
    SHOW("setattr_not_kernel",
         cudaFuncSetAttribute((const void *)not_a_kernel,
                              cudaFuncAttributeMaxDynamicSharedMemorySize, 1000));
    SHOW("sync", cudaDeviceSynchronize());
    void *p = (void *)0x1;
    SHOW("malloc0", cudaMalloc(&p, 0));
    printf("malloc0_ptr_null=%d\n", p == nullptr);
    SHOW("free_null", cudaFree(nullptr));
    SHOW("free_bogus", cudaFree((void *)0x12345));
    void *a = nullptr;
    SHOW("malloc_4k", cudaMalloc(&a, 4096));
    SHOW("free_interior", cudaFree((char *)a + 256));
    SHOW("free_once", cudaFree(a));
    SHOW("free_twice", cudaFree(a));
    SHOW("malloc_huge", cudaMalloc(&p, (size_t)1 << 50));
    SHOW("malloc_after_huge", cudaMalloc(&a, 4096));
    SHOW("free_after_huge", cudaFree(a));
    cudaStream_t s;
    SHOW("stream", cudaStreamCreate(&s));
    p = (void *)0x1;
    SHOW("malloc_async0", cudaMallocAsync(&p, 0, s));
    printf("malloc_async0_ptr_null=%d\n", p == nullptr);
    SHOW("free_async_null", cudaFreeAsync(nullptr, s));
    SHOW("malloc_async", cudaMallocAsync(&a, 1000, s));
    SHOW("free_async", cudaFreeAsync(a, s));
    SHOW("free_async_twice", cudaFreeAsync(a, s));
    SHOW("stream_sync", cudaStreamSynchronize(s));
    SHOW("stream_destroy", cudaStreamDestroy(s));
    CUdeviceptr d = 0;
    printf("cuMemAlloc0=%s\n", cu(cuMemAlloc(&d, 0)));
    printf("cuMemFree0=%s\n", cu(cuMemFree(0)));
    printf("cuMemFree_bogus=%s\n", cu(cuMemFree((CUdeviceptr)0x12345)));
    printf("cuMemAlloc=%s\n", cu(cuMemAlloc(&d, 1000)));
    printf("cuMemFree_interior=%s\n", cu(cuMemFree(d + 256)));
    printf("cuMemFree=%s\n", cu(cuMemFree(d)));
    printf("cuMemFree_twice=%s\n", cu(cuMemFree(d)));
    CUdeviceptr base = 0;
    size_t sz = 0;
    SHOW("malloc_for_range", cudaMalloc(&a, 3000));
    CUresult rr = cuMemGetAddressRange(&base, &sz, (CUdeviceptr)a + 100);
    printf("getrange_interior=%s size=%zu base_ok=%d\n", cu(rr), sz, base == (CUdeviceptr)a);
    SHOW("free_range", cudaFree(a));
    size_t f = 0, t = 0;
    SHOW("meminfo", cudaMemGetInfo(&f, &t));
    printf("done\n");
    return 0;
}
