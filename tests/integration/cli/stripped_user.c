/* stripped_user: calls the stripped library's entry point (stripped_lib.c) twice, and allocates
 * through functions named as NVIDIA's statically linked runtime names its own
 * (libcudart_static_<40 hex digits>, what nvcc's default build puts ahead of the program's frames).
 * Output: "stripped_user: handles=2 runtime_bytes=B". Lines marked `@name` are checked. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

int sblasCreate(void **handle);

#define RUNTIME_BYTES (3u << 20)

__attribute__((noinline)) int
libcudart_static_4d8b33a106dceb3c07a56e26de61f545ff6e5ec8(void **p, size_t n)
{
    int rc = cudaMalloc(p, n) == cudaSuccess ? 0 : 1;
    __asm__ volatile("" ::: "memory");
    return rc;
}

__attribute__((noinline)) int
libcudart_static_0028031a846b44ea26c2c079c3f6a04c41d82424(void **p, size_t n)
{
    int rc = libcudart_static_4d8b33a106dceb3c07a56e26de61f545ff6e5ec8(p, n);
    __asm__ volatile("" ::: "memory");
    return rc;
}

int
main(void)
{
    void *h1 = NULL, *h2 = NULL, *buf = NULL;
    int rc = sblasCreate(&h1) | sblasCreate(&h2); /* @create */
    if (rc != 0) {
        printf("stripped_user: FAIL sblasCreate\n");
        return 1;
    }
    size_t n = RUNTIME_BYTES;
    rc = libcudart_static_0028031a846b44ea26c2c079c3f6a04c41d82424(&buf, n); /* @runtime */
    if (rc != 0) {
        printf("stripped_user: FAIL runtime\n");
        return 1;
    }
    printf("stripped_user: handles=2 runtime_bytes=%u\n", RUNTIME_BYTES);
    return 0;
}
