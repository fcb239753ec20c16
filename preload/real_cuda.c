/* real_cuda.c: resolution of the real driver entry points (see real_cuda.h). */
#include "preload/real_cuda.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
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

const struct real_cuda *
real_cuda_get_slow(void)
{
    pthread_once(&real_once, real_cuda_resolve);
    return real_found ? &real : NULL;
}
