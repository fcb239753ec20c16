/* real_cuda.c: resolution of the real driver entry points (see real_cuda.h). */
#include "preload/real_cuda.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "preload/layers.h"
#include "preload/real_dl.h"
#include "preload/runtime.h"

static struct real_cuda real;
static bool real_found;
static pthread_once_t real_once = PTHREAD_ONCE_INIT;
/* Set once the resolution found the driver: real_cuda_get is then one load. */
_Atomic(const struct real_cuda *) real_cuda_resolved;
static void *driver_handle; /* libcuda.so.1, open for the process lifetime */
/* This thread is inside real_cuda_resolve. */
static _Thread_local bool resolving __attribute__((tls_model("initial-exec")));

bool
real_cuda_resolving(void)
{
    return resolving;
}

void *
real_cuda_lookup_in_use(void)
{
    void *fn;
    memcpy(&fn, &real.cuGetProcAddress_v2, sizeof fn);
    return fn;
}

void *
real_cuda_driver_own(const char *name)
{
    if (driver_handle == NULL || name == NULL)
        return NULL;
    void *fn = real_dl_dlsym(driver_handle, name);
    return fn != NULL && !real_dl_is_self(fn) ? fn : NULL;
}

void *
real_cuda_instead_of_self(const char *name)
{
    if (name == NULL)
        return NULL;
    /* A layer after us that took its own wrapper's address through the global scope got ours:
     * its own definition follows us. */
    void *fn = real_dl_dlsym(RTLD_NEXT, name);
    if (fn != NULL && !real_dl_is_self(fn))
        return fn;
    return real_cuda_driver_own(name);
}

/* True the first time `name` is claimed (a few names at most: then every later one is quiet). */
static bool
first_time(const char *name)
{
    enum { SAID_MAX = 16 };
    static _Atomic(const char *) said[SAID_MAX];
    for (int i = 0; i < SAID_MAX; i++) {
        const char *expected = NULL;
        if (atomic_compare_exchange_strong(&said[i], &expected, name))
            return true;
        if (strcmp(expected, name) == 0)
            return false;
    }
    return false;
}

void
real_cuda_say_missing(const char *name)
{
    if (!first_time(name) || !runtime_log_info())
        return;
    runtime_log("cuprof: the driver hands out cuprof's own %s as its entry point and has no "
                "definition of its own: cuprof answers as a driver without it "
                "(CUDA_ERROR_NOT_FOUND)",
                name);
}

/* What the next layer (another interposer, else the driver) answers for (base, version, flags):
 * its versioned lookup first, then the exported name (the stub library answers every
 * cuGetProcAddress_v2 with CUDA_ERROR_STUB_LIBRARY, old drivers lack it). A pointer into
 * libcuprof (a driver whose table binds to the global scope, a layer that resolved the driver
 * by name) is never taken: the next definition of the name after us, or the driver object's own,
 * replaces it. */
static void *
resolve(void *lib, const char *base, int version, cuuint64_t flags, const char *exported)
{
    void *fn = NULL;
    if (real.cuGetProcAddress_v2 == NULL ||
        real.cuGetProcAddress_v2(base, &fn, version, flags, NULL) != CUDA_SUCCESS)
        fn = NULL;
    if (fn == NULL)
        fn = layers_dlsym(lib, exported);
    if (fn == NULL || !real_dl_is_self(fn))
        return fn;
    fn = real_cuda_instead_of_self(exported);
    if (fn == NULL)
        real_cuda_say_missing(exported);
    return fn;
}

