/* rt_state: what the real runtime keeps per process (driver, primary contexts) and per thread
 * (current device, last error). */
#include "rt_state.h"

#include "rt_driver.h"
#include "rt_errors.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>

#define RT_STATE_MAX_DEVICES 64

static struct {
    pthread_once_t once;
    enum cudaError init_error; /* written once under `once` */
    int device_count;          /* written once under `once` */
    pthread_mutex_t lock;
    CUcontext primary[RT_STATE_MAX_DEVICES]; /* protected by lock; NULL = not retained */
    _Atomic int sticky;                      /* a sticky error, reported by every later call */
} rt_state = {
    .once = PTHREAD_ONCE_INIT,
    .init_error = cudaErrorInitializationError,
    .lock = PTHREAD_MUTEX_INITIALIZER,
};

static _Thread_local int rt_state_tls_device;
static _Thread_local enum cudaError rt_state_tls_error;

static void
rt_state_init_once(void)
{
    CUresult r = rt_driver_load();
    if (r == CUDA_ERROR_SHARED_OBJECT_INIT_FAILED) {
        /* No libcuda.so.1 at all: what cudart reports on a machine without a driver. */
        rt_state.init_error = cudaErrorInsufficientDriver;
        return;
    }
    if (r != CUDA_SUCCESS) {
        rt_state.init_error = rt_errors_from_cu(r);
        return;
    }
    int version = 0;
    r = RT_CALL(cuDriverGetVersion, &version);
    if (r != CUDA_SUCCESS) {
        rt_state.init_error = rt_errors_from_cu(r);
        return;
    }
    if (version < CUDART_VERSION) { /* cudart 13 rejects drivers older than itself */
        rt_state.init_error = cudaErrorInsufficientDriver;
        return;
    }
    r = RT_CALL(cuInit, 0);
    if (r != CUDA_SUCCESS) {
        rt_state.init_error = rt_errors_from_cu(r);
        return;
    }
    int count = 0;
    r = RT_CALL(cuDeviceGetCount, &count);
    if (r != CUDA_SUCCESS) {
        rt_state.init_error = rt_errors_from_cu(r);
        return;
    }
    if (count <= 0) {
        rt_state.init_error = cudaErrorNoDevice;
        return;
    }
    rt_state.device_count = count < RT_STATE_MAX_DEVICES ? count : RT_STATE_MAX_DEVICES;
    rt_state.init_error = cudaSuccess;
}

enum cudaError
rt_state_ret(enum cudaError e)
{
    if (e == cudaSuccess || e == cudaErrorNotReady)
        return e;
    if (rt_errors_is_sticky(e)) {
        int expected = cudaSuccess;
        atomic_compare_exchange_strong(&rt_state.sticky, &expected, (int)e);
    }
    rt_state_tls_error = e;
    return e;
}

enum cudaError
rt_state_cu(CUresult r)
{
    return rt_state_ret(rt_errors_from_cu(r));
}

enum cudaError
rt_state_last_error(int clear)
{
    int sticky = atomic_load(&rt_state.sticky);
    if (sticky != cudaSuccess)
        return (enum cudaError)sticky;
    enum cudaError e = rt_state_tls_error;
    if (clear)
        rt_state_tls_error = cudaSuccess;
    return e;
}

enum cudaError
rt_state_init(void)
{
    if (pthread_once(&rt_state.once, rt_state_init_once) != 0)
        return rt_state_ret(cudaErrorInitializationError);
    int sticky = atomic_load(&rt_state.sticky);
    if (sticky != cudaSuccess)
        return rt_state_ret((enum cudaError)sticky);
    return rt_state_ret(rt_state.init_error);
}

int
rt_state_device_count(void)
{
    return rt_state.device_count;
}

CUresult
rt_state_primary(int device, CUcontext *ctx)
{
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&rt_state.lock);
    if (rt_state.primary[device] == NULL) {
        CUdevice dev = 0;
        r = RT_CALL(cuDeviceGet, &dev, device);
        if (r == CUDA_SUCCESS)
            r = RT_CALL(cuDevicePrimaryCtxRetain, &rt_state.primary[device], dev);
    }
    *ctx = rt_state.primary[device];
    pthread_mutex_unlock(&rt_state.lock);
    return r;
}

enum cudaError
rt_state_ctx(void)
{
    enum cudaError e = rt_state_init();
    if (e != cudaSuccess)
        return e;
    CUcontext cur = NULL;
    CUresult r = RT_CALL(cuCtxGetCurrent, &cur);
    if (r != CUDA_SUCCESS)
        return rt_state_cu(r);
    if (cur != NULL)
        return cudaSuccess;
    r = rt_state_primary(rt_state_tls_device, &cur);
    if (r == CUDA_SUCCESS)
        r = RT_CALL(cuCtxSetCurrent, cur);
    return rt_state_cu(r);
}

enum cudaError
rt_state_get_device(int *device)
{
    enum cudaError e = rt_state_init();
    if (e != cudaSuccess)
        return e;
    CUcontext cur = NULL;
    if (RT_CALL(cuCtxGetCurrent, &cur) == CUDA_SUCCESS && cur != NULL) {
        CUdevice dev = 0;
        CUresult r = RT_CALL(cuCtxGetDevice, &dev);
        if (r != CUDA_SUCCESS)
            return rt_state_cu(r);
        *device = (int)dev;
        return cudaSuccess;
    }
    *device = rt_state_tls_device;
    return cudaSuccess;
}

enum cudaError
rt_state_set_device(int device)
{
    enum cudaError e = rt_state_init();
    if (e != cudaSuccess)
        return e;
    if (device < 0 || device >= rt_state.device_count)
        return rt_state_ret(cudaErrorInvalidDevice);
    /* Since CUDA 12 cudaSetDevice initialises the device's primary context right away. */
    CUcontext ctx = NULL;
    CUresult r = rt_state_primary(device, &ctx);
    if (r == CUDA_SUCCESS)
        r = RT_CALL(cuCtxSetCurrent, ctx);
    if (r != CUDA_SUCCESS)
        return rt_state_cu(r);
    rt_state_tls_device = device;
    return cudaSuccess;
}

enum cudaError
rt_state_reset_device(void)
{
    int device = 0;
    enum cudaError e = rt_state_ctx();
    if (e == cudaSuccess)
        e = rt_state_get_device(&device);
    if (e != cudaSuccess)
        return e;
    CUdevice dev = 0;
    CUresult r = RT_CALL(cuDeviceGet, &dev, device);
    if (r == CUDA_SUCCESS)
        r = RT_CALL(cuDevicePrimaryCtxReset, dev);
    if (r != CUDA_SUCCESS)
        return rt_state_cu(r);
    pthread_mutex_lock(&rt_state.lock);
    CUcontext old = rt_state.primary[device];
    rt_state.primary[device] = NULL;
    pthread_mutex_unlock(&rt_state.lock);
    CUcontext cur = NULL;
    if (RT_CALL(cuCtxGetCurrent, &cur) == CUDA_SUCCESS && cur == old)
        (void)RT_CALL(cuCtxSetCurrent, NULL);
    return cudaSuccess;
}
