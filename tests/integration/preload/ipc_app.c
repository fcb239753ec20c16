/* ipc_app.c: legacy CUDA IPC handles (cudaIpcGetMemHandle) for the first block of an
 * allocation, a block after it, an address inside the first, a freed one, and blocks of
 * stream-ordered requests (cudaMallocAsync: one on a stream of its own, which starts a segment in
 * cache mode, one on the legacy stream). In cache mode cuprof cuts small blocks from one segment,
 * and a handle names a whole driver allocation: the second block's handle would open at the
 * segment's start in another process, so cuprof must refuse it; stream-ordered memory is never
 * legacy-IPC capable. Each case also asks CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, alone
 * and among others, which must agree with the handle's answer. Prints one line per case; the
 * simulated handle's words are [magic, pid, allocation start, size]. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The attribute alone (its error, or the value the driver wrote: 4 bytes) and among others. */
static void
show_capable(void *ptr)
{
    unsigned int alone = 0x5a5a5a5a;
    CUresult r = cuPointerGetAttribute(&alone, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
                                       (CUdeviceptr)(uintptr_t)ptr);
    if (r == CUDA_SUCCESS)
        printf(" capable=%u", alone);
    else
        printf(" capable=error%d", (int)r);
    unsigned int plural = 0x5a5a5a5a;
    int type = 0;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                   CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE};
    void *data[] = {&type, &plural};
    r = cuPointerGetAttributes(2, attrs, data, (CUdeviceptr)(uintptr_t)ptr);
    printf(" plural=%d/%u", (int)r, plural);
}

static void
show(const char *name, void *ptr)
{
    cudaIpcMemHandle_t h;
    memset(&h, 0, sizeof(h));
    cudaError_t e = cudaIpcGetMemHandle(&h, ptr);
    uint64_t words[4];
    memcpy(words, h.reserved, sizeof(words));
    printf("%s=%s names_start=%d last=%s", name, cudaGetErrorName(e),
           e == cudaSuccess && words[2] == (uint64_t)(uintptr_t)ptr,
           cudaGetErrorName(cudaGetLastError()));
    show_capable(ptr);
    printf("\n");
}

int
main(void)
{
    void *first = NULL, *second = NULL, *gone = NULL, *async_own = NULL, *async_legacy = NULL;
    cudaStream_t s;
    /* The freed block last, so that no later allocation takes its place. */
    if (cudaMalloc(&first, 1000) != cudaSuccess || cudaMalloc(&second, 1000) != cudaSuccess ||
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
        cudaMallocAsync(&async_own, 1000, s) != cudaSuccess ||
        cudaMallocAsync(&async_legacy, 1000, 0) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess || cudaMalloc(&gone, 1000) != cudaSuccess ||
        cudaFree(gone) != cudaSuccess) {
        printf("ipc_app: allocation failed\n");
        return 1;
    }
    show("first", first);
    show("second", second);
    show("second_again", second);
    show("inside_first", (char *)first + 100);
    show("freed", gone);
    show("async_own_stream", async_own);
    show("async_legacy_stream", async_legacy);
    cudaFreeAsync(async_legacy, 0);
    cudaFreeAsync(async_own, s);
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
    cudaFree(second);
    cudaFree(first);
    return 0;
}
