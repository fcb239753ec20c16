/* cuprof.h: the public C API of libcuprof.so (PyTorch's memory-management calls for C/C++).
 * Locking: every call is thread-safe.
 * Hot path: no. Every helper is static inline and finds libcuprof's function with dlsym, so a
 *   program built with this header runs unchanged without the shim (the calls then return 0,
 *   NULL or CUPROF_ERROR_NOT_LOADED). Nothing to link: pkg-config --cflags cuprof. */
#ifndef CUPROF_H
#define CUPROF_H

#include <stddef.h>

/* Results of the int-returning calls. */
#define CUPROF_SUCCESS           0
#define CUPROF_ERROR_NOT_LOADED  (-1) /* libcuprof.so is not preloaded */
#define CUPROF_ERROR_DISABLED    (-2) /* CUPROF_MODE=off, or no CUDA device */
#define CUPROF_ERROR_INVALID     (-3) /* bad argument (device out of range, unknown mode string) */
#define CUPROF_ERROR_IO          (-4) /* the snapshot file could not be written */
#define CUPROF_ERROR_NOMEM       (-5) /* out of host memory */
#define CUPROF_ERROR_NOT_STARTED (-6) /* no CUDA call from the program yet */

/* `device` is a device ordinal; a negative value means the calling thread's current device
 * (PyTorch's device=None). Byte counts are 0 when the shim is absent or disabled, and before
 * the program's first CUDA call (cuprof never initializes CUDA itself: until then the counters
 * are 0, resets and empty_cache succeed, annotations and a history switch wait for the trace,
 * and device_count, set_per_process_memory_fraction and dumps return CUPROF_ERROR_NOT_STARTED).
 *
 * const char *cuprof_version(void);                  "0.2.0", or NULL
 * int cuprof_device_count(void);                     devices cuprof serves (>= 1), or an error
 * size_t cuprof_memory_allocated(int device);        allocated_bytes.all.current
 * size_t cuprof_memory_reserved(int device);         reserved_bytes.all.current
 * size_t cuprof_max_memory_allocated(int device);    allocated_bytes.all.peak
 * size_t cuprof_max_memory_reserved(int device);     reserved_bytes.all.peak
 * int cuprof_reset_peak_memory_stats(int device);
 * int cuprof_reset_accumulated_memory_stats(int device);
 * int cuprof_empty_cache(void);                      releases every unused cached segment
 * int cuprof_set_per_process_memory_fraction(double fraction, int device);   0 < fraction <= 1
 * char *cuprof_memory_stats_json(int device);        {"active.all.allocated": 0, ...}; free() it
 * char *cuprof_memory_summary(int device);           torch.cuda.memory_summary()'s table; free()
 * char *cuprof_memory_summary_abbreviated(int device);  the same with abbreviated=True
 * int cuprof_record_memory_history(const char *enabled, const char *context, const char *stacks,
 *                                  size_t max_entries);
 *     PyTorch's _record_memory_history: enabled NULL (stop and clear), "state" or "all";
 *     context NULL (no stacks), "state"/"alloc" (stack on alloc) or "all" (alloc and free);
 *     stacks NULL or "all" (native and Python frames), "python" (a thread running Python keeps
 *     its Python frames only, as PyTorch's stacks="python" does);
 *     max_entries 0 keeps CUPROF_MAX_ENTRIES.
 * int cuprof_dump_snapshot(const char *path);  NULL: a new file named by CUPROF_SNAPSHOT;
 *     otherwise exactly `path` (.pickle/.pkl or .json), replaced atomically like PyTorch's
 *     when it is a regular file (a symbolic link is replaced, never followed; a FIFO or device
 *     is refused); mode 0600.
 * int cuprof_annotate(const char *label);      marks a phase ("forward") in every device's trace
 * int cuprof_annotate_start(const char *label);  starts a range ("forward"), as an NVTX range's
 * int cuprof_annotate_end(const char *label);    ends it: a START and an END annotation in every
 *     device's trace and the snapshot's external_annotations (PyTorch's record_function layout)
 * char *cuprof_snapshot_pickle(size_t *length);  torch.cuda.memory._snapshot(): the snapshot as
 *     pickle bytes (*length of them) in a malloc'd buffer, free() it; NULL when disabled/no memory
 */
