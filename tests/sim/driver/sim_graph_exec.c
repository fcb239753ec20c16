/* Executable graphs and the graph entry points (see sim_graph.h): graphs made empty or by
 * capture, instantiated (with flags or parameters), uploaded, launched in capture order with
 * their allocations handed to the program, destroyed; the devices' graph memory attributes. */
#include <stdlib.h>

#include "sim_driver.h"
#include "sim_graph.h"
#include "sim_graph_internal.h"

/* ---- graph entry points ---- */

CUresult
cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!phGraph || flags != 0) /* cuda.h: flags must be 0 */
        return CUDA_ERROR_INVALID_VALUE;
    *phGraph = sim_graph_new();
    return *phGraph ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* The flags cuGraphInstantiateWithFlags takes; cuGraphInstantiateWithParams takes UPLOAD too. */
static const unsigned long long instantiate_flags =
    CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH |
    CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;

static CUresult instantiate(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags);

CUresult
cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (flags & ~instantiate_flags)
        return CUDA_ERROR_INVALID_VALUE;
    return instantiate(phGraphExec, hGraph, flags);
}

/* The device memory of the graph's allocations, taken at its first upload or launch (their
 * addresses were fixed when the graph was built) and kept while the graph lives, as the real
 * driver keeps it for the graph's next run; CUDA_ERROR_OUT_OF_MEMORY when it does not fit. */
static CUresult
back_memory(struct graph_memory *m)
{
    sim_graph_lock();
    uintptr_t *ptrs = m->n > 0 ? malloc(m->n * sizeof(*ptrs)) : NULL;
    CUresult r = m->n > 0 && ptrs == NULL ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
    for (size_t i = 0; ptrs != NULL && i < m->n; i++)
        ptrs[i] = m->allocs[i].ptr;
    if (ptrs != NULL)
        r = sim_mem_graph_back(ptrs, m->n, m);
    sim_graph_unlock();
    free(ptrs);
    return r;
}

/* Uploading takes the graph's memory (its nodes are host work): a capturing stream takes no
 * work from it. */
static CUresult
upload(CUgraphExec e, CUstream h, bool ptsz)
{
    struct CUstream_st *s;
    CUresult r = sim_stream_resolve(h, ptsz, &s);
    if (r != CUDA_SUCCESS)
        return r;
    return e ? back_memory(e->mem) : CUDA_ERROR_INVALID_VALUE;
}

CUresult
cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
    return upload(hGraphExec, hStream, false);
}

CUresult
cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    return upload(hGraphExec, hStream, true);
}

/* result_out says why an instantiation failed (here only ever an unexpected reason, the
 * return value's); with CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD the graph is uploaded to
 * hUploadStream as well. */
static CUresult
instantiate_with_params(CUgraphExec *phGraphExec, CUgraph hGraph,
                        CUDA_GRAPH_INSTANTIATE_PARAMS *params, bool ptsz)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!params || (params->flags & ~(instantiate_flags | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD)))
        return CUDA_ERROR_INVALID_VALUE;
    params->hErrNode_out = NULL;
    r = instantiate(phGraphExec, hGraph, params->flags & instantiate_flags);
    if (r == CUDA_SUCCESS && (params->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) &&
        (r = upload(*phGraphExec, params->hUploadStream, ptsz)) != CUDA_SUCCESS) {
        (void)cuGraphExecDestroy(*phGraphExec);
        *phGraphExec = NULL;
    }
    params->result_out =
        r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
    return r;
}

CUresult
cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                             CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    return instantiate_with_params(phGraphExec, hGraph, instantiateParams, false);
}

CUresult
cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                  CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    return instantiate_with_params(phGraphExec, hGraph, instantiateParams, true);
}

