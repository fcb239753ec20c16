/* rt_stream: copies, memsets, streams (priorities, callbacks), events and device synchronisation.
 * Legacy entry points hand the stream through the driver's legacy functions (0 = legacy default
 * stream); the _ptsz/_ptds exports use the driver's per-thread twins (0 = the calling thread's
 * default stream). */
#include "rt_api.h"
#include "rt_driver.h"
#include "rt_errors.h"
#include "rt_state.h"

#include <stdint.h>
#include <stdlib.h>

#define RT_DPTR(p) ((CUdeviceptr)(uintptr_t)(p))

/* The driver functions one flavour (legacy or per-thread) of the runtime copies with. */
struct rt_stream_copy {
    PFN_cuMemcpyHtoD_v3020 htod;
    PFN_cuMemcpyDtoH_v3020 dtoh;
    PFN_cuMemcpyDtoD_v3020 dtod;
    PFN_cuMemcpy_v4000 any;
};

static cudaError_t
rt_stream_memcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                 const struct rt_stream_copy *fn)
{
    RT_CTX_OR_RETURN();
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
        return rt_state_ret(cudaErrorInvalidMemcpyDirection);
    if (count == 0)
        return cudaSuccess;
    if (dst == NULL || src == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    CUresult r = CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER;
    switch (kind) {
    case cudaMemcpyHostToDevice:
        if (fn->htod)
            r = fn->htod(RT_DPTR(dst), src, count);
        break;
    case cudaMemcpyDeviceToHost:
        if (fn->dtoh)
            r = fn->dtoh(dst, RT_DPTR(src), count);
        break;
    case cudaMemcpyDeviceToDevice:
        if (fn->dtod)
            r = fn->dtod(RT_DPTR(dst), RT_DPTR(src), count);
        break;
    default: /* host-to-host and cudaMemcpyDefault: unified addressing decides */
        if (fn->any)
            r = fn->any(RT_DPTR(dst), RT_DPTR(src), count);
        break;
    }
    return rt_state_cu(r);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    struct rt_stream_copy fn = {rt_drv.cuMemcpyHtoD, rt_drv.cuMemcpyDtoH, rt_drv.cuMemcpyDtoD,
                                rt_drv.cuMemcpy};
    return rt_stream_memcpy(dst, src, count, kind, &fn);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    struct rt_stream_copy fn = {rt_drv.cuMemcpyHtoD_ptds, rt_drv.cuMemcpyDtoH_ptds,
                                rt_drv.cuMemcpyDtoD_ptds, rt_drv.cuMemcpy_ptds};
    return rt_stream_memcpy(dst, src, count, kind, &fn);
}

/* The asynchronous flavour: device-to-device and default copies go through cuMemcpyAsync. */
struct rt_stream_copy_async {
    PFN_cuMemcpyHtoDAsync_v3020 htod;
    PFN_cuMemcpyDtoHAsync_v3020 dtoh;
    PFN_cuMemcpyAsync_v4000 any;
};

static cudaError_t
rt_stream_memcpy_async(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                       cudaStream_t stream, const struct rt_stream_copy_async *fn)
{
    RT_CTX_OR_RETURN();
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
        return rt_state_ret(cudaErrorInvalidMemcpyDirection);
    if (count == 0)
        return cudaSuccess;
    if (dst == NULL || src == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    CUresult r = CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER;
    CUstream s = (CUstream)stream;
    if (kind == cudaMemcpyHostToDevice && fn->htod)
        r = fn->htod(RT_DPTR(dst), src, count, s);
    else if (kind == cudaMemcpyDeviceToHost && fn->dtoh)
        r = fn->dtoh(dst, RT_DPTR(src), count, s);
    else if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToHost && fn->any)
        r = fn->any(RT_DPTR(dst), RT_DPTR(src), count, s);
    return rt_state_cu(r);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                cudaStream_t stream)
{
    struct rt_stream_copy_async fn = {rt_drv.cuMemcpyHtoDAsync, rt_drv.cuMemcpyDtoHAsync,
                                      rt_drv.cuMemcpyAsync};
    return rt_stream_memcpy_async(dst, src, count, kind, stream, &fn);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                     cudaStream_t stream)
{
    struct rt_stream_copy_async fn = {rt_drv.cuMemcpyHtoDAsync_ptsz, rt_drv.cuMemcpyDtoHAsync_ptsz,
                                      rt_drv.cuMemcpyAsync_ptsz};
    return rt_stream_memcpy_async(dst, src, count, kind, stream, &fn);
}

static cudaError_t
rt_stream_memset(void *devPtr, int value, size_t count, PFN_cuMemsetD8_v3020 fn)
{
    RT_CTX_OR_RETURN();
    if (count == 0)
        return cudaSuccess;
    if (fn == NULL)
        return rt_state_ret(cudaErrorCallRequiresNewerDriver);
    return rt_state_cu(fn(RT_DPTR(devPtr), (unsigned char)value, count));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemset(void *devPtr, int value, size_t count)
{
    return rt_stream_memset(devPtr, value, count, rt_drv.cuMemsetD8);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemset_ptds(void *devPtr, int value, size_t count)
{
    return rt_stream_memset(devPtr, value, count, rt_drv.cuMemsetD8_ptds);
}

static cudaError_t
rt_stream_memset_async(void *devPtr, int value, size_t count, cudaStream_t stream,
                       PFN_cuMemsetD8Async_v3020 fn)
{
    RT_CTX_OR_RETURN();
    if (count == 0)
        return cudaSuccess;
    if (fn == NULL)
        return rt_state_ret(cudaErrorCallRequiresNewerDriver);
    return rt_state_cu(fn(RT_DPTR(devPtr), (unsigned char)value, count, (CUstream)stream));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    return rt_stream_memset_async(devPtr, value, count, stream, rt_drv.cuMemsetD8Async);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    return rt_stream_memset_async(devPtr, value, count, stream, rt_drv.cuMemsetD8Async_ptsz);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
    if (pStream == NULL || (flags & ~(unsigned int)cudaStreamNonBlocking) != 0)
        return rt_state_ret(cudaErrorInvalidValue);
    RT_CTX_OR_RETURN();
    /* cudaStreamNonBlocking has the value of CU_STREAM_NON_BLOCKING. */
    return rt_state_cu(RT_CALL(cuStreamCreate, (CUstream *)pStream, flags));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaStreamCreate(cudaStream_t *pStream)
{
    return cudaStreamCreateWithFlags(pStream, cudaStreamDefault);
}

/* The driver clamps the priority to the device's range, as documented for the runtime. */
RT_EXPORT cudaError_t CUDARTAPI
cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags, int priority)
{
    if (pStream == NULL || (flags & ~(unsigned int)cudaStreamNonBlocking) != 0)
        return rt_state_ret(cudaErrorInvalidValue);
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuStreamCreateWithPriority, (CUstream *)pStream, flags, priority));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuCtxGetStreamPriorityRange, leastPriority, greatestPriority));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaStreamGetPriority(cudaStream_t hStream, int *priority)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuStreamGetPriority, (CUstream)hStream, priority));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaStreamGetPriority_ptsz(cudaStream_t hStream, int *priority)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuStreamGetPriority_ptsz, (CUstream)hStream, priority));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaStreamGetFlags(cudaStream_t hStream, unsigned int *flags)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuStreamGetFlags, (CUstream)hStream, flags));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaStreamGetFlags_ptsz(cudaStream_t hStream, unsigned int *flags)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuStreamGetFlags_ptsz, (CUstream)hStream, flags));
}

