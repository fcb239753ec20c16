/* rt_launch: kernel launches and the function and occupancy queries around them. nvcc turns
 * kernel<<<g, b, smem, s>>>(args) into __cudaPushCallConfiguration(g, b, smem, s), then the
 * kernel's host stub: __cudaPopCallConfiguration and __cudaLaunchKernel(handle, ...), the
 * handle coming once from __cudaGetKernel(&handle, stub). A launch is validated like the real
 * runtime's (kernel registered, grid and block within the device limits, dynamic shared memory
 * within the kernel's limit, live stream), then made as cudart makes it: cuLaunchKernel of the
 * kernel of the fat binary's library (loaded at its first launch; under lazy loading the driver
 * takes the code's device memory then). No device code runs. */
#include "rt_api.h"
#include "rt_driver.h"
#include "rt_register.h"
#include "rt_state.h"

#include <stdbool.h>
#include <string.h>

/* <<<>>> configurations pushed by this thread and not yet popped by a stub (a kernel's argument
 * list may itself launch, so it is a stack). */
#define RT_LAUNCH_DEPTH 16

struct rt_launch_config {
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
};

static _Thread_local struct rt_launch_config rt_launch_stack[RT_LAUNCH_DEPTH];
static _Thread_local unsigned rt_launch_depth;

RT_EXPORT unsigned CUDARTAPI
__cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                            struct CUstream_st *stream)
{
    if (rt_launch_depth == RT_LAUNCH_DEPTH) /* non-zero: the generated code skips the call */
        return 1;
    rt_launch_stack[rt_launch_depth++] =
        (struct rt_launch_config){gridDim, blockDim, sharedMem, (cudaStream_t)stream};
    return 0;
}

RT_EXPORT cudaError_t CUDARTAPI
__cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream)
{
    if (rt_launch_depth == 0)
        return rt_state_ret(cudaErrorMissingConfiguration);
    struct rt_launch_config c = rt_launch_stack[--rt_launch_depth];
    *gridDim = c.grid;
    *blockDim = c.block;
    *sharedMem = c.smem;
    memcpy(stream, &c.stream, sizeof c.stream);
    return cudaSuccess;
}

RT_EXPORT cudaError_t CUDARTAPI
__cudaGetKernel(cudaKernel_t *kernel, const void *func)
{
    if (kernel == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    void *h = NULL;
    enum cudaError e = rt_register_kernel_handle(func, &h);
    *kernel = (cudaKernel_t)h;
    return rt_state_ret(e);
}

/* One attribute of the calling thread's device, or `fallback` where the driver has none. */
static int
rt_launch_attr(CUdevice_attribute attr, int fallback)
{
    int device = 0, v = 0;
    CUdevice dev = 0;
    if (rt_state_get_device(&device) != cudaSuccess || RT_CALL(cuDeviceGet, &dev, device) ||
        RT_CALL(cuDeviceGetAttribute, &v, attr, dev) || v <= 0)
        return fallback;
    return v;
}

/* cudaErrorInvalidValue for an empty or oversized grid or block: what NVIDIA's runtime 13.0
 * returns with driver 580 (measured on an H200; the documentation's
 * cudaErrorInvalidConfiguration is not what comes back). */
static enum cudaError
rt_launch_check_dims(dim3 grid, dim3 block)
{
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x == 0 || block.y == 0 || block.z == 0)
        return cudaErrorInvalidValue;
    if (grid.x > (unsigned)rt_launch_attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 2147483647) ||
        grid.y > (unsigned)rt_launch_attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, 65535) ||
        grid.z > (unsigned)rt_launch_attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, 65535))
        return cudaErrorInvalidValue;
    unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
    if (block.x > (unsigned)rt_launch_attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, 1024) ||
        block.y > (unsigned)rt_launch_attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, 1024) ||
        block.z > (unsigned)rt_launch_attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 64) ||
        threads > (unsigned)rt_launch_attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024))
        return cudaErrorInvalidValue;
    return cudaSuccess;
}

/* Which of the driver's launches a runtime launch is. */
enum rt_launch_kind {
    RT_LAUNCH_LEGACY,
    RT_LAUNCH_PER_THREAD,
    RT_LAUNCH_COOPERATIVE,
    RT_LAUNCH_COOPERATIVE_PER_THREAD,
};

