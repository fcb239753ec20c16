/* rt_memory: the runtime's allocation calls, each one driver call through the table, with the
 * runtime's own rules on top (size 0 -> NULL + success, cudaFree(NULL) -> success, and so on).
 * SIMCUDA_RT_LOG names a file that gets one line per cudaMalloc and cudaFree the runtime itself
 * ran ("cudaMalloc SIZE", "cudaFree ADDRESS"), so a test sees which calls an interposer answered
 * without the runtime. */
#include "rt_api.h"
#include "rt_driver.h"
#include "rt_state.h"

#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

static pthread_once_t call_log_once = PTHREAD_ONCE_INIT;
static int call_log_fd = -1;

static void
call_log_open(void)
{
    const char *path = getenv("SIMCUDA_RT_LOG");
    if (path == NULL || *path == '\0')
        return;
    call_log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (call_log_fd < 0)
        fprintf(stderr, "cuprof: sim: SIMCUDA_RT_LOG=\"%s\": cannot open the file\n", path);
}

static void
call_log(const char *call, uint64_t value)
{
    pthread_once(&call_log_once, call_log_open);
    if (call_log_fd < 0)
        return;
    char line[64];
    int n = snprintf(line, sizeof(line), "%s %" PRIu64 "\n", call, value);
    if (n > 0 && (size_t)n < sizeof(line))
        (void)!write(call_log_fd, line, (size_t)n); /* one write per line: no interleaving */
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMalloc(void **devPtr, size_t size)
{
    call_log("cudaMalloc", size);
    if (devPtr == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    RT_CTX_OR_RETURN();
    *devPtr = NULL;
    if (size == 0) /* the runtime answers a zero-size request with NULL and success */
        return cudaSuccess;
    CUdeviceptr p = 0;
    CUresult r = RT_CALL(cuMemAlloc, &p, size);
    if (r != CUDA_SUCCESS)
        return rt_state_cu(r);
    *devPtr = (void *)(uintptr_t)p;
    return cudaSuccess;
}

RT_EXPORT cudaError_t CUDARTAPI
cudaFree(void *devPtr)
{
    call_log("cudaFree", (uint64_t)(uintptr_t)devPtr);
    /* cudaFree(NULL) is the classic "initialise the context" idiom: it does init, then succeeds. */
    RT_CTX_OR_RETURN();
    if (devPtr == NULL)
        return cudaSuccess;
    return rt_state_cu(RT_CALL(cuMemFree, (CUdeviceptr)(uintptr_t)devPtr));
}

static cudaError_t
rt_memory_alloc_async(void **devPtr, size_t size, cudaStream_t s, PFN_cuMemAllocAsync_v11020 fn)
{
    if (devPtr == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    RT_CTX_OR_RETURN();
    *devPtr = NULL;
    if (size == 0)
        return cudaSuccess;
    if (fn == NULL)
        return rt_state_ret(cudaErrorCallRequiresNewerDriver);
    CUdeviceptr p = 0;
    CUresult r = fn(&p, size, (CUstream)s);
    if (r != CUDA_SUCCESS)
        return rt_state_cu(r);
    *devPtr = (void *)(uintptr_t)p;
    return cudaSuccess;
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
    return rt_memory_alloc_async(devPtr, size, hStream, rt_drv.cuMemAllocAsync);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream)
{
    return rt_memory_alloc_async(devPtr, size, hStream, rt_drv.cuMemAllocAsync_ptsz);
}

static cudaError_t
rt_memory_free_async(void *devPtr, cudaStream_t s, PFN_cuMemFreeAsync_v11020 fn)
{
    RT_CTX_OR_RETURN();
    if (devPtr == NULL) /* mirrors the NULL that a zero-size cudaMallocAsync hands out */
        return cudaSuccess;
    if (fn == NULL)
        return rt_state_ret(cudaErrorCallRequiresNewerDriver);
    return rt_state_cu(fn((CUdeviceptr)(uintptr_t)devPtr, (CUstream)s));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
    return rt_memory_free_async(devPtr, hStream, rt_drv.cuMemFreeAsync);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream)
{
    return rt_memory_free_async(devPtr, hStream, rt_drv.cuMemFreeAsync_ptsz);
}

static cudaError_t
rt_memory_alloc_pool(void **ptr, size_t size, cudaMemPool_t pool, cudaStream_t s,
                     PFN_cuMemAllocFromPoolAsync_v11020 fn)
{
    if (ptr == NULL || pool == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    RT_CTX_OR_RETURN();
    *ptr = NULL;
    if (size == 0)
        return cudaSuccess;
    if (fn == NULL)
        return rt_state_ret(cudaErrorCallRequiresNewerDriver);
    CUdeviceptr p = 0;
    CUresult r = fn(&p, size, (CUmemoryPool)pool, (CUstream)s);
    if (r != CUDA_SUCCESS)
        return rt_state_cu(r);
    *ptr = (void *)(uintptr_t)p;
    return cudaSuccess;
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream)
{
    return rt_memory_alloc_pool(ptr, size, memPool, stream, rt_drv.cuMemAllocFromPoolAsync);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream)
{
    return rt_memory_alloc_pool(ptr, size, memPool, stream, rt_drv.cuMemAllocFromPoolAsync_ptsz);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
    if (devPtr == NULL || pitch == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    RT_CTX_OR_RETURN();
    *devPtr = NULL;
    if (width == 0 || height == 0) { /* an empty 2D allocation behaves like cudaMalloc(0) */
        *pitch = 0;
        return cudaSuccess;
    }
    CUdeviceptr p = 0;
    size_t pp = 0;
    /* Element size 4: the runtime's choice; it only bounds the pitch the driver may pick. */
    CUresult r = RT_CALL(cuMemAllocPitch, &p, &pp, width, height, 4);
    if (r != CUDA_SUCCESS)
        return rt_state_cu(r);
    *devPtr = (void *)(uintptr_t)p;
    *pitch = pp;
    return cudaSuccess;
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMalloc3D(struct cudaPitchedPtr *pitchedDevPtr, struct cudaExtent extent)
{
    if (pitchedDevPtr == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    if (extent.depth != 0 && extent.height > SIZE_MAX / extent.depth)
        return rt_state_ret(cudaErrorInvalidValue);
    void *p = NULL;
    size_t pitch = 0;
    cudaError_t e = cudaMallocPitch(&p, &pitch, extent.width, extent.height * extent.depth);
    if (e != cudaSuccess)
        return e;
    pitchedDevPtr->ptr = p;
    pitchedDevPtr->pitch = pitch;
    pitchedDevPtr->xsize = extent.width;
    pitchedDevPtr->ysize = extent.height;
    return cudaSuccess;
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
    if (devPtr == NULL || size == 0) /* documented: size 0 is cudaErrorInvalidValue here */
        return rt_state_ret(cudaErrorInvalidValue);
    RT_CTX_OR_RETURN();
    CUdeviceptr p = 0;
    CUresult r = RT_CALL(cuMemAllocManaged, &p, size, flags);
    if (r != CUDA_SUCCESS)
        return rt_state_cu(r);
    *devPtr = (void *)(uintptr_t)p;
    return cudaSuccess;
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMallocHost(void **ptr, size_t size)
{
    if (ptr == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    RT_CTX_OR_RETURN();
    *ptr = NULL;
    if (size == 0)
        return cudaSuccess;
    /* cudart 13 never calls cuMemAllocHost: pinned host memory comes from cuMemHostAlloc. */
    return rt_state_cu(RT_CALL(cuMemHostAlloc, ptr, size, 0));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaFreeHost(void *ptr)
{
    RT_CTX_OR_RETURN();
    if (ptr == NULL)
        return cudaSuccess;
    return rt_state_cu(RT_CALL(cuMemFreeHost, ptr));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemGetInfo(size_t *free, size_t *total)
{
    if (free == NULL || total == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuMemGetInfo, free, total));
}

/* What NVIDIA's runtime 13.0 answers (measured with driver 580 on an H200): device memory is
 * cudaMemoryTypeDevice on its device with itself as device pointer; a pointer CUDA does not
 * know succeeds as cudaMemoryTypeUnregistered on device -2 with no device pointer. */
RT_EXPORT cudaError_t CUDARTAPI
cudaPointerGetAttributes(struct cudaPointerAttributes *attributes, const void *ptr)
{
    if (attributes == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    RT_CTX_OR_RETURN();
    CUpointer_attribute asked[] = {
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
        CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
        CU_POINTER_ATTRIBUTE_HOST_POINTER};
    unsigned int type = 0;
    unsigned int managed = 0; /* the driver writes 4 bytes for a yes/no attribute */
    int ordinal = -2;
    CUdeviceptr device_pointer = 0;
    void *host_pointer = NULL;
    void *data[] = {&type, &managed, &ordinal, &device_pointer, &host_pointer};
    CUresult r = RT_CALL(cuPointerGetAttributes, 5, asked, data, (CUdeviceptr)(uintptr_t)ptr);
    if (r != CUDA_SUCCESS)
        return rt_state_cu(r);
    attributes->type = managed                        ? cudaMemoryTypeManaged
                       : type == CU_MEMORYTYPE_DEVICE ? cudaMemoryTypeDevice
                       : type == CU_MEMORYTYPE_HOST   ? cudaMemoryTypeHost
                                                      : cudaMemoryTypeUnregistered;
    attributes->device = ordinal;
    attributes->devicePointer = (void *)(uintptr_t)device_pointer;
    attributes->hostPointer = attributes->type == cudaMemoryTypeDevice ? NULL : host_pointer;
    return cudaSuccess;
}

/* The driver's legacy IPC handle, byte for byte (cudaIpcMemHandle_t has the same 64 bytes). */
RT_EXPORT cudaError_t CUDARTAPI
cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr)
{
    if (handle == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    RT_CTX_OR_RETURN();
    CUipcMemHandle h;
    CUresult r = RT_CALL(cuIpcGetMemHandle, &h, (CUdeviceptr)(uintptr_t)devPtr);
    if (r == CUDA_SUCCESS)
        memcpy(handle->reserved, h.reserved, sizeof(handle->reserved));
    return rt_state_cu(r);
}

/* Managed-memory hints: the driver checks the range (one cudaMallocManaged allocation) and the
 * location; nothing moves on the simulated device. cudaMemLocation and cudaMemoryAdvise have
 * the driver's values. */
static CUmemLocation
rt_memory_location(struct cudaMemLocation location)
{
    CUmemLocation l = {.type = (CUmemLocationType)location.type, .id = location.id};
    return l;
}

static cudaError_t
rt_memory_prefetch(const void *devPtr, size_t count, struct cudaMemLocation location,
                   unsigned int flags, cudaStream_t stream, PFN_cuMemPrefetchAsync_v12020 fn)
{
    RT_CTX_OR_RETURN();
    if (fn == NULL)
        return rt_state_ret(cudaErrorCallRequiresNewerDriver);
    return rt_state_cu(fn((CUdeviceptr)(uintptr_t)devPtr, count, rt_memory_location(location),
                          flags, (CUstream)stream));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemPrefetchAsync(const void *devPtr, size_t count, struct cudaMemLocation location,
                     unsigned int flags, cudaStream_t stream)
{
    return rt_memory_prefetch(devPtr, count, location, flags, stream, rt_drv.cuMemPrefetchAsync);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemPrefetchAsync_ptsz(const void *devPtr, size_t count, struct cudaMemLocation location,
                          unsigned int flags, cudaStream_t stream)
{
    return rt_memory_prefetch(devPtr, count, location, flags, stream,
                              rt_drv.cuMemPrefetchAsync_ptsz);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemAdvise(const void *devPtr, size_t count, enum cudaMemoryAdvise advice,
              struct cudaMemLocation location)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuMemAdvise, (CUdeviceptr)(uintptr_t)devPtr, count,
                               (CUmem_advise)advice, rt_memory_location(location)));
}
