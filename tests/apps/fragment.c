/* fragment: free memory in pieces too small for the next request. Allocates COUNT blocks of
 * BLOCK_MIB MiB, frees every second one from the second on (1, 3, ...), then asks for
 * REQUEST_MIB MiB: with PyTorch's rules (a 20 MiB segment holds two 8 MiB blocks and a 4 MiB
 * rest) on a 60 MiB device the defaults 8 5 16 leave 36 MiB cached in 12 MiB pieces and the
 * request fails. Frees everything before it exits. Arguments: BLOCK_MIB COUNT REQUEST_MIB.
 * Output: fragment: blocks=N live=L request=ok|failed */
#include "app_common.h"

#include <cuda_runtime_api.h>

#define APP        "fragment"
#define MAX_BLOCKS 64

int
main(int argc, char **argv)
{
    size_t block = (size_t)(argc > 1 ? atoi(argv[1]) : 8) << 20;
    int count = argc > 2 ? atoi(argv[2]) : 5;
    size_t request = (size_t)(argc > 3 ? atoi(argv[3]) : 16) << 20;
    APP_CHECK(APP, count > 0 && count <= MAX_BLOCKS, "COUNT in 1..64", count);
    void *p[MAX_BLOCKS] = {0};
    int live = 0;
    for (int i = 0; i < count; i++) {
        cudaError_t e = cudaMalloc(&p[i], block);
        APP_CHECK(APP, e == cudaSuccess, "cudaMalloc of a block", e);
        live++;
    }
    for (int i = 1; i < count; i += 2) {
        cudaError_t e = cudaFree(p[i]);
        APP_CHECK(APP, e == cudaSuccess, "cudaFree", e);
        p[i] = NULL;
        live--;
    }
    void *big = NULL;
    cudaError_t e = cudaMalloc(&big, request);
    APP_CHECK(APP, e == cudaSuccess || e == cudaErrorMemoryAllocation, "the request", e);
    (void)cudaGetLastError();
    printf(APP ": blocks=%d live=%d request=%s\n", count, live, e == cudaSuccess ? "ok" : "failed");
    if (big != NULL)
        (void)cudaFree(big);
    for (int i = 0; i < count; i++)
        if (p[i] != NULL)
            (void)cudaFree(p[i]);
    return 0;
}