static CUresult
rt_launch_driver(CUfunction f, dim3 g, dim3 b, void **args, unsigned smem, CUstream s,
                 enum rt_launch_kind kind)
{
    switch (kind) {
    case RT_LAUNCH_PER_THREAD:
        return RT_CALL(cuLaunchKernel_ptsz, f, g.x, g.y, g.z, b.x, b.y, b.z, smem, s, args, NULL);
    case RT_LAUNCH_COOPERATIVE:
        return RT_CALL(cuLaunchCooperativeKernel, f, g.x, g.y, g.z, b.x, b.y, b.z, smem, s, args);
    case RT_LAUNCH_COOPERATIVE_PER_THREAD:
        return RT_CALL(cuLaunchCooperativeKernel_ptsz, f, g.x, g.y, g.z, b.x, b.y, b.z, smem, s,
                       args);
    default:
        return RT_CALL(cuLaunchKernel, f, g.x, g.y, g.z, b.x, b.y, b.z, smem, s, args, NULL);
    }
}

static cudaError_t
rt_launch(const void *func, dim3 grid, dim3 block, void **args, size_t smem, cudaStream_t stream,
          enum rt_launch_kind kind)
{
    RT_CTX_OR_RETURN();
    struct rt_register_kernel k;
    enum cudaError e = rt_register_kernel_find(func, &k);
    if (e == cudaSuccess)
        e = rt_launch_check_dims(grid, block);
    if (e == cudaSuccess && smem > (size_t)k.max_dyn_smem)
        e = cudaErrorInvalidValue; /* more than 48 KiB needs cudaFuncSetAttribute first */
    if (e != cudaSuccess)
        return rt_state_ret(e);
    /* The stream must be live (cudaErrorInvalidResourceHandle otherwise); its state is moot, a
     * capture included (a kernel node would run no code either). Asking whether it captures
     * leaves a capture alone where a query would invalidate it; for the legacy stream while a
     * blocking stream captures the driver answers CUDA_ERROR_STREAM_CAPTURE_IMPLICIT. */
    CUstreamCaptureStatus status;
    bool per_thread = kind == RT_LAUNCH_PER_THREAD || kind == RT_LAUNCH_COOPERATIVE_PER_THREAD;
    CUresult r = per_thread ? RT_CALL(cuStreamIsCapturing_ptsz, (CUstream)stream, &status)
                            : RT_CALL(cuStreamIsCapturing, (CUstream)stream, &status);
    if (r != CUDA_SUCCESS)
        return rt_state_cu(r);
    /* As cudart: the driver's launch of the library's kernel, which loads its code first under
     * lazy loading (device memory: CUDA_ERROR_OUT_OF_MEMORY when there is none). */
    CUfunction f = NULL;
    r = rt_register_kernel_driver(func, &f);
    if (r == CUDA_SUCCESS)
        r = rt_launch_driver(f, grid, block, args, (unsigned)smem, (CUstream)stream, kind);
    return r == CUDA_SUCCESS ? cudaSuccess : rt_state_cu(r); /* the device runs no code */
}

RT_EXPORT cudaError_t CUDARTAPI
__cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                   cudaStream_t stream)
{
    return rt_launch((const void *)kernel, gridDim, blockDim, args, sharedMem, stream,
                     RT_LAUNCH_LEGACY);
}

RT_EXPORT cudaError_t CUDARTAPI
__cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                        size_t sharedMem, cudaStream_t stream)
{
    return rt_launch((const void *)kernel, gridDim, blockDim, args, sharedMem, stream,
                     RT_LAUNCH_PER_THREAD);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                 cudaStream_t stream)
{
    return rt_launch(func, gridDim, blockDim, args, sharedMem, stream, RT_LAUNCH_LEGACY);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                      cudaStream_t stream)
{
    return rt_launch(func, gridDim, blockDim, args, sharedMem, stream, RT_LAUNCH_PER_THREAD);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaLaunchCooperativeKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                            size_t sharedMem, cudaStream_t stream)
{
    return rt_launch(func, gridDim, blockDim, args, sharedMem, stream, RT_LAUNCH_COOPERATIVE);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaLaunchCooperativeKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                 size_t sharedMem, cudaStream_t stream)
{
    return rt_launch(func, gridDim, blockDim, args, sharedMem, stream,
                     RT_LAUNCH_COOPERATIVE_PER_THREAD);
}

/* ---- function queries ---- */

RT_EXPORT cudaError_t CUDARTAPI
cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func)
{
    if (attr == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    RT_CTX_OR_RETURN();
    struct rt_register_kernel k;
    enum cudaError e = rt_register_kernel_find(func, &k);
    if (e != cudaSuccess)
        return rt_state_ret(e);
    /* Nothing reads the cubin: no static shared, constant or local memory, few registers. */
    memset(attr, 0, sizeof *attr);
    attr->maxThreadsPerBlock = rt_launch_attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024);
    attr->numRegs = 16;
    attr->ptxVersion = k.arch_ptx;
    attr->binaryVersion = k.arch_sass;
    attr->maxDynamicSharedSizeBytes = k.max_dyn_smem;
    attr->preferredShmemCarveout = k.carveout;
    return cudaSuccess;
}

