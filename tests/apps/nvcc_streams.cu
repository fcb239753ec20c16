/* nvcc_streams: built by nvcc -cudart shared. Two non-blocking streams; each round allocates a
 * buffer per stream with cudaMallocAsync, fills it with cudaMemsetAsync, launches a kernel on the
 * stream (runs nothing on the simulated device: the kernel only reads), copies the buffer back
 * and frees it with cudaFreeAsync, all stream-ordered. Every allocating call carries an
 * "alloc:NAME" comment that tests/integration/nvcc finds.
 * Output: "alloc NAME SIZE" per allocation, a checksum of the copied-back bytes per round, then
 *   nvcc_streams: allocs=A frees=F live_bytes=0 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            printf("nvcc_streams: FAIL %s: %s\n", #call, cudaGetErrorName(e_));                    \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define ROUNDS 3

__global__ void
count_nonzero(const unsigned char *a, size_t n, unsigned long long *out)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n && a[i] != 0 && out != nullptr)
        atomicAdd(out, 1ull);
}

int
main()
{
    cudaStream_t streams[2];
    for (int s = 0; s < 2; s++)
        CK(cudaStreamCreateWithFlags(&streams[s], cudaStreamNonBlocking));
    unsigned long long allocs = 0, frees = 0;
    static unsigned char host[2][1 << 20];
    for (int round = 0; round < ROUNDS; round++) {
        unsigned char *buf[2];
        size_t size[2];
        for (int s = 0; s < 2; s++) {
            size[s] = (size_t)(256 << 10) * (round + 1) + 4096 * s;
            CK(cudaMallocAsync(&buf[s], size[s], streams[s])); // alloc:async
            printf("alloc async %zu\n", size[s]);
            allocs++;
            CK(cudaMemsetAsync(buf[s], 16 * round + s + 1, size[s], streams[s]));
            count_nonzero<<<(unsigned)((size[s] + 255) / 256), 256, 0, streams[s]>>>(
                buf[s], size[s], nullptr);
            CK(cudaGetLastError());
            CK(cudaMemcpyAsync(host[s], buf[s], size[s], cudaMemcpyDeviceToHost, streams[s]));
            CK(cudaFreeAsync(buf[s], streams[s]));
            frees++;
        }
        unsigned long long sum = 0;
        for (int s = 0; s < 2; s++) {
            CK(cudaStreamSynchronize(streams[s]));
            for (size_t i = 0; i < size[s]; i++)
                sum += host[s][i];
        }
        printf("round=%d sum=%llu\n", round, sum);
    }
    for (int s = 0; s < 2; s++)
        CK(cudaStreamDestroy(streams[s]));
    printf("nvcc_streams: allocs=%llu frees=%llu live_bytes=0\n", allocs, frees);
    return 0;
}
