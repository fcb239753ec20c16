/* shim_peer.h: peer access wrappers: when the program lets one device access another's memory
 *   (cuCtxEnablePeerAccess, cudaDeviceEnablePeerAccess), the real call runs first; then, as in
 *   PyTorch's enablePeerAccess, the owning device's allocator learns the accessing device and
 *   gives it access to its expandable segments' pages, now and at every later mapping.
 * Locking: none of its own (allocator_add_peer locks the owning device).
 * Hot path: no. */
#ifndef CUPROF_SHIM_PEER_H
#define CUPROF_SHIM_PEER_H

#include <cuda.h>

CUresult shim_peer_ctx_enable(CUcontext peer, unsigned int flags);

/* After the program's peer enabling succeeded (or was already done: PyTorch goes on then too):
 * the calling thread's current device may access `owner`'s memory. */
void shim_peer_record(int owner);

#endif
