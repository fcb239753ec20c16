/* refused_free_app.c: cudaFree while the device refuses to synchronize (run with
 * SIMCUDA_FAIL=sync:nth=1, which stands in for a CUDA graph capture that forbids the call: the
 * runtime's cudaFree then fails with cudaErrorStreamCaptureUnsupported, measured on an H200).
 * In cache mode cuprof's free synchronizes first: it must fail the same way and keep the block,
 * so that the second cudaFree of the same pointer succeeds, and the runtime must hold the error
 * as its last error, as it does for the driver's own refusal. Prints one line per call. */
#include <cuda_runtime_api.h>
#include <stdio.h>

int
main(void)
{
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, 4096);
    printf("malloc=%s\n", cudaGetErrorName(e));
    e = cudaFree(p);
    /* The runtime holds the refusal as its last error, as it holds any driver error. */
    cudaError_t peek = cudaPeekAtLastError();
    cudaError_t last = cudaGetLastError();
    printf("free1=%s peek=%s last=%s then=%s\n", cudaGetErrorName(e), cudaGetErrorName(peek),
           cudaGetErrorName(last), cudaGetErrorName(cudaPeekAtLastError()));
    printf("free2=%s\n", cudaGetErrorName(cudaFree(p)));
    printf("free3=%s\n", cudaGetErrorName(cudaFree(p)));
    return 0;
}
