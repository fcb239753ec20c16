/* ctx_owner.c: which context each device's cache belongs to (see ctx_owner.h). */
#include "preload/ctx_owner.h"

#include <stdatomic.h>

_Atomic(CUcontext) ctx_owner_of_device[CTX_OWNER_DEVICES];
/* 1 + the highest device that ever had an owner: the scan stops there. */
static _Atomic int owned_span;

int
ctx_owner_device_of_others(CUcontext ctx)
{
    int span = atomic_load_explicit(&owned_span, memory_order_relaxed);
    for (int d = 1; d < span; d++)
        if (atomic_load_explicit(&ctx_owner_of_device[d], memory_order_relaxed) == ctx)
            return ctx != NULL ? d : -1;
    return -1;
}

bool
ctx_owner_current(const struct real_cuda *real, CUcontext *ctx, int *device)
{
    CUcontext current = NULL;
    if (real->cuCtxGetCurrent(&current) != CUDA_SUCCESS || current == NULL)
        return false;
    /* The owner of a device's cache is a context of that device: no second query. */
    int owned = ctx_owner_device_of(current);
    CUdevice dev = owned;
    if (owned < 0 && real->cuCtxGetDevice(&dev) != CUDA_SUCCESS)
        return false; /* a destroyed context: the driver's own error */
    *ctx = current;
    *device = dev;
    return true;
}

bool
ctx_owner_claim(int device, CUcontext ctx)
{
    if (device < 0 || device >= CTX_OWNER_DEVICES)
        return true;
    CUcontext owner = atomic_load_explicit(&ctx_owner_of_device[device], memory_order_acquire);
    if (owner == ctx)
        return true;
    if (owner != NULL)
        return false;
    if (!atomic_compare_exchange_strong(&ctx_owner_of_device[device], &owner, ctx))
        return owner == ctx; /* another thread claimed it first */
    int span = atomic_load(&owned_span);
    while (span < device + 1 && !atomic_compare_exchange_weak(&owned_span, &span, device + 1)) {
    }
    return true;
}

bool
ctx_owner_is(int device, CUcontext ctx)
{
    if (device < 0 || device >= CTX_OWNER_DEVICES)
        return true;
    return atomic_load_explicit(&ctx_owner_of_device[device], memory_order_acquire) == ctx;
}

void
ctx_owner_clear(int device)
{
    if (device >= 0 && device < CTX_OWNER_DEVICES)
        atomic_store(&ctx_owner_of_device[device], NULL);
}
