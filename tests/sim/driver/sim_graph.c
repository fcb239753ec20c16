/* Stream capture (see sim_graph.h): captures, the modes that refuse calls while they run, joins,
 * and the graphs they build with their graph allocations; executable graphs and the graph
 * entry points are sim_graph_exec.c's. */
#include <stdlib.h>
#include <string.h>

#include "sim_driver.h"
#include "sim_graph.h"
#include "sim_graph_internal.h"

struct capture {
    uint64_t id;
    CUstreamCaptureMode mode;
    pthread_t thread; /* the one that began it */
    bool invalidated; /* a refused call: cuStreamEndCapture gives no graph */
    struct CUgraph_st *graph;
    bool graph_given;           /* cuStreamBeginCaptureToGraph: the program's graph */
    struct CUstream_st *origin; /* NULL once destroyed */
    struct capture *next;
    uint8_t stream_count; /* capture_index values handed out (the origin's is 0) */
};

static pthread_mutex_t capture_lock = PTHREAD_MUTEX_INITIALIZER;
static struct capture *captures;  /* protected by capture_lock */
static uint64_t last_capture_id;  /* protected by capture_lock */
static atomic_int captures_alive; /* how many are in `captures` */
static _Thread_local CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

bool
sim_capture_active(void)
{
    return atomic_load_explicit(&captures_alive, memory_order_acquire) > 0;
}

void
sim_graph_lock(void)
{
    pthread_mutex_lock(&capture_lock);
}

void
sim_graph_unlock(void)
{
    pthread_mutex_unlock(&capture_lock);
}

static struct capture *
find_capture(uint64_t id)
{
    for (struct capture *c = id ? captures : NULL; c; c = c->next)
        if (c->id == id)
            return c;
    return NULL;
}

/* ---- graphs ---- */

void
sim_graph_memory_unref(struct graph_memory *m)
{
    if (atomic_fetch_sub(&m->refs, 1) != 1)
        return;
    for (size_t i = 0; i < m->n; i++)
        sim_mem_graph_release(m->allocs[i].ptr, m);
    free(m->allocs);
    free(m);
}

void
sim_graph_nodes_free(struct sim_op **nodes, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sim_op_free(nodes[i]);
    free(nodes);
}

struct CUgraph_st *
sim_graph_new(void)
{
    struct CUgraph_st *g = calloc(1, sizeof(*g));
    struct graph_memory *m = calloc(1, sizeof(*m));
    if (!g || !m) {
        free(g);
        free(m);
        return NULL;
    }
    atomic_init(&m->refs, 1);
    g->mem = m;
    return g;
}

void
sim_graph_free(struct CUgraph_st *g)
{
    sim_graph_nodes_free(g->nodes, g->n);
    sim_graph_memory_unref(g->mem);
    free(g);
}

static bool
grow(void **array, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return true;
    size_t ncap = *cap ? *cap * 2 : 8;
    void *a = realloc(*array, ncap * size);
    if (!a)
        return false;
    *array = a;
    *cap = ncap;
    return true;
}

/* ---- what a capture refuses ---- */

/* Marks every capture that forbids this thread's unsafe calls invalid; true when one does. */
static bool
invalidate_forbidding(void)
{
    if (thread_mode == CU_STREAM_CAPTURE_MODE_RELAXED)
        return false;
    pthread_t self = pthread_self();
    bool forbidden = false;
    for (struct capture *c = captures; c; c = c->next) {
        bool own = pthread_equal(c->thread, self);
        if ((own && c->mode != CU_STREAM_CAPTURE_MODE_RELAXED) ||
            (!own && thread_mode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
             c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL)) {
            c->invalidated = true;
            forbidden = true;
        }
    }
    return forbidden;
}

