/* runtime.c: builds libcuprof's state once (config, stacks, ring, allocator, triggers). */
#include "preload/runtime.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "allocator/allocator.h"
#include "preload/api_start.h"
#include "preload/config.h"
#include "preload/control.h"
#include "preload/cuda_backend.h"
#include "preload/device_footprint.h"
#include "preload/dumper.h"
#include "preload/instance.h"
#include "preload/layers.h"
#include "preload/library_usage.h"
#include "preload/lifecycle.h"
#include "preload/oom_log.h"
#include "preload/nvtx.h"
#include "preload/real_cuda.h"
#include "preload/snapshot_place.h"
#include "preload/stderr_out.h"
#include "snapshot/label_table.h"
#include "snapshot/program_pools.h"
#include "snapshot/python_frames.h"
#include "snapshot/snapshot_oom.h"
#include "snapshot/text_escape.h"
#include "snapshot/stacks.h"
#include "snapshot/trace_ring.h"

/* More devices than any machine has: the driver's count is not believed. */
#define RUNTIME_MAX_DEVICES 1024

extern char **environ;

static pthread_once_t runtime_config_once = PTHREAD_ONCE_INIT;
static struct cuprof_config runtime_config_value;
/* Set once the configuration was parsed: runtime_config is then one load. */
_Atomic(const struct cuprof_config *) runtime_config_parsed;

static pthread_once_t runtime_once = PTHREAD_ONCE_INIT;
static struct cuprof_runtime runtime_value;
/* &runtime_value once runtime_init succeeded: runtime_get is then one load. */
_Atomic(struct cuprof_runtime *) runtime_ready_value;
/* The thread running runtime_init: a CUDA call it makes that comes back to runtime_get passes
 * through instead of waiting for itself in pthread_once. */
static _Thread_local bool runtime_initializing __attribute__((tls_model("initial-exec")));

static pthread_once_t runtime_labels_once = PTHREAD_ONCE_INIT;
static struct label_table *runtime_labels_value;

static void
runtime_labels_init(void)
{
    runtime_labels_value = label_table_create();
}

struct label_table *
runtime_labels(void)
{
    pthread_once(&runtime_labels_once, runtime_labels_init);
    return runtime_labels_value;
}

static void
runtime_config_init(void)
{
    char err[2048];
    if (config_parse(environ, &runtime_config_value, err, sizeof err) != 0) {
        /* Before main (or inside another library's constructor): no atexit handler, no stdio. */
        size_t len = strnlen(err, sizeof err - 1);
        err[len] = '\n';
        (void)stderr_out_write(err, len + 1);
        _exit(2);
    }
    snapshot_place_anchor(runtime_config_value.snapshot, sizeof runtime_config_value.snapshot);
    /* Another copy of libcuprof serves, or this one was dlopen'ed: pass everything through. */
    if (instance_inert() || !instance_preloaded())
        runtime_config_value.mode = CUPROF_MODE_OFF;
    atomic_store_explicit(&runtime_config_parsed, &runtime_config_value, memory_order_release);
}

const struct cuprof_config *
runtime_config_slow(void)
{
    pthread_once(&runtime_config_once, runtime_config_init);
    return &runtime_config_value;
}

bool
runtime_log_info(void)
{
    return runtime_config()->log >= CONFIG_LOG_INFO;
}

bool
runtime_log_debug(void)
{
    return runtime_config()->log >= CONFIG_LOG_DEBUG;
}

void
runtime_log(const char *fmt, ...)
{
    char text[1200], line[1200];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    /* Paths, argv and frame names may hold anything: one line, no control character. */
    size_t len = text_escape(text, strlen(text), TEXT_ESCAPE_TERMINAL, line, sizeof line - 1);
    if (len > sizeof line - 2)
        len = strlen(line);
    line[len] = '\n';
    /* One write(2) per line: lines of concurrent threads and processes never interleave. */
    (void)stderr_out_write(line, len + 1);
}

/* release_threshold_mb: the memory each device's default stream-ordered pool keeps cached (the
 * driver's pool serves the cudaMallocAsync/cuMemAllocFromPoolAsync calls cuprof passes through).
 * A device whose pool cannot be set is named in one line; profiling goes on. */