static void
real_cuda_resolve_driver(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (lib == NULL)
        lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (lib == NULL)
        return;
    /* The handle stays open for the process lifetime: the driver is never unloaded under us. */
    driver_handle = lib;
    /* The lookup itself comes from the next layer too, so a layer after us sees our calls. */
    void *gpa = layers_dlsym(lib, "cuGetProcAddress_v2");
    if (gpa != NULL && real_dl_is_self(gpa))
        gpa = real_cuda_instead_of_self("cuGetProcAddress_v2");
    memcpy(&real.cuGetProcAddress_v2, &gpa, sizeof gpa);
    /* Every other row: asked of that lookup at its version, else dlsym'd by its exported name. */
#define RESOLVE(field, lookup, version, flags, exported)                                           \
    {                                                                                              \
        void *fn = resolve(lib, lookup, version, flags, exported);                                 \
        memcpy(&real.field, &fn, sizeof fn);                                                       \
    }
#define DRIVER_LOOKUP ENTRY_POINT_IGNORE
#define DRIVER_WRAPPER(field, exported, lookup, min_version, max_version, ptsz, pfn, wrapper,      \
                       params, args)                                                               \
    RESOLVE(field, lookup, min_version, ENTRY_LOOKUP_FLAGS(ptsz), #exported)
#define DRIVER_CALLED(field, lookup, version, flags, pfn)                                          \
    RESOLVE(field, lookup, version, flags, #field)
#define RUNTIME_WRAPPER ENTRY_POINT_IGNORE
#include "preload/entry_points.def"
#undef DRIVER_LOOKUP
#undef DRIVER_WRAPPER
#undef DRIVER_CALLED
#undef RUNTIME_WRAPPER
#undef RESOLVE
    real_found = true;
}

static void
real_cuda_resolve(void)
{
    resolving = true;
    real_cuda_resolve_driver();
    resolving = false;
    if (real_found)
        atomic_store_explicit(&real_cuda_resolved, &real, memory_order_release);
}

/* The entries cuprof calls itself (never only on the program's behalf), by what each serves. */
struct needed_entry {
    enum real_cuda_need need;
    size_t offset;
    const char *name;
};
#define NEEDED(need, field)                                                                        \
    {                                                                                              \
        need, offsetof(struct real_cuda, field), #field                                            \
    }
static const struct needed_entry needed_entries[] = {
    NEEDED(REAL_CUDA_NEED_TRACE, cuCtxGetCurrent),
    NEEDED(REAL_CUDA_NEED_TRACE, cuCtxGetDevice),
    NEEDED(REAL_CUDA_NEED_TRACE, cuDeviceGet),
    NEEDED(REAL_CUDA_NEED_TRACE, cuDeviceGetCount),
    NEEDED(REAL_CUDA_NEED_TRACE, cuDevicePrimaryCtxRetain),
    NEEDED(REAL_CUDA_NEED_TRACE, cuDevicePrimaryCtxRelease_v2),
    NEEDED(REAL_CUDA_NEED_TRACE, cuCtxPushCurrent_v2),
    NEEDED(REAL_CUDA_NEED_TRACE, cuCtxPopCurrent_v2),
    NEEDED(REAL_CUDA_NEED_TRACE, cuMemAlloc_v2),
    NEEDED(REAL_CUDA_NEED_TRACE, cuMemFree_v2),
    NEEDED(REAL_CUDA_NEED_TRACE, cuMemGetInfo_v2),
    NEEDED(REAL_CUDA_NEED_CACHE, cuCtxSynchronize),
    NEEDED(REAL_CUDA_NEED_CACHE, cuStreamSynchronize),
    NEEDED(REAL_CUDA_NEED_CACHE, cuEventCreate),
    NEEDED(REAL_CUDA_NEED_CACHE, cuEventRecord),
    NEEDED(REAL_CUDA_NEED_CACHE, cuEventQuery),
    NEEDED(REAL_CUDA_NEED_CACHE, cuEventSynchronize),
    NEEDED(REAL_CUDA_NEED_CACHE, cuEventDestroy_v2),
    NEEDED(REAL_CUDA_NEED_VMM, cuMemGetAllocationGranularity),
    NEEDED(REAL_CUDA_NEED_VMM, cuMemAddressReserve),
    NEEDED(REAL_CUDA_NEED_VMM, cuMemAddressFree),
    NEEDED(REAL_CUDA_NEED_VMM, cuMemCreate),
    NEEDED(REAL_CUDA_NEED_VMM, cuMemMap),
    NEEDED(REAL_CUDA_NEED_VMM, cuMemUnmap),
    NEEDED(REAL_CUDA_NEED_VMM, cuMemRelease),
    NEEDED(REAL_CUDA_NEED_VMM, cuMemSetAccess),
    NEEDED(REAL_CUDA_NEED_VMM, cuDeviceGetAttribute),
};
#undef NEEDED

size_t
real_cuda_missing(enum real_cuda_need need, char *names, size_t names_len)
{
    const struct real_cuda *r = real_cuda_get();
    size_t missing = 0, used = 0;
    if (names != NULL && names_len > 0)
        names[0] = '\0';
    for (size_t i = 0; r != NULL && i < sizeof needed_entries / sizeof needed_entries[0]; i++) {
        const struct needed_entry *e = &needed_entries[i];
        void *fn;
        memcpy(&fn, (const char *)r + e->offset, sizeof fn);
        /* Cache mode needs what trace mode needs too. */
        bool wanted =
            e->need == need || (need == REAL_CUDA_NEED_CACHE && e->need == REAL_CUDA_NEED_TRACE);
        if (!wanted || fn != NULL)
            continue;
        missing++;
        if (names != NULL && used < names_len) {
            int n =
                snprintf(names + used, names_len - used, "%s%s", missing > 1 ? ", " : "", e->name);
            used += n > 0 ? (size_t)n : 0;
        }
    }
    return missing;
}

const struct real_cuda *
real_cuda_get_slow(void)
{
    pthread_once(&real_once, real_cuda_resolve);
    return real_found ? &real : NULL;
}
