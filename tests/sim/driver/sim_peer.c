/* Peer access: cuDeviceCanAccessPeer (every pair of distinct devices can), cuCtxEnablePeerAccess
 * and cuCtxDisablePeerAccess with the driver's error codes, kept per context (up to
 * SIM_MAX_PEERS) under its device's lock. It changes what the simulator allows for nothing but
 * these calls: ordinary device memory is copied between devices either way, and VMM mappings are
 * reached only by the devices cuMemSetAccess names, as on the driver. */
#include "sim_driver.h"

CUresult
cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!canAccessPeer)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_device_get(dev) || !sim_device_get(peerDev))
        return CUDA_ERROR_INVALID_DEVICE;
    *canAccessPeer = dev != peerDev;
    return CUDA_SUCCESS;
}

static int
peer_index_locked(const struct CUctx_st *ctx, const struct CUctx_st *peer)
{
    for (int i = 0; i < ctx->npeers; i++)
        if (ctx->peers[i] == peer)
            return i;
    return -1;
}

CUresult
cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
    struct CUctx_st *cur;
    CUresult r = sim_ctx_require(&cur);
    if (r != CUDA_SUCCESS)
        return r;
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!peerContext || peerContext == cur || !sim_ctx_live(peerContext))
        return CUDA_ERROR_INVALID_CONTEXT;
    /* cuDeviceCanAccessPeer says no for a device and itself. */
    if (peerContext->dev == cur->dev)
        return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
    pthread_mutex_lock(&cur->dev->lock);
    if (peer_index_locked(cur, peerContext) >= 0)
        r = CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
    else if (cur->npeers == SIM_MAX_PEERS)
        r = CUDA_ERROR_TOO_MANY_PEERS;
    else
        cur->peers[cur->npeers++] = peerContext;
    pthread_mutex_unlock(&cur->dev->lock);
    if (r == CUDA_SUCCESS)
        sim_vmm_log("peer %d %d", cur->dev->ordinal, peerContext->dev->ordinal);
    return r;
}

CUresult
cuCtxDisablePeerAccess(CUcontext peerContext)
{
    struct CUctx_st *cur;
    CUresult r = sim_ctx_require(&cur);
    if (r != CUDA_SUCCESS)
        return r;
    if (!peerContext || !sim_ctx_live(peerContext))
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&cur->dev->lock);
    int i = peer_index_locked(cur, peerContext);
    if (i < 0) {
        r = CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
    } else {
        cur->peers[i] = cur->peers[--cur->npeers];
        cur->peers[cur->npeers] = NULL;
    }
    pthread_mutex_unlock(&cur->dev->lock);
    if (r == CUDA_SUCCESS)
        sim_vmm_log("unpeer %d %d", cur->dev->ordinal, peerContext->dev->ordinal);
    return r;
}

void
sim_peer_forget(struct CUctx_st *ctx)
{
    for (int d = 0; d < sim.ndev; d++) {
        struct sim_device *dev = &sim.devs[d];
        pthread_mutex_lock(&dev->lock);
        struct CUctx_st *c = &dev->primary;
        while (c != NULL) {
            if (c == ctx) {
                c->npeers = 0;
            } else {
                int i = peer_index_locked(c, ctx);
                if (i >= 0)
                    c->peers[i] = c->peers[--c->npeers];
            }
            c = c == &dev->primary ? dev->created : c->next;
        }
        pthread_mutex_unlock(&dev->lock);
    }
}
