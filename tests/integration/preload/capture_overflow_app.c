/* capture_overflow_app.c: more global-mode captures at once (65) than cuprof follows one by one
 * (64: past them it counts every thread as forbidden), and meanwhile a thread in thread-local
 * mode, which none of them concerns, calls cudaMalloc and cudaMallocPitch: the driver allows
 * both. In cache mode cuprof hands them to the driver (it cannot tell), so the memory is the
 * driver's; cuprof must still record it, as trace mode would. Prints one line per answer. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>

#define CAPTURES 65

struct result {
    cudaError_t malloc_result, pitch_result;
    void *p, *q;
    size_t pitch;
};

static void *
thread_local_allocations(void *arg)
{
    struct result *r = arg;
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeThreadLocal;
    cudaThreadExchangeStreamCaptureMode(&mode);
    r->malloc_result = cudaMalloc(&r->p, 4096);
    r->pitch_result = cudaMallocPitch(&r->q, &r->pitch, 1000, 3);
    return NULL;
}

int
main(void)
{
    static cudaStream_t streams[CAPTURES];
    void *warm = NULL;
    /* A freed block the cache could have served the 4 KiB request from. */
    printf("warm=%s\n", cudaGetErrorName(cudaMalloc(&warm, 4096)));
    printf("warm_free=%s\n", cudaGetErrorName(cudaFree(warm)));
    int begun = 0;
    for (int i = 0; i < CAPTURES; i++)
        if (cudaStreamCreate(&streams[i]) == cudaSuccess &&
            cudaStreamBeginCapture(streams[i], cudaStreamCaptureModeGlobal) == cudaSuccess)
            begun++;
    printf("captures=%d\n", begun);
    struct result r = {cudaErrorUnknown, cudaErrorUnknown, NULL, NULL, 0};
    pthread_t t;
    pthread_create(&t, NULL, thread_local_allocations, &r);
    pthread_join(t, NULL);
    printf("other_malloc=%s\n", cudaGetErrorName(r.malloc_result));
    printf("other_pitch=%s pitch=%zu\n", cudaGetErrorName(r.pitch_result), r.pitch);
    int ended = 0;
    for (int i = 0; i < CAPTURES; i++) {
        cudaGraph_t g = NULL;
        if (cudaStreamEndCapture(streams[i], &g) == cudaSuccess &&
            cudaGraphDestroy(g) == cudaSuccess)
            ended++;
        cudaStreamDestroy(streams[i]);
    }
    printf("ended=%d\n", ended);
    printf("free=%s\n", cudaGetErrorName(cudaFree(r.p)));
    printf("free_pitch=%s\n", cudaGetErrorName(cudaFree(r.q)));
    return 0;
}