#define CUPROF_API_FUNCS(X)                                                                        \
    X(const char *, cuprof_version, (void), (), NULL)                                              \
    X(int, cuprof_device_count, (void), (), CUPROF_ERROR_NOT_LOADED)                               \
    X(size_t, cuprof_memory_allocated, (int device), (device), 0)                                  \
    X(size_t, cuprof_memory_reserved, (int device), (device), 0)                                   \
    X(size_t, cuprof_max_memory_allocated, (int device), (device), 0)                              \
    X(size_t, cuprof_max_memory_reserved, (int device), (device), 0)                               \
    X(int, cuprof_reset_peak_memory_stats, (int device), (device), CUPROF_ERROR_NOT_LOADED)        \
    X(int, cuprof_reset_accumulated_memory_stats, (int device), (device), CUPROF_ERROR_NOT_LOADED) \
    X(int, cuprof_empty_cache, (void), (), CUPROF_ERROR_NOT_LOADED)                                \
    X(int, cuprof_set_per_process_memory_fraction, (double fraction, int device),                  \
      (fraction, device), CUPROF_ERROR_NOT_LOADED)                                                 \
    X(char *, cuprof_memory_stats_json, (int device), (device), NULL)                              \
    X(char *, cuprof_memory_summary, (int device), (device), NULL)                                 \
    X(char *, cuprof_memory_summary_abbreviated, (int device), (device), NULL)                     \
    X(int, cuprof_record_memory_history,                                                           \
      (const char *enabled, const char *context, const char *stacks, size_t max_entries),          \
      (enabled, context, stacks, max_entries), CUPROF_ERROR_NOT_LOADED)                            \
    X(int, cuprof_dump_snapshot, (const char *path), (path), CUPROF_ERROR_NOT_LOADED)              \
    X(int, cuprof_annotate, (const char *label), (label), CUPROF_ERROR_NOT_LOADED)                 \
    X(int, cuprof_annotate_start, (const char *label), (label), CUPROF_ERROR_NOT_LOADED)           \
    X(int, cuprof_annotate_end, (const char *label), (label), CUPROF_ERROR_NOT_LOADED)             \
    X(char *, cuprof_snapshot_pickle, (size_t * length), (length), NULL)

#ifdef CUPROF_BUILDING_LIBRARY
/* libcuprof.so itself: the real, exported functions. */
#define CUPROF_DECLARE_(ret, name, params, args, fallback) ret name params;
CUPROF_API_FUNCS(CUPROF_DECLARE_)
#undef CUPROF_DECLARE_
#else
#include <dlfcn.h>
#include <string.h>
#ifndef RTLD_DEFAULT
#define RTLD_DEFAULT ((void *)0) /* glibc's value; dlfcn.h hides it without _GNU_SOURCE */
#endif

/* Looks the exported function up once (RTLD_DEFAULT finds the preloaded shim). */
static inline void *
cuprof_resolve_(void **slot, const char *name)
{
    void *fn = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (fn == NULL) {
        fn = dlsym(RTLD_DEFAULT, name);
        if (fn != NULL)
            __atomic_store_n(slot, fn, __ATOMIC_RELEASE);
    }
    return fn;
}

/* memcpy: ISO C has no cast between object and function pointers. */
#define CUPROF_INLINE_(ret, name, params, args, fallback)                                          \
    static inline ret name params                                                                  \
    {                                                                                              \
        static void *slot;                                                                         \
        void *sym = cuprof_resolve_(&slot, #name);                                                 \
        ret(*fn) params;                                                                           \
        if (sym == NULL)                                                                           \
            return fallback;                                                                       \
        memcpy(&fn, &sym, sizeof fn);                                                              \
        return fn args;                                                                            \
    }
CUPROF_API_FUNCS(CUPROF_INLINE_)
#undef CUPROF_INLINE_
#endif

#endif
