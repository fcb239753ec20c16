/* capture_free_app.c: cudaFree and cudaMalloc while a stream captures in global mode, which
 * forbids both (cudaErrorStreamCaptureUnsupported), and what the runtime then holds as its last
 * error (cudaPeekAtLastError, cudaGetLastError): the program must see the same answers with and
 * without cuprof. In cache mode `a` is a block of the cache and a cached block would fit the
 * cudaMalloc, so cuprof's fast path meets both calls. Prints one line per call. */
#include <cuda_runtime_api.h>
#include <stdio.h>

/* One call's answer, then the runtime's last error (read after it, and reset). */
static void
show(const char *label, cudaError_t e)
{
    cudaError_t last = cudaGetLastError();
    printf("%s=%s last=%s\n", label, cudaGetErrorName(e), cudaGetErrorName(last));
}

int
main(void)
{
    void *a = NULL, *b = NULL, *c = NULL;
    cudaStream_t s;
    cudaGraph_t g = NULL;
    if (cudaMalloc(&a, 1000) != cudaSuccess || cudaMalloc(&b, 1000) != cudaSuccess ||
        cudaFree(b) != cudaSuccess ||
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
        printf("capture_free_app: setup failed\n");
        return 1;
    }
    show("begin", cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    cudaError_t e = cudaFree(a);
    cudaError_t peek = cudaPeekAtLastError();
    printf("free_in_capture=%s peek=%s", cudaGetErrorName(e), cudaGetErrorName(peek));
    cudaError_t last = cudaGetLastError();
    peek = cudaPeekAtLastError();
    printf(" last=%s then=%s\n", cudaGetErrorName(last), cudaGetErrorName(peek));
    show("malloc_in_capture", cudaMalloc(&c, 1000));
    show("end", cudaStreamEndCapture(s, &g));
    show("free_after", cudaFree(a));
    show("free_again", cudaFree(a)); /* the first cudaFree in the capture kept the block */
    cudaStreamDestroy(s);
    return 0;
}
