/* nvcc_kernels: built by nvcc -cudart shared. Launches a kernel with <<<>>> (a good launch, an
 * empty grid, an oversized block, a host function that is no kernel), round-trips a __device__
 * variable through cudaMemcpyToSymbol/FromSymbol, updates a __managed__ variable and
 * cudaMallocManaged memory from the host, and leaves one cudaMalloc allocation live. Every
 * allocating call carries an "alloc:NAME" comment, where tests/integration/nvcc finds its line.
 * Nothing printed depends on a kernel having run, so the output is the same on the simulated
 * device (where launches run no code) and on a GPU.
 * Output: "alloc NAME SIZE" per allocation, one "name=value" line per step, then
 *   nvcc_kernels: allocs=A frees=F live_bytes=B */
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            printf("nvcc_kernels: FAIL %s: %s\n", #call, cudaGetErrorName(e_));                    \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

__device__ int scale;
__managed__ int ticks;

__global__ void
add_scaled(int *a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        a[i] += scale;
}

static void
not_a_kernel(int *, int)
{
}

static unsigned long long allocs, frees, live;

static void
count_alloc(const char *name, size_t size)
{
    printf("alloc %s %zu\n", name, size);
    allocs++;
}

int
main()
{
    const int n = 4096;
    int *dev = nullptr;
    CK(cudaMalloc(&dev, n * sizeof(int))); // alloc:dev
    count_alloc("dev", n * sizeof(int));
    CK(cudaMemset(dev, 0, n * sizeof(int)));

    int s = 7, back = 0;
    size_t size = 0;
    CK(cudaMemcpyToSymbol(scale, &s, sizeof s));
    CK(cudaMemcpyFromSymbol(&back, scale, sizeof back));
    CK(cudaGetSymbolSize(&size, scale));
    printf("symbol=%d size=%zu\n", back, size);
    ticks += 41; // a __managed__ variable, used in place by host code
    ticks++;
    printf("managed_var=%d\n", ticks);

    add_scaled<<<(n + 255) / 256, 256>>>(dev, n);
    printf("launch=%s\n", cudaGetErrorName(cudaGetLastError()));
    printf("sync=%s\n", cudaGetErrorName(cudaDeviceSynchronize()));
    add_scaled<<<0, 256>>>(dev, n);
    printf("empty_grid=%s\n", cudaGetErrorName(cudaGetLastError()));
    add_scaled<<<1, 2048>>>(dev, n);
    printf("big_block=%s\n", cudaGetErrorName(cudaGetLastError()));
    int *arg = dev;
    int count = n;
    void *args[] = {&arg, &count};
    cudaError_t e = cudaLaunchKernel((const void *)not_a_kernel, dim3(1), dim3(1), args, 0, 0);
    printf("not_a_kernel=%s last=%s\n", cudaGetErrorName(e), cudaGetErrorName(cudaGetLastError()));
    e = cudaLaunchKernel((const void *)add_scaled, dim3(2), dim3(128), args, 0, 0);
    printf("launch_api=%s\n", cudaGetErrorName(e));
    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, add_scaled));
    printf("max_threads=%d\n", fa.maxThreadsPerBlock);

    float *managed = nullptr;
    CK(cudaMallocManaged(&managed, 1000 * sizeof(float))); // alloc:managed
    count_alloc("managed", 1000 * sizeof(float));
    double sum = 0;
    for (int i = 0; i < 1000; i++)
        managed[i] = 0.5f * i;
    for (int i = 0; i < 1000; i++)
        sum += managed[i];
    printf("managed_sum=%.1f\n", sum);
    CK(cudaFree(managed));
    frees++;

    int host[16], check[16];
    for (int i = 0; i < 16; i++)
        host[i] = i * i;
    CK(cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(check, dev, sizeof check, cudaMemcpyDeviceToHost));
    int same = 1;
    for (int i = 0; i < 16; i++)
        same &= host[i] == check[i];
    printf("copy_back=%d\n", same);
    CK(cudaFree(dev));
    frees++;

    void *kept = nullptr;
    CK(cudaMalloc(&kept, 3000)); // alloc:kept
    count_alloc("kept", 3000);
    live += 3000;
    printf("nvcc_kernels: allocs=%llu frees=%llu live_bytes=%llu\n", allocs, frees, live);
    return 0;
}
