/* cuMemcpy*, cuMemcpyPeer*, cuMemcpy2D*, cuMemsetD8* and cuMemsetD2D8*: validated, then run in
 * order on the right stream. Synchronous forms go through the default stream (legacy, or
 * per-thread for _ptds) and wait for it. */
#include "sim_driver.h"
#include "sim_stream.h"

enum sim_dir { DIR_ANY, DIR_HTOD, DIR_DTOH, DIR_DTOD };

/* Device-side ranges must lie inside one live allocation; unified copies may name host memory. */
static CUresult
check_range(uintptr_t p, size_t n, bool must_be_device)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_mem_owner(p, n))
        return CUDA_SUCCESS;
    if (!must_be_device && !sim_mem_is_device_va(p))
        return CUDA_SUCCESS;
    return CUDA_ERROR_INVALID_VALUE;
}

static CUresult
copy(uintptr_t dst, uintptr_t src, size_t n, enum sim_dir dir, CUstream h, bool per_thread,
     bool wait)
{
    struct CUstream_st *s;
    CUresult r = sim_stream_resolve(h, per_thread, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (n == 0)
        return CUDA_SUCCESS;
    bool dst_dev = dir == DIR_HTOD || dir == DIR_DTOD;
    bool src_dev = dir == DIR_DTOH || dir == DIR_DTOD;
    if ((r = check_range(dst, n, dst_dev)) != CUDA_SUCCESS ||
        (r = check_range(src, n, src_dev)) != CUDA_SUCCESS)
        return r;
    /* The stream's device runs the copy: VMM memory it was given no access to faults. */
    if ((r = sim_vmm_check_access(dst, n, s->dev->ordinal, true)) != CUDA_SUCCESS ||
        (r = sim_vmm_check_access(src, n, s->dev->ordinal, false)) != CUDA_SUCCESS)
        return r;
    return sim_stream_copy(s, (void *)dst, (const void *)src, n, wait);
}

static CUresult
set8(uintptr_t dst, unsigned char v, size_t n, CUstream h, bool per_thread, bool wait)
{
    struct CUstream_st *s;
    CUresult r = sim_stream_resolve(h, per_thread, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (n == 0)
        return CUDA_SUCCESS;
    if ((r = check_range(dst, n, true)) != CUDA_SUCCESS ||
        (r = sim_vmm_check_access(dst, n, s->dev->ordinal, true)) != CUDA_SUCCESS)
        return r;
    return sim_stream_set(s, (void *)dst, v, n, wait);
}

CUresult
cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    return copy(dst, src, ByteCount, DIR_ANY, NULL, false, true);
}

CUresult
cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    return copy(dst, src, ByteCount, DIR_ANY, NULL, true, true);
}

CUresult
cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    return copy(dstDevice, (uintptr_t)srcHost, ByteCount, DIR_HTOD, NULL, false, true);
}

CUresult
cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    return copy(dstDevice, (uintptr_t)srcHost, ByteCount, DIR_HTOD, NULL, true, true);
}

CUresult
cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    return copy((uintptr_t)dstHost, srcDevice, ByteCount, DIR_DTOH, NULL, false, true);
}

CUresult
cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    return copy((uintptr_t)dstHost, srcDevice, ByteCount, DIR_DTOH, NULL, true, true);
}

CUresult
cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    return copy(dstDevice, srcDevice, ByteCount, DIR_DTOD, NULL, false, true);
}

CUresult
cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    return copy(dstDevice, srcDevice, ByteCount, DIR_DTOD, NULL, true, true);
}

CUresult
cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
    return copy(dst, src, ByteCount, DIR_ANY, hStream, false, false);
}

CUresult
cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
    return copy(dst, src, ByteCount, DIR_ANY, hStream, true, false);
}

CUresult
cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream)
{
    return copy(dstDevice, (uintptr_t)srcHost, ByteCount, DIR_HTOD, hStream, false, false);
}

CUresult
cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                          CUstream hStream)
{
    return copy(dstDevice, (uintptr_t)srcHost, ByteCount, DIR_HTOD, hStream, true, false);
}

CUresult
cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
{
    return copy((uintptr_t)dstHost, srcDevice, ByteCount, DIR_DTOH, hStream, false, false);
}

CUresult
cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
{
    return copy((uintptr_t)dstHost, srcDevice, ByteCount, DIR_DTOH, hStream, true, false);
}

CUresult
cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                     CUstream hStream)
{
    return copy(dstDevice, srcDevice, ByteCount, DIR_DTOD, hStream, false, false);
}

CUresult
cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                          CUstream hStream)
{
    return copy(dstDevice, srcDevice, ByteCount, DIR_DTOD, hStream, true, false);
}

CUresult
cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    return set8(dstDevice, uc, N, NULL, false, true);
}

CUresult
cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    return set8(dstDevice, uc, N, NULL, true, true);
}

CUresult
cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
    return set8(dstDevice, uc, N, hStream, false, false);
}

CUresult
cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
    return set8(dstDevice, uc, N, hStream, true, false);
}

/* ---- peer copies ---- */

/* Each side must lie in memory of its context's device; the copy then runs like any other. */
static CUresult
copy_peer(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, size_t n,
          CUstream h, bool per_thread, bool wait)
{
    struct CUstream_st *s;
    CUresult r = sim_stream_resolve(h, per_thread, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!sim_ctx_live(dst_ctx) || !sim_ctx_live(src_ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (n == 0)
        return CUDA_SUCCESS;
    if (sim_mem_owner(dst, n) != dst_ctx->dev || sim_mem_owner(src, n) != src_ctx->dev)
        return CUDA_ERROR_INVALID_VALUE;
    return copy(dst, src, n, DIR_DTOD, h, per_thread, wait);
}

CUresult
cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
             CUcontext srcContext, size_t ByteCount)
{
    return copy_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, NULL, false, true);
}