static void
runtime_set_release_threshold(const struct alloc_config *conf, int device_count)
{
    if (!conf->release_threshold_set)
        return;
    const struct real_cuda *real = real_cuda_get();
    if (real == NULL || real->cuDeviceGet == NULL || real->cuDeviceGetDefaultMemPool == NULL ||
        real->cuMemPoolSetAttribute == NULL) {
        runtime_log("cuprof: release_threshold_mb: the driver has no stream-ordered memory pools: "
                    "ignored");
        return;
    }
    cuuint64_t bytes = (cuuint64_t)conf->release_threshold;
    for (int i = 0; i < device_count; i++) {
        CUdevice dev = 0;
        CUmemoryPool pool = NULL;
        CUresult r = real->cuDeviceGet(&dev, i);
        if (r == CUDA_SUCCESS)
            r = real->cuDeviceGetDefaultMemPool(&pool, dev);
        if (r == CUDA_SUCCESS)
            r = real->cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &bytes);
        if (r != CUDA_SUCCESS)
            runtime_log("cuprof: release_threshold_mb: cannot set the default memory pool's "
                        "release threshold of device %d (CUresult %d)",
                        i, (int)r);
    }
}

/* per_process_memory_fraction is a share of the device's total: the allocator applies no limit
 * from a total of 0 or a free count above it (allocator_set_memory_fraction); say so once. */
static void
runtime_check_mem_info(int device_count)
{
    const struct device_ops *ops = cuda_backend_ops();
    for (int d = 0; d < device_count; d++) {
        size_t free_b = 0, total_b = 0;
        if (ops->mem_info(ops->ctx, d, &free_b, &total_b) == 0 &&
            (total_b == 0 || free_b > total_b)) {
            runtime_log("cuprof: cuMemGetInfo_v2 says device %d has %zu bytes free of %zu: "
                        "per_process_memory_fraction is not applied to it",
                        d, free_b, total_b);
            return;
        }
    }
}

/* Only the events some sink keeps reach the sinks: with CUPROF_HISTORY=off a block's alloc and
 * free cost the hot path no call. */
static void
update_traced_actions(struct cuprof_runtime *rt)
{
    uint32_t actions = trace_ring_traced_actions(rt->ring);
    if (rt->counts_libraries)
        actions |= LIBRARY_USAGE_TRACED_ACTIONS;
    if (program_pools_active(rt->pools))
        actions |= TRACE_ACTION_BIT(TRACE_FREE_REQUESTED);
    allocator_set_traced_actions(rt->alloc, actions);
}

/* Serializes the switches of traced actions: the last one decides. */
static pthread_mutex_t runtime_switching = PTHREAD_MUTEX_INITIALIZER;

void
runtime_refresh_traced_actions(struct cuprof_runtime *rt)
{
    pthread_mutex_lock(&runtime_switching);
    update_traced_actions(rt);
    pthread_mutex_unlock(&runtime_switching);
}

int
runtime_set_history(struct cuprof_runtime *rt, enum history_mode mode, size_t max_entries)
{
    pthread_mutex_lock(&runtime_switching);
    /* Events wanted by either mode flow while the ring switches; the ring drops what it must. */
    allocator_set_traced_actions(rt->alloc, TRACE_ACTIONS_ALL);
    int rc = trace_ring_set_mode(rt->ring, mode, max_entries);
    update_traced_actions(rt);
    pthread_mutex_unlock(&runtime_switching);
    return rc;
}

/* A driver that lacks what cuprof itself calls (an old driver, a virtualization layer, a stub)
 * is served as far as it can be: without synchronization and events cuprof's cache cannot keep
 * a freed block safe, so cache mode records as trace mode does; without device allocations and
 * contexts cuprof passes every call through. One line says which and why. */
static bool
runtime_driver_serves(struct cuprof_runtime *rt)
{
    char missing[256];
    if (real_cuda_missing(REAL_CUDA_NEED_TRACE, missing, sizeof missing) > 0) {
        runtime_log("cuprof: the driver has no %s: passing every call through, nothing is "
                    "recorded",
                    missing);
        return false;
    }
    if (rt->mode == CUPROF_MODE_CACHE &&
        real_cuda_missing(REAL_CUDA_NEED_CACHE, missing, sizeof missing) > 0) {
        runtime_log("cuprof: the driver has no %s, which cuprof's cache needs: recording in "
                    "trace mode instead (every call goes to the driver)",
                    missing);
        rt->mode = CUPROF_MODE_TRACE;
    }
    return true;
}

/* Which unwinder takes the stacks, once, and what a stack costs when it is libgcc's through
 * glibc's backtrace (issue 30: 20-50x libunwind and cuprof's own unwinder). */
