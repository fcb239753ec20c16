/* null_runtime.c: a libcudart.so.13 with cudaMalloc, cudaFree, cudaRuntimeGetVersion and
 * cudaPeekAtLastError only,
 * for benchmarks: each allocation call is
 * one call to the driver entry point it looked up once through cuGetProcAddress_v2, as NVIDIA's
 * runtime reaches the driver (so cuprof's driver-level wrapper serves it), and nothing else. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t,
                           CUdriverProcAddressQueryResult *);
typedef CUresult (*mem_alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*mem_free_fn)(CUdeviceptr);

static mem_alloc_fn driver_alloc;
static mem_free_fn driver_free;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void
load_driver(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    void *sym = lib != NULL ? dlsym(lib, "cuGetProcAddress_v2") : NULL;
    void *fn = NULL;
    gpa_fn gpa;
    if (sym == NULL)
        return;
    memcpy(&gpa, &sym, sizeof sym); /* POSIX: a data pointer from dlsym holds a function */
    if (gpa("cuMemAlloc", &fn, 12000, 0, NULL) == CUDA_SUCCESS)
        memcpy(&driver_alloc, &fn, sizeof fn);
    if (gpa("cuMemFree", &fn, 12000, 0, NULL) == CUDA_SUCCESS)
        memcpy(&driver_free, &fn, sizeof fn);
}

cudaError_t
cudaMalloc(void **ptr, size_t size)
{
    pthread_once(&once, load_driver);
    if (driver_alloc == NULL)
        return cudaErrorInitializationError;
    CUdeviceptr p = 0;
    if (driver_alloc(&p, size) != CUDA_SUCCESS)
        return cudaErrorMemoryAllocation;
    *ptr = (void *)p;
    return cudaSuccess;
}

cudaError_t
cudaFree(void *ptr)
{
    pthread_once(&once, load_driver);
    if (driver_free == NULL)
        return cudaErrorInitializationError;
    return driver_free((CUdeviceptr)ptr) == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

cudaError_t
cudaRuntimeGetVersion(int *version)
{
    *version = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t
cudaPeekAtLastError(void)
{
    return cudaSuccess; /* this runtime keeps no error */
}
