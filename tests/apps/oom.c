/* oom: allocates 256 MiB blocks with cudaMalloc until the device is full, checks the error is
 * cudaErrorMemoryAllocation and that it is not sticky (cudaPeekAtLastError keeps it,
 * cudaGetLastError returns then clears it), frees everything and allocates the same count again.
 * Output: oom: blocks=N error=cudaErrorMemoryAllocation peek=2 last=2 cleared=0 realloc=N
 *         free_before=BYTES free_full=BYTES */
#include "app_common.h"

#include <cuda_runtime_api.h>

#define APP        "oom"
#define BLOCK      ((size_t)256 << 20)
#define MAX_BLOCKS 4096

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        APP_CHECK(APP, e_ == cudaSuccess, #call, e_);                                              \
    } while (0)

static void *block[MAX_BLOCKS];

/* Allocates until failure; returns the count and the failing error. */
static int
fill(cudaError_t *err)
{
    int n = 0;
    for (;;) {
        APP_CHECK(APP, n < MAX_BLOCKS, "device larger than MAX_BLOCKS blocks", n);
        void *p = (void *)0x1; /* must be left alone or nulled on failure, never half-set */
        cudaError_t e = cudaMalloc(&p, BLOCK);
        if (e != cudaSuccess) {
            *err = e;
            return n;
        }
        block[n++] = p;
    }
}

int
main(void)
{
    size_t free_before = 0, free_full = 0, total = 0;
    CK(cudaMemGetInfo(&free_before, &total));
    cudaError_t err = cudaSuccess;
    int n = fill(&err);
    APP_CHECK(APP, err == cudaErrorMemoryAllocation, "cudaMalloc past capacity", err);
    CK(cudaMemGetInfo(&free_full, &total));
    APP_CHECK(APP, free_full < BLOCK, "free memory when full < one block", free_full);
    cudaError_t peek = cudaPeekAtLastError();
    cudaError_t last = cudaGetLastError();
    cudaError_t cleared = cudaGetLastError();
    for (int i = 0; i < n; i++)
        CK(cudaFree(block[i]));
    cudaError_t err2 = cudaSuccess;
    int again = fill(&err2);
    APP_CHECK(APP, err2 == cudaErrorMemoryAllocation, "second fill past capacity", err2);
    (void)cudaGetLastError();
    for (int i = 0; i < again; i++)
        CK(cudaFree(block[i]));
    printf(APP ": blocks=%d error=%s peek=%d last=%d cleared=%d realloc=%d free_before=%zu "
               "free_full=%zu\n",
           n, cudaGetErrorName(err), (int)peek, (int)last, (int)cleared, again, free_before,
           free_full);
    return 0;
}