static void
runtime_log_unwinder(const struct cuprof_config *config)
{
    switch (stacks_unwinder()) {
    case STACKS_UNWINDER_LIBUNWIND:
        runtime_log("cuprof: stacks by libunwind (libunwind.so.8)");
        break;
    case STACKS_UNWINDER_CUPROF:
        runtime_log("cuprof: stacks by cuprof's unwinder (libunwind.so.8 is not installed): "
                    "rules read once per return address from .eh_frame");
        break;
    case STACKS_UNWINDER_LIBGCC:
        runtime_log("cuprof: stacks by libgcc's unwinder through glibc's backtrace "
                    "(libunwind.so.8 is not installed and libgcc_s.so.1 has no _Unwind_Find_FDE): "
                    "%.0f ns a frame here, %.1f us a stack of %u frames (libunwind takes about 10 "
                    "ns a frame); install libunwind (libunwind8 on Debian/Ubuntu) for faster "
                    "stacks, or set CUPROF_STACKS=none",
                    stacks_frame_ns(), stacks_frame_ns() * (double)config->stack_depth / 1000.0,
                    (unsigned)config->stack_depth);
        break;
    }
}

/* Stacks as configured (the unwinder named once) and the trace ring for `devices`; NULL when out
 * of host memory. */
static struct trace_ring *
runtime_start_history(const struct cuprof_config *config, int devices)
{
    stacks_configure((enum stack_mode)config->stacks, (unsigned)config->stack_depth);
    python_frames_enable(config->python_frames == 0); /* "on" is choice 0 */
    stacks_warm_up();
    if (config->stacks != STACKS_NONE && runtime_log_info())
        runtime_log_unwinder(config);
    enum history_mode history = (enum history_mode)config->history;
    size_t max_entries = (size_t)config->max_entries;
    api_start_history(&history, &max_entries); /* _record_memory_history before CUDA's start */
    struct label_table *labels = runtime_labels();
    return labels != NULL ? trace_ring_create_labeled(devices, max_entries, history, labels) : NULL;
}

/* expandable_segments:True on a device that cannot map memory gets ordinary segments. */
static void
runtime_log_expandable(const struct cuprof_runtime *rt)
{
    if (!rt->config->alloc_conf.expandable_segments || rt->mode != CUPROF_MODE_CACHE)
        return;
    char missing[256];
    for (int d = 0; d < rt->device_count; d++) {
        if (allocator_device_expandable(rt->alloc, d))
            continue;
        if (real_cuda_missing(REAL_CUDA_NEED_VMM, missing, sizeof missing) > 0)
            runtime_log("cuprof: expandable_segments:True: the driver has no %s (virtual memory "
                        "management): ordinary segments are used",
                        missing);
        else
            runtime_log("cuprof: expandable_segments:True: device %d has no virtual memory "
                        "management: its segments are ordinary ones",
                        d);
        if (real_cuda_missing(REAL_CUDA_NEED_VMM, NULL, 0) > 0)
            return; /* one line for every device */
    }
}