/* A runtime callback takes a cudaError_t where the driver's takes a CUresult: the driver calls
 * this trampoline, which hands the runtime's callback its stream, status and data, once. */
struct rt_stream_callback {
    cudaStreamCallback_t callback;
    cudaStream_t stream;
    void *data;
};

static void CUDA_CB
rt_stream_callback_run(CUstream unused, CUresult status, void *arg)
{
    (void)unused;
    struct rt_stream_callback cb = *(struct rt_stream_callback *)arg;
    free(arg);
    cb.callback(cb.stream, rt_errors_from_cu(status), cb.data);
}

static cudaError_t
rt_stream_add_callback(cudaStream_t stream, cudaStreamCallback_t callback, void *data,
                       unsigned flags, PFN_cuStreamAddCallback_v5000 fn)
{
    if (callback == NULL || flags != 0) /* flags: reserved, must be 0 */
        return rt_state_ret(cudaErrorInvalidValue);
    RT_CTX_OR_RETURN();
    if (fn == NULL)
        return rt_state_ret(cudaErrorCallRequiresNewerDriver);
    struct rt_stream_callback *cb = malloc(sizeof(*cb));
    if (cb == NULL)
        return rt_state_ret(cudaErrorMemoryAllocation);
    *cb = (struct rt_stream_callback){callback, stream, data};
    CUresult r = fn((CUstream)stream, rt_stream_callback_run, cb, 0);
    if (r != CUDA_SUCCESS)
        free(cb);
    return rt_state_cu(r);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback, void *userData,
                      unsigned int flags)
{
    return rt_stream_add_callback(stream, callback, userData, flags, rt_drv.cuStreamAddCallback);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaStreamAddCallback_ptsz(cudaStream_t stream, cudaStreamCallback_t callback, void *userData,
                           unsigned int flags)
{
    return rt_stream_add_callback(stream, callback, userData, flags,
                                  rt_drv.cuStreamAddCallback_ptsz);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaStreamDestroy(cudaStream_t stream)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuStreamDestroy, (CUstream)stream));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaStreamSynchronize(cudaStream_t stream)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuStreamSynchronize, (CUstream)stream));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaStreamSynchronize_ptsz(cudaStream_t stream)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuStreamSynchronize_ptsz, (CUstream)stream));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaStreamQuery(cudaStream_t stream)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuStreamQuery, (CUstream)stream));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaStreamQuery_ptsz(cudaStream_t stream)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuStreamQuery_ptsz, (CUstream)stream));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuLaunchHostFunc, (CUstream)stream, (CUhostFn)fn, userData));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaLaunchHostFunc_ptsz(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuLaunchHostFunc_ptsz, (CUstream)stream, (CUhostFn)fn, userData));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuStreamWaitEvent, (CUstream)stream, (CUevent)event, flags));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuStreamWaitEvent_ptsz, (CUstream)stream, (CUevent)event, flags));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    unsigned int known = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
    if (event == NULL || (flags & ~known) != 0)
        return rt_state_ret(cudaErrorInvalidValue);
    RT_CTX_OR_RETURN();
    /* The runtime's event flags have the driver's CU_EVENT_* values. */
    return rt_state_cu(RT_CALL(cuEventCreate, (CUevent *)event, flags));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaEventCreate(cudaEvent_t *event)
{
    return cudaEventCreateWithFlags(event, cudaEventDefault);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuEventRecord, (CUevent)event, (CUstream)stream));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuEventRecord_ptsz, (CUevent)event, (CUstream)stream));
}