static CUresult
instantiate(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
    if (!phGraphExec || !hGraph)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUgraphExec_st *e = calloc(1, sizeof(*e));
    struct sim_op **nodes = calloc(hGraph->n ? hGraph->n : 1, sizeof(*nodes));
    if (!e || !nodes) {
        free(e);
        free(nodes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (size_t i = 0; i < hGraph->n; i++)
        if (!(nodes[e->n++] = sim_op_clone(hGraph->nodes[i]))) {
            sim_graph_nodes_free(nodes, e->n - 1);
            free(e);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    sim_graph_lock();
    bool taken = hGraph->mem->n > 0 && hGraph->mem->instantiated;
    if (!taken && hGraph->mem->n > 0)
        hGraph->mem->instantiated = true;
    sim_graph_unlock();
    if (taken) { /* graphs with memory nodes: one executable copy at a time */
        sim_graph_nodes_free(nodes, e->n);
        free(e);
        return CUDA_ERROR_INVALID_VALUE;
    }
    e->nodes = nodes;
    e->mem = hGraph->mem;
    e->auto_free = (flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH) != 0;
    atomic_fetch_add(&e->mem->refs, 1);
    *phGraphExec = e;
    return CUDA_SUCCESS;
}

/* Graph allocations not freed in the graph become the program's when it runs; launching again
 * before the program freed them is CUDA_ERROR_INVALID_VALUE, unless the graph was instantiated
 * to free them itself on launch. (sim_graph_lock held.) */
static CUresult
hand_out_allocations(struct graph_memory *m, bool auto_free)
{
    bool live = false;
    for (size_t i = 0; i < m->n && !auto_free; i++)
        if (!m->allocs[i].freed_in_graph && sim_mem_graph_is_live(m->allocs[i].ptr, m))
            return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < m->n; i++)
        if (!m->allocs[i].freed_in_graph)
            (void)sim_mem_graph_set_live(m->allocs[i].ptr, m, true, &live);
    return CUDA_SUCCESS;
}

static CUresult
graph_launch(CUgraphExec e, CUstream h, bool ptsz)
{
    struct CUstream_st *s;
    CUresult r = sim_stream_resolve(h, ptsz, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!e)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = back_memory(e->mem)) != CUDA_SUCCESS)
        return r; /* nothing ran */
    sim_graph_lock();
    r = hand_out_allocations(e->mem, e->auto_free);
    sim_graph_unlock();
    for (size_t i = 0; i < e->n && r == CUDA_SUCCESS; i++) {
        struct sim_op *op = sim_op_clone(e->nodes[i]);
        r = op ? sim_stream_submit_op(s, op) : CUDA_ERROR_OUT_OF_MEMORY;
    }
    return r;
}

CUresult
cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    return graph_launch(hGraphExec, hStream, false);
}

CUresult
cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    return graph_launch(hGraphExec, hStream, true);
}

CUresult
cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!hGraphExec)
        return CUDA_ERROR_INVALID_VALUE;
    sim_graph_lock();
    hGraphExec->mem->instantiated = false;
    sim_graph_unlock();
    sim_graph_nodes_free(hGraphExec->nodes, hGraphExec->n);
    sim_graph_memory_unref(hGraphExec->mem);
    free(hGraphExec);
    return CUDA_SUCCESS;
}

CUresult
cuGraphDestroy(CUgraph hGraph)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!hGraph)
        return CUDA_ERROR_INVALID_VALUE;
    sim_graph_free(hGraph);
    return CUDA_SUCCESS;
}

/* ---- graph memory attributes ---- */

/* The simulated graph allocator keeps no pool: what graphs hold is what it reserved for them. */
CUresult
cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
    struct sim_device *dev;
    CUresult r = sim_device_require(device, &dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&dev->lock);
    switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT:
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT:
        *(cuuint64_t *)value = dev->graph_bytes;
        break;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH:
        *(cuuint64_t *)value = dev->graph_bytes_high;
        break;
    default:
        r = CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&dev->lock);
    return r;
}

/* Only the high watermarks, and only back to zero (they then restart from the current value). */
CUresult
cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
    struct sim_device *dev;
    CUresult r = sim_device_require(device, &dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (!value || *(cuuint64_t *)value != 0 ||
        (attr != CU_GRAPH_MEM_ATTR_USED_MEM_HIGH && attr != CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&dev->lock);
    dev->graph_bytes_high = dev->graph_bytes;
    pthread_mutex_unlock(&dev->lock);
    return CUDA_SUCCESS;
}

/* Nothing is cached for graphs here: a graph's allocations go with the graph. */
CUresult
cuDeviceGraphMemTrim(CUdevice device)
{
    struct sim_device *dev;
    return sim_device_require(device, &dev);
}
