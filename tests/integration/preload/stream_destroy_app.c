/* stream_destroy_app.c: streams that live for a few stream-ordered allocations and are
 * destroyed while the program goes on allocating and freeing with cudaFree. Under
 * free_sync:events cuprof records an event on every stream a device used at each free, so it
 * must stop using a stream the moment the program destroys it. Prints what it computed. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            printf("stream_destroy_app: %s failed: %d\n", #call, (int)e_);                         \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int
main(void)
{
    unsigned sum = 0;
    unsigned char host[4096];
    for (int round = 0; round < 16; round++) {
        cudaStream_t s;
        void *p = NULL, *q = NULL;
        CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        CK(cudaMallocAsync(&p, sizeof(host), s));
        CK(cudaMemsetAsync(p, round + 1, sizeof(host), s));
        CK(cudaMemcpyAsync(host, p, sizeof(host), cudaMemcpyDeviceToHost, s));
        CK(cudaStreamSynchronize(s));
        sum += host[round * 100];
        CK(cudaFreeAsync(p, s));
        CK(cudaStreamDestroy(s));
        /* A free after the destroy: events go on the streams still alive only. */
        CK(cudaMalloc(&q, 1000 + (size_t)round));
        CK(cudaMemset(q, 7, 1000));
        CK(cudaMemcpy(host, q, 1000, cudaMemcpyDeviceToHost));
        sum += host[999];
        CK(cudaFree(q));
    }
    printf("stream_destroy_app: rounds=16 sum=%u\n", sum);
    return 0;
}
