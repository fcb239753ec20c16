/* api.c: the exported cuprof_* functions declared in cuprof.h (PyTorch's torch.cuda.memory calls).
 */
#define CUPROF_BUILDING_LIBRARY
#include "preload/cuprof.h"

#include <stdlib.h>
#include <string.h>

#include "allocator/allocator.h"
#include "allocator/cuprof_errors.h"
#include "preload/config.h"
#include "preload/dumper.h"
#include "preload/guard.h"
#include "preload/real_cuda.h"
#include "preload/runtime.h"
#include "snapshot/stacks.h"
#include "snapshot/trace_ring.h"
#include "stats/memory_stats.h"
#include "stats/memory_summary.h"
#include "stats/stats_json.h"

#define CUPROF_EXPORT __attribute__((visibility("default")))

/* Largest history PyTorch's max_entries=sys.maxsize is clamped to (CUPROF_MAX_ENTRIES' limit). */
#define API_MAX_ENTRIES ((size_t)100000000)

/* PyTorch's device=None: the calling thread's current device, from its current context. */
static int
api_device(const struct cuprof_runtime *rt, int device, int *out)
{
    if (device < 0) {
        const struct real_cuda *cuda = real_cuda_get();
        CUdevice current = 0;
        device = 0;
        guard_enter();
        if (cuda != NULL && cuda->cuCtxGetDevice != NULL &&
            cuda->cuCtxGetDevice(&current) == CUDA_SUCCESS)
            device = (int)current;
        guard_leave();
    }
    if (device >= rt->device_count)
        return CUPROF_ERROR_INVALID;
    *out = device;
    return CUPROF_SUCCESS;
}

/* The runtime and a valid device, or an error code for the caller to return. */
static int
api_enter(int device, struct cuprof_runtime **rt, int *out)
{
    *rt = runtime_get();
    if (*rt == NULL)
        return CUPROF_ERROR_DISABLED;
    return api_device(*rt, device, out);
}

static int
api_result(int rc)
{
    switch (rc) {
    case 0:
        return CUPROF_SUCCESS;
    case -CUPROF_EINVAL:
        return CUPROF_ERROR_INVALID;
    case -CUPROF_EHOSTMEM:
        return CUPROF_ERROR_NOMEM;
    default:
        return CUPROF_ERROR_IO;
    }
}

CUPROF_EXPORT const char *
cuprof_version(void)
{
    return CUPROF_VERSION;
}

/* One counter of allocated_bytes/reserved_bytes.all, or 0 when disabled. */
static size_t
api_stat(int device, bool reserved, bool peak)
{
    struct cuprof_runtime *rt;
    struct memory_stats stats;
    if (api_enter(device, &rt, &device) != CUPROF_SUCCESS)
        return 0;
    allocator_get_stats(rt->alloc, device, &stats);
    const struct stat_counter *c =
        reserved ? &stats.reserved_bytes[STAT_ALL] : &stats.allocated_bytes[STAT_ALL];
    int64_t value = peak ? c->peak : c->current;
    return value > 0 ? (size_t)value : 0;
}

CUPROF_EXPORT size_t
cuprof_memory_allocated(int device)
{
    return api_stat(device, false, false);
}

CUPROF_EXPORT size_t
cuprof_memory_reserved(int device)
{
    return api_stat(device, true, false);
}

CUPROF_EXPORT size_t
cuprof_max_memory_allocated(int device)
{
    return api_stat(device, false, true);
}

CUPROF_EXPORT size_t
cuprof_max_memory_reserved(int device)
{
    return api_stat(device, true, true);
}

CUPROF_EXPORT int
cuprof_reset_peak_memory_stats(int device)
{
    struct cuprof_runtime *rt;
    int rc = api_enter(device, &rt, &device);
    if (rc == CUPROF_SUCCESS)
        allocator_reset_peak_stats(rt->alloc, device);
    return rc;
}

CUPROF_EXPORT int
cuprof_reset_accumulated_memory_stats(int device)
{
    struct cuprof_runtime *rt;
    int rc = api_enter(device, &rt, &device);
    if (rc == CUPROF_SUCCESS)
        allocator_reset_accumulated_stats(rt->alloc, device);
    return rc;
}

CUPROF_EXPORT int
cuprof_empty_cache(void)
{
    struct cuprof_runtime *rt = runtime_get();
    if (rt == NULL)
        return CUPROF_ERROR_DISABLED;
    guard_enter();
    int rc = allocator_empty_cache(rt->alloc, -1);
    guard_leave();
    return rc == 0 ? CUPROF_SUCCESS : api_result(rc);
}

