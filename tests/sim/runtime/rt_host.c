/* rt_host: page-locked host memory beyond cudaMallocHost: cudaHostAlloc with flags, registration
 * of the program's own memory, and the queries on both. The runtime's cudaHost* flags have the
 * values of the driver's CU_MEMHOSTALLOC_* and CU_MEMHOSTREGISTER_*, so they pass through. */
#include "rt_api.h"
#include "rt_driver.h"
#include "rt_state.h"

#include <stdint.h>

RT_EXPORT cudaError_t CUDARTAPI
cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    unsigned int known = cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined;
    if (pHost == NULL || (flags & ~known) != 0)
        return rt_state_ret(cudaErrorInvalidValue);
    RT_CTX_OR_RETURN();
    *pHost = NULL;
    if (size == 0) /* like cudaMallocHost: NULL and success */
        return cudaSuccess;
    return rt_state_cu(RT_CALL(cuMemHostAlloc, pHost, size, flags));
}

/* Documented: only memory from cudaHostAlloc/cudaMallocHost has flags (any address inside it). */
RT_EXPORT cudaError_t CUDARTAPI
cudaHostGetFlags(unsigned int *pFlags, void *pHost)
{
    if (pFlags == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuMemHostGetFlags, pFlags, pHost));
}

/* Unified addressing: the device pointer of mapped host memory is its host address. */
RT_EXPORT cudaError_t CUDARTAPI
cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags)
{
    if (pDevice == NULL || flags != 0) /* flags: for extensions, must be 0 */
        return rt_state_ret(cudaErrorInvalidValue);
    RT_CTX_OR_RETURN();
    CUdeviceptr p = 0;
    CUresult r = RT_CALL(cuMemHostGetDevicePointer, &p, pHost, 0);
    if (r == CUDA_SUCCESS)
        *pDevice = (void *)(uintptr_t)p;
    return rt_state_cu(r);
}

/* Overlapping an already registered range is cudaErrorHostMemoryAlreadyRegistered. */
RT_EXPORT cudaError_t CUDARTAPI
cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
    unsigned int known = cudaHostRegisterPortable | cudaHostRegisterMapped |
                         cudaHostRegisterIoMemory | cudaHostRegisterReadOnly;
    if (ptr == NULL || size == 0 || (flags & ~known) != 0)
        return rt_state_ret(cudaErrorInvalidValue);
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuMemHostRegister, ptr, size, flags));
}

/* ptr must be the start of a registered range, else cudaErrorHostMemoryNotRegistered. */
RT_EXPORT cudaError_t CUDARTAPI
cudaHostUnregister(void *ptr)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuMemHostUnregister, ptr));
}
