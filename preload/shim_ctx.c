/* shim_ctx.c: context and stream lifetime wrappers (see shim_ctx.h). */
#include "preload/shim_ctx.h"

#include <stdatomic.h>

#include "allocator/allocator.h"
#include "preload/cuda_backend.h"
#include "preload/double_free.h"
#include "preload/guard.h"
#include "preload/real_cuda.h"
#include "preload/shim_call.h"
#include "preload/shim_capture.h"
#include "preload/runtime.h"
#include "preload/stream_id.h"

/* The program is tearing a context down: hand the device's free cached segments back while the
 * context still exists (recorded as segment_free), so only blocks it still holds are dropped. */
static void
release_cache(int device)
{
    struct cuprof_runtime *rt = shim_call_runtime_if_ready();
    if (guard_active() || rt == NULL || rt->alloc == NULL || device < 0 ||
        device >= allocator_device_count(rt->alloc))
        return;
    guard_enter();
    (void)allocator_empty_cache(rt->alloc, device);
    /* The events go with the context; destroyed while their handles are still valid. */
    allocator_destroy_idle_events(rt->alloc, device);
    guard_leave();
}

static void
forget_only(int device)
{
    struct cuprof_runtime *rt = shim_call_runtime_if_ready();
    if (guard_active() || rt == NULL || rt->alloc == NULL || device < 0 ||
        device >= allocator_device_count(rt->alloc))
        return;
    guard_enter();
    /* The driver is about to free every allocation of the device: never cuMemFree them later,
     * never hand them out again. */
    unsigned reset = double_free_reset_begin(device);
    allocator_forget_device(rt->alloc, device);
    double_free_reset_end(reset);
    cuda_backend_forget_device(device);
    guard_leave();
}

void
shim_ctx_forget_device(int device)
{
    release_cache(device);
    forget_only(device);
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

/* Only the last release destroys the context; the driver's state tells whether it did. */
static void
forget_if_inactive(const struct real_cuda *real, CUdevice dev)
{
    unsigned int flags = 0;
    int active = 1;
    if (real->cuDevicePrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS && !active)
        forget_only(dev);
}

/* Both ABIs of cuDevicePrimaryCtxRelease (same C signature): `release` is the real one. The
 * runtime and every library that carries NVIDIA's runtime statically (cuBLAS, cuDNN, cuFFT)
 * retain and release the primary context themselves: only the release that destroys it takes the
 * cache with it, so a library letting go changes nothing the program or its snapshot sees. */
static CUresult
primary_release(const struct real_cuda *real, PFN_cuDevicePrimaryCtxRelease_v11000 release,
                CUdevice dev)
{
    if (real->cuDevicePrimaryCtxGetState == NULL) {
        /* Nothing tells which release is the last: hand the cache back at each one, while the
         * context surely exists (never a block of a destroyed context handed out again). */
        static atomic_bool logged;
        if (!atomic_exchange(&logged, true))
            runtime_log("cuprof: the driver has no cuDevicePrimaryCtxGetState: each primary "
                        "context release empties cuprof's cache of that device");
        release_cache(dev);
        return release(dev);
    }
    CUresult result = release(dev);
    if (result == CUDA_SUCCESS)
        forget_if_inactive(real, dev);
    return result;
}

CUresult
shim_ctx_primary_release(CUdevice dev)
{
    REAL_CUDA_OR_FAIL(real, cuDevicePrimaryCtxRelease_v1)
    return primary_release(real, real->cuDevicePrimaryCtxRelease_v1, dev);
}

CUresult
shim_ctx_primary_release_v2(CUdevice dev)
{
    REAL_CUDA_OR_FAIL(real, cuDevicePrimaryCtxRelease_v2)
    return primary_release(real, real->cuDevicePrimaryCtxRelease_v2, dev);
}

CUresult
shim_ctx_destroy(CUcontext ctx)
{
    REAL_CUDA_OR_FAIL(real, cuCtxDestroy_v2)
    /* cuprof's cache is per device: forgetting it may leak (never corrupt) memory that lives in
     * another context of the same device. */
    CUcontext popped;
    CUdevice dev;
    if (ctx != NULL && real->cuCtxPushCurrent_v2(ctx) == CUDA_SUCCESS) {
        CUresult r = real->cuCtxGetDevice(&dev);
        (void)real->cuCtxPopCurrent_v2(&popped);
        if (r == CUDA_SUCCESS)
            shim_ctx_forget_device(dev);
    }
    return real->cuCtxDestroy_v2(ctx);
}

CUresult
shim_stream_destroy(CUstream stream)
{
    REAL_CUDA_OR_FAIL(real, cuStreamDestroy_v2)
    struct cuprof_runtime *rt = shim_call_runtime_if_ready();
    shim_capture_forget_stream(stream);
    /* free_sync:events remembers the streams a device used and records an event on each at
     * every free: a destroyed handle must leave that list before it dies (recording on it would
     * reach freed driver state). The default streams are not objects and cannot be destroyed. */
    if (!guard_active() && rt != NULL && rt->alloc != NULL && stream != NULL &&
        stream != CU_STREAM_LEGACY && stream != CU_STREAM_PER_THREAD) {
        guard_enter();
        allocator_forget_stream(rt->alloc, stream_id_from_cu(stream, false));
        guard_leave();
    }
    return real->cuStreamDestroy_v2(stream);
}
