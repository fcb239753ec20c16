/* rt_state: lazy runtime initialisation, primary contexts, the per-thread current device and the
 * per-thread last error (with sticky errors). Lock: rt_state.lock guards the primary-context
 * table; per-thread fields need none. Hot path: yes (every runtime call goes through rt_state_ctx).
 */
#ifndef CUPROF_SIM_RT_STATE_H
#define CUPROF_SIM_RT_STATE_H

#include <driver_types.h>
#include <cuda.h>

/* Loads the driver and runs cuInit once; no context needed. Returns the (recorded) error. */
__attribute__((warn_unused_result)) enum cudaError rt_state_init(void);

/* rt_state_init, then makes sure the calling thread has a current context: the one it already
 * has, or the primary context of its current device (retained and made current, like cudart). */
__attribute__((warn_unused_result)) enum cudaError rt_state_ctx(void);

/* Records a runtime error as this thread's last error (cudaErrorNotReady is not an error and is
 * not recorded; sticky errors also become the process-wide sticky error) and returns it. */
enum cudaError rt_state_ret(enum cudaError e);

/* rt_state_ret(rt_errors_from_cu(r)). */
enum cudaError rt_state_cu(CUresult r);

/* cudaGetLastError (clear = 1) and cudaPeekAtLastError (clear = 0). */
enum cudaError rt_state_last_error(int clear);

/* The calling thread's device: that of its current context, else the one cudaSetDevice chose. */
__attribute__((warn_unused_result)) enum cudaError rt_state_get_device(int *device);

/* cudaSetDevice: checks the ordinal, binds the device's primary context to the thread. */
__attribute__((warn_unused_result)) enum cudaError rt_state_set_device(int device);

/* cudaDeviceReset: synchronizes, resets the current device's primary context (freeing every
 * allocation on it) and drops the runtime's reference so the next call re-creates it. */
__attribute__((warn_unused_result)) enum cudaError rt_state_reset_device(void);

/* Returns from the calling runtime function unless the thread has a usable context. */
#define RT_CTX_OR_RETURN()                                                                         \
    do {                                                                                           \
        enum cudaError rt_e_ = rt_state_ctx();                                                     \
        if (rt_e_ != cudaSuccess)                                                                  \
            return rt_e_;                                                                          \
    } while (0)

/* The primary context of `device` (0 .. count-1), retained on first use. */
__attribute__((warn_unused_result)) CUresult rt_state_primary(int device, CUcontext *ctx);

/* Device count found at init (0 before). */
int rt_state_device_count(void);

#endif
