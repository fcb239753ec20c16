/* rt_device: device selection and queries, versions, last error, error names, and the driver
 * entry-point queries (which go through the cuGetProcAddress pointer the bootstrap kept). */
#include "rt_api.h"
#include "rt_driver.h"
#include "rt_errors.h"
#include "rt_state.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

RT_EXPORT cudaError_t CUDARTAPI
cudaGetDeviceCount(int *count)
{
    if (count == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    *count = 0;
    enum cudaError e = rt_state_init();
    if (e != cudaSuccess)
        return e;
    *count = rt_state_device_count();
    return cudaSuccess;
}

RT_EXPORT cudaError_t CUDARTAPI
cudaGetDevice(int *device)
{
    if (device == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    return rt_state_get_device(device);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaSetDevice(int device)
{
    return rt_state_set_device(device);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaDeviceReset(void)
{
    return rt_state_reset_device();
}

RT_EXPORT cudaError_t CUDARTAPI
cudaDeviceCanAccessPeer(int *canAccessPeer, int device, int peerDevice)
{
    if (canAccessPeer == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    enum cudaError e = rt_state_init();
    if (e != cudaSuccess)
        return e;
    int n = rt_state_device_count();
    if (device < 0 || device >= n || peerDevice < 0 || peerDevice >= n)
        return rt_state_ret(cudaErrorInvalidDevice);
    return rt_state_cu(RT_CALL(cuDeviceCanAccessPeer, canAccessPeer, device, peerDevice));
}

/* The current device's context gets access to peerDevice's primary context (cudart retains it),
 * through cuCtxEnablePeerAccess like NVIDIA's runtime. A device that cannot reach the peer (itself
 * included) is cudaErrorInvalidDevice, as documented. */
RT_EXPORT cudaError_t CUDARTAPI
cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags)
{
    RT_CTX_OR_RETURN();
    int device = 0, can = 0;
    enum cudaError e = rt_state_get_device(&device);
    if (e != cudaSuccess)
        return e;
    if (peerDevice < 0 || peerDevice >= rt_state_device_count())
        return rt_state_ret(cudaErrorInvalidDevice);
    if (flags != 0)
        return rt_state_ret(cudaErrorInvalidValue);
    CUresult r = RT_CALL(cuDeviceCanAccessPeer, &can, device, peerDevice);
    if (r != CUDA_SUCCESS)
        return rt_state_cu(r);
    if (!can)
        return rt_state_ret(cudaErrorInvalidDevice);
    CUcontext peer = NULL;
    r = rt_state_primary(peerDevice, &peer);
    if (r == CUDA_SUCCESS)
        r = RT_CALL(cuCtxEnablePeerAccess, peer, 0);
    return rt_state_cu(r);
}

/* Limits belong to the current device's primary context; cudaLimit has the driver's CUlimit
 * values, and a limit the device lacks is cudaErrorUnsupportedLimit. */
RT_EXPORT cudaError_t CUDARTAPI
cudaDeviceSetLimit(enum cudaLimit limit, size_t value)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuCtxSetLimit, (CUlimit)limit, value));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaDeviceGetLimit(size_t *pValue, enum cudaLimit limit)
{
    if (pValue == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuCtxGetLimit, pValue, (CUlimit)limit));
}

/* At most one scheduling flag, plus the documented others; they have the CU_CTX_* values. */
static bool
rt_device_flags_valid(unsigned int flags)
{
    unsigned int schedule = flags & cudaDeviceScheduleMask;
    unsigned int others = cudaDeviceMapHost | cudaDeviceLmemResizeToMax | cudaDeviceSyncMemops;
    return (flags & ~(cudaDeviceScheduleMask | others)) == 0 &&
           (schedule == cudaDeviceScheduleAuto || schedule == cudaDeviceScheduleSpin ||
            schedule == cudaDeviceScheduleYield || schedule == cudaDeviceScheduleBlockingSync);
}

/* The flags of the current device's primary context, set whether or not it is active yet
 * (CUDA >= 12: an active context gets the new flags too). */
RT_EXPORT cudaError_t CUDARTAPI
cudaSetDeviceFlags(unsigned int flags)
{
    if (!rt_device_flags_valid(flags))
        return rt_state_ret(cudaErrorInvalidValue);
    int device = 0;
    enum cudaError e = rt_state_get_device(&device);
    if (e != cudaSuccess)
        return e;
    CUdevice dev = 0;
    CUresult r = RT_CALL(cuDeviceGet, &dev, device);
    if (r == CUDA_SUCCESS)
        r = RT_CALL(cuDevicePrimaryCtxSetFlags, dev, flags);
    return rt_state_cu(r);
}

/* The current context's flags, else the current device's primary context's. cudaDeviceMapHost
 * is always on: documented as implicit for the runtime. */
RT_EXPORT cudaError_t CUDARTAPI
cudaGetDeviceFlags(unsigned int *flags)
{
    if (flags == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    int device = 0;
    enum cudaError e = rt_state_get_device(&device);
    if (e != cudaSuccess)
        return e;
    CUcontext ctx = NULL;
    unsigned int f = 0;
    CUresult r = RT_CALL(cuCtxGetCurrent, &ctx);
    if (r == CUDA_SUCCESS && ctx != NULL) {
        r = RT_CALL(cuCtxGetFlags, &f);
    } else if (r == CUDA_SUCCESS) {
        CUdevice dev = 0;
        int active = 0;
        r = RT_CALL(cuDeviceGet, &dev, device);
        if (r == CUDA_SUCCESS)
            r = RT_CALL(cuDevicePrimaryCtxGetState, dev, &f, &active);
    }
    if (r == CUDA_SUCCESS)
        *flags = f | cudaDeviceMapHost;
    return rt_state_cu(r);
}

/* cudaDeviceProp int fields filled from cuDeviceGetAttribute. */
static const struct {
    size_t offset;
    CUdevice_attribute attr;
} rt_device_attrs[] = {
    {offsetof(struct cudaDeviceProp, major), CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR},
    {offsetof(struct cudaDeviceProp, minor), CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR},
    {offsetof(struct cudaDeviceProp, multiProcessorCount),
     CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT},
    {offsetof(struct cudaDeviceProp, warpSize), CU_DEVICE_ATTRIBUTE_WARP_SIZE},
    {offsetof(struct cudaDeviceProp, maxThreadsPerBlock),
     CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK},
    {offsetof(struct cudaDeviceProp, pciBusID), CU_DEVICE_ATTRIBUTE_PCI_BUS_ID},
    {offsetof(struct cudaDeviceProp, pciDeviceID), CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID},
    {offsetof(struct cudaDeviceProp, l2CacheSize), CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE},
    {offsetof(struct cudaDeviceProp, memoryBusWidth), CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH},
    {offsetof(struct cudaDeviceProp, unifiedAddressing), CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING},
    {offsetof(struct cudaDeviceProp, managedMemory), CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY},
    {offsetof(struct cudaDeviceProp, concurrentKernels), CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS},
    {offsetof(struct cudaDeviceProp, asyncEngineCount), CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT},
    {offsetof(struct cudaDeviceProp, memoryPoolsSupported),
     CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED},
};

RT_EXPORT cudaError_t CUDARTAPI
cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    if (prop == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    enum cudaError e = rt_state_init();
    if (e != cudaSuccess)
        return e;
    if (device < 0 || device >= rt_state_device_count())
        return rt_state_ret(cudaErrorInvalidDevice);
    CUdevice dev = 0;
    CUresult r = RT_CALL(cuDeviceGet, &dev, device);
    if (r != CUDA_SUCCESS)
        return rt_state_cu(r);
    memset(prop, 0, sizeof *prop);
    r = RT_CALL(cuDeviceGetName, prop->name, (int)sizeof prop->name, dev);
    if (r == CUDA_SUCCESS)
        r = RT_CALL(cuDeviceTotalMem, &prop->totalGlobalMem, dev);
    if (r != CUDA_SUCCESS)
        return rt_state_cu(r);
    for (size_t i = 0; i < sizeof rt_device_attrs / sizeof rt_device_attrs[0]; i++) {
        int v = 0;
        /* An attribute the (simulated) driver does not model stays 0. */
        if (RT_CALL(cuDeviceGetAttribute, &v, rt_device_attrs[i].attr, dev) == CUDA_SUCCESS)
            memcpy((char *)prop + rt_device_attrs[i].offset, &v, sizeof v);
    }
    return cudaSuccess;
}

RT_EXPORT cudaError_t CUDARTAPI
cudaDriverGetVersion(int *driverVersion)
{
    if (driverVersion == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    *driverVersion = 0; /* documented: 0 when no driver is installed */
    if (rt_driver_load() != CUDA_SUCCESS || rt_drv.cuDriverGetVersion == NULL)
        return cudaSuccess;
    return rt_state_cu(rt_drv.cuDriverGetVersion(driverVersion));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaRuntimeGetVersion(int *runtimeVersion)
{
    if (runtimeVersion == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    /* SIMCUDA_RUNTIME_VERSION: play an older runtime (tests of what depends on the version). */
    const char *v = getenv("SIMCUDA_RUNTIME_VERSION");
    *runtimeVersion = v != NULL && *v != '\0' ? atoi(v) : CUDART_VERSION;
    return cudaSuccess;
}

RT_EXPORT cudaError_t CUDARTAPI
cudaGetLastError(void)
{
    return rt_state_last_error(1);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaPeekAtLastError(void)
{
    return rt_state_last_error(0);
}

RT_EXPORT const char *CUDARTAPI
cudaGetErrorName(cudaError_t error)
{
    const char *s = rt_errors_name(error);
    return s ? s : "unrecognized error code";
}

RT_EXPORT const char *CUDARTAPI
cudaGetErrorString(cudaError_t error)
{
    const char *s = rt_errors_string(error);
    return s ? s : "unrecognized error code";
}

/* Both entry-point queries call the pointer cudart got for "cuGetProcAddress"@12000, so whatever
 * an interposer handed back there sees every lookup a program makes through the runtime. */
static cudaError_t
rt_device_entry_point(const char *symbol, void **funcPtr, int version, unsigned long long flags,
                      enum cudaDriverEntryPointQueryResult *status)
{
    if (symbol == NULL || funcPtr == NULL ||
        (flags & ~(unsigned long long)(cudaEnableLegacyStream | cudaEnablePerThreadDefaultStream)))
        return rt_state_ret(cudaErrorInvalidValue);
    enum cudaError e = rt_state_init();
    if (e != cudaSuccess)
        return e;
    *funcPtr = NULL;
    if (rt_drv.get_proc == NULL)
        return rt_state_ret(cudaErrorNotSupported);
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
    CUresult r = rt_drv.get_proc(symbol, funcPtr, version, (cuuint64_t)flags, &st);
    if (status != NULL)
        *status = (enum cudaDriverEntryPointQueryResult)st;
    /* Documented: a missing symbol is cudaSuccess with *funcPtr NULL and the status saying why. */
    if (r == CUDA_ERROR_NOT_FOUND) {
        *funcPtr = NULL;
        return cudaSuccess;
    }
    return rt_state_cu(r);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaGetDriverEntryPoint(const char *symbol, void **funcPtr, unsigned long long flags,
                        enum cudaDriverEntryPointQueryResult *driverStatus)
{
    /* cudart 13 hard-codes its own version here (the call is deprecated in favour of ByVersion). */
    return rt_device_entry_point(symbol, funcPtr, CUDART_VERSION, flags, driverStatus);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr, unsigned long long flags,
                             enum cudaDriverEntryPointQueryResult *driverStatus)
{
    if (flags == cudaEnableDefault) /* default means per-thread in a per-thread build */
        flags = cudaEnablePerThreadDefaultStream;
    return rt_device_entry_point(symbol, funcPtr, CUDART_VERSION, flags, driverStatus);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                                 unsigned long long flags,
                                 enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return rt_device_entry_point(symbol, funcPtr, (int)cudaVersion, flags, driverStatus);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                                      unsigned long long flags,
                                      enum cudaDriverEntryPointQueryResult *driverStatus)
{
    if (flags == cudaEnableDefault)
        flags = cudaEnablePerThreadDefaultStream;
    return rt_device_entry_point(symbol, funcPtr, (int)cudaVersion, flags, driverStatus);
}
