/* real_cuda.h: the real driver entry points (what wrappers forward to and what cuprof itself
 *   calls), each resolved once with an explicit version through the driver's cuGetProcAddress_v2.
 * Locking: resolved once behind pthread_once; read-only afterwards.
 * Hot path: real_cuda_get() is one pthread_once check plus a load. */
#ifndef CUPROF_REAL_CUDA_H
#define CUPROF_REAL_CUDA_H

#include <cudaTypedefs.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "preload/entry_points.h"

/* The driver's own functions: one member per DRIVER_* row of preload/entry_points.def. */
struct real_cuda {
#define DRIVER_LOOKUP(field, exported, lookup, min_version, max_version, ptsz, pfn, wrapper,       \
                      params, args)                                                                \
    pfn field; /* NULL with a driver that lacks it */
#define DRIVER_WRAPPER(field, exported, lookup, min_version, max_version, ptsz, pfn, wrapper,      \
                       params, args)                                                               \
    pfn field;
#define DRIVER_CALLED(field, lookup, version, flags, pfn) pfn field;
#define RUNTIME_WRAPPER                                   ENTRY_POINT_IGNORE
#include "preload/entry_points.def"
#undef DRIVER_LOOKUP
#undef DRIVER_WRAPPER
#undef DRIVER_CALLED
#undef RUNTIME_WRAPPER
};

/* The driver's entry points, or NULL when libcuda.so.1 cannot be loaded. Entries the driver does
 * not have are NULL. Loads the driver with dlopen(RTLD_NOLOAD) first, then RTLD_NOW. Inline:
 * once resolved with a driver it is one load (every wrapper asks, some several times). */
extern _Atomic(const struct real_cuda *) real_cuda_resolved __attribute__((visibility("hidden")));
const struct real_cuda *real_cuda_get_slow(void);
static inline const struct real_cuda *
real_cuda_get(void)
{
    const struct real_cuda *r = atomic_load_explicit(&real_cuda_resolved, memory_order_acquire);
    return __builtin_expect(r != NULL, 1) ? r : real_cuda_get_slow();
}

/* The driver object's own definition of an exported name (dlsym on the libcuda.so.1 handle),
 * never one of cuprof's; NULL when it has none or the driver is not loaded yet. */
void *real_cuda_driver_own(const char *name);

/* What stands for one of cuprof's own exports that a lookup handed back as "real": the next
 * definition of `name` after libcuprof (a layer's own wrapper), else the driver's own; NULL when
 * neither exists. */
void *real_cuda_instead_of_self(const char *name);

/* True on the thread that is resolving the entry points right now: a driver that forwards to
 * another through dlsym reaches cuprof's own lookup again from inside the resolution. */
bool real_cuda_resolving(void);

/* The driver lookup cuprof forwards to (NULL before the resolution has found it); a plain read
 * for comparisons, without waiting for the resolution. */
void *real_cuda_lookup_in_use(void);

/* One line (the first time for each name, CUPROF_LOG=info) saying that the driver handed out
 * cuprof's own `name` and has no definition of its own to use instead. */
void real_cuda_say_missing(const char *name);

/* What cuprof itself needs of the driver for each way of serving a process. */
enum real_cuda_need {
    REAL_CUDA_NEED_TRACE, /* device allocations, contexts, free memory: trace mode */
    REAL_CUDA_NEED_CACHE, /* and synchronization and events: cuprof's cache */
    REAL_CUDA_NEED_VMM,   /* PyTorch's expandable segments' virtual memory calls */
};

/* How many entry points `need` wants that the driver lacks; the first ones' names (a comma
 * list) go into names (may be NULL). 0 with no driver resolved. */
size_t real_cuda_missing(enum real_cuda_need need, char *names, size_t names_len);

/* In a wrapper: declares `real` and returns CUDA_ERROR_NOT_INITIALIZED when the driver is
 * missing (a program cannot reach a wrapper without a driver; answer as an uninitialised driver
 * would), CUDA_ERROR_NOT_FOUND when it has no entry point of its own (what its lookup answers
 * for a missing one). */
#define REAL_CUDA_OR_FAIL(real, field)                                                             \
    const struct real_cuda *real = real_cuda_get();                                                \
    if (real == NULL)                                                                              \
        return CUDA_ERROR_NOT_INITIALIZED;                                                         \
    if (real->field == NULL)                                                                       \
        return CUDA_ERROR_NOT_FOUND;

#endif
