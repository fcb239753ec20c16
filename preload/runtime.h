/* runtime.h: libcuprof's process-wide state (mode, allocator, trace ring, config), built once.
 * Locking: built behind pthread_once; every field is read-only afterwards (no lock to read it).
 * Hot path: runtime_get() is called by every intercepted call (one acquire load once warm). */
#ifndef CUPROF_RUNTIME_H
#define CUPROF_RUNTIME_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdbool.h>

#include "preload/lifecycle.h"
#include "snapshot/trace_ring.h"

/* Every allocator the runtime makes asks a segment of just the request before an OOM
 * (alloc_config.fit_segment_on_oom); its snapshots say so (cuprof.fit_segment_on_oom). */
#define RUNTIME_FIT_SEGMENT_ON_OOM true

struct allocator;
struct program_pools;
struct trace_ring;
struct cuprof_config;

/* CUPROF_MODE; the order matches the values list in preload/config.def. */
enum cuprof_mode {
    CUPROF_MODE_CACHE = 0, /* the caching allocator serves device requests */
    CUPROF_MODE_TRACE = 1, /* every call goes to the device and is recorded */
    CUPROF_MODE_OFF = 2,   /* pure pass-through */
};

struct cuprof_runtime { /* read-only after init */
    enum cuprof_mode mode;
    struct allocator *alloc;            /* set whenever runtime_get() returns non-NULL */
    struct trace_ring *ring;            /* set whenever runtime_get() returns non-NULL */
    struct program_pools *pools;        /* NVTX heaps and regions; NULL when out of memory */
    const struct cuprof_config *config; /* every parsed CUPROF_* setting */
    int device_count;
    bool counts_libraries; /* the per-library sink is in front of the ring */
};

/* Lazy, thread-safe (pthread_once) init on the first intercepted call: configuration (exit 2 on
 * a bad value), stacks, trace ring, allocator over the CUDA backend, signal trigger and dumper
 * thread. Returns NULL to mean "pass through": off mode, no driver, or init failed (logged once).
 * Must not be called while holding any cuprof lock. Inline: once ready it is one load (every
 * intercepted call asks). */
extern _Atomic(struct cuprof_runtime *) runtime_ready_value __attribute__((visibility("hidden")));
struct cuprof_runtime *runtime_get_slow(void);
static inline struct cuprof_runtime *
runtime_get(void)
{
    struct cuprof_runtime *rt = atomic_load_explicit(&runtime_ready_value, memory_order_acquire);
    if (__builtin_expect(rt == NULL, 0))
        return runtime_get_slow();
    lifecycle_resume_after_fork(rt);
    return rt;
}

/* The process's annotation labels (snapshot/label_table.h), made on first use without any CUDA
 * call: NVTX names ranges before the runtime exists, and the runtime's ring shares the table.
 * NULL only when out of host memory. */
struct label_table *runtime_labels(void);

/* Tells the allocator again which events the sinks want (after the first NVTX heap: every
 * free_requested, so the program's own pool learns its block is freed even without history). */
void runtime_refresh_traced_actions(struct cuprof_runtime *rt);

/* cuprof_record_memory_history's history switch: the ring's new mode and size, and the allocator
 * told which events the sinks now want (serialized: the last switch decides both). 0 or a
 * -CUPROF_E* of trace_ring_set_mode. */
int runtime_set_history(struct cuprof_runtime *rt, enum history_mode mode, size_t max_entries);

/* The allocator reported an out-of-memory on `device`: the first time (per process), writes a
 * snapshot synchronously before the caller returns the error to the program. Call it outside
 * every cuprof lock. */
void runtime_notify_oom(int device);
/* The driver refused `api`, a call that takes device memory for the driver itself (kernel code,
 * arrays, the stack: shim_driver_memory.h), for lack of memory on `device`: one line (once per
 * process) and the same first-OOM snapshot, named after the call; no trace entry (the size is
 * the driver's secret). Outside every cuprof lock. */
void runtime_notify_driver_oom(struct cuprof_runtime *rt, int device, const char *api);

/* The parsed configuration, parsing it first if needed (exit 2 on a bad value). Never NULL. Safe
 * in every mode, makes no CUDA call. Inline: once parsed it is one load (off mode asks it on
 * every call). */
extern _Atomic(const struct cuprof_config *) runtime_config_parsed
    __attribute__((visibility("hidden")));
const struct cuprof_config *runtime_config_slow(void);
static inline const struct cuprof_config *
runtime_config(void)
{
    const struct cuprof_config *c =
        atomic_load_explicit(&runtime_config_parsed, memory_order_acquire);
    return __builtin_expect(c != NULL, 1) ? c : runtime_config_slow();
}

/* True when CUPROF_LOG allows a message of that level (debug > info > quiet). */
bool runtime_log_info(void);
bool runtime_log_debug(void);

/* Writes one line (a newline is added) to stderr with a single write(2). Not for signal handlers
 * or allocator locks (formats with vsnprintf). Callers check runtime_log_info/debug first. */
__attribute__((format(printf, 1, 2))) void runtime_log(const char *fmt, ...);

#endif
