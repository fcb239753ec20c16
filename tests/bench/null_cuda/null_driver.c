/* null_driver.c: a libcuda.so.1 that adds nothing of its own, for benchmarks only: one device,
 * one context that is always current, host memory as device memory, every synchronization
 * already complete. It answers the calls cuprof and null_runtime.c make, so the time a pair
 * takes under the shim is the shim's and its allocator's (issue 14's "a runtime that adds
 * nothing"). Not a test double: the simulator (tests/sim/) is the faithful one. */
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define NULL_MEM ((size_t)80 << 30) /* what cuMemGetInfo and cuDeviceTotalMem report */

static int dummy_ctx, dummy_event;

CUresult CUDAAPI
cuInit(unsigned int flags)
{
    (void)flags;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuDriverGetVersion(int *version)
{
    *version = 13000;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuDeviceGetCount(int *count)
{
    *count = 1;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuDeviceGet(CUdevice *device, int ordinal)
{
    if (ordinal != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *device = 0;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuCtxGetDevice(CUdevice *device)
{
    *device = 0;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuCtxGetCurrent(CUcontext *ctx)
{
    *ctx = (CUcontext)(void *)&dummy_ctx;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuCtxSynchronize(void)
{
    return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuCtxPushCurrent_v2(CUcontext ctx)
{
    (void)ctx;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuCtxPopCurrent_v2(CUcontext *ctx)
{
    if (ctx != NULL)
        *ctx = (CUcontext)(void *)&dummy_ctx;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice device)
{
    (void)device;
    *ctx = (CUcontext)(void *)&dummy_ctx;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuDevicePrimaryCtxRelease_v2(CUdevice device)
{
    (void)device;
    return CUDA_SUCCESS;
}

/* libcuda exports the pre-11 ABI under the plain name too; cuda.h maps that name to _v2. */
#undef cuDevicePrimaryCtxRelease
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice device);
CUresult CUDAAPI
cuDevicePrimaryCtxRelease(CUdevice device)
{
    (void)device;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuDevicePrimaryCtxGetState(CUdevice device, unsigned int *flags, int *active)
{
    (void)device;
    *flags = 0;
    *active = 1;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuDeviceTotalMem_v2(size_t *bytes, CUdevice device)
{
    (void)device;
    *bytes = NULL_MEM;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
    *free_bytes = NULL_MEM;
    *total_bytes = NULL_MEM;
    return CUDA_SUCCESS;
}

/* Device memory is address space only (nothing reads or writes it): a bump pointer through one
 * reservation; a freed range goes on a short stack and is reused by exact size, so a pair costs
 * a few dozen instructions whatever the heap looks like (glibc's aligned_alloc did not). A bench
 * holds a handful of ranges at a time; past NULL_RANGES live ones the driver is out of memory. */
#define NULL_SPAN   ((uintptr_t)1 << 40)
#define NULL_RANGES 256
struct range {
    uintptr_t addr;
    size_t size;
};
static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t span_base, span_next;
static size_t span_size;
static struct range live[NULL_RANGES], freed[NULL_RANGES];
static size_t live_count, freed_count;

static uintptr_t
take_locked(size_t size)
{
    for (size_t i = freed_count; i-- > 0;) {
        if (freed[i].size == size) {
            uintptr_t addr = freed[i].addr;
            freed[i] = freed[--freed_count];
            return addr;
        }
    }
    /* As large a reservation as the process may make (valgrind allows far less than 1 TiB). */
    for (size_t span = NULL_SPAN; span_base == 0 && span >= ((size_t)1 << 30); span /= 2) {
        void *p = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p != MAP_FAILED) {
            span_base = span_next = ((uintptr_t)p + 511) & ~(uintptr_t)511;
            span_size = span - 512;
        }
    }
    if (span_base == 0 || size > span_size - (span_next - span_base))
        return 0;
    uintptr_t addr = span_next;
    span_next += size;
    return addr;
}

CUresult CUDAAPI
cuMemAlloc_v2(CUdeviceptr *dptr, size_t size)
{
    size = (size + 511) & ~(size_t)511; /* 512-byte aligned, as the driver's */
    pthread_mutex_lock(&mem_lock);
    uintptr_t addr = live_count < NULL_RANGES ? take_locked(size) : 0;
    if (addr != 0)
        live[live_count++] = (struct range){addr, size};
    pthread_mutex_unlock(&mem_lock);
    if (addr == 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *dptr = (CUdeviceptr)addr;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuMemFree_v2(CUdeviceptr dptr)
{
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mem_lock);
    for (size_t i = live_count; i-- > 0;) {
        if (live[i].addr == (uintptr_t)dptr) {
            if (freed_count < NULL_RANGES)
                freed[freed_count++] = live[i];
            live[i] = live[--live_count];
            r = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&mem_lock);
    return r;
}

CUresult CUDAAPI
cuStreamSynchronize(CUstream stream)
{
    (void)stream;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus *status)
{
    (void)stream;
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuEventCreate(CUevent *event, unsigned int flags)
{
    (void)flags;
    *event = (CUevent)(void *)&dummy_event;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuEventRecord(CUevent event, CUstream stream)
{
    (void)event;
    (void)stream;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuEventQuery(CUevent event)
{
    (void)event;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuEventSynchronize(CUevent event)
{
    (void)event;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuEventDestroy_v2(CUevent event)
{
    (void)event;
    return CUDA_SUCCESS;
}

/* A launch of anything, done at once: what a launch costs cuprof's wrapper is measured. */
CUresult CUDAAPI
cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
               unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
               unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)
{
    (void)f, (void)gridDimX, (void)gridDimY, (void)gridDimZ, (void)blockDimX, (void)blockDimY;
    (void)blockDimZ, (void)sharedMemBytes, (void)hStream, (void)kernelParams, (void)extra;
    return CUDA_SUCCESS;
}

typedef void (*any_fn)(void);
#define ENTRY(base, fn)                                                                            \
    {                                                                                              \
        base, (any_fn)(fn)                                                                         \
    }
static const struct {
    const char *base;
    any_fn fn;
} entries[] = {
    ENTRY("cuInit", cuInit),
    ENTRY("cuDriverGetVersion", cuDriverGetVersion),
    ENTRY("cuDeviceGetCount", cuDeviceGetCount),
    ENTRY("cuDeviceGet", cuDeviceGet),
    ENTRY("cuCtxGetDevice", cuCtxGetDevice),
    ENTRY("cuCtxGetCurrent", cuCtxGetCurrent),
    ENTRY("cuCtxSynchronize", cuCtxSynchronize),
    ENTRY("cuCtxPushCurrent", cuCtxPushCurrent_v2),
    ENTRY("cuCtxPopCurrent", cuCtxPopCurrent_v2),
    ENTRY("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain),
    ENTRY("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease_v2),
    ENTRY("cuDevicePrimaryCtxGetState", cuDevicePrimaryCtxGetState),
    ENTRY("cuDeviceTotalMem", cuDeviceTotalMem_v2),
    ENTRY("cuMemGetInfo", cuMemGetInfo_v2),
    ENTRY("cuMemAlloc", cuMemAlloc_v2),
    ENTRY("cuMemFree", cuMemFree_v2),
    ENTRY("cuStreamSynchronize", cuStreamSynchronize),
    ENTRY("cuStreamIsCapturing", cuStreamIsCapturing),
    ENTRY("cuEventCreate", cuEventCreate),
    ENTRY("cuEventRecord", cuEventRecord),
    ENTRY("cuEventQuery", cuEventQuery),
    ENTRY("cuEventSynchronize", cuEventSynchronize),
    ENTRY("cuEventDestroy", cuEventDestroy_v2),
    ENTRY("cuLaunchKernel", cuLaunchKernel),
};

CUresult CUDAAPI
cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                    CUdriverProcAddressQueryResult *status)
{
    (void)version;
    (void)flags;
    for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++) {
        if (strcmp(entries[i].base, symbol) == 0) {
            memcpy(pfn, &entries[i].fn, sizeof(void *)); /* as dlsym hands out functions */
            if (status != NULL)
                *status = CU_GET_PROC_ADDRESS_SUCCESS;
            return CUDA_SUCCESS;
        }
    }
    *pfn = NULL;
    if (status != NULL)
        *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
}
