/* api.c: the exported cuprof_* functions declared in cuprof.h (PyTorch's torch.cuda.memory calls).
 */
#define CUPROF_BUILDING_LIBRARY
#include "preload/cuprof.h"

#include <stdlib.h>
#include <string.h>

#include "allocator/allocator.h"
#include "allocator/cuprof_errors.h"
#include "preload/api_start.h"
#include "preload/config.h"
#include "preload/dumper.h"
#include "preload/guard.h"
#include "preload/nvtx.h"
#include "preload/real_cuda.h"
#include "preload/runtime.h"
#include "snapshot/label_table.h"
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

/* The runtime and a valid device, or an error code for the caller to return:
 * CUPROF_ERROR_NOT_STARTED before the program's first CUDA call (api_start.h). */
static int
api_enter(int device, struct cuprof_runtime **rt, int *out)
{
    switch (api_start_runtime(rt)) {
    case API_READY:
        return api_device(*rt, device, out);
    case API_NOT_STARTED:
        return CUPROF_ERROR_NOT_STARTED;
    default:
        return CUPROF_ERROR_DISABLED;
    }
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

CUPROF_EXPORT int
cuprof_device_count(void)
{
    struct cuprof_runtime *rt;
    int device = 0;
    int rc = api_enter(0, &rt, &device);
    return rc == CUPROF_SUCCESS ? rt->device_count : rc;
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
    return rc == CUPROF_ERROR_NOT_STARTED ? CUPROF_SUCCESS : rc; /* nothing counted yet */
}

CUPROF_EXPORT int
cuprof_reset_accumulated_memory_stats(int device)
{
    struct cuprof_runtime *rt;
    int rc = api_enter(device, &rt, &device);
    if (rc == CUPROF_SUCCESS)
        allocator_reset_accumulated_stats(rt->alloc, device);
    return rc == CUPROF_ERROR_NOT_STARTED ? CUPROF_SUCCESS : rc;
}

CUPROF_EXPORT int
cuprof_empty_cache(void)
{
    struct cuprof_runtime *rt;
    enum api_state state = api_start_runtime(&rt);
    if (state != API_READY)
        return state == API_NOT_STARTED ? CUPROF_SUCCESS : CUPROF_ERROR_DISABLED;
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

enum api_text { API_STATS_JSON, API_SUMMARY, API_SUMMARY_ABBREVIATED };

/* Formats with a size-returning formatter (snprintf style) into a malloc'd string. */
static char *
api_format(const struct memory_stats *stats, int device, enum api_text what)
{
    bool abbreviated = what == API_SUMMARY_ABBREVIATED;
    size_t len = what == API_STATS_JSON ? stats_json(stats, NULL, 0)
                                        : memory_summary(stats, device, abbreviated, NULL, 0);
    char *text = malloc(len + 1);
    if (text == NULL)
        return NULL;
    if (what == API_STATS_JSON)
        (void)stats_json(stats, text, len + 1);
    else
        (void)memory_summary(stats, device, abbreviated, text, len + 1);
    return text;
}

/* The stats text of a device; before the program's first CUDA call every counter is 0. */
static char *
api_text(int device, enum api_text what)
{
    struct cuprof_runtime *rt;
    struct memory_stats stats;
    int rc = api_enter(device, &rt, &device);
    if (rc == CUPROF_ERROR_NOT_STARTED) {
        memset(&stats, 0, sizeof stats);
        return api_format(&stats, device < 0 ? 0 : device, what);
    }
    if (rc != CUPROF_SUCCESS)
        return NULL;
    allocator_get_stats(rt->alloc, device, &stats);
    return api_format(&stats, device, what);
}

CUPROF_EXPORT char *
cuprof_memory_stats_json(int device)
{
    return api_text(device, API_STATS_JSON);
}

CUPROF_EXPORT char *
cuprof_memory_summary(int device)
{
    return api_text(device, API_SUMMARY);
}

CUPROF_EXPORT char *
cuprof_memory_summary_abbreviated(int device)
{
    return api_text(device, API_SUMMARY_ABBREVIATED);
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
    struct cuprof_runtime *rt;
    enum api_state state = api_start_runtime(&rt);
    if (state == API_OFF)
        return CUPROF_ERROR_DISABLED;
    const struct cuprof_config *config = runtime_config();
    if (max_entries == 0)
        max_entries = (size_t)config->max_entries;
    if (max_entries > API_MAX_ENTRIES)
        max_entries = API_MAX_ENTRIES; /* PyTorch's default is sys.maxsize: "as many as fit" */
    /* PyTorch: enabled=None stops recording stacks too. */
    stacks_configure(e == 0 ? STACKS_NONE : stacks_of[c], (unsigned)config->stack_depth);
    stacks_set_python_only(s == 1);
    /* Before the first CUDA call: the ring starts this way when the runtime is built. */
    if (state == API_NOT_STARTED && api_start_keep_history(history_of[e], max_entries))
        return CUPROF_SUCCESS;
    if (state == API_NOT_STARTED && (rt = runtime_get()) == NULL)
        return CUPROF_ERROR_DISABLED;
    return api_result(runtime_set_history(rt, history_of[e], max_entries));
}

CUPROF_EXPORT int
cuprof_dump_snapshot(const char *path)
{
    struct cuprof_runtime *rt;
    enum api_state state = api_start_runtime(&rt);
    if (state != API_READY)
        return state == API_NOT_STARTED ? CUPROF_ERROR_NOT_STARTED : CUPROF_ERROR_DISABLED;
    guard_enter();
    int rc = dumper_dump(rt, path);
    guard_leave();
    return api_result(rc);
}

/* One annotation of `label` in every device's trace: a mark, or a range's start or end. Before
 * the program's first CUDA call it waits with NVTX's events for the trace to exist. */
static int
api_annotate(const char *label, enum snap_stage stage)
{
    if (label == NULL)
        return CUPROF_ERROR_INVALID;
    struct cuprof_runtime *rt;
    if (api_start_runtime(&rt) == API_OFF)
        return CUPROF_ERROR_DISABLED;
    uint32_t id = label_table_intern(runtime_labels(), label, stage); /* the ring's own table */
    if (id == 0)
        return CUPROF_ERROR_NOMEM;
    nvtx_emit(id);
    return CUPROF_SUCCESS;
}

CUPROF_EXPORT int
cuprof_annotate(const char *label)
{
    return api_annotate(label, SNAP_STAGE_MARK);
}

CUPROF_EXPORT int
cuprof_annotate_start(const char *label)
{
    return api_annotate(label, SNAP_STAGE_START);
}

CUPROF_EXPORT int
cuprof_annotate_end(const char *label)
{
    return api_annotate(label, SNAP_STAGE_END);
}

CUPROF_EXPORT char *
cuprof_snapshot_pickle(size_t *length)
{
    struct cuprof_runtime *rt;
    unsigned char *data = NULL;
    if (length == NULL || api_start_runtime(&rt) != API_READY)
        return NULL;
    guard_enter();
    int rc = dumper_snapshot_pickle(rt, &data, length);
    guard_leave();
    return rc == 0 ? (char *)data : NULL;
}
