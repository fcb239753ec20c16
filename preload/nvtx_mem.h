/* nvtx_mem.h: NVTX's memory extension (nvToolsExtMem.h): NVTX calls the exported
 *   InitializeInjectionNvtxExtension once per extension module; for the memory module it gets
 *   cuprof's heap and region callbacks. A heap the program registers on one of its device
 *   allocations, and the regions it registers, resizes, names and unregisters in it, become the
 *   blocks of the program's own allocator in the trace and the snapshot
 *   (snapshot/program_pools.h). Heaps anywhere else (host memory, the middle of an allocation,
 *   NVTX's process-wide heap) are not recorded (one line under CUPROF_LOG=debug); permissions
 *   are left to NVTX's no-ops.
 * Locking: each call takes the allocator lock of the device holding the memory, briefly, as a
 *   free does; stacks are captured and nodes allocated before it, freed after it.
 * Hot path: no (pool bookkeeping calls; each costs about what a cudaMalloc under cuprof does). */
#ifndef CUPROF_NVTX_MEM_H
#define CUPROF_NVTX_MEM_H

#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExtMem.h>

/* NVTX's entry point for its extensions: 1 for the memory module (compatible versions), else 0
 * (that module's calls stay no-ops). */
int InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t *info);

#endif