CUresult
sim_capture_check_unsafe(void)
{
    pthread_mutex_lock(&capture_lock);
    bool forbidden = invalidate_forbidding();
    pthread_mutex_unlock(&capture_lock);
    return forbidden ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

/* Whether a blocking stream of `dev` captures, marking its capture invalid with `invalidate`
 * (capture_lock held). */
static bool
find_blocking_capture(struct sim_device *dev, bool invalidate)
{
    bool found = false;
    pthread_mutex_lock(&dev->streams_lock);
    for (struct CUstream_st *t = dev->streams; t; t = t->next) {
        struct capture *c = find_capture(t->capture_id);
        if (c && !(t->flags & CU_STREAM_NON_BLOCKING)) {
            c->invalidated = c->invalidated || invalidate;
            found = true;
        }
    }
    pthread_mutex_unlock(&dev->streams_lock);
    return found;
}

static bool
blocking_capture(struct sim_device *dev)
{
    return find_blocking_capture(dev, false);
}

/* The legacy stream waits for every blocking stream, so work on it would depend on a capture:
 * CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, and the captures of the blocking streams are invalid. */
static bool
invalidate_implicit(struct sim_device *dev)
{
    return find_blocking_capture(dev, true);
}

/* ---- joins: which captured work the origin stream depends on, so that ending a capture with
 * a fork's work left out fails (CUDA Programming Guide, cross-stream dependencies: a stream that
 * is not joined back to the origin fails the whole capture). Each stream counts its own captured
 * work; an event's record keeps what its stream depended on, and a wait on it adds that. ---- */

static void
note_work(struct CUstream_st *s)
{
    if (s->capture_index < SIM_CAPTURE_STREAMS)
        s->capture_seen[s->capture_index]++;
}

static void
depend_on(struct CUstream_st *s, const struct CUevent_st *ev)
{
    for (int i = 0; i < SIM_CAPTURE_STREAMS; i++)
        if (ev->capture_seen[i] > s->capture_seen[i])
            s->capture_seen[i] = ev->capture_seen[i];
}

/* A stream joins capture c (its origin at begin, a fork at a wait), depending on nothing yet. */
static void
enter_capture(struct capture *c, struct CUstream_st *s)
{
    s->capture_id = c->id;
    s->capture_index =
        c->stream_count < SIM_CAPTURE_STREAMS ? c->stream_count++ : SIM_CAPTURE_STREAMS;
    memset(s->capture_seen, 0, sizeof(s->capture_seen));
}

/* A stream of capture c has captured work its origin does not depend on (capture_lock held). */
static bool
unjoined(const struct capture *c)
{
    const struct CUstream_st *o = c->origin;
    bool found = false;
    for (int i = 0; i < sim.ndev && !found; i++) {
        struct sim_device *dev = &sim.devs[i];
        pthread_mutex_lock(&dev->streams_lock);
        for (struct CUstream_st *t = dev->streams; t && !found; t = t->next) {
            unsigned k = t->capture_index;
            found = t->capture_id == c->id && t != o && k < SIM_CAPTURE_STREAMS &&
                    t->capture_seen[k] > o->capture_seen[k];
        }
        pthread_mutex_unlock(&dev->streams_lock);
    }
    return found;
}

CUresult
sim_capture_submit(struct CUstream_st *s, struct sim_op *op, bool wait, bool *taken)
{
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&capture_lock);
    struct capture *c = find_capture(s->capture_id);
    *taken = true;
    if (c && wait) {
        c->invalidated = true; /* a synchronous call on a capturing stream */
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    } else if (c && c->invalidated) {
        r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (c) {
        struct CUgraph_st *g = c->graph;
        if (grow((void **)&g->nodes, &g->cap, g->n, sizeof(*g->nodes))) {
            g->nodes[g->n++] = op;
            note_work(s);
        } else {
            r = CUDA_ERROR_OUT_OF_MEMORY;
        }
    } else if (wait && invalidate_forbidding()) {
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    } else if (s->legacy && invalidate_implicit(s->dev)) {
        r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    } else {
        *taken = false;
    }
    pthread_mutex_unlock(&capture_lock);
    return r;
}

/* The capture stream work on `s` goes to, with capture_lock held: *taken when there is one, and
 * NULL with *r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED when it already failed. */
static struct capture *
capture_for_work(struct CUstream_st *s, bool *taken, CUresult *r)
{
    struct capture *c = find_capture(s->capture_id);
    *taken = c != NULL;
    *r = CUDA_SUCCESS;
    if (c && c->invalidated) {
        *r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        return NULL;
    }
    return c;
}

CUresult
sim_capture_record(struct CUstream_st *s, struct CUevent_st *ev, bool *taken)
{
    CUresult r;
    pthread_mutex_lock(&capture_lock);
    struct capture *c = capture_for_work(s, taken, &r);
    if (c) {
        ev->capture_id = c->id; /* a later wait on it joins the capture */
        memcpy(ev->capture_seen, s->capture_seen, sizeof(ev->capture_seen));
    } else if (!*taken && s->legacy && invalidate_implicit(s->dev)) {
        *taken = true;
        r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    } else if (!*taken) {
        ev->capture_id = 0;
    }
    pthread_mutex_unlock(&capture_lock);
    return r;
}

CUresult
sim_capture_wait(struct CUstream_st *s, struct CUevent_st *ev, bool *taken)
{
    pthread_mutex_lock(&capture_lock);
    struct capture *mine = find_capture(s->capture_id);
    struct capture *theirs = find_capture(ev->capture_id);
    CUresult r = CUDA_SUCCESS;
    *taken = mine || theirs;
    if (mine && !theirs) {
        /* A dependency on work outside the capture. */
        mine->invalidated = true;
        r = CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    } else if (!mine && theirs && s->legacy) {
        theirs->invalidated = true;
        r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    } else if (!mine && theirs) {
        /* Fork: the stream joins the capture; its work is captured from now on. */
        enter_capture(theirs, s);
        depend_on(s, ev);
        r = theirs->invalidated ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
    } else if (mine && mine != theirs) {
        mine->invalidated = theirs->invalidated = true;
        r = CUDA_ERROR_STREAM_CAPTURE_MERGE;
    } else if (mine) {
        /* Both in one capture (a join, or a fork's fork): replaying in capture order already
         * keeps the order; the dependency is what ending the capture checks. */
        depend_on(s, ev);
    }
    pthread_mutex_unlock(&capture_lock);
    return r;
}

CUresult
sim_capture_check_sync(struct CUstream_st *s, struct CUevent_st *ev)
{
    pthread_mutex_lock(&capture_lock);
    struct capture *c = find_capture(s ? s->capture_id : 0);
    struct capture *e = find_capture(ev ? ev->capture_id : 0);
    if (c)
        c->invalidated = true;
    pthread_mutex_unlock(&capture_lock);
    if (e)
        return CUDA_ERROR_CAPTURED_EVENT;
    return c ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

/* ---- graph memory ---- */

CUresult
sim_capture_alloc(struct CUstream_st *s, struct CUctx_st *ctx, size_t size, CUdeviceptr *out,
                  bool *taken)
{
    CUresult r;
    pthread_mutex_lock(&capture_lock);
    struct capture *c = capture_for_work(s, taken, &r);
    if (c) {
        struct graph_memory *m = c->graph->mem;
        if (!grow((void **)&m->allocs, &m->cap, m->n, sizeof(*m->allocs)))
            r = CUDA_ERROR_OUT_OF_MEMORY;
        else if ((r = sim_mem_alloc_graph(ctx, size, m, out)) == CUDA_SUCCESS) {
            m->allocs[m->n++] = (struct graph_allocation){(uintptr_t)*out, false};
            note_work(s);
        }
    } else if (!*taken && s->legacy && invalidate_implicit(s->dev)) {
        *taken = true;
        r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    }
    pthread_mutex_unlock(&capture_lock);
    return r;
}

CUresult
sim_capture_free(struct CUstream_st *s, CUdeviceptr ptr, bool *taken)
{
    CUresult r;
    pthread_mutex_lock(&capture_lock);
    struct capture *c = capture_for_work(s, taken, &r);
    if (c) {
        /* Only an allocation of this graph, and once (cuGraphAddMemFreeNode's rules). */
        struct graph_memory *m = c->graph->mem;
        r = CUDA_ERROR_INVALID_VALUE;
        for (size_t i = 0; i < m->n; i++)
            if (m->allocs[i].ptr == (uintptr_t)ptr && !m->allocs[i].freed_in_graph) {
                m->allocs[i].freed_in_graph = true;
                note_work(s);
                r = CUDA_SUCCESS;
            }
    } else if (!*taken && s->legacy && invalidate_implicit(s->dev)) {
        *taken = true;
        r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    }
    pthread_mutex_unlock(&capture_lock);
    return r;
}

/* ---- capture entry points ---- */

void
sim_capture_forget_stream(struct CUstream_st *s)
{
    pthread_mutex_lock(&capture_lock);
    struct capture *c = find_capture(s->capture_id);
    if (c && c->origin == s) {
        c->origin = NULL;
        c->invalidated = true;
    }
    s->capture_id = 0;
    pthread_mutex_unlock(&capture_lock);
}

static CUresult
begin_capture(CUstream h, CUstreamCaptureMode mode, struct CUgraph_st *into, bool ptsz)
{
    struct CUstream_st *s;
    CUresult r = sim_stream_resolve(h, ptsz, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    if (s->legacy)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    struct capture *c = calloc(1, sizeof(*c));
    struct CUgraph_st *g = into ? into : sim_graph_new();
    if (!c || !g) {
        free(c);
        if (g && !into)
            sim_graph_free(g);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&capture_lock);
    if (find_capture(s->capture_id)) {
        pthread_mutex_unlock(&capture_lock);
        free(c);
        if (!into)
            sim_graph_free(g);
        return CUDA_ERROR_ILLEGAL_STATE;
    }
    *c = (struct capture){.id = ++last_capture_id,
                          .mode = mode,
                          .thread = pthread_self(),
                          .graph = g,
                          .graph_given = into != NULL,
                          .origin = s,
                          .next = captures};
    captures = c;
    enter_capture(c, s);
    atomic_fetch_add_explicit(&captures_alive, 1, memory_order_release);
    pthread_mutex_unlock(&capture_lock);
    return CUDA_SUCCESS;
}

CUresult
cuStreamBeginCapture(CUstream hStream)
{
    return begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL, false);
}

CUresult
cuStreamBeginCapture_ptsz(CUstream hStream)
{
    return begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL, true);
}

CUresult
cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    return begin_capture(hStream, mode, NULL, false);
}

