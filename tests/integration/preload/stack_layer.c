/* stack_layer.c: a second CUDA interposer of the shape GPU-sharing layers have (HAMi-core's
 * libvgpu.so): it exports dlsym, cuGetProcAddress(_v2), cuMemAlloc_v2 and cuMemFree_v2, hands its
 * own wrappers out of both lookups, and forwards to the driver it found by handle (dlopen of
 * libcuda.so.1, glibc's own dlsym). Tests preload it before and after libcuprof.so.
 *
 * It counts the device allocations that pass through it and can enforce a quota:
 *   LAYER_QUOTA=BYTES  a cuMemAlloc that would take the live total over BYTES fails with
 *                      CUDA_ERROR_OUT_OF_MEMORY (what a quota layer answers);
 *   LAYER_LOG=PATH     one line per allocation/free: "alloc ADDR SIZE" / "free ADDR".
 * At exit it prints "layer: allocs=N frees=M peak=B" on stderr. */
#include <cuda.h>
#undef cuGetProcAddress
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT          __attribute__((visibility("default")))
#define TO_FN(dst, src) memcpy(&(dst), &(src), sizeof(dst))

typedef void *(*dlsym_fn)(void *, const char *);
typedef CUresult (*gpa_v2_fn)(const char *, void **, int, cuuint64_t,
                              CUdriverProcAddressQueryResult *);
typedef CUresult (*gpa_v1_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);

static struct {
    dlsym_fn dlsym;
    gpa_v2_fn gpa_v2;
    gpa_v1_fn gpa_v1;
    alloc_fn alloc;
    free_fn free;
} driver;
static pthread_once_t driver_once = PTHREAD_ONCE_INIT;

/* Live allocations, for the quota: a small table is enough for the test programs. */
enum { MAX_LIVE = 1 << 14 };
static struct {
    CUdeviceptr addr;
    size_t size;
} live[MAX_LIVE];
static size_t live_bytes, peak_bytes, quota;
static unsigned long n_allocs, n_frees;
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *log_file;

/* glibc's dlsym; idempotent, so racing threads store the same pointer. */
static dlsym_fn
libc_dlsym(void)
{
    static _Atomic(dlsym_fn) fn;
    dlsym_fn f = atomic_load(&fn);
    if (f == NULL) {
        void *p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        TO_FN(f, p);
        atomic_store(&fn, f);
    }
    return f;
}

static void
find_driver(void)
{
    driver.dlsym = libc_dlsym();
    void *p;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (lib == NULL)
        return;
    p = driver.dlsym(lib, "cuGetProcAddress_v2");
    TO_FN(driver.gpa_v2, p);
    p = driver.dlsym(lib, "cuGetProcAddress");
    TO_FN(driver.gpa_v1, p);
    p = driver.dlsym(lib, "cuMemAlloc_v2");
    TO_FN(driver.alloc, p);
    p = driver.dlsym(lib, "cuMemFree_v2");
    TO_FN(driver.free, p);
    const char *q = getenv("LAYER_QUOTA");
    quota = q != NULL ? strtoull(q, NULL, 10) : 0;
    const char *path = getenv("LAYER_LOG");
    if (path != NULL)
        log_file = fopen(path, "w");
}

static void
init(void)
{
    pthread_once(&driver_once, find_driver);
}

EXPORT CUresult
cuMemAlloc_v2(CUdeviceptr *dptr, size_t size)
{
    init();
    if (driver.alloc == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&live_lock);
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    size_t slot = 0;
    while (slot < MAX_LIVE && live[slot].addr != 0)
        slot++;
    if (slot < MAX_LIVE && (quota == 0 || live_bytes + size <= quota))
        r = driver.alloc(dptr, size);
    if (r == CUDA_SUCCESS) {
        live[slot].addr = *dptr;
        live[slot].size = size;
        live_bytes += size;
        if (live_bytes > peak_bytes)
            peak_bytes = live_bytes;
        n_allocs++;
        if (log_file != NULL)
            fprintf(log_file, "alloc %llu %zu\n", (unsigned long long)*dptr, size);
    }
    pthread_mutex_unlock(&live_lock);
    return r;
}

EXPORT CUresult
cuMemFree_v2(CUdeviceptr ptr)
{
    init();
    if (driver.free == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = driver.free(ptr);
    if (r != CUDA_SUCCESS || ptr == 0)
        return r;
    pthread_mutex_lock(&live_lock);
    for (size_t i = 0; i < MAX_LIVE; i++)
        if (live[i].addr == ptr) {
            live_bytes -= live[i].size;
            live[i].addr = 0;
            break;
        }
    n_frees++;
    if (log_file != NULL)
        fprintf(log_file, "free %llu\n", (unsigned long long)ptr);
    pthread_mutex_unlock(&live_lock);
    return r;
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *status);
EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);

/* Our own wrapper for the names this layer hooks, else NULL. */
static void *
own(const char *name)
{
    void *p = NULL;
    if (strcmp(name, "cuMemAlloc_v2") == 0) {
        alloc_fn f = cuMemAlloc_v2;
        TO_FN(p, f);
    } else if (strcmp(name, "cuMemFree_v2") == 0) {
        free_fn f = cuMemFree_v2;
        TO_FN(p, f);
    } else if (strcmp(name, "cuGetProcAddress_v2") == 0) {
        gpa_v2_fn f = cuGetProcAddress_v2;
        TO_FN(p, f);
    } else if (strcmp(name, "cuGetProcAddress") == 0) {
        gpa_v1_fn f = cuGetProcAddress;
        TO_FN(p, f);
    }
    return p;
}

/* The versioned name a (base name, version) lookup stands for, for the hooked entries. */
static void *
own_for_lookup(const char *symbol, int version)
{
    if (strcmp(symbol, "cuMemAlloc") == 0 && version >= 3020)
        return own("cuMemAlloc_v2");
    if (strcmp(symbol, "cuMemFree") == 0 && version >= 3020)
        return own("cuMemFree_v2");
    if (strcmp(symbol, "cuGetProcAddress") == 0)
        return own(version >= 12000 ? "cuGetProcAddress_v2" : "cuGetProcAddress");
    return NULL;
}

EXPORT CUresult
cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                    CUdriverProcAddressQueryResult *status)
{
    init();
    if (driver.gpa_v2 == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = driver.gpa_v2(symbol, pfn, version, flags, status);
    void *mine = r == CUDA_SUCCESS && symbol != NULL ? own_for_lookup(symbol, version) : NULL;
    if (mine != NULL)
        *pfn = mine;
    return r;
}

EXPORT CUresult
cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    init();
    if (driver.gpa_v1 == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = driver.gpa_v1(symbol, pfn, version, flags);
    void *mine = r == CUDA_SUCCESS && symbol != NULL ? own_for_lookup(symbol, version) : NULL;
    if (mine != NULL)
        *pfn = mine;
    return r;
}

EXPORT void *
dlsym(void *handle, const char *name)
{
    void *sym = libc_dlsym()(handle, name);
    if (sym != NULL && handle != RTLD_NEXT && handle != RTLD_DEFAULT) {
        void *mine = own(name);
        if (mine != NULL)
            return mine;
    }
    return sym;
}

__attribute__((destructor)) static void
report(void)
{
    if (log_file != NULL)
        fclose(log_file);
    fprintf(stderr, "layer: allocs=%lu frees=%lu peak=%zu\n", n_allocs, n_frees, peak_bytes);
}
