/* shim_ctx.c: context lifetime wrappers (see shim_ctx.h). */
#include "preload/shim_ctx.h"

#include "preload/real_cuda.h"

void
shim_ctx_forget_device(int device)
{
    (void)device;
}

CUresult
shim_ctx_primary_reset(CUdevice dev)
{
    REAL_CUDA_OR_FAIL(real, cuDevicePrimaryCtxReset_v1)
    shim_ctx_forget_device(dev);
    return real->cuDevicePrimaryCtxReset_v1(dev);
}

CUresult
shim_ctx_primary_reset_v2(CUdevice dev)
{
    REAL_CUDA_OR_FAIL(real, cuDevicePrimaryCtxReset_v2)
    shim_ctx_forget_device(dev);
    return real->cuDevicePrimaryCtxReset_v2(dev);
}

CUresult
shim_ctx_primary_release(CUdevice dev)
{
    REAL_CUDA_OR_FAIL(real, cuDevicePrimaryCtxRelease_v1)
    return real->cuDevicePrimaryCtxRelease_v1(dev);
}

CUresult
shim_ctx_primary_release_v2(CUdevice dev)
{
    REAL_CUDA_OR_FAIL(real, cuDevicePrimaryCtxRelease_v2)
    return real->cuDevicePrimaryCtxRelease_v2(dev);
}

CUresult
shim_ctx_destroy(CUcontext ctx)
{
    REAL_CUDA_OR_FAIL(real, cuCtxDestroy_v2)
    return real->cuCtxDestroy_v2(ctx);
}
