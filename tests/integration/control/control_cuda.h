/* control_cuda.h: the few driver calls the control test programs make (header-only helpers).
 * Locking: none.
 * Hot path: no (test programs). */
#ifndef CONTROL_CUDA_H
#define CONTROL_CUDA_H

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

/* Makes device 0's primary context current on the calling thread; exits 1 on failure. */
static inline void
control_cuda_init(void)
{
    CUdevice dev;
    CUcontext ctx;
    CUresult rc = cuInit(0);
    if (rc == CUDA_SUCCESS)
        rc = cuDeviceGet(&dev, 0);
    if (rc == CUDA_SUCCESS)
        rc = cuDevicePrimaryCtxRetain(&ctx, dev);
    if (rc == CUDA_SUCCESS)
        rc = cuCtxSetCurrent(ctx);
    if (rc != CUDA_SUCCESS) {
        fprintf(stderr, "control: CUDA init failed: %d\n", (int)rc);
        exit(1);
    }
}

/* cuMemAlloc that exits 1 on failure. */
static inline CUdeviceptr
control_cuda_alloc(size_t size)
{
    CUdeviceptr ptr = 0;
    CUresult rc = cuMemAlloc(&ptr, size);
    if (rc != CUDA_SUCCESS) {
        fprintf(stderr, "control: cuMemAlloc(%zu) failed: %d\n", size, (int)rc);
        exit(1);
    }
    return ptr;
}

static inline void
control_cuda_free(CUdeviceptr ptr)
{
    CUresult rc = cuMemFree(ptr);
    if (rc != CUDA_SUCCESS) {
        fprintf(stderr, "control: cuMemFree failed: %d\n", (int)rc);
        exit(1);
    }
}

#endif
