/* rt_pool: stream-ordered memory pools: each device's default and current pool, created pools
 * and their attributes, each one driver call. cudaMemPoolAttr and the fields of cudaMemPoolProps
 * have the driver's values (CUmemPool_attribute, CUmemPoolProps). */
#include "rt_api.h"
#include "rt_driver.h"
#include "rt_state.h"

#include <stdbool.h>
#include <string.h>

/* A device ordinal the runtime knows: cudaErrorInvalidDevice otherwise (recorded). */
static cudaError_t
rt_pool_device(int device, CUdevice *dev)
{
    if (device < 0 || device >= rt_state_device_count())
        return rt_state_ret(cudaErrorInvalidDevice);
    return rt_state_cu(RT_CALL(cuDeviceGet, dev, device));
}

/* The device's default pool, or (`current`) the one cudaMallocAsync takes from: the default one
 * until cudaDeviceSetMemPool. */
static cudaError_t
device_pool(cudaMemPool_t *memPool, int device, bool current)
{
    if (memPool == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    RT_CTX_OR_RETURN();
    CUdevice dev = 0;
    cudaError_t e = rt_pool_device(device, &dev);
    if (e != cudaSuccess)
        return e;
    CUmemoryPool *out = (CUmemoryPool *)memPool;
    return rt_state_cu(current ? RT_CALL(cuDeviceGetMemPool, out, dev)
                               : RT_CALL(cuDeviceGetDefaultMemPool, out, dev));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaDeviceGetDefaultMemPool(cudaMemPool_t *memPool, int device)
{
    return device_pool(memPool, device, false);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaDeviceGetMemPool(cudaMemPool_t *memPool, int device)
{
    return device_pool(memPool, device, true);
}

/* Documented: the pool must be local to the device (cudaErrorInvalidDevice otherwise). */
RT_EXPORT cudaError_t CUDARTAPI
cudaDeviceSetMemPool(int device, cudaMemPool_t memPool)
{
    if (memPool == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    RT_CTX_OR_RETURN();
    CUdevice dev = 0;
    cudaError_t e = rt_pool_device(device, &dev);
    if (e != cudaSuccess)
        return e;
    return rt_state_cu(RT_CALL(cuDeviceSetMemPool, dev, (CUmemoryPool)memPool));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemPoolCreate(cudaMemPool_t *memPool, const struct cudaMemPoolProps *poolProps)
{
    if (memPool == NULL || poolProps == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    RT_CTX_OR_RETURN();
    CUmemPoolProps props;
    memset(&props, 0, sizeof(props));
    props.allocType = (CUmemAllocationType)poolProps->allocType;
    props.handleTypes = (CUmemAllocationHandleType)poolProps->handleTypes;
    props.location.type = (CUmemLocationType)poolProps->location.type;
    props.location.id = poolProps->location.id;
    props.win32SecurityAttributes = poolProps->win32SecurityAttributes;
    props.maxSize = poolProps->maxSize;
    props.usage = poolProps->usage;
    return rt_state_cu(RT_CALL(cuMemPoolCreate, (CUmemoryPool *)memPool, &props));
}

/* A device's default pool cannot be destroyed (cudaErrorInvalidValue). */
RT_EXPORT cudaError_t CUDARTAPI
cudaMemPoolDestroy(cudaMemPool_t memPool)
{
    if (memPool == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuMemPoolDestroy, (CUmemoryPool)memPool));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemPoolSetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value)
{
    if (memPool == NULL || value == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    RT_CTX_OR_RETURN();
    return rt_state_cu(
        RT_CALL(cuMemPoolSetAttribute, (CUmemoryPool)memPool, (CUmemPool_attribute)attr, value));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaMemPoolGetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value)
{
    if (memPool == NULL || value == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    RT_CTX_OR_RETURN();
    return rt_state_cu(
        RT_CALL(cuMemPoolGetAttribute, (CUmemoryPool)memPool, (CUmemPool_attribute)attr, value));
}

/* The simulated pools never cache, so there is never anything to trim. */
RT_EXPORT cudaError_t CUDARTAPI
cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep)
{
    if (memPool == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuMemPoolTrimTo, (CUmemoryPool)memPool, minBytesToKeep));
}
