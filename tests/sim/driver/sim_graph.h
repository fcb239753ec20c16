/* sim_graph: stream capture and CUDA graphs. Work queued on a capturing stream becomes a node of
 * the capture's graph instead of running; a graph launch queues its nodes in capture order (one
 * order that keeps every dependency the capture saw). Stream-ordered allocations inside a capture
 * become graph allocations with an address fixed for the graph's life. The capture modes of
 * cuStreamBeginCapture and cuThreadExchangeStreamCaptureMode decide which calls are refused while
 * captures run, and a refused call invalidates the captures that refused it.
 * Lock: capture_lock (this module's), taken before a device's streams_lock or lock, never while
 * work is queued. Hot path: no (with no capture under way each hook is one atomic load). */
#ifndef SIM_GRAPH_H
#define SIM_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "sim_driver.h"

struct sim_op;

/* True while any capture is under way (an atomic load): the hooks below matter only then. */
bool sim_capture_active(void);

/* A "potentially unsafe" call (cuMemAlloc, cuMemFree, cuCtxSynchronize, a synchronous copy ...)
 * by this thread: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, invalidating the captures that forbid
 * it, when this thread's mode forbids it (the rules of cuThreadExchangeStreamCaptureMode). */
CUresult sim_capture_check_unsafe(void) __attribute__((warn_unused_result));

/* Work for `s`: *taken when the capture took `op` (the graph owns it) or refused it (the caller
 * frees it and returns the error); otherwise the caller queues it. `wait`: a synchronous call. */
CUresult sim_capture_submit(struct CUstream_st *s, struct sim_op *op, bool wait, bool *taken)
    __attribute__((warn_unused_result));
/* cuEventRecord on `s`: *taken when `s` captures (the event is then recorded in the capture). */
CUresult sim_capture_record(struct CUstream_st *s, struct CUevent_st *ev, bool *taken)
    __attribute__((warn_unused_result));
/* cuStreamWaitEvent: *taken when capture decides it (a join, a merge, an isolation error). */
CUresult sim_capture_wait(struct CUstream_st *s, struct CUevent_st *ev, bool *taken)
    __attribute__((warn_unused_result));
/* cuStreamSynchronize / cuStreamQuery of `s`, cuEventQuery / cuEventSynchronize of `ev` (either
 * may be NULL): refused while it belongs to a capture. */
CUresult sim_capture_check_sync(struct CUstream_st *s, struct CUevent_st *ev)
    __attribute__((warn_unused_result));
/* cuMemAllocAsync / cuMemFreeAsync on `s`: *taken when `s` captures (a graph allocation, or a
 * free node for one; any other pointer is CUDA_ERROR_INVALID_VALUE), or when `s` is the legacy
 * stream while a blocking stream captures (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT). */
CUresult sim_capture_alloc(struct CUstream_st *s, struct CUctx_st *ctx, size_t size,
                           CUdeviceptr *out, bool *taken) __attribute__((warn_unused_result));
CUresult sim_capture_free(struct CUstream_st *s, CUdeviceptr ptr, bool *taken)
    __attribute__((warn_unused_result));
/* A stream going away: a capture it started is invalidated, one it joined forgets it. */
void sim_capture_forget_stream(struct CUstream_st *s);

/* The module's lock (capture_lock): held across fork by the driver's atfork handlers. */
void sim_graph_lock(void);
void sim_graph_unlock(void);

#endif
