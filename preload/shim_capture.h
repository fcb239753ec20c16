/* shim_capture.h: CUDA graph captures under way, and the capture mode of each thread, followed
 *   through the wrapped cuStreamBeginCapture (every ABI, ToGraph included), cuStreamEndCapture
 *   and cuThreadExchangeStreamCaptureMode, so that the cache does not answer a call the driver
 *   would refuse: during a capture that forbids "potentially unsafe" calls (the rules of
 *   cuThreadExchangeStreamCaptureMode in cuda.h), cuMemAlloc is refused with
 *   CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and the capture invalidated. cuprof then hands the
 *   allocation to the driver, which refuses it and invalidates what it should (and if it allows
 *   it after all, its answer stands: the driver is the judge; this module only says when to ask).
 * Locking: capture_lock (its own, a leaf) at begin, end and stream destruction; the question
 *   asked on every cached allocation is one atomic load while no capture is under way.
 * Hot path: shim_capture_any only. */
#ifndef CUPROF_SHIM_CAPTURE_H
#define CUPROF_SHIM_CAPTURE_H

#include <cuda.h>
#include <stdatomic.h>
#include <stdbool.h>

/* Captures the wrappers saw begin and not end (a relaxed load: a capture another thread begins
 * at this instant is concurrent with the call either way). */
extern _Atomic int shim_capture_live;
static inline bool
shim_capture_any(void)
{
    return atomic_load_explicit(&shim_capture_live, memory_order_relaxed) != 0;
}

/* Whether a capture under way forbids this thread's potentially unsafe calls now. */
bool shim_capture_forbids_unsafe(void);

/* The wrapped stream is being destroyed: a capture on it is over. */
void shim_capture_forget_stream(CUstream stream);

CUresult shim_capture_begin_v1(CUstream stream);
CUresult shim_capture_begin_v1_ptsz(CUstream stream);
CUresult shim_capture_begin(CUstream stream, CUstreamCaptureMode mode);
CUresult shim_capture_begin_ptsz(CUstream stream, CUstreamCaptureMode mode);
CUresult shim_capture_begin_to_graph(CUstream stream, CUgraph graph,
                                     const CUgraphNode *dependencies,
                                     const CUgraphEdgeData *edge_data, size_t count,
                                     CUstreamCaptureMode mode);
CUresult shim_capture_begin_to_graph_ptsz(CUstream stream, CUgraph graph,
                                          const CUgraphNode *dependencies,
                                          const CUgraphEdgeData *edge_data, size_t count,
                                          CUstreamCaptureMode mode);
CUresult shim_capture_end(CUstream stream, CUgraph *graph);
CUresult shim_capture_end_ptsz(CUstream stream, CUgraph *graph);
CUresult shim_capture_exchange_mode(CUstreamCaptureMode *mode);

#endif
