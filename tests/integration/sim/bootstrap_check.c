/* bootstrap_check: proves the simulated libcudart reaches the driver the way cudart 13 does, the
 * very path a profiler shim hooks. The program exports its own dlsym (-rdynamic), so libcudart's
 * dlsym(handle, "cuGetProcAddress_v2") lands here; it hands out a recording wrapper, and a second
 * one when asked for "cuGetProcAddress"@12000. It then checks the recorded (name, version, flags)
 * sequence and which wrapper each lookup went through. Prints "bootstrap_check: ok N". */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CALLS 512

struct call {
    char name[64];
    int version;
    unsigned long long flags;
    int via; /* 1: the dlsym'd pointer, 2: the pointer handed out for cuGetProcAddress@12000 */
};

static struct call calls[MAX_CALLS];
static int ncalls, dlsym_hits, checks;
static PFN_cuGetProcAddress_v12000 real_gpa;

static void
record(const char *name, int version, cuuint64_t flags, int via)
{
    if (ncalls < MAX_CALLS) {
        snprintf(calls[ncalls].name, sizeof calls[ncalls].name, "%s", name);
        calls[ncalls].version = version;
        calls[ncalls].flags = (unsigned long long)flags;
        calls[ncalls].via = via;
    }
    ncalls++;
}

static CUresult CUDAAPI gpa_second(const char *, void **, int, cuuint64_t,
                                   CUdriverProcAddressQueryResult *);

static CUresult CUDAAPI
gpa_first(const char *name, void **pfn, int version, cuuint64_t flags,
          CUdriverProcAddressQueryResult *st)
{
    record(name, version, flags, 1);
    CUresult r = real_gpa(name, pfn, version, flags, st);
    if (r == CUDA_SUCCESS && strcmp(name, "cuGetProcAddress") == 0 && version >= 12000)
        memcpy(pfn, &(PFN_cuGetProcAddress_v12000){gpa_second}, sizeof *pfn);
    return r;
}

static CUresult CUDAAPI
gpa_second(const char *name, void **pfn, int version, cuuint64_t flags,
           CUdriverProcAddressQueryResult *st)
{
    record(name, version, flags, 2);
    return real_gpa(name, pfn, version, flags, st);
}

/* Interposes libc's dlsym for every library of the process (libcudart included). */
__attribute__((visibility("default"))) void *
dlsym(void *handle, const char *name)
{
    static void *(*real_dlsym)(void *, const char *);
    if (real_dlsym == NULL) {
        void *p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (p == NULL)
            p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        memcpy(&real_dlsym, &p, sizeof p);
    }
    void *sym = real_dlsym(handle, name);
    if (sym != NULL && strcmp(name, "cuGetProcAddress_v2") == 0) {
        dlsym_hits++;
        memcpy(&real_gpa, &sym, sizeof sym);
        memcpy(&sym, &(PFN_cuGetProcAddress_v12000){gpa_first}, sizeof sym);
    }
    return sym;
}

#define EXPECT(what, cond)                                                                         \
    do {                                                                                           \
        checks++;                                                                                  \
        if (!(cond)) {                                                                             \
            printf("bootstrap_check: FAIL %s (line %d)\n", what, __LINE__);                        \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Index of the first recorded lookup of (name, version, flags), or -1. */
static int
find(const char *name, int version, unsigned long long flags)
{
    for (int i = 0; i < ncalls && i < MAX_CALLS; i++)
        if (strcmp(calls[i].name, name) == 0 && calls[i].version == version &&
            calls[i].flags == flags)
            return i;
    return -1;
}

int
main(void)
{
    EXPECT("no lookup before the first runtime call", ncalls == 0);
    void *p = NULL;
    EXPECT("cudaMalloc", cudaMalloc(&p, 1 << 20) == cudaSuccess);
    EXPECT("dlsym(cuGetProcAddress_v2) once", dlsym_hits == 1);
    EXPECT("probe first", ncalls > 4 && strcmp(calls[0].name, "") == 0 && calls[0].via == 1);
    EXPECT("cuInit@2000 second", find("cuInit", 2000, 0) == 1 && calls[1].via == 1);
    EXPECT("cuGetProcAddress@11030", find("cuGetProcAddress", 11030, 0) == 2);
    EXPECT("cuGetProcAddress@12000", find("cuGetProcAddress", 12000, 0) == 3);
    for (int i = 4; i < ncalls; i++)
        EXPECT("later lookups go through the @12000 pointer", calls[i].via == 2);
    static const struct {
        const char *name;
        int version;
        unsigned long long flags;
    } want[] = {
        {"cuMemAlloc", 3020, 0},
        {"cuMemFree", 3020, 0},
        {"cuMemAllocPitch", 3020, 0},
        {"cuMemAllocManaged", 6000, 0},
        {"cuMemGetInfo", 3020, 0},
        {"cuMemAllocAsync", 11020, 0},
        {"cuMemAllocAsync", 11020, 2},
        {"cuMemFreeAsync", 11020, 0},
        {"cuMemFreeAsync", 11020, 2},
        {"cuMemAllocFromPoolAsync", 11020, 0},
        {"cuMemHostAlloc", 2020, 0},
        {"cuCtxGetDevice", 2000, 0},
        {"cuDevicePrimaryCtxRetain", 7000, 0},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        EXPECT(want[i].name, find(want[i].name, want[i].version, want[i].flags) > 3);
    EXPECT("cudaFree", cudaFree(p) == cudaSuccess);

    /* Entry-point queries use the stored pointer: 13000 for the deprecated call, the caller's
     * version for ByVersion. */
    int before = ncalls;
    void *fn = NULL;
    EXPECT("cudaGetDriverEntryPoint",
           cudaGetDriverEntryPoint("cuMemFree", &fn, cudaEnableDefault, NULL) == cudaSuccess &&
               fn != NULL);
    EXPECT("asked at 13000 through the swapped pointer",
           ncalls == before + 1 && calls[before].version == 13000 && calls[before].via == 2 &&
               strcmp(calls[before].name, "cuMemFree") == 0);
    EXPECT("cudaGetDriverEntryPointByVersion",
           cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 3020, cudaEnableDefault, NULL) ==
                   cudaSuccess &&
               fn != NULL);
    EXPECT("asked at the caller's version",
           ncalls == before + 2 && calls[before + 1].version == 3020 && calls[before + 1].via == 2);
    printf("bootstrap_check: ok %d (%d lookups)\n", checks, ncalls);
    return 0;
}
