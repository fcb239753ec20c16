/* double_free_app.c: frees one runtime allocation twice through cudaFree and one driver
 * allocation twice through cuMemFree, and prints the codes it gets. test_double_free.py runs it
 * with and without cuprof and finds the marked lines below in this source: cuprof's double-free
 * report must name them (function and line) as the first frames of "freed at"/"allocated at". */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdio.h>

/* noinline: each call site keeps its own function frame, whatever the optimisation level. */
__attribute__((noinline)) static int
runtime_double_free(void)
{
    void *p = NULL;
    if (cudaMalloc(&p, 4096) != cudaSuccess) /* MARK: rt-alloc */
        return 1;
    cudaError_t first = cudaFree(p); /* MARK: rt-free-first */
    cudaError_t again = cudaFree(p); /* MARK: rt-free-again */
    printf("runtime: first=%d again=%d\n", (int)first, (int)again);
    /* The runtime keeps the error for cudaGetLastError, as it does without cuprof. */
    printf("runtime: last=%d\n", (int)cudaGetLastError());
    return 0;
}

__attribute__((noinline)) static int
driver_double_free(void)
{
    CUdeviceptr d = 0;
    if (cuMemAlloc(&d, 8192) != CUDA_SUCCESS) /* MARK: drv-alloc */
        return 1;
    CUresult first = cuMemFree(d); /* MARK: drv-free-first */
    CUresult again = cuMemFree(d); /* MARK: drv-free-again */
    printf("driver: first=%d again=%d\n", (int)first, (int)again);
    return 0;
}

int
main(void)
{
    /* cudaFree(0) creates the primary context, current for the driver calls too. */
    if (cudaFree(0) != cudaSuccess)
        return 1;
    if (runtime_double_free() != 0 || driver_double_free() != 0)
        return 1;
    /* Everything still works after the errors. */
    void *q = NULL;
    cudaError_t later = cudaMalloc(&q, 100);
    printf("later: malloc=%d free=%d\n", (int)later, (int)cudaFree(q));
    return 0;
}