CUresult
cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
    return begin_capture(hStream, mode, NULL, true);
}

/* Captures into the program's graph, after its nodes (dependencies on chosen nodes are not
 * simulated: graphs here are built by capture only, so a program has no node handles to give). */
static CUresult
begin_capture_to_graph(CUstream h, CUgraph graph, size_t count, CUstreamCaptureMode mode, bool ptsz)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!graph || count != 0)
        return CUDA_ERROR_INVALID_VALUE;
    return begin_capture(h, mode, graph, ptsz);
}

CUresult
cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
                            const CUgraphEdgeData *dependencyData, size_t numDependencies,
                            CUstreamCaptureMode mode)
{
    (void)dependencies;
    (void)dependencyData;
    return begin_capture_to_graph(hStream, hGraph, numDependencies, mode, false);
}

CUresult
cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
                                 const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                 CUstreamCaptureMode mode)
{
    (void)dependencies;
    (void)dependencyData;
    return begin_capture_to_graph(hStream, hGraph, numDependencies, mode, true);
}

/* Every stream that joined capture `id` leaves it (capture_lock held). */
static void
release_streams(uint64_t id)
{
    for (int i = 0; i < sim.ndev; i++) {
        struct sim_device *dev = &sim.devs[i];
        pthread_mutex_lock(&dev->streams_lock);
        for (struct CUstream_st *t = dev->streams; t; t = t->next)
            if (t->capture_id == id)
                t->capture_id = 0;
        pthread_mutex_unlock(&dev->streams_lock);
    }
}

