/* reset_app.c: blocks live across cudaDeviceReset. Allocates (small, large, cached-free and
 * managed memory), resets the device, frees the stale pointers (each must fail with the real
 * error), allocates again and exits with one block live. Prints what it did, one line. */
#include <cuda_runtime_api.h>
#include <stdio.h>

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            printf("reset_app: %s failed: %d\n", #call, (int)e_);                                  \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int
main(void)
{
    void *a = NULL, *b = NULL, *c = NULL, *m = NULL, *d = NULL, *e = NULL;
    CK(cudaMalloc(&a, 1000));
    CK(cudaMalloc(&b, 5u << 20));
    CK(cudaMalloc(&c, 3000));
    CK(cudaFree(c)); /* cached by cuprof: its segment is still held at the reset */
    CK(cudaMallocManaged(&m, 4096, cudaMemAttachGlobal));
    CK(cudaDeviceReset());
    /* Stale pointers: the device no longer has them. */
    int stale_a = (int)cudaFree(a);
    int stale_b = (int)cudaFree(b);
    int stale_m = (int)cudaFree(m);
    (void)cudaGetLastError();
    CK(cudaMalloc(&d, 2000));
    CK(cudaMalloc(&e, 7u << 20));
    CK(cudaFree(d));
    printf("reset_app: allocs=6 frees=2 stale_a=%d stale_b=%d stale_m=%d live_bytes=%u\n", stale_a,
           stale_b, stale_m, 7u << 20);
    return 0;
}
