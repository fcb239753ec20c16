/* cuMemcpy* and cuMemsetD8*: validated, then run in order on the right stream. Synchronous
 * forms go through the default stream (legacy, or per-thread for _ptds) and wait for it. */
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
