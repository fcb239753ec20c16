/* real_cuda.c: resolution of the real driver entry points (see real_cuda.h). */
#include "preload/real_cuda.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "preload/real_dl.h"

static struct real_cuda real;
static bool real_found;
static pthread_once_t real_once = PTHREAD_ONCE_INIT;

/* Prefers the driver's own versioned lookup; falls back to the exported name (the stub library
 * answers every cuGetProcAddress_v2 call with CUDA_ERROR_STUB_LIBRARY, old drivers lack it). */
static void *
resolve(void *lib, const char *base, int version, cuuint64_t flags, const char *exported)
{
    void *fn = NULL;
    if (real.cuGetProcAddress_v2 != NULL &&
        real.cuGetProcAddress_v2(base, &fn, version, flags, NULL) == CUDA_SUCCESS && fn != NULL)
        return fn;
    return real_dl_dlsym(lib, exported);
}

/* "cuGetProcAddress_v1" -> "cuGetProcAddress" (see REAL_CUDA_FUNCS). */
static const char *
exported_name(const char *field)
{
    static char buf[64];
    size_t len = strlen(field);
    if (len < 3 || len >= sizeof buf || strcmp(field + len - 3, "_v1") != 0)
        return field;
    memcpy(buf, field, len - 3);
    buf[len - 3] = '\0';
    return buf;
}

static void
real_cuda_resolve(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (lib == NULL)
        lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (lib == NULL)
        return;
    /* The handle stays open for the process lifetime: the driver is never unloaded under us. */
    void *gpa = real_dl_dlsym(lib, "cuGetProcAddress_v2");
    memcpy(&real.cuGetProcAddress_v2, &gpa, sizeof gpa);
#define REAL_CUDA_RESOLVE(field, base, version, flags, type)                                       \
    {                                                                                              \
        void *fn = resolve(lib, base, version, flags, exported_name(#field));                      \
        memcpy(&real.field, &fn, sizeof fn);                                                       \
    }
    REAL_CUDA_FUNCS(REAL_CUDA_RESOLVE)
#undef REAL_CUDA_RESOLVE
    real_found = true;
}

const struct real_cuda *
real_cuda_get(void)
{
    pthread_once(&real_once, real_cuda_resolve);
    return real_found ? &real : NULL;
}
