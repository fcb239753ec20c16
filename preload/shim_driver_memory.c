/* shim_driver_memory.c: the driver's own memory calls (see shim_driver_memory.h). */
#include "preload/shim_driver_memory.h"

#include <stdatomic.h>
#include <stdbool.h>

#include "allocator/alloc_policy.h"
#include "preload/real_cuda.h"
#include "preload/runtime.h"
#include "preload/shim_call.h"

static atomic_bool release_logged; /* one line per process */

/* After `api` was refused for lack of memory: true when cuprof's cache held memory the driver
 * lacked and handed it back, so that the call is worth making again. */
static bool
release_for(const char *api)
{
    struct cuprof_runtime *rt;
    int device = shim_call_ready_device(&rt);
    size_t held = device >= 0 ? shim_call_hand_back(rt, device) : 0;
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

/* `api`'s refusal stands: said once, and the first-OOM snapshot (every mode but off). */
static CUresult
refused(const char *api)
{
    struct cuprof_runtime *rt;
    int device = shim_call_ready_device(&rt);
    if (device >= 0)
        runtime_notify_driver_oom(rt, device, api);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

/* A wrapper's whole body: the real call, made once more after the cache handed memory back for
 * it; returns the last answer (a refusal that stands is told, runtime_notify_driver_oom). */
#define CALL_WITH_RELEASE(field, args)                                                             \
    REAL_CUDA_OR_FAIL(real, field)                                                                 \
    CUresult result = real->field args;                                                            \
    if (result == CUDA_ERROR_OUT_OF_MEMORY && release_for(#field))                                 \
        result = real->field args;                                                                 \
    return result == CUDA_ERROR_OUT_OF_MEMORY ? refused(#field) : result

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