RT_EXPORT cudaError_t CUDARTAPI
cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
    RT_CTX_OR_RETURN();
    struct rt_register_kernel k;
    enum cudaError e = rt_register_kernel_find(func, &k);
    if (e != cudaSuccess)
        return rt_state_ret(e);
    if ((int)attr < 0 || attr >= cudaFuncAttributeMax)
        return rt_state_ret(cudaErrorInvalidValue);
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize &&
        (value < 0 || value > RT_REGISTER_SMEM_OPTIN))
        return rt_state_ret(cudaErrorInvalidValue);
    if (attr == cudaFuncAttributePreferredSharedMemoryCarveout && (value < -1 || value > 100))
        return rt_state_ret(cudaErrorInvalidValue);
    /* Cluster attributes are accepted and not modelled. */
    return rt_state_ret(rt_register_kernel_set(func, attr, value));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaFuncSetCacheConfig(const void *func, enum cudaFuncCache cacheConfig)
{
    RT_CTX_OR_RETURN();
    if ((int)cacheConfig < cudaFuncCachePreferNone || cacheConfig > cudaFuncCachePreferEqual)
        return rt_state_ret(cudaErrorInvalidValue);
    struct rt_register_kernel k;
    return rt_state_ret(rt_register_kernel_find(func, &k)); /* a hint: nothing to keep */
}

RT_EXPORT cudaError_t CUDARTAPI
cudaFuncGetName(const char **name, const void *func)
{
    if (name == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    struct rt_register_kernel k;
    enum cudaError e = rt_register_kernel_find(func, &k);
    if (e != cudaSuccess)
        return rt_state_ret(e);
    *name = k.name;
    return cudaSuccess;
}

/* ---- device attributes and occupancy ---- */

RT_EXPORT cudaError_t CUDARTAPI
cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    if (value == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    enum cudaError e = rt_state_init();
    if (e != cudaSuccess)
        return e;
    if (device < 0 || device >= rt_state_device_count())
        return rt_state_ret(cudaErrorInvalidDevice);
    CUdevice dev = 0;
    CUresult r = RT_CALL(cuDeviceGet, &dev, device);
    /* cudaDeviceAttr values are the driver's CU_DEVICE_ATTRIBUTE_* values. */
    if (r == CUDA_SUCCESS)
        r = RT_CALL(cuDeviceGetAttribute, value, (CUdevice_attribute)attr, dev);
    return rt_state_cu(r);
}

/* Resident blocks per multiprocessor, bounded by threads (whole warps), the block slots of the
 * simulated Hopper-class device (32) and its 228 KiB of shared memory (1 KiB reserved a block). */
static cudaError_t
rt_launch_occupancy(int *numBlocks, const void *func, int blockSize, size_t smem,
                    unsigned int flags)
{
    if (numBlocks == NULL || blockSize <= 0 ||
        (flags & ~(unsigned)cudaOccupancyDisableCachingOverride))
        return rt_state_ret(cudaErrorInvalidValue);
    RT_CTX_OR_RETURN();
    struct rt_register_kernel k;
    enum cudaError e = rt_register_kernel_find(func, &k);
    if (e != cudaSuccess)
        return rt_state_ret(e);
    *numBlocks = 0;
    if (blockSize > rt_launch_attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024) ||
        smem > (size_t)k.max_dyn_smem)
        return cudaSuccess;
    int warp = rt_launch_attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32);
    int threads = (blockSize + warp - 1) / warp * warp;
    long n = rt_launch_attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 2048) / threads;
    long slots = rt_launch_attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, 32);
    n = n < slots ? n : slots;
    long per_sm = rt_launch_attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 233472);
    long by_smem = per_sm / ((long)smem + 1024);
    *numBlocks = (int)(n < by_smem ? n : by_smem);
    return cudaSuccess;
}

RT_EXPORT cudaError_t CUDARTAPI
cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, const void *func, int blockSize,
                                              size_t dynamicSMemSize)
{
    return rt_launch_occupancy(numBlocks, func, blockSize, dynamicSMemSize, 0);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, const void *func,
                                                       int blockSize, size_t dynamicSMemSize,
                                                       unsigned int flags)
{
    return rt_launch_occupancy(numBlocks, func, blockSize, dynamicSMemSize, flags);
}
