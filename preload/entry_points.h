/* entry_points.h: the one list of CUDA entry points (preload/entry_points.def, whose header
 *   comment names its row kinds and columns) and what its rows share. A user defines
 *   DRIVER_LOOKUP, DRIVER_WRAPPER, DRIVER_CALLED and RUNTIME_WRAPPER (ENTRY_POINT_IGNORE for the
 *   kinds it has no use for), includes the .def, then undefines all four; DRIVER_RETRY rows read
 *   as DRIVER_WRAPPER unless it defines that kind too (shim_driver_memory.{c,h} do).
 * Locking: none (constants only).
 * Hot path: no. */
#ifndef CUPROF_ENTRY_POINTS_H
#define CUPROF_ENTRY_POINTS_H

/* A row's per-thread-default-stream variant (cuGetProcAddress's flag 2). */
enum entry_ptsz { ENTRY_PTSZ_ANY = -1, ENTRY_PTSZ_NO = 0, ENTRY_PTSZ_YES = 1 };

/* The flags cuprof asks the driver's lookup with for a DRIVER_WRAPPER row's own function. */
#define ENTRY_LOOKUP_FLAGS(ptsz) ((ptsz) == ENTRY_PTSZ_YES ? 2 : 0)

/* cuStreamBeginCapture's first ABI (10.0: no mode), whose PFN type cudaTypedefs.h keeps for
 * the driver's own build. */
#include <cuda.h>
typedef CUresult(CUDAAPI *entry_pfn_stream_begin_capture_v10000)(CUstream hStream);

/* Expands to nothing: for the row kinds a user does not read. */
#define ENTRY_POINT_IGNORE(...)

#endif
