/* pitch_app.c: pitched allocations whose row or total size cannot fit in a size_t. A caching
 * shim that computes the pitch itself must not wrap (a tiny row, a division by zero); the
 * program gets the driver's own answer. Prints the codes. */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>

int
main(void)
{
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return 1;
    struct {
        size_t width, height;
    } cases[] = {{SIZE_MAX - 10, 1}, {SIZE_MAX, 2}, {1024, SIZE_MAX / 512}, {4096, 16}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CUdeviceptr p = 0;
        size_t pitch = 0;
        CUresult r = cuMemAllocPitch(&p, &pitch, cases[i].width, cases[i].height, 4);
        printf("case %zu: rc=%d pitch_ok=%d\n", i, (int)r,
               r != CUDA_SUCCESS || pitch >= cases[i].width);
        if (r == CUDA_SUCCESS)
            printf("case %zu: free=%d\n", i, (int)cuMemFree(p));
    }
    return 0;
}
