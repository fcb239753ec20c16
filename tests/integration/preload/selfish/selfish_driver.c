/* selfish_driver.c: a libcuda.so.1 in front of the simulated driver whose lookup table hands out
 * whatever the global scope defines for cuMemGetInfo_v2 (cuprof's export when cuprof is preloaded)
 * and which has no cuMemGetInfo_v2 of its own: the case where no "real" entry point exists.
 * Every other lookup goes to the simulated driver at SIM_DRIVER_PATH. */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#undef cuGetProcAddress
#define EXPORT __attribute__((visibility("default")))

typedef CUresult (*gpa_v2_fn)(const char *, void **, int, cuuint64_t,
                              CUdriverProcAddressQueryResult *);

/* Bound through the GOT like a table in a driver linked without -Bsymbolic-functions: the global
 * scope's definition (cuprof's export), or NULL where nobody defines it. */
extern CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) __attribute__((weak));

static gpa_v2_fn sim_gpa;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void
load_sim(void)
{
    void *lib = dlopen(SIM_DRIVER_PATH, RTLD_NOW | RTLD_LOCAL);
    void *p = lib != NULL ? dlsym(lib, "cuGetProcAddress_v2") : NULL;
    memcpy(&sim_gpa, &p, sizeof p);
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *status);

EXPORT CUresult
cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                    CUdriverProcAddressQueryResult *status)
{
    pthread_once(&once, load_sim);
    if (sim_gpa == NULL)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (symbol != NULL && pfn != NULL && strcmp(symbol, "cuGetProcAddress") == 0) {
        gpa_v2_fn mine = cuGetProcAddress_v2;
        memcpy(pfn, &mine, sizeof mine);
        return CUDA_SUCCESS;
    }
    if (symbol != NULL && pfn != NULL && strcmp(symbol, "cuMemGetInfo") == 0) {
        PFN_cuMemGetInfo_v3020 bound = cuMemGetInfo_v2;
        memcpy(pfn, &bound, sizeof bound);
        if (status != NULL)
            *status =
                *pfn != NULL ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return *pfn != NULL ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
    }
    return sim_gpa(symbol, pfn, version, flags, status);
}