static CUresult
end_capture(CUstream h, CUgraph *graph, bool ptsz)
{
    struct CUstream_st *s;
    CUresult r = sim_stream_resolve(h, ptsz, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!graph)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&capture_lock);
    struct capture *c = find_capture(s->capture_id);
    if (!c) {
        pthread_mutex_unlock(&capture_lock);
        return CUDA_ERROR_ILLEGAL_STATE;
    }
    if (c->origin != s) {
        c->invalidated = true;
        pthread_mutex_unlock(&capture_lock);
        return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    }
    if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(c->thread, pthread_self())) {
        pthread_mutex_unlock(&capture_lock);
        return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    }
    /* Either way every stream of the capture leaves it (the guide: all of them are taken out
     * of capture mode at cuStreamEndCapture). */
    bool left_out = !c->invalidated && unjoined(c);
    for (struct capture **pp = &captures; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    release_streams(c->id);
    atomic_fetch_sub_explicit(&captures_alive, 1, memory_order_release);
    pthread_mutex_unlock(&capture_lock);
    bool invalidated = c->invalidated, given = c->graph_given;
    struct CUgraph_st *g = c->graph;
    free(c);
    if (invalidated || left_out) {
        if (!given)
            sim_graph_free(g);
        *graph = NULL;
        return invalidated ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
                           : CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
    }
    *graph = g;
    return CUDA_SUCCESS;
}

