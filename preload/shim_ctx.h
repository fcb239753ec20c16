/* shim_ctx.h: context and stream lifetime wrappers: a primary-context reset/last release or
 *   cuCtxDestroy frees every allocation of the device, so cuprof forgets that device's cache
 *   first; cuStreamDestroy ends the handle, so cuprof stops recording events on it first.
 * Locking: none of its own (allocator_forget_device locks the device).
 * Hot path: no. */
#ifndef CUPROF_SHIM_CTX_H
#define CUPROF_SHIM_CTX_H

#include <cuda.h>

CUresult shim_ctx_primary_reset(CUdevice dev);
CUresult shim_ctx_primary_reset_v2(CUdevice dev);
CUresult shim_ctx_primary_release(CUdevice dev);
CUresult shim_ctx_primary_release_v2(CUdevice dev);
CUresult shim_ctx_destroy(CUcontext ctx);
CUresult shim_stream_destroy(CUstream stream);

/* Before the driver frees everything of `device`: returns its free cached segments while the
 * context still exists, then drops what is left (blocks the program still holds, ownership). */
void shim_ctx_forget_device(int device);

#endif