static void
runtime_init(void)
{
    const struct cuprof_config *config = runtime_config();
    struct cuprof_runtime *rt = &runtime_value;
    runtime_initializing = true;

    rt->mode = (enum cuprof_mode)config->mode;
    rt->config = config;
    if (rt->mode == CUPROF_MODE_OFF)
        goto out;

    if (runtime_log_info())
        layers_log_start();
    if (!runtime_driver_serves(rt))
        goto out;
    rt->device_count = cuda_backend_device_count();
    /* A count no machine has (the driver's answer sizes every per-device table). */
    if (rt->device_count > RUNTIME_MAX_DEVICES) {
        runtime_log("cuprof: cuDeviceGetCount says %d devices (more than %d): passing every call "
                    "through",
                    rt->device_count, RUNTIME_MAX_DEVICES);
        rt->device_count = 0;
        goto out;
    }
    if (rt->device_count <= 0) {
        if (runtime_log_debug())
            runtime_log("cuprof: no CUDA device found: passing every call through");
        goto out;
    }
    rt->ring = runtime_start_history(config, rt->device_count);
    if (rt->ring == NULL) {
        runtime_log("cuprof: out of host memory for the trace history: passing every call "
                    "through");
        goto out;
    }
    runtime_set_release_threshold(&config->alloc_conf, rt->device_count);
    struct alloc_config alloc_conf = config->alloc_conf;
    if (rt->mode == CUPROF_MODE_TRACE)
        alloc_conf.caching = false; /* trace: one device allocation per request */
    /* The cache must never be why the program runs out of memory: a smaller segment before an
     * OOM. Snapshots say so (dumper_write.c), so that replays take the step for them only. */
    alloc_conf.fit_segment_on_oom = RUNTIME_FIT_SEGMENT_ON_OOM;
    struct trace_sink sink = trace_ring_sink(rt->ring);
    /* NVTX heaps' events go to the ring; the allocator's pass by them (a heap's block freed). */
    rt->pools = program_pools_create(rt->device_count, sink);
    if (rt->pools != NULL)
        sink = program_pools_sink(rt->pools);
    else
        runtime_log("cuprof: out of host memory for NVTX heaps: their regions are not recorded");
    /* Device memory by library counts in front of the ring; without host memory for its tables
     * the ring alone gets the events. */
    rt->counts_libraries = library_usage_init(rt->device_count, sink, &sink);
    if (!rt->counts_libraries || !device_footprint_init(rt->device_count))
        runtime_log("cuprof: out of host memory for the per-library counters: snapshots will "
                    "not show device memory by library");
    rt->alloc = allocator_create(&alloc_conf, cuda_backend_ops(), &sink, rt->device_count);
    if (rt->alloc == NULL) {
        runtime_log("cuprof: out of host memory for the allocator: passing every call through");
        trace_ring_destroy(rt->ring);
        program_pools_destroy(rt->pools);
        rt->ring = NULL;
        rt->pools = NULL;
        goto out;
    }
    update_traced_actions(rt);
    runtime_log_expandable(rt);
    if (alloc_conf.per_process_memory_fraction > 0.0)
        runtime_check_mem_info(rt->device_count);
    lifecycle_register(rt);
    dumper_start(rt);
    control_start(rt);
    nvtx_runtime_ready(rt); /* NVTX events that came before CUDA's first call, in order */
    atomic_store_explicit(&runtime_ready_value, &runtime_value, memory_order_release);
out:
    if (atomic_load_explicit(&runtime_ready_value, memory_order_relaxed) == NULL)
        nvtx_runtime_ready(NULL);
    runtime_initializing = false;
}

struct cuprof_runtime *
runtime_get_slow(void)
{
    if (runtime_initializing || instance_inert())
        return NULL;
    /* Not cancelled half-way (its lines and files are cancellation points): a cancelled init is
     * run again from the start by the next caller, over state the first one left. */
    int cancel_state = PTHREAD_CANCEL_ENABLE;
    (void)pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
    pthread_once(&runtime_once, runtime_init);
    (void)pthread_setcancelstate(cancel_state, NULL);
    struct cuprof_runtime *rt = atomic_load_explicit(&runtime_ready_value, memory_order_acquire);
    if (rt != NULL)
        lifecycle_resume_after_fork(rt);
    return rt;
}

/* The OOM dump, once per process (CUPROF_DUMP_ON's oom), `api` naming a refusal outside the
 * allocator. */
static void
oom_dump(struct cuprof_runtime *rt, int device, const char *api)
{
    if ((rt->config->dump_on & CONFIG_DUMP_ON_OOM) == 0 || !lifecycle_claim_oom_dump())
        return;
    if (runtime_log_debug())
        runtime_log("cuprof: out of memory on device %d: writing a snapshot", device);
    char why[96];
    if (api != NULL)
        snprintf(why, sizeof why, "out of memory on device %d at %s", device, api);
    else
        snprintf(why, sizeof why, "out of memory on device %d", device);
    int rc = dumper_dump_because(rt, why); /* a failure was logged */
    (void)rc;
}

void
runtime_notify_oom(int device)
{
    struct cuprof_runtime *rt = runtime_get();
    if (rt == NULL)
        return;
    oom_log_note(rt, device); /* before the dump: the OOM dump holds its message */
    oom_dump(rt, device, NULL);
}

void
runtime_notify_driver_oom(struct cuprof_runtime *rt, int device, const char *api)
{
    static atomic_bool logged;
    char message[384];
    snprintf(message, sizeof message,
             "%s: the driver found no device memory for itself (" SNAP_DRIVER_OWN_MEMORY
             ", which it takes outside every allocation)%s; the program gets "
             "CUDA_ERROR_OUT_OF_MEMORY",
             api,
             rt->mode == CUPROF_MODE_CACHE ? ", and cuprof's cache held none it could hand back"
                                           : "");
    oom_log_note_driver(rt, device, api, message); /* before the dump: the OOM dump holds it */
    if (!atomic_exchange(&logged, true) && runtime_log_info())
        runtime_log("cuprof: %s (logged once)", message);
    oom_dump(rt, device, api);
}
