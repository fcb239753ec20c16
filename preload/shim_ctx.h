/* shim_ctx.h: context and stream lifetime wrappers: a primary-context reset/last release or
 *   cuCtxDestroy frees every allocation of that context, so cuprof forgets them first (the
 *   device's cache with them when that context owns it, ctx_owner.h); cuStreamDestroy ends the
 *   handle, so cuprof stops recording events on it first.
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

/* Before the driver frees everything of the primary context of `device` (cudaDeviceReset): when
 * it owns the cache, returns the free cached segments while it still exists; then drops what is
 * left of its memory (blocks the program still holds, external memory, ownership). */
void shim_ctx_forget_primary(int device);

#endif
