/* shim_peer.c: peer access wrappers (see shim_peer.h). */
#include "preload/shim_peer.h"

#include <stdatomic.h>

#include "allocator/allocator.h"
#include "preload/config.h"
#include "preload/guard.h"
#include "preload/real_cuda.h"
#include "preload/runtime.h"

/* The device of a context other than the current one: pushed for one query, popped again. */
static bool
ctx_device(const struct real_cuda *real, CUcontext ctx, CUdevice *dev)
{
    CUcontext popped = NULL;
    if (real->cuCtxPushCurrent_v2(ctx) != CUDA_SUCCESS)
        return false;
    bool ok = real->cuCtxGetDevice(dev) == CUDA_SUCCESS;
    (void)real->cuCtxPopCurrent_v2(&popped);
    return ok;
}

/* PyTorch's enablePeerAccess(dev, dev_to_access) after the driver call: impls_[dev_to_access]
 * ->addPeerAccess(dev). Here dev is the calling thread's current device. */
static void
record(const struct real_cuda *real, int owner)
{
    CUdevice accessor;
    if (guard_active() || runtime_config()->mode == CUPROF_MODE_OFF ||
        real->cuCtxGetDevice(&accessor) != CUDA_SUCCESS)
        return;
    guard_enter();
    /* The first CUDA call may be this one: peers enabled before any allocation count too. */
    struct cuprof_runtime *rt = runtime_get();
    int rc = 0;
    if (rt != NULL && rt->alloc != NULL && owner >= 0 && owner < allocator_device_count(rt->alloc))
        rc = allocator_add_peer(rt->alloc, owner, accessor);
    guard_leave();
    static atomic_bool logged;
    if (rc > 0 && !atomic_exchange(&logged, true) && runtime_log_info())
        runtime_log("cuprof: cuMemSetAccess for peer device %d on device %d's expandable "
                    "segments failed with CUresult %d (logged once)",
                    (int)accessor, owner, rc);
}

void
shim_peer_record(int owner)
{
    const struct real_cuda *real = real_cuda_get();
    if (real != NULL && real->cuCtxGetDevice != NULL)
        record(real, owner);
}

CUresult
shim_peer_ctx_enable(CUcontext peer, unsigned int flags)
{
    REAL_CUDA_OR_FAIL(real, cuCtxEnablePeerAccess)
    CUresult r = real->cuCtxEnablePeerAccess(peer, flags);
    CUdevice owner;
    if ((r == CUDA_SUCCESS || r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) && !guard_active() &&
        runtime_config()->mode != CUPROF_MODE_OFF && ctx_device(real, peer, &owner))
        record(real, owner);
    return r;
}
