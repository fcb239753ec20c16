/* rt_profiler: cudaProfilerStart/cudaProfilerStop (cuda_profiler_api.h), which programs call to
 * scope a profiling tool's collection (Nsight Systems' --capture-range=cudaProfilerApi): handed to
 * the driver's cuProfilerStart/cuProfilerStop in the thread's context, created if need be.
 * Lock: none. Hot path: no. */
#include <cuda.h>
#include <cuda_profiler_api.h>

#include "rt_api.h"
#include "rt_driver.h"
#include "rt_state.h"

RT_EXPORT cudaError_t CUDARTAPI
cudaProfilerStart(void)
{
    RT_CTX_OR_RETURN();
    CUresult r =
        rt_drv.cuProfilerStart ? rt_drv.cuProfilerStart() : CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER;
    return r == CUDA_SUCCESS ? cudaSuccess : rt_state_cu(r);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaProfilerStop(void)
{
    RT_CTX_OR_RETURN();
    CUresult r =
        rt_drv.cuProfilerStop ? rt_drv.cuProfilerStop() : CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER;
    return r == CUDA_SUCCESS ? cudaSuccess : rt_state_cu(r);
}
