/* shim_call.c: the common head and tail of accounting wrappers (see shim_call.h). */
#include "preload/shim_call.h"

#include <stdatomic.h>

#include "allocator/allocator.h"
#include "allocator/cuprof_errors.h"
#include "preload/call_tag.h"
#include "preload/ctx_owner.h"
#include "preload/cuda_backend.h"
#include "preload/device_footprint.h"
#include "preload/library_usage.h"
#include "preload/config.h"
#include "preload/guard.h"
#include "preload/real_cuda.h"
#include "preload/shim_capture.h"
#include "snapshot/stacks.h"

_Atomic(struct cuprof_runtime *) shim_call_ready_runtime;

bool
shim_call_begin(struct shim_call *call, enum shim_call_kind kind, const void *caller)
{
    /* Off mode is pure pass-through: not even the context query below. */
    if (guard_active() || runtime_config()->mode == CUPROF_MODE_OFF)
        return false;
    const struct real_cuda *real = real_cuda_get();
    if (real == NULL || real->cuCtxGetDevice == NULL || real->cuCtxGetCurrent == NULL)
        return false;
    /* The device comes from the calling thread's current context. Without one (or before
     * cuInit) the real call must produce its own error, and cuprof must not initialise. */
    int dev;
    CUcontext ctx;
    if (!ctx_owner_current(real, &ctx, &dev))
        return false;
    guard_enter();
    struct cuprof_runtime *rt = runtime_get();
    /* rt->device_count is the allocator's device count (runtime_init made it with that). */
    if (rt == NULL || rt->alloc == NULL || dev < 0 || dev >= rt->device_count) {
        guard_leave();
        return false;
    }
    if (atomic_load_explicit(&shim_call_ready_runtime, memory_order_relaxed) == NULL)
        atomic_store_explicit(&shim_call_ready_runtime, rt, memory_order_release);
    call->rt = rt;
    call->device = dev;
    call->context = ctx;
    call->stack_id = shim_call_stack(kind);
    device_footprint_note_start(dev);
    call->owner = 0;
    if (kind == SHIM_CALL_ALLOC)
        call->owner = library_usage_begin_alloc(
            call->stack_id, call_tag_current.caller != NULL ? call_tag_current.caller : caller);
    return true;
}

void
shim_call_end(struct shim_call *call)
{
    (void)call;
    library_usage_end_call();
    cuda_backend_log_faults();
    guard_leave();
}

void
shim_call_log_bad_answer(const char *api)
{
    static atomic_bool logged;
    if (atomic_exchange(&logged, true) || !runtime_log_info())
        return;
    runtime_log("cuprof: %s returned CUDA_SUCCESS with a NULL, misaligned or overlapping "
                "address; cuprof leaves that memory alone and passes such requests to the driver "
                "unrecorded (logged once)",
                api);
}

void
shim_call_track_external(const struct shim_call *call, int device, uint64_t addr, size_t size,
                         uint64_t stream, uint8_t pool, const char *api)
{
    if (allocator_track_external_in(call->rt->alloc, device, addr, size, stream, pool,
                                    call->stack_id,
                                    ctx_owner_tag(call->context)) == -CUPROF_EDRIVER)
        shim_call_log_bad_answer(api);
}

int
shim_call_ready_device(struct cuprof_runtime **rt)
{
    *rt = shim_call_runtime_if_ready();
    const struct real_cuda *real = real_cuda_get();
    if (guard_active() || *rt == NULL || (*rt)->alloc == NULL || real == NULL)
        return -1;
    CUcontext ctx;
    int device;
    if (!ctx_owner_current(real, &ctx, &device) || device < 0 || device >= (*rt)->device_count)
        return -1;
    return device;
}

size_t
shim_call_hand_back(struct cuprof_runtime *rt, int device)
{
    if (rt->mode != CUPROF_MODE_CACHE || device < 0 ||
        device >= allocator_device_count(rt->alloc) || shim_capture_any())
        return 0;
    size_t held = allocator_releasable_bytes(rt->alloc, device);
    if (held > 0) {
        guard_enter();
        (void)allocator_empty_cache(rt->alloc, device);
        guard_leave();
    }
    return held;
}

bool
shim_call_release_for_driver(const struct shim_call *call, CUresult result, int device)
{
    return result == CUDA_ERROR_OUT_OF_MEMORY && shim_call_hand_back(call->rt, device) > 0;
}

void
shim_call_note_refusal(const struct shim_call *call, CUresult result, int device, size_t size,
                       uint64_t stream, uint8_t pool, const char *api)
{
    if (result != CUDA_ERROR_OUT_OF_MEMORY || device < 0 ||
        device >= allocator_device_count(call->rt->alloc))
        return;
    if (allocator_note_external_oom(call->rt->alloc, device, size, stream, pool, call->stack_id,
                                    api) == 0)
        runtime_notify_oom(device);
}

CUresult
shim_call_result(const struct shim_call *call, int result)
{
    if (result == 0)
        return CUDA_SUCCESS;
    if (result > 0)
        return (CUresult)result;
    if (result == -CUPROF_ENOMEM) {
        runtime_notify_oom(call->device);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    /* cuprof's own host-memory failure: the closest error a real allocation can return. */
    return CUDA_ERROR_OUT_OF_MEMORY;
}
