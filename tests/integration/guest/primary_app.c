/* primary_app: the primary context retained and released by others besides the runtime, as
 * libraries that carry NVIDIA's runtime statically (cuBLAS, cuDNN, cuFFT) do.
 *   device 0: the runtime holds the context; a "library" retains and releases it around the
 *             program's two cudaMalloc/cudaFree pairs of 1 MiB
 *   device 1: the driver API alone: two retains, a 1 MiB cuMemAlloc/cuMemFree pair after each
 *             release, the second release destroying the context; then a retain and a pair in
 *             the new context
 * Prints each pointer's offset from the first of its device and the driver's free memory, so a
 * test can tell a cached block (same address, no new device allocation) from a new one. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK_CU(call)                                                                             \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            printf("FAIL %s: %d at line %d\n", #call, (int)r_, __LINE__);                          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static void
runtime_pair(const char *label)
{
    void *p = NULL;
    if (cudaMalloc(&p, 1 << 20) != cudaSuccess || cudaFree(p) != cudaSuccess) {
        printf("FAIL runtime pair %s\n", label);
        exit(1);
    }
    printf("dev0 %s ok\n", label);
}

static void
driver_pair(const char *label)
{
    CUdeviceptr p = 0;
    CHECK_CU(cuMemAlloc(&p, 1 << 20));
    CHECK_CU(cuMemFree(p));
    printf("dev1 %s ok\n", label);
}

int
main(void)
{
    runtime_pair("first");
    CUcontext lib_ctx;
    CHECK_CU(cuDevicePrimaryCtxRetain(&lib_ctx, 0)); /* a library's own reference */
    CHECK_CU(cuDevicePrimaryCtxRelease(0));          /* ... let go: not the last one */
    runtime_pair("after a library's release");

    CUdevice dev1;
    CUcontext c1, c2;
    CHECK_CU(cuDeviceGet(&dev1, 1));
    CHECK_CU(cuDevicePrimaryCtxRetain(&c1, dev1));
    CHECK_CU(cuDevicePrimaryCtxRetain(&c2, dev1));
    CHECK_CU(cuCtxSetCurrent(c1));
    driver_pair("first");
    CHECK_CU(cuDevicePrimaryCtxRelease(dev1));
    driver_pair("after one release");
    CHECK_CU(cuCtxSetCurrent(NULL));
    CHECK_CU(cuDevicePrimaryCtxRelease(dev1)); /* the last: the context and its memory go */
    unsigned flags;
    int active = 1;
    CHECK_CU(cuDevicePrimaryCtxGetState(dev1, &flags, &active));
    printf("dev1 active after the last release: %d\n", active);
    CHECK_CU(cuDevicePrimaryCtxRetain(&c1, dev1));
    CHECK_CU(cuCtxSetCurrent(c1));
    driver_pair("in a new context");
    CHECK_CU(cuCtxSetCurrent(NULL));
    CHECK_CU(cuDevicePrimaryCtxRelease(dev1));
    return 0;
}
