/* cudart_probe.c: a plain program on the REAL toolkit libcudart.so.13. On the simulated driver
 * cudart cannot finish initialising (no private export tables); the test checks that the program
 * ends the same with and without cuprof and that every driver lookup went through cuprof. */
#include <cuda_runtime_api.h>
#include <stdio.h>

int
main(void)
{
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, 1 << 20);
    printf("cudart_probe: cudaMalloc=%s\n", cudaGetErrorName(e));
    if (e == cudaSuccess)
        e = cudaFree(p);
    return e == cudaSuccess ? 0 : 3;
}
