/* fake_libcuda.c: a libcuda.so.1 that is the simulated driver (FAKECUDA_REAL, a path) with one
 * lie: from the FAKECUDA_FROM-th successful cuMemAlloc_v2 on (default 2), the pointer it returns
 * is replaced as FAKECUDA_LIE says: "zero" (NULL), "unaligned" (the real one + 8), "dup" (the
 * last pointer it returned truthfully). The real allocation behind a lie is leaked. And
 * cuMemGetInfo_v2 lies as FAKECUDA_MEMINFO says: "zero" (total 0), "swapped" (free > total),
 * "max" (total SIZE_MAX). Everything
 * else is the simulator's: only cuGetProcAddress(_v2) is exported, which is all the runtime and
 * cuprof look up. A test fixture, never linked to anything. */
/* The driver's own view of cuda.h: cuGetProcAddress is not macro-renamed to _v2. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t,
                           CUdriverProcAddressQueryResult *);
typedef CUresult (*gpa_v1_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*info_fn)(size_t *, size_t *);

static pthread_once_t once = PTHREAD_ONCE_INIT;
static gpa_fn sim_gpa;
static alloc_fn sim_alloc;
static info_fn sim_info;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long successes, from = 2;
static CUdeviceptr last_truth;

static void
load(void)
{
    const char *path = getenv("FAKECUDA_REAL");
    void *sim = path != NULL ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    /* glibc's own dlsym: cuprof's (preloaded) hands out its cuGetProcAddress for this name. */
    void *libc_dlsym = dlvsym(RTLD_DEFAULT, "dlsym", "GLIBC_2.34");
    if (libc_dlsym == NULL)
        libc_dlsym = dlvsym(RTLD_DEFAULT, "dlsym", "GLIBC_2.2.5");
    void *(*lookup)(void *, const char *) = dlsym;
    if (libc_dlsym != NULL)
        memcpy(&lookup, &libc_dlsym, sizeof libc_dlsym);
    void *gpa = sim != NULL ? lookup(sim, "cuGetProcAddress_v2") : NULL;
    if (gpa == NULL) {
        fprintf(stderr, "fake_libcuda: cannot load FAKECUDA_REAL=%s\n", path ? path : "(unset)");
        abort();
    }
    memcpy(&sim_gpa, &gpa, sizeof gpa);
    void *fn = NULL;
    if (sim_gpa("cuMemAlloc", &fn, 3020, 0, NULL) != CUDA_SUCCESS || fn == NULL)
        abort();
    memcpy(&sim_alloc, &fn, sizeof fn);
    if (sim_gpa("cuMemGetInfo", &fn, 3020, 0, NULL) != CUDA_SUCCESS || fn == NULL)
        abort();
    memcpy(&sim_info, &fn, sizeof fn);
    if (getenv("FAKECUDA_FROM") != NULL)
        from = atol(getenv("FAKECUDA_FROM"));
}

static CUresult
fake_alloc(CUdeviceptr *dptr, size_t size)
{
    CUresult r = sim_alloc(dptr, size);
    if (r != CUDA_SUCCESS)
        return r;
    const char *lie = getenv("FAKECUDA_LIE");
    pthread_mutex_lock(&lock);
    if (++successes < from || lie == NULL) {
        last_truth = *dptr;
    } else if (strcmp(lie, "zero") == 0) {
        *dptr = 0;
    } else if (strcmp(lie, "unaligned") == 0) {
        *dptr += 8;
    } else if (strcmp(lie, "dup") == 0) {
        *dptr = last_truth;
    }
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

static CUresult
fake_info(size_t *free_bytes, size_t *total_bytes)
{
    CUresult r = sim_info(free_bytes, total_bytes);
    const char *lie = getenv("FAKECUDA_MEMINFO");
    if (r != CUDA_SUCCESS || lie == NULL || free_bytes == NULL || total_bytes == NULL)
        return r;
    if (strcmp(lie, "zero") == 0) {
        *total_bytes = 0;
    } else if (strcmp(lie, "swapped") == 0) {
        *free_bytes = *total_bytes + 1;
    } else if (strcmp(lie, "max") == 0) {
        *total_bytes = SIZE_MAX;
    }
    return r;
}

__attribute__((visibility("default"))) CUresult cuGetProcAddress(const char *symbol, void **pfn,
                                                                 int version, cuuint64_t flags);

__attribute__((visibility("default"))) CUresult
cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                    CUdriverProcAddressQueryResult *status)
{
    pthread_once(&once, load);
    CUresult r = sim_gpa(symbol, pfn, version, flags, status);
    if (r != CUDA_SUCCESS || symbol == NULL || pfn == NULL)
        return r;
    if (strcmp(symbol, "cuMemAlloc") == 0 && version >= 3020) {
        alloc_fn f = fake_alloc;
        memcpy(pfn, &f, sizeof f);
    } else if (strcmp(symbol, "cuMemGetInfo") == 0 && version >= 3020) {
        info_fn f = fake_info;
        memcpy(pfn, &f, sizeof f);
    } else if (strcmp(symbol, "cuGetProcAddress") == 0) {
        /* Lookups through the returned lookup must keep the lie. */
        if (version >= 12000) {
            gpa_fn f = cuGetProcAddress_v2;
            memcpy(pfn, &f, sizeof f);
        } else {
            gpa_v1_fn f = cuGetProcAddress;
            memcpy(pfn, &f, sizeof f);
        }
    }
    return r;
}

/* The 4-argument form, for callers that ask for it by name. */
__attribute__((visibility("default"))) CUresult
cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}
