/* shim_capture.c: captures under way and each thread's capture mode (see shim_capture.h). */
#include "preload/shim_capture.h"

#include <pthread.h>
#include <stdint.h>

#include "preload/real_cuda.h"

/* More captures at once than any program makes; past it, every thread counts as forbidden while
 * they last (the driver then answers each allocation, correct if slower). */
#define CAPTURES_MAX 64

struct capture {
    CUstream stream;  /* CU_STREAM_PER_THREAD for a thread's own default stream */
    pthread_t thread; /* the thread that began it */
    CUstreamCaptureMode mode;
};

_Atomic int shim_capture_live;
static pthread_mutex_t capture_lock = PTHREAD_MUTEX_INITIALIZER;
static struct capture captures[CAPTURES_MAX]; /* protected by capture_lock */
static int capture_count;                     /* protected by capture_lock */
static int untracked;                         /* begun past CAPTURES_MAX; protected likewise */
static _Thread_local CUstreamCaptureMode thread_mode __attribute__((tls_model("initial-exec"))) =
    CU_STREAM_CAPTURE_MODE_GLOBAL;

/* A per-thread default stream is the calling thread's: named by the thread that began it. */
static CUstream
stream_key(CUstream stream, bool ptsz)
{
    return stream == CU_STREAM_PER_THREAD || (stream == NULL && ptsz) ? CU_STREAM_PER_THREAD
                                                                      : stream;
}

static bool
same_capture(const struct capture *c, CUstream key)
{
    return c->stream == key &&
           (key != CU_STREAM_PER_THREAD || pthread_equal(c->thread, pthread_self()));
}

bool
shim_capture_forbids_unsafe(void)
{
    CUstreamCaptureMode mine = thread_mode;
    if (mine == CU_STREAM_CAPTURE_MODE_RELAXED)
        return false;
    pthread_t self = pthread_self();
    pthread_mutex_lock(&capture_lock);
    bool forbidden = untracked > 0;
    for (int i = 0; i < capture_count && !forbidden; i++) {
        bool own = pthread_equal(captures[i].thread, self);
        forbidden = own ? captures[i].mode != CU_STREAM_CAPTURE_MODE_RELAXED
                        : mine == CU_STREAM_CAPTURE_MODE_GLOBAL &&
                              captures[i].mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
    }
    pthread_mutex_unlock(&capture_lock);
    return forbidden;
}

static void
note_begin(CUstream key, CUstreamCaptureMode mode)
{
    pthread_mutex_lock(&capture_lock);
    if (capture_count < CAPTURES_MAX)
        captures[capture_count++] = (struct capture){key, pthread_self(), mode};
    else
        untracked++;
    atomic_fetch_add_explicit(&shim_capture_live, 1, memory_order_relaxed);
    pthread_mutex_unlock(&capture_lock);
}

static void
note_end(CUstream key)
{
    pthread_mutex_lock(&capture_lock);
    bool found = false;
    for (int i = 0; i < capture_count && !found; i++)
        if (same_capture(&captures[i], key)) {
            captures[i] = captures[--capture_count];
            found = true;
        }
    if (!found && untracked > 0) {
        untracked--;
        found = true;
    }
    if (found)
        atomic_fetch_sub_explicit(&shim_capture_live, 1, memory_order_relaxed);
    pthread_mutex_unlock(&capture_lock);
}

void
shim_capture_forget_stream(CUstream stream)
{
    if (shim_capture_any() && stream != NULL && stream != CU_STREAM_LEGACY &&
        stream != CU_STREAM_PER_THREAD)
        note_end(stream);
}

/* A capture is under way once the driver began it. */
static CUresult
begun(CUresult r, CUstream stream, bool ptsz, CUstreamCaptureMode mode)
{
    if (r == CUDA_SUCCESS)
        note_begin(stream_key(stream, ptsz), mode);
    return r;
}

CUresult
shim_capture_begin_v1(CUstream stream)
{
    REAL_CUDA_OR_FAIL(real, cuStreamBeginCapture_v1)
    return begun(real->cuStreamBeginCapture_v1(stream), stream, false,
                 CU_STREAM_CAPTURE_MODE_GLOBAL);
}

