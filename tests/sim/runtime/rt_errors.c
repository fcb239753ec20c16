/* rt_errors: the driver-to-runtime error mapping and the error-name tables (rt_errors.def). */
#include "rt_errors.h"

#include <stddef.h>

struct rt_errors_entry {
    enum cudaError code;
    const char *name;
    const char *text;
};

static const struct rt_errors_entry rt_errors_table[] = {
#define RT_ERR(code, text) {code, #code, text},
#include "rt_errors.def"
#undef RT_ERR
};

enum cudaError
rt_errors_from_cu(CUresult r)
{
    switch (r) {
    case CUDA_SUCCESS:
        return cudaSuccess;
    case CUDA_ERROR_INVALID_VALUE:
        return cudaErrorInvalidValue;
    case CUDA_ERROR_OUT_OF_MEMORY:
        return cudaErrorMemoryAllocation;
    case CUDA_ERROR_NOT_INITIALIZED:
        return cudaErrorInitializationError;
    case CUDA_ERROR_DEINITIALIZED:
        return cudaErrorCudartUnloading;
    case CUDA_ERROR_STUB_LIBRARY:
        return cudaErrorStubLibrary;
    case CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER:
        return cudaErrorCallRequiresNewerDriver;
    case CUDA_ERROR_NO_DEVICE:
        return cudaErrorNoDevice;
    case CUDA_ERROR_INVALID_DEVICE:
        return cudaErrorInvalidDevice;
    case CUDA_ERROR_INVALID_CONTEXT:
        return cudaErrorDeviceUninitialized;
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
        return cudaErrorContextIsDestroyed;
    case CUDA_ERROR_SHARED_OBJECT_INIT_FAILED:
        return cudaErrorSharedObjectInitFailed;
    case CUDA_ERROR_OPERATING_SYSTEM:
        return cudaErrorOperatingSystem;
    case CUDA_ERROR_INVALID_HANDLE:
        return cudaErrorInvalidResourceHandle;
    case CUDA_ERROR_ILLEGAL_STATE:
        return cudaErrorIllegalState;
    case CUDA_ERROR_NOT_FOUND:
        return cudaErrorSymbolNotFound;
    case CUDA_ERROR_NOT_READY:
        return cudaErrorNotReady;
    case CUDA_ERROR_ILLEGAL_ADDRESS:
        return cudaErrorIllegalAddress;
    case CUDA_ERROR_LAUNCH_FAILED:
        return cudaErrorLaunchFailure;
    case CUDA_ERROR_NOT_PERMITTED:
        return cudaErrorNotPermitted;
    case CUDA_ERROR_NOT_SUPPORTED:
        return cudaErrorNotSupported;
    case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED:
        return cudaErrorHostMemoryAlreadyRegistered;
    case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED:
        return cudaErrorHostMemoryNotRegistered;
    case CUDA_ERROR_UNSUPPORTED_LIMIT:
        return cudaErrorUnsupportedLimit;
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
        return cudaErrorStreamCaptureUnsupported;
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
        return cudaErrorStreamCaptureInvalidated;
    case CUDA_ERROR_STREAM_CAPTURE_MERGE:
        return cudaErrorStreamCaptureMerge;
    case CUDA_ERROR_STREAM_CAPTURE_UNMATCHED:
        return cudaErrorStreamCaptureUnmatched;
    case CUDA_ERROR_STREAM_CAPTURE_UNJOINED:
        return cudaErrorStreamCaptureUnjoined;
    case CUDA_ERROR_STREAM_CAPTURE_ISOLATION:
        return cudaErrorStreamCaptureIsolation;
    case CUDA_ERROR_STREAM_CAPTURE_IMPLICIT:
        return cudaErrorStreamCaptureImplicit;
    case CUDA_ERROR_CAPTURED_EVENT:
        return cudaErrorCapturedEvent;
    case CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD:
        return cudaErrorStreamCaptureWrongThread;
    case CUDA_ERROR_TIMEOUT:
        return cudaErrorTimeout;
    case CUDA_ERROR_PEER_ACCESS_UNSUPPORTED:
        return cudaErrorPeerAccessUnsupported;
    case CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED:
        return cudaErrorPeerAccessAlreadyEnabled;
    case CUDA_ERROR_TOO_MANY_PEERS:
        return cudaErrorTooManyPeers;
    default:
        return cudaErrorUnknown;
    }
}

bool
rt_errors_is_sticky(enum cudaError e)
{
    return e == cudaErrorIllegalAddress || e == cudaErrorLaunchFailure ||
           e == cudaErrorHardwareStackError || e == cudaErrorIllegalInstruction ||
           e == cudaErrorMisalignedAddress || e == cudaErrorInvalidAddressSpace ||
           e == cudaErrorInvalidPc || e == cudaErrorECCUncorrectable;
}

static const struct rt_errors_entry *
rt_errors_find(enum cudaError e)
{
    for (size_t i = 0; i < sizeof rt_errors_table / sizeof rt_errors_table[0]; i++)
        if (rt_errors_table[i].code == e)
            return &rt_errors_table[i];
    return NULL;
}

const char *
rt_errors_name(enum cudaError e)
{
    const struct rt_errors_entry *t = rt_errors_find(e);
    return t ? t->name : NULL;
}

const char *
rt_errors_string(enum cudaError e)
{
    const struct rt_errors_entry *t = rt_errors_find(e);
    return t ? t->text : NULL;
}
