/* shim_driver_memory.c: the driver's own memory calls (see shim_driver_memory.h). */
#include "preload/shim_driver_memory.h"

#include <stdatomic.h>
#include <stdbool.h>

#include "allocator/alloc_policy.h"
#include "preload/guard.h"
#include "preload/real_cuda.h"
#include "preload/runtime.h"
#include "preload/shim_call.h"

static atomic_bool release_logged; /* one line per process */

/* The runtime, when cuprof's cache may hold memory of `device` (cache mode, not cuprof's own
 * call), else NULL. */
static struct cuprof_runtime *
cache_runtime(int device)
{
    struct cuprof_runtime *rt = shim_call_runtime_if_ready();
    if (rt == NULL || rt->alloc == NULL || guard_active() || device < 0 ||
        device >= rt->device_count)
        return NULL;
    return rt;
}

/* The current context's device (-1: none, or not one cuprof serves). */
static int
current_device(void)
{
    struct cuprof_runtime *rt;
    return shim_call_ready_device(&rt);
}

/* After `api` was refused for lack of memory on `device`: true when cuprof's cache held memory
 * the driver lacked and handed it back, so that the call is worth making again. */
static bool
release_for(const char *api, int device)
{
    struct cuprof_runtime *rt = cache_runtime(device);
    size_t held = rt != NULL ? shim_call_hand_back(rt, device) : 0;
    if (held == 0)
        return false;
    if (!atomic_exchange(&release_logged, true) && runtime_log_info()) {
        char size[32];
        alloc_policy_format_size(held, size, sizeof size);
        runtime_log("cuprof: %s found no device memory for the driver while cuprof's cache held "
                    "%s the program had freed; the cache handed it back and the call was made "
                    "again (logged once)",
                    api, size);
    }
    return true;
}

/* `api`'s refusal on `device` stands: said once, and the first-OOM snapshot (every mode but
 * off). */
static CUresult
refused(const char *api, int device)
{
    struct cuprof_runtime *rt = cache_runtime(device);
    if (rt != NULL)
        runtime_notify_driver_oom(rt, device, api);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

/* A wrapper's whole body: the real call, made once more after the cache of `device` handed memory
 * back for it; returns the last answer (a refusal that stands is told, runtime_notify_driver_oom).
 * `device` is evaluated after the first refusal only. */
#define CALL_WITH_RELEASE_ON(field, args, device)                                                  \
    REAL_CUDA_OR_FAIL(real, field)                                                                 \
    CUresult result = real->field args;                                                            \
    if (result != CUDA_ERROR_OUT_OF_MEMORY)                                                        \
        return result;                                                                             \
    int on_device = (device);                                                                      \
    if (release_for(#field, on_device))                                                            \
        result = real->field args;                                                                 \
    return result == CUDA_ERROR_OUT_OF_MEMORY ? refused(#field, on_device) : result

/* The calls that take memory on the current context's device. */
#define CALL_WITH_RELEASE(field, args) CALL_WITH_RELEASE_ON(field, args, current_device())

/* The wrappers, from the rows themselves. A launch that failed for lack of memory launched
 * nothing: making it again is what the program would do itself once memory is back. */
#define DRIVER_LOOKUP   ENTRY_POINT_IGNORE
#define DRIVER_WRAPPER  ENTRY_POINT_IGNORE
#define DRIVER_CALLED   ENTRY_POINT_IGNORE
#define RUNTIME_WRAPPER ENTRY_POINT_IGNORE
#define DRIVER_RETRY(field, exported, lookup, min_version, max_version, ptsz, pfn, wrapper,        \
                     params, args)                                                                 \
    CUresult wrapper params                                                                        \
    {                                                                                              \
        CALL_WITH_RELEASE(field, args);                                                            \
    }
#include "preload/entry_points.def"
#undef DRIVER_LOOKUP
#undef DRIVER_WRAPPER
#undef DRIVER_CALLED
#undef RUNTIME_WRAPPER
#undef DRIVER_RETRY

/* A new context takes device memory on the device it is made for. */
CUresult
shim_driver_memory_ctx_create_v2(CUcontext *ctx, unsigned int flags, CUdevice dev)
{
    CALL_WITH_RELEASE_ON(cuCtxCreate_v2, (ctx, flags, dev), (int)dev);
}

CUresult
shim_driver_memory_ctx_create_v3(CUcontext *ctx, CUexecAffinityParam *params, int count,
                                 unsigned int flags, CUdevice dev)
{
    CALL_WITH_RELEASE_ON(cuCtxCreate_v3, (ctx, params, count, flags, dev), (int)dev);
}

CUresult
shim_driver_memory_ctx_create_v4(CUcontext *ctx, CUctxCreateParams *params, unsigned int flags,
                                 CUdevice dev)
{
    CALL_WITH_RELEASE_ON(cuCtxCreate_v4, (ctx, params, flags, dev), (int)dev);
}