CUresult
shim_capture_begin_v1_ptsz(CUstream stream)
{
    REAL_CUDA_OR_FAIL(real, cuStreamBeginCapture_v1_ptsz)
    return begun(real->cuStreamBeginCapture_v1_ptsz(stream), stream, true,
                 CU_STREAM_CAPTURE_MODE_GLOBAL);
}

CUresult
shim_capture_begin(CUstream stream, CUstreamCaptureMode mode)
{
    REAL_CUDA_OR_FAIL(real, cuStreamBeginCapture_v2)
    return begun(real->cuStreamBeginCapture_v2(stream, mode), stream, false, mode);
}

CUresult
shim_capture_begin_ptsz(CUstream stream, CUstreamCaptureMode mode)
{
    REAL_CUDA_OR_FAIL(real, cuStreamBeginCapture_v2_ptsz)
    return begun(real->cuStreamBeginCapture_v2_ptsz(stream, mode), stream, true, mode);
}

CUresult
shim_capture_begin_to_graph(CUstream stream, CUgraph graph, const CUgraphNode *dependencies,
                            const CUgraphEdgeData *edge_data, size_t count,
                            CUstreamCaptureMode mode)
{
    REAL_CUDA_OR_FAIL(real, cuStreamBeginCaptureToGraph)
    return begun(
        real->cuStreamBeginCaptureToGraph(stream, graph, dependencies, edge_data, count, mode),
        stream, false, mode);
}

CUresult
shim_capture_begin_to_graph_ptsz(CUstream stream, CUgraph graph, const CUgraphNode *dependencies,
                                 const CUgraphEdgeData *edge_data, size_t count,
                                 CUstreamCaptureMode mode)
{
    REAL_CUDA_OR_FAIL(real, cuStreamBeginCaptureToGraph_ptsz)
    return begun(
        real->cuStreamBeginCaptureToGraph_ptsz(stream, graph, dependencies, edge_data, count, mode),
        stream, true, mode);
}

/* Over when the driver gave the graph, or none because the capture was invalidated. After any
 * other error the driver says: the wrong thread or the wrong stream leave the capture under way,
 * while a fork left unjoined ends it for every stream (the Programming Guide); a driver that
 * cannot say leaves it followed. */
static bool
capture_over(const struct real_cuda *real, CUresult r, CUstream stream, bool ptsz)
{
    if (r == CUDA_SUCCESS || r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
        return true;
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    return real->cuStreamIsCapturing != NULL &&
           real->cuStreamIsCapturing(stream == NULL && ptsz ? CU_STREAM_PER_THREAD : stream,
                                     &status) == CUDA_SUCCESS &&
           status == CU_STREAM_CAPTURE_STATUS_NONE;
}

CUresult
shim_capture_end(CUstream stream, CUgraph *graph)
{
    REAL_CUDA_OR_FAIL(real, cuStreamEndCapture)
    CUresult r = real->cuStreamEndCapture(stream, graph);
    if (capture_over(real, r, stream, false))
        note_end(stream_key(stream, false));
    return r;
}

CUresult
shim_capture_end_ptsz(CUstream stream, CUgraph *graph)
{
    REAL_CUDA_OR_FAIL(real, cuStreamEndCapture_ptsz)
    CUresult r = real->cuStreamEndCapture_ptsz(stream, graph);
    if (capture_over(real, r, stream, true))
        note_end(stream_key(stream, true));
    return r;
}

CUresult
shim_capture_exchange_mode(CUstreamCaptureMode *mode)
{
    REAL_CUDA_OR_FAIL(real, cuThreadExchangeStreamCaptureMode)
    CUstreamCaptureMode wanted = mode != NULL ? *mode : CU_STREAM_CAPTURE_MODE_GLOBAL;
    CUresult r = real->cuThreadExchangeStreamCaptureMode(mode);
    if (r == CUDA_SUCCESS)
        thread_mode = wanted;
    return r;
}
