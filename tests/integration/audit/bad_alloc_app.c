/* bad_alloc_app.c: three cudaMalloc/cudaFree rounds whose device allocations a lying driver
 * (fakecuda/) may answer with a NULL, misaligned or duplicate pointer. Prints only what the
 * program can see of each answer (codes, NULL, alignment, equal to an earlier pointer), so the
 * output is the same with and without cuprof. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>

static void
show(const char *name, cudaError_t rc, const void *p, const void *earlier)
{
    printf("%s: rc=%d null=%d misaligned=%d same_as_a=%d\n", name, (int)rc, p == NULL,
           (int)((uintptr_t)p % 256 != 0), p != NULL && p == earlier);
}

int
main(void)
{
    if (cudaFree(0) != cudaSuccess)
        return 1;
    void *a = NULL, *b = NULL, *c = NULL;
    cudaError_t ra = cudaMalloc(&a, 4 << 20);
    cudaError_t rb = cudaMalloc(&b, 64 << 20);
    cudaError_t rc = cudaMalloc(&c, 1000);
    show("a", ra, a, NULL);
    show("b", rb, b, a);
    show("c", rc, c, a);
    /* Freed newest first: with duplicates, the first free of the address is the one that
     * succeeds, with or without cuprof. */
    printf("free c=%d\n", (int)cudaFree(c));
    printf("free b=%d\n", (int)cudaFree(b));
    printf("free a=%d\n", (int)cudaFree(a));
    (void)cudaGetLastError();
    return 0;
}