CUPROF_EXPORT int
cuprof_set_per_process_memory_fraction(double fraction, int device)
{
    struct cuprof_runtime *rt;
    int rc = api_enter(device, &rt, &device);
    if (rc != CUPROF_SUCCESS)
        return rc;
    if (!(fraction > 0.0 && fraction <= 1.0)) /* PyTorch's range; also refuses NaN */
        return CUPROF_ERROR_INVALID;
    return api_result(allocator_set_memory_fraction(rt->alloc, device, fraction));
}

/* Formats with a size-returning formatter (snprintf style) into a malloc'd string. */
static char *
api_format(const struct memory_stats *stats, int device, bool summary)
{
    size_t len =
        summary ? memory_summary(stats, device, false, NULL, 0) : stats_json(stats, NULL, 0);
    char *text = malloc(len + 1);
    if (text == NULL)
        return NULL;
    if (summary)
        (void)memory_summary(stats, device, false, text, len + 1);
    else
        (void)stats_json(stats, text, len + 1);
    return text;
}

CUPROF_EXPORT char *
cuprof_memory_stats_json(int device)
{
    struct cuprof_runtime *rt;
    struct memory_stats stats;
    if (api_enter(device, &rt, &device) != CUPROF_SUCCESS)
        return NULL;
    allocator_get_stats(rt->alloc, device, &stats);
    return api_format(&stats, device, false);
}

CUPROF_EXPORT char *
cuprof_memory_summary(int device)
{
    struct cuprof_runtime *rt;
    struct memory_stats stats;
    if (api_enter(device, &rt, &device) != CUPROF_SUCCESS)
        return NULL;
    allocator_get_stats(rt->alloc, device, &stats);
    return api_format(&stats, device, true);
}

/* Index of `value` in a NULL-terminated list (NULL matches index 0), or -1. */
static int
api_choice(const char *value, const char *const *choices, int count)
{
    if (value == NULL)
        return 0;
    for (int i = 1; i < count; i++)
        if (strcmp(value, choices[i]) == 0)
            return i;
    return -1;
}

CUPROF_EXPORT int
cuprof_record_memory_history(const char *enabled, const char *context, const char *stacks,
                             size_t max_entries)
{
    static const char *const enabled_choices[] = {NULL, "state", "all"};
    static const char *const context_choices[] = {NULL, "state", "alloc", "all"};
    static const char *const stacks_choices[] = {NULL, "python", "all"};
    static const enum history_mode history_of[] = {HISTORY_OFF, HISTORY_STATE, HISTORY_ALL};
    static const enum stack_mode stacks_of[] = {STACKS_NONE, STACKS_ALLOC, STACKS_ALLOC,
                                                STACKS_ALL};
    int e = api_choice(enabled, enabled_choices, 3);
    int c = api_choice(context, context_choices, 4);
    int s = api_choice(stacks, stacks_choices, 3);
    if (e < 0 || c < 0 || s < 0)
        return CUPROF_ERROR_INVALID;
    struct cuprof_runtime *rt = runtime_get();
    if (rt == NULL)
        return CUPROF_ERROR_DISABLED;
    if (max_entries == 0)
        max_entries = (size_t)rt->config->max_entries;
    if (max_entries > API_MAX_ENTRIES)
        max_entries = API_MAX_ENTRIES; /* PyTorch's default is sys.maxsize: "as many as fit" */
    /* PyTorch: enabled=None stops recording stacks too. */
    stacks_configure(e == 0 ? STACKS_NONE : stacks_of[c], (unsigned)rt->config->stack_depth);
    stacks_set_python_only(s == 1);
    return api_result(runtime_set_history(rt, history_of[e], max_entries));
}

CUPROF_EXPORT int
cuprof_dump_snapshot(const char *path)
{
    struct cuprof_runtime *rt = runtime_get();
    if (rt == NULL)
        return CUPROF_ERROR_DISABLED;
    guard_enter();
    int rc = dumper_dump(rt, path);
    guard_leave();
    return api_result(rc);
}

CUPROF_EXPORT int
cuprof_annotate(const char *label)
{
    if (label == NULL)
        return CUPROF_ERROR_INVALID;
    struct cuprof_runtime *rt = runtime_get();
    if (rt == NULL)
        return CUPROF_ERROR_DISABLED;
    uint32_t id = trace_ring_intern_label(rt->ring, label);
    if (id == 0)
        return CUPROF_ERROR_NOMEM;
    trace_ring_annotate(rt->ring, id);
    return CUPROF_SUCCESS;
}
