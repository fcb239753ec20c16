/* lean_driver.c: a libcuda.so.1 in front of the simulated driver that lacks the entry points named
 * in LEAN_DRIVER_HIDE (a comma list of lookup names, "cuMemCreate,cuMemMap"): its lookup answers
 * CUDA_ERROR_NOT_FOUND for them and it exports nothing but the lookup, so neither
 * cuGetProcAddress nor dlsym finds them; as an older driver, a virtualization layer or a stub
 * would. Every other lookup goes to the simulated driver at SIM_DRIVER_PATH; a lookup of the
 * lookup itself gets this one back, so nothing reaches around the filter. */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#undef cuGetProcAddress
#define EXPORT __attribute__((visibility("default")))

typedef CUresult (*gpa_v2_fn)(const char *, void **, int, cuuint64_t,
                              CUdriverProcAddressQueryResult *);
typedef CUresult (*gpa_v1_fn)(const char *, void **, int, cuuint64_t);

static gpa_v2_fn sim_gpa;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void
load_sim(void)
{
    void *lib = dlopen(SIM_DRIVER_PATH, RTLD_NOW | RTLD_LOCAL);
    void *p = lib != NULL ? dlsym(lib, "cuGetProcAddress_v2") : NULL;
    memcpy(&sim_gpa, &p, sizeof p);
}

/* True when `symbol` is in LEAN_DRIVER_HIDE. */
static int
hidden(const char *symbol)
{
    const char *list = getenv("LEAN_DRIVER_HIDE");
    size_t n = strlen(symbol);
    for (const char *p = list; p != NULL && *p != '\0';) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, symbol, n) == 0)
            return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *status);
EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);

EXPORT CUresult
cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                    CUdriverProcAddressQueryResult *status)
{
    pthread_once(&once, load_sim);
    if (sim_gpa == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (symbol != NULL && pfn != NULL && strcmp(symbol, "cuGetProcAddress") == 0) {
        /* Each ABI gets its own signature's function. */
        if (version >= 12000) {
            gpa_v2_fn mine = cuGetProcAddress_v2;
            memcpy(pfn, &mine, sizeof mine);
        } else {
            gpa_v1_fn mine = cuGetProcAddress;
            memcpy(pfn, &mine, sizeof mine);
        }
        if (status != NULL)
            *status = CU_GET_PROC_ADDRESS_SUCCESS;
        return CUDA_SUCCESS;
    }
    if (symbol != NULL && pfn != NULL && hidden(symbol)) {
        *pfn = NULL;
        if (status != NULL)
            *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_ERROR_NOT_FOUND;
    }
    return sim_gpa(symbol, pfn, version, flags, status);
}

EXPORT CUresult
cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}