/* cudaEventRecordExternal has the value of CU_EVENT_RECORD_EXTERNAL; the driver checks flags. */
RT_EXPORT cudaError_t CUDARTAPI
cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuEventRecordWithFlags, (CUevent)event, (CUstream)stream, flags));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaEventRecordWithFlags_ptsz(cudaEvent_t event, cudaStream_t stream, unsigned int flags)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(
        RT_CALL(cuEventRecordWithFlags_ptsz, (CUevent)event, (CUstream)stream, flags));
}

/* The driver answers the documented errors: a NULL result is cudaErrorInvalidValue, an event
 * never recorded or made with cudaEventDisableTiming cudaErrorInvalidResourceHandle, one not yet
 * complete cudaErrorNotReady. */
RT_EXPORT cudaError_t CUDARTAPI
cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuEventElapsedTime, ms, (CUevent)start, (CUevent)end));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaEventQuery(cudaEvent_t event)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuEventQuery, (CUevent)event));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaEventSynchronize(cudaEvent_t event)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuEventSynchronize, (CUevent)event));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaEventDestroy(cudaEvent_t event)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuEventDestroy, (CUevent)event));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaDeviceSynchronize(void)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(rt_drv.cuCtxSynchronize ? rt_drv.cuCtxSynchronize()
                                               : CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER);
}
