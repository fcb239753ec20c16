/* faults: a fixed sequence of runtime calls whose return codes the fault-injection test compares
 * with and without the shim under SIMCUDA_FAIL rules: a small and a 3 GiB allocation, a free that
 * is retried when it fails, a stream-ordered pair, a device sync and 200 alloc/free cycles.
 * Output (one line): faults: a=RC big=RC c=RC free_c=RC free_c_retry=RC async=RC free_async=RC
 *   sync=RC free_a=RC free_big=RC loop_fail=N
 * Lock: none (one thread). Hot path: n/a (test program). */
#include <cuda_runtime_api.h>
#include <stdio.h>

int
main(void)
{
    void *a = NULL, *big = NULL, *c = NULL, *d = NULL;
    cudaStream_t s;
    int ra = cudaMalloc(&a, (size_t)1 << 20);
    int rbig = cudaMalloc(&big, (size_t)3 << 30);
    int rc = cudaMalloc(&c, (size_t)4 << 20);
    int rfc = rc == 0 ? (int)cudaFree(c) : -1;
    int rfc2 = rfc > 0 ? (int)cudaFree(c) : -1;
    (void)cudaGetLastError();
    int rd = -1, rfd = -1;
    if (cudaStreamCreate(&s) == 0) {
        rd = cudaMallocAsync(&d, (size_t)8 << 20, s);
        rfd = rd == 0 ? (int)cudaFreeAsync(d, s) : -1;
        (void)cudaStreamSynchronize(s);
        (void)cudaStreamDestroy(s);
    }
    (void)cudaGetLastError();
    int rsync = cudaDeviceSynchronize();
    int rfa = ra == 0 ? (int)cudaFree(a) : -1;
    int rfb = rbig == 0 ? (int)cudaFree(big) : -1;
    int loop_fail = 0;
    for (int i = 0; i < 200; i++) {
        void *p = NULL;
        if (cudaMalloc(&p, ((size_t)1 << 16) * (size_t)(1 + i % 37)) != 0 || cudaFree(p) != 0)
            loop_fail++;
    }
    printf("faults: a=%d big=%d c=%d free_c=%d free_c_retry=%d async=%d free_async=%d sync=%d "
           "free_a=%d free_big=%d loop_fail=%d\n",
           ra, rbig, rc, rfc, rfc2, rd, rfd, rsync, rfa, rfb, loop_fail);
    return 0;
}
