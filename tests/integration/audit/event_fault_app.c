/* event_fault_app.c: blocks freed on another stream than their own (cudaFreeAsync), which a
 * caching allocator may reuse only after an event on the freeing stream completes; run with
 * SIMCUDA_FAIL making cuEventQuery fail. Prints the codes it gets, including its own
 * cudaEventQuery's, which must be the device's whether cuprof is there or not. */
#include <cuda_runtime_api.h>
#include <stdio.h>

int
main(void)
{
    cudaStream_t s1, s2;
    if (cudaStreamCreate(&s1) != cudaSuccess || cudaStreamCreate(&s2) != cudaSuccess)
        return 1;
    int bad = 0;
    for (int i = 0; i < 5; i++) {
        void *p = NULL;
        bad += cudaMallocAsync(&p, 1 << 20, s1) != cudaSuccess;
        bad += cudaFreeAsync(p, s2) != cudaSuccess;
        bad += cudaStreamSynchronize(s2) != cudaSuccess;
    }
    /* The program's own query sees the injected error, as without cuprof. */
    cudaEvent_t ev;
    bad += cudaEventCreate(&ev) != cudaSuccess;
    bad += cudaEventRecord(ev, s1) != cudaSuccess;
    bad += cudaStreamSynchronize(s1) != cudaSuccess;
    int query = (int)cudaEventQuery(ev);
    bad += cudaEventDestroy(ev) != cudaSuccess;
    void *q = NULL;
    bad += cudaMallocAsync(&q, 1 << 20, s1) != cudaSuccess;
    bad += cudaFreeAsync(q, s1) != cudaSuccess;
    bad += cudaStreamSynchronize(s1) != cudaSuccess;
    printf("event_fault: failed calls=%d own query=%d\n", bad, query);
    return bad != 0;
}
