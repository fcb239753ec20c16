/* rt_copy: copies between devices (cudaMemcpyPeer*) and pitched 2D copies and memsets. Peer copies
 * name each side's device, whose primary context the driver's cuMemcpyPeer takes; 2D copies are
 * one CUDA_MEMCPY2D through cuMemcpy2DUnaligned / cuMemcpy2DAsync, as NVIDIA's runtime does. */
#include "rt_api.h"
#include "rt_driver.h"
#include "rt_state.h"

#include <stdbool.h>
#include <stdint.h>

#define RT_DPTR(p) ((CUdeviceptr)(uintptr_t)(p))

/* The largest pitch a 2D copy takes (cudaDevAttrMaxPitch of current GPUs: 2^31 - 1 bytes). */
#define RT_COPY_MAX_PITCH ((size_t)INT32_MAX)

static cudaError_t
rt_copy_peer(void *dst, int dst_device, const void *src, int src_device, size_t count,
             cudaStream_t stream, bool async)
{
    RT_CTX_OR_RETURN();
    int n = rt_state_device_count();
    if (dst_device < 0 || dst_device >= n || src_device < 0 || src_device >= n)
        return rt_state_ret(cudaErrorInvalidDevice);
    if (count == 0)
        return cudaSuccess;
    CUcontext dst_ctx, src_ctx;
    CUresult r = rt_state_primary(dst_device, &dst_ctx);
    if (r == CUDA_SUCCESS)
        r = rt_state_primary(src_device, &src_ctx);
    if (r != CUDA_SUCCESS)
        return rt_state_cu(r);
    if (async)
        r = RT_CALL(cuMemcpyPeerAsync, RT_DPTR(dst), dst_ctx, RT_DPTR(src), src_ctx, count,
                    (CUstream)stream);
    else
        r = RT_CALL(cuMemcpyPeer, RT_DPTR(dst), dst_ctx, RT_DPTR(src), src_ctx, count);
    return rt_state_cu(r);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice, size_t count)
{
    return rt_copy_peer(dst, dstDevice, src, srcDevice, count, NULL, false);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice, size_t count,
                    cudaStream_t stream)
{
    return rt_copy_peer(dst, dstDevice, src, srcDevice, count, stream, true);
}

/* Fills one side of a CUDA_MEMCPY2D from the copy kind: host memory, device memory, or (for
 * cudaMemcpyDefault) whatever unified addressing says the pointer is. */
static void
rt_copy_side(enum cudaMemcpyKind kind, bool is_dst, const void *p, CUmemorytype *type,
             const void **host, CUdeviceptr *device)
{
    bool device_side = kind == cudaMemcpyDeviceToDevice ||
                       kind == (is_dst ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);
    if (kind == cudaMemcpyDefault) {
        *type = CU_MEMORYTYPE_UNIFIED;
        *device = RT_DPTR(p);
    } else if (device_side) {
        *type = CU_MEMORYTYPE_DEVICE;
        *device = RT_DPTR(p);
    } else {
        *type = CU_MEMORYTYPE_HOST;
        *host = p;
    }
}

/* The driver's per-flavour 2D copy: synchronous or ordered on a stream. */
struct rt_copy_2d_fn {
    PFN_cuMemcpy2DUnaligned_v3020 sync;
    PFN_cuMemcpy2DAsync_v3020 async;
};

static cudaError_t
rt_copy_2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
           enum cudaMemcpyKind kind, cudaStream_t stream, bool async,
           const struct rt_copy_2d_fn *fn)
{
    RT_CTX_OR_RETURN();
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
        return rt_state_ret(cudaErrorInvalidMemcpyDirection);
    if (width == 0 || height == 0)
        return cudaSuccess;
    /* Documented: the pitches must be at least the width and at most the maximum pitch. */
    if (dpitch > RT_COPY_MAX_PITCH || spitch > RT_COPY_MAX_PITCH || width > dpitch ||
        width > spitch)
        return rt_state_ret(cudaErrorInvalidPitchValue);
    if (dst == NULL || src == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    CUDA_MEMCPY2D copy = {
        .WidthInBytes = width, .Height = height, .srcPitch = spitch, .dstPitch = dpitch};
    rt_copy_side(kind, false, src, &copy.srcMemoryType, &copy.srcHost, &copy.srcDevice);
    const void *dst_host = NULL;
    rt_copy_side(kind, true, dst, &copy.dstMemoryType, &dst_host, &copy.dstDevice);
    copy.dstHost = (void *)(uintptr_t)dst_host;
    CUresult r = CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER;
    if (async && fn->async)
        r = fn->async(&copy, (CUstream)stream);
    else if (!async && fn->sync)
        r = fn->sync(&copy);
    return rt_state_cu(r);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
             enum cudaMemcpyKind kind)
{
    struct rt_copy_2d_fn fn = {rt_drv.cuMemcpy2DUnaligned, NULL};
    return rt_copy_2d(dst, dpitch, src, spitch, width, height, kind, NULL, false, &fn);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                  size_t height, enum cudaMemcpyKind kind)
{
    struct rt_copy_2d_fn fn = {rt_drv.cuMemcpy2DUnaligned_ptds, NULL};
    return rt_copy_2d(dst, dpitch, src, spitch, width, height, kind, NULL, false, &fn);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                  size_t height, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    struct rt_copy_2d_fn fn = {NULL, rt_drv.cuMemcpy2DAsync};
    return rt_copy_2d(dst, dpitch, src, spitch, width, height, kind, stream, true, &fn);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                       size_t height, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    struct rt_copy_2d_fn fn = {NULL, rt_drv.cuMemcpy2DAsync_ptsz};
    return rt_copy_2d(dst, dpitch, src, spitch, width, height, kind, stream, true, &fn);
}

static cudaError_t
rt_copy_set_2d(void *dst, size_t pitch, int value, size_t width, size_t height, cudaStream_t stream,
               PFN_cuMemsetD2D8_v3020 sync, PFN_cuMemsetD2D8Async_v3020 async)
{
    RT_CTX_OR_RETURN();
    if (width == 0 || height == 0)
        return cudaSuccess;
    CUresult r = CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER;
    /* The driver refuses a width above the pitch and memory outside one allocation. */
    if (sync)
        r = sync(RT_DPTR(dst), pitch, (unsigned char)value, width, height);
    else if (async)
        r = async(RT_DPTR(dst), pitch, (unsigned char)value, width, height, (CUstream)stream);
    return rt_state_cu(r);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemset2D(void *devPtr, size_t pitch, int value, size_t width, size_t height)
{
    return rt_copy_set_2d(devPtr, pitch, value, width, height, NULL, rt_drv.cuMemsetD2D8, NULL);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemset2D_ptds(void *devPtr, size_t pitch, int value, size_t width, size_t height)
{
    return rt_copy_set_2d(devPtr, pitch, value, width, height, NULL, rt_drv.cuMemsetD2D8_ptds,
                          NULL);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemset2DAsync(void *devPtr, size_t pitch, int value, size_t width, size_t height,
                  cudaStream_t stream)
{
    return rt_copy_set_2d(devPtr, pitch, value, width, height, stream, NULL,
                          rt_drv.cuMemsetD2D8Async);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemset2DAsync_ptsz(void *devPtr, size_t pitch, int value, size_t width, size_t height,
                       cudaStream_t stream)
{
    return rt_copy_set_2d(devPtr, pitch, value, width, height, stream, NULL,
                          rt_drv.cuMemsetD2D8Async_ptsz);
}