CUresult
cuMemcpyPeer_ptds(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                  CUcontext srcContext, size_t ByteCount)
{
    return copy_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, NULL, true, true);
}

CUresult
cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                  CUcontext srcContext, size_t ByteCount, CUstream hStream)
{
    return copy_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream, false,
                     false);
}

CUresult
cuMemcpyPeerAsync_ptsz(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                       CUcontext srcContext, size_t ByteCount, CUstream hStream)
{
    return copy_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream, true, false);
}

/* ---- 2D copies and memsets ---- */

/* Bytes from the first to the last byte of `rows` rows of `width` bytes, `pitch` apart; 0 when
 * that overflows (rows and width are not 0, pitch >= width). */
static size_t
span_2d(size_t width, size_t pitch, size_t rows)
{
    if (rows - 1 > (SIZE_MAX - width) / pitch)
        return 0;
    return (rows - 1) * pitch + width;
}

/* One side of a CUDA_MEMCPY2D: its first byte, and whether it must be device memory (UNIFIED:
 * whatever the address is). CUDA arrays are not simulated. */
static CUresult
side_2d(CUmemorytype type, const void *host, CUdeviceptr device, size_t x, size_t y, size_t pitch,
        uintptr_t *addr, bool *must_be_device)
{
    switch (type) {
    case CU_MEMORYTYPE_HOST:
        *addr = (uintptr_t)host;
        *must_be_device = false;
        break;
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_UNIFIED:
        *addr = device;
        *must_be_device = type == CU_MEMORYTYPE_DEVICE;
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!*addr || y > (UINTPTR_MAX - *addr - x) / (pitch ? pitch : 1))
        return CUDA_ERROR_INVALID_VALUE;
    *addr += x + y * pitch;
    return CUDA_SUCCESS;
}

static CUresult
copy_2d(const CUDA_MEMCPY2D *p, CUstream h, bool per_thread, bool wait)
{
    struct CUstream_st *s;
    CUresult r = sim_stream_resolve(h, per_thread, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    size_t w = p->WidthInBytes, rows = p->Height;
    if (w == 0 || rows == 0)
        return CUDA_SUCCESS;
    if (w > p->srcPitch || w > p->dstPitch) /* cuda.h: a row may not be wider than its pitch */
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t dst, src;
    bool dst_dev, src_dev;
    if ((r = side_2d(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY,
                     p->dstPitch, &dst, &dst_dev)) != CUDA_SUCCESS ||
        (r = side_2d(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes, p->srcY,
                     p->srcPitch, &src, &src_dev)) != CUDA_SUCCESS)
        return r;
    size_t dst_span = span_2d(w, p->dstPitch, rows), src_span = span_2d(w, p->srcPitch, rows);
    if (!dst_span || !src_span)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = check_range(dst, dst_span, dst_dev)) != CUDA_SUCCESS ||
        (r = check_range(src, src_span, src_dev)) != CUDA_SUCCESS ||
        (r = sim_vmm_check_access(dst, dst_span, s->dev->ordinal, true)) != CUDA_SUCCESS ||
        (r = sim_vmm_check_access(src, src_span, s->dev->ordinal, false)) != CUDA_SUCCESS)
        return r;
    return sim_stream_copy_2d(s, (void *)dst, p->dstPitch, (const void *)src, p->srcPitch, w, rows,
                              wait);
}

/* The simulator makes no difference between aligned and unaligned 2D copies. */
CUresult
cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy)
{
    return copy_2d(pCopy, NULL, false, true);
}

CUresult
cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *pCopy)
{
    return copy_2d(pCopy, NULL, true, true);
}

CUresult
cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *pCopy)
{
    return copy_2d(pCopy, NULL, false, true);
}

CUresult
cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *pCopy)
{
    return copy_2d(pCopy, NULL, true, true);
}

CUresult
cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
    return copy_2d(pCopy, hStream, false, false);
}

CUresult
cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
    return copy_2d(pCopy, hStream, true, false);
}

static CUresult
set8_2d(uintptr_t dst, size_t pitch, unsigned char v, size_t w, size_t rows, CUstream h,
        bool per_thread, bool wait)
{
    struct CUstream_st *s;
    CUresult r = sim_stream_resolve(h, per_thread, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (w == 0 || rows == 0)
        return CUDA_SUCCESS;
    if (w > pitch)
        return CUDA_ERROR_INVALID_VALUE;
    size_t span = span_2d(w, pitch, rows);
    if (!span)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = check_range(dst, span, true)) != CUDA_SUCCESS ||
        (r = sim_vmm_check_access(dst, span, s->dev->ordinal, true)) != CUDA_SUCCESS)
        return r;
    return sim_stream_set_2d(s, (void *)dst, pitch, v, w, rows, wait);
}

CUresult
cuMemsetD2D8_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width,
                size_t Height)
{
    return set8_2d(dstDevice, dstPitch, uc, Width, Height, NULL, false, true);
}

CUresult
cuMemsetD2D8_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width,
                     size_t Height)
{
    return set8_2d(dstDevice, dstPitch, uc, Width, Height, NULL, true, true);
}

CUresult
cuMemsetD2D8Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width,
                  size_t Height, CUstream hStream)
{
    return set8_2d(dstDevice, dstPitch, uc, Width, Height, hStream, false, false);
}

CUresult
cuMemsetD2D8Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width,
                       size_t Height, CUstream hStream)
{
    return set8_2d(dstDevice, dstPitch, uc, Width, Height, hStream, true, false);
}
