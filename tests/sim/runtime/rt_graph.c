/* rt_graph: stream capture and CUDA graphs, each call handed to the driver's twin (the
 * simulated driver's sim_graph.c does the work). The _ptsz exports use the per-thread twins. */
#include "rt_api.h"
#include "rt_driver.h"
#include "rt_state.h"

#include <stdbool.h>

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

/* The driver's id is a cuuint64_t, the runtime's an unsigned long long: copied, not cast. */
static cudaError_t
capture_info(cudaStream_t stream, enum cudaStreamCaptureStatus *status, unsigned long long *id,
             cudaGraph_t *graph, const cudaGraphNode_t **dependencies,
             const cudaGraphEdgeData **edge_data, size_t *count, bool ptsz)
{
    RT_CTX_OR_RETURN();
    cuuint64_t capture_id = 0;
    CUresult r = ptsz ? RT_CALL(cuStreamGetCaptureInfo_ptsz, (CUstream)stream,
                                (CUstreamCaptureStatus *)status, id ? &capture_id : NULL,
                                (CUgraph *)graph, (const CUgraphNode **)dependencies,
                                (const CUgraphEdgeData **)edge_data, count)
                      : RT_CALL(cuStreamGetCaptureInfo, (CUstream)stream,
                                (CUstreamCaptureStatus *)status, id ? &capture_id : NULL,
                                (CUgraph *)graph, (const CUgraphNode **)dependencies,
                                (const CUgraphEdgeData **)edge_data, count);
    if (r == CUDA_SUCCESS && id)
        *id = capture_id;
    return rt_state_cu(r);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaStreamGetCaptureInfo(cudaStream_t stream, enum cudaStreamCaptureStatus *captureStatus_out,
                         unsigned long long *id_out, cudaGraph_t *graph_out,
                         const cudaGraphNode_t **dependencies_out,
                         const cudaGraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    return capture_info(stream, captureStatus_out, id_out, graph_out, dependencies_out,
                        edgeData_out, numDependencies_out, false);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaStreamGetCaptureInfo_ptsz(cudaStream_t stream, enum cudaStreamCaptureStatus *captureStatus_out,
                              unsigned long long *id_out, cudaGraph_t *graph_out,
                              const cudaGraphNode_t **dependencies_out,
                              const cudaGraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    return capture_info(stream, captureStatus_out, id_out, graph_out, dependencies_out,
                        edgeData_out, numDependencies_out, true);
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

RT_EXPORT cudaError_t CUDARTAPI
cudaGraphCreate(cudaGraph_t *pGraph, unsigned int flags)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuGraphCreate, (CUgraph *)pGraph, flags));
}

static cudaError_t
begin_capture_to_graph(cudaStream_t stream, cudaGraph_t graph, const cudaGraphNode_t *dependencies,
                       const cudaGraphEdgeData *dependencyData, size_t numDependencies,
                       enum cudaStreamCaptureMode mode, bool ptsz)
{
    RT_CTX_OR_RETURN();
    const CUgraphNode *deps = (const CUgraphNode *)dependencies;
    const CUgraphEdgeData *data = (const CUgraphEdgeData *)dependencyData;
    return rt_state_cu(ptsz ? RT_CALL(cuStreamBeginCaptureToGraph_ptsz, (CUstream)stream,
                                      (CUgraph)graph, deps, data, numDependencies,
                                      (CUstreamCaptureMode)mode)
                            : RT_CALL(cuStreamBeginCaptureToGraph, (CUstream)stream, (CUgraph)graph,
                                      deps, data, numDependencies, (CUstreamCaptureMode)mode));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaStreamBeginCaptureToGraph(cudaStream_t stream, cudaGraph_t graph,
                              const cudaGraphNode_t *dependencies,
                              const cudaGraphEdgeData *dependencyData, size_t numDependencies,
                              enum cudaStreamCaptureMode mode)
{
    return begin_capture_to_graph(stream, graph, dependencies, dependencyData, numDependencies,
                                  mode, false);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t stream, cudaGraph_t graph,
                                   const cudaGraphNode_t *dependencies,
                                   const cudaGraphEdgeData *dependencyData, size_t numDependencies,
                                   enum cudaStreamCaptureMode mode)
{
    return begin_capture_to_graph(stream, graph, dependencies, dependencyData, numDependencies,
                                  mode, true);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaGraphUpload(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuGraphUpload, (CUgraphExec)graphExec, (CUstream)stream));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaGraphUpload_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    RT_CTX_OR_RETURN();
    return rt_state_cu(RT_CALL(cuGraphUpload_ptsz, (CUgraphExec)graphExec, (CUstream)stream));
}

/* The runtime's parameter block and the driver's hold the same fields under other types:
 * copied both ways, not cast. */
static cudaError_t
instantiate_with_params(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                        cudaGraphInstantiateParams *params, bool ptsz)
{
    RT_CTX_OR_RETURN();
    if (params == NULL)
        return rt_state_ret(cudaErrorInvalidValue);
    CUDA_GRAPH_INSTANTIATE_PARAMS p = {.flags = params->flags,
                                       .hUploadStream = (CUstream)params->uploadStream};
    CUresult r =
        ptsz ? RT_CALL(cuGraphInstantiateWithParams_ptsz, (CUgraphExec *)pGraphExec, (CUgraph)graph,
                       &p)
             : RT_CALL(cuGraphInstantiateWithParams, (CUgraphExec *)pGraphExec, (CUgraph)graph, &p);
    params->errNode_out = (cudaGraphNode_t)p.hErrNode_out;
    params->result_out = (cudaGraphInstantiateResult)p.result_out;
    return rt_state_cu(r);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaGraphInstantiateWithParams(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                               cudaGraphInstantiateParams *instantiateParams)
{
    return instantiate_with_params(pGraphExec, graph, instantiateParams, false);
}

RT_EXPORT cudaError_t CUDARTAPI
cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                    cudaGraphInstantiateParams *instantiateParams)
{
    return instantiate_with_params(pGraphExec, graph, instantiateParams, true);
}

/* The graph memory calls name a device by ordinal; one out of range is cudaErrorInvalidDevice. */
static cudaError_t
graph_device(int device)
{
    enum cudaError e = rt_state_init();
    if (e != cudaSuccess)
        return e;
    if (device < 0 || device >= rt_state_device_count())
        return rt_state_ret(cudaErrorInvalidDevice);
    return cudaSuccess;
}

RT_EXPORT cudaError_t CUDARTAPI
cudaDeviceGetGraphMemAttribute(int device, enum cudaGraphMemAttributeType attr, void *value)
{
    enum cudaError e = graph_device(device);
    if (e != cudaSuccess)
        return e;
    return rt_state_cu(
        RT_CALL(cuDeviceGetGraphMemAttribute, device, (CUgraphMem_attribute)attr, value));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaDeviceSetGraphMemAttribute(int device, enum cudaGraphMemAttributeType attr, void *value)
{
    enum cudaError e = graph_device(device);
    if (e != cudaSuccess)
        return e;
    return rt_state_cu(
        RT_CALL(cuDeviceSetGraphMemAttribute, device, (CUgraphMem_attribute)attr, value));
}

RT_EXPORT cudaError_t CUDARTAPI
cudaDeviceGraphMemTrim(int device)
{
    enum cudaError e = graph_device(device);
    if (e != cudaSuccess)
        return e;
    return rt_state_cu(RT_CALL(cuDeviceGraphMemTrim, device));
}
