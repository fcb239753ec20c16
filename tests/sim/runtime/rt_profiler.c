/* rt_profiler: cudaProfilerStart/cudaProfilerStop (cuda_profiler_api.h), which programs call to
 * scope a profiling tool's collection (Nsight Systems' --capture-range=cudaProfilerApi): handed to
 * the driver's cuProfilerStart/cuProfilerStop in the thread's context, created if need be.
 * Lock: none. Hot path: no. */
#include <cuda.h>
#include <cuda_profiler_api.h>
#include <stdbool.h>

#include "rt_api.h"
#include "rt_driver.h"
#include "rt_state.h"

/* The driver's start (or stop) in the thread's context. */
static cudaError_t
rt_profiler_call(bool start)
{
    RT_CTX_OR_RETURN();
    PFN_cuProfilerStart_v4000 fn = start ? rt_drv.cuProfilerStart : rt_drv.cuProfilerStop;
    return rt_state_cu(fn != NULL ? fn() : CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaProfilerStart(void)
{
    return rt_profiler_call(true);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaProfilerStop(void)
{
    return rt_profiler_call(false);
}