CUresult
cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    return end_capture(hStream, phGraph, false);
}

CUresult
cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    return end_capture(hStream, phGraph, true);
}

/* The capture's graph and the stream's current dependencies: graphs here are built by capture
 * only and their nodes have no handles, so a capturing stream names none (count 0). */
struct capture_where {
    CUgraph *graph;
    const CUgraphNode **dependencies;
    const CUgraphEdgeData **edge_data;
    size_t *count;
};

static CUresult capture_info_where(CUstream h, CUstreamCaptureStatus *status, cuuint64_t *id,
                                   const struct capture_where *where, bool ptsz);

static CUresult
capture_info(CUstream h, CUstreamCaptureStatus *status, cuuint64_t *id, bool ptsz)
{
    return capture_info_where(h, status, id, NULL, ptsz);
}

static CUresult
capture_info_where(CUstream h, CUstreamCaptureStatus *status, cuuint64_t *id,
                   const struct capture_where *where, bool ptsz)
{
    struct CUstream_st *s;
    CUresult r = sim_stream_resolve(h, ptsz, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!status)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&capture_lock);
    struct capture *c = find_capture(s->capture_id);
    if (s->legacy && blocking_capture(s->dev)) {
        /* cuda.h: the legacy stream while a blocking stream captures (which stays valid). */
        pthread_mutex_unlock(&capture_lock);
        return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    }
    *status = !c               ? CU_STREAM_CAPTURE_STATUS_NONE
              : c->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                               : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    if (id && c)
        *id = c->id;
    if (where && c && *status == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
        if (where->graph)
            *where->graph = c->graph;
        if (where->dependencies)
            *where->dependencies = NULL;
        if (where->edge_data)
            *where->edge_data = NULL;
        if (where->count)
            *where->count = 0;
    }
    pthread_mutex_unlock(&capture_lock);
    return CUDA_SUCCESS;
}

CUresult
cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    return capture_info(hStream, captureStatus, NULL, false);
}

CUresult
cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    return capture_info(hStream, captureStatus, NULL, true);
}

CUresult
cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                       cuuint64_t *id_out)
{
    return capture_info(hStream, captureStatus_out, id_out, false);
}

CUresult
cuStreamGetCaptureInfo_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                            cuuint64_t *id_out)
{
    return capture_info(hStream, captureStatus_out, id_out, true);
}

CUresult
cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                          cuuint64_t *id_out, CUgraph *graph_out,
                          const CUgraphNode **dependencies_out,
                          const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    struct capture_where where = {graph_out, dependencies_out, edgeData_out, numDependencies_out};
    return capture_info_where(hStream, captureStatus_out, id_out, &where, false);
}

CUresult
cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                               cuuint64_t *id_out, CUgraph *graph_out,
                               const CUgraphNode **dependencies_out,
                               const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    struct capture_where where = {graph_out, dependencies_out, edgeData_out, numDependencies_out};
    return capture_info_where(hStream, captureStatus_out, id_out, &where, true);
}

CUresult
cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!mode ||
        (*mode != CU_STREAM_CAPTURE_MODE_GLOBAL && *mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
         *mode != CU_STREAM_CAPTURE_MODE_RELAXED))
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode old = thread_mode;
    thread_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}
