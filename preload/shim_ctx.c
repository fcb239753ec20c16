/* shim_ctx.c: context and stream lifetime wrappers (see shim_ctx.h). */
#include "preload/shim_ctx.h"

#include <stdatomic.h>

#include "allocator/allocator.h"
#include "preload/ctx_owner.h"
#include "preload/cuda_backend.h"
#include "preload/double_free.h"
#include "preload/guard.h"
#include "preload/real_cuda.h"
#include "preload/shim_call.h"
#include "preload/shim_capture.h"
#include "preload/runtime.h"
#include "preload/stream_id.h"

/* The program is tearing down the context that owns the device's cache: hand the free cached
 * segments back while the context still exists (recorded as segment_free), so only blocks it
 * still holds are dropped. */
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

/* The driver is about to free (or has freed) every allocation of `ctx`, a context of `device`:
 * its external memory is forgotten, and the cache too when ctx owned it (never cuMemFree'd
 * later, never handed out again). `ctx` NULL: a context cuprof cannot name; everything of the
 * device goes. */
static void
forget_context(int device, CUcontext ctx)
{
    struct cuprof_runtime *rt = shim_call_runtime_if_ready();
    if (guard_active() || rt == NULL || rt->alloc == NULL || device < 0 ||
        device >= allocator_device_count(rt->alloc))
        return;
    guard_enter();
    bool with_cache = ctx == NULL || ctx_owner_is(device, ctx);
    unsigned reset = double_free_reset_begin(device);
    if (ctx == NULL)
        allocator_forget_device(rt->alloc, device);
    else
        allocator_forget_context(rt->alloc, device, ctx_owner_tag(ctx), with_cache);
    double_free_reset_end(reset);
    if (with_cache) {
        cuda_backend_forget_device(device);
        ctx_owner_clear(device);
    }
    guard_leave();
}

/* The primary context of `dev` while it is active, else NULL (also when the driver cannot say).
 * Retained and released at once: the caller holds it active. */
static CUcontext
active_primary(const struct real_cuda *real, CUdevice dev)
{
    unsigned int flags = 0;
    int active = 0;
    CUcontext ctx = NULL;
    if (real->cuDevicePrimaryCtxGetState == NULL ||
        real->cuDevicePrimaryCtxGetState(dev, &flags, &active) != CUDA_SUCCESS || !active ||
        real->cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS)
        return NULL;
    (void)real->cuDevicePrimaryCtxRelease_v2(dev);
    return ctx;
}

void
shim_ctx_forget_primary(int device)
{
    const struct real_cuda *real = real_cuda_get();
    if (real == NULL || shim_call_runtime_if_ready() == NULL)
        return;
    CUcontext primary = active_primary(real, device);
    /* Inactive: nothing of it lives (its last release forgot it). Unknown: as before contexts
     * were told apart, the whole device. */
    if (primary == NULL && real->cuDevicePrimaryCtxGetState != NULL)
        return;
    CUcontext popped;
    if (primary == NULL) {
        release_cache(device);
    } else if (ctx_owner_is(device, primary) &&
               real->cuCtxPushCurrent_v2(primary) == CUDA_SUCCESS) {
        release_cache(device); /* with the primary current: its memory, whatever else is */
        (void)real->cuCtxPopCurrent_v2(&popped);
    }
    forget_context(device, primary);
}

CUresult
shim_ctx_primary_reset(CUdevice dev)
{
    REAL_CUDA_OR_FAIL(real, cuDevicePrimaryCtxReset_v1)
    shim_ctx_forget_primary(dev);
    return real->cuDevicePrimaryCtxReset_v1(dev);
}

CUresult
shim_ctx_primary_reset_v2(CUdevice dev)
{
    REAL_CUDA_OR_FAIL(real, cuDevicePrimaryCtxReset_v2)
    shim_ctx_forget_primary(dev);
    return real->cuDevicePrimaryCtxReset_v2(dev);
}

/* Both ABIs of cuDevicePrimaryCtxRelease (same C signature): `release` is the real one. The
 * runtime and every library that carries NVIDIA's runtime statically (cuBLAS, cuDNN, cuFFT)
 * retain and release the primary context themselves: only the release that destroys it takes its
 * memory with it, so a library letting go changes nothing the program or its snapshot sees. */
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
    /* Named before the release: after the last one it is gone. */
    CUcontext primary = shim_call_runtime_if_ready() != NULL ? active_primary(real, dev) : NULL;
    CUresult result = release(dev);
    unsigned int flags = 0;
    int active = 1;
    if (result == CUDA_SUCCESS && primary != NULL &&
        real->cuDevicePrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS && !active)
        forget_context(dev, primary);
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
    /* Only ctx's memory goes: the cache's when ctx owns it, handed back while ctx is current. */
    CUcontext popped;
    CUdevice dev;
    if (ctx != NULL && shim_call_runtime_if_ready() != NULL &&
        real->cuCtxPushCurrent_v2(ctx) == CUDA_SUCCESS) {
        CUresult r = real->cuCtxGetDevice(&dev);
        if (r == CUDA_SUCCESS && ctx_owner_is(dev, ctx))
            release_cache(dev);
        (void)real->cuCtxPopCurrent_v2(&popped);
        if (r == CUDA_SUCCESS)
            forget_context(dev, ctx);
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
