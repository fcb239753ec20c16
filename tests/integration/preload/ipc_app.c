/* ipc_app.c: legacy CUDA IPC handles (cudaIpcGetMemHandle) for the first block of an
 * allocation, a block after it, an address inside the first, and a freed one. In cache mode
 * cuprof cuts small blocks from one segment, and a handle names a whole driver allocation: the
 * second block's handle would open at the segment's start in another process, so cuprof must
 * refuse it. Prints one line per case; the simulated handle's words are [magic, pid, allocation
 * start, size]. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static void
show(const char *name, void *ptr)
{
    cudaIpcMemHandle_t h;
    memset(&h, 0, sizeof(h));
    cudaError_t e = cudaIpcGetMemHandle(&h, ptr);
    uint64_t words[4];
    memcpy(words, h.reserved, sizeof(words));
    printf("%s=%s names_start=%d last=%s\n", name, cudaGetErrorName(e),
           e == cudaSuccess && words[2] == (uint64_t)(uintptr_t)ptr,
           cudaGetErrorName(cudaGetLastError()));
}

int
main(void)
{
    void *first = NULL, *second = NULL, *gone = NULL;
    if (cudaMalloc(&first, 1000) != cudaSuccess || cudaMalloc(&second, 1000) != cudaSuccess ||
        cudaMalloc(&gone, 1000) != cudaSuccess || cudaFree(gone) != cudaSuccess) {
        printf("ipc_app: allocation failed\n");
        return 1;
    }
    show("first", first);
    show("second", second);
    show("second_again", second);
    show("inside_first", (char *)first + 100);
    show("freed", gone);
    cudaFree(second);
    cudaFree(first);
    return 0;
}
