/* rt_graph: stream capture and CUDA graphs, each call handed to the driver's twin (the
 * simulated driver's sim_graph.c does the work). The _ptsz exports use the per-thread twins. */
#include "rt_api.h"
#include "rt_driver.h"
#include "rt_state.h"

RT_EXPORT cudaError_t CUDARTAPI
cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuStreamBeginCapture, (CUstream)stream, (CUstreamCaptureMode)mode));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(
        RT_CALL(cuStreamBeginCapture_ptsz, (CUstream)stream, (CUstreamCaptureMode)mode));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuStreamEndCapture, (CUstream)stream, (CUgraph *)pGraph));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuStreamEndCapture_ptsz, (CUstream)stream, (CUgraph *)pGraph));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(
        RT_CALL(cuStreamIsCapturing, (CUstream)stream, (CUstreamCaptureStatus *)pCaptureStatus));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaStreamIsCapturing_ptsz(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuStreamIsCapturing_ptsz, (CUstream)stream,
                               (CUstreamCaptureStatus *)pCaptureStatus));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuThreadExchangeStreamCaptureMode, (CUstreamCaptureMode *)mode));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph, unsigned long long flags)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(
        RT_CALL(cuGraphInstantiateWithFlags, (CUgraphExec *)pGraphExec, (CUgraph)graph, flags));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaGraphInstantiateWithFlags(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                              unsigned long long flags)
{
    return cudaGraphInstantiate(pGraphExec, graph, flags);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuGraphLaunch, (CUgraphExec)graphExec, (CUstream)stream));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuGraphLaunch_ptsz, (CUgraphExec)graphExec, (CUstream)stream));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaGraphExecDestroy(cudaGraphExec_t graphExec)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuGraphExecDestroy, (CUgraphExec)graphExec));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaGraphDestroy(cudaGraph_t graph)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuGraphDestroy, (CUgraph)graph));
}
