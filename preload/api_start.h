/* api_start.h: cuprof.h's calls before the program's first CUDA call. The runtime is built on
 *   the first call that needs it, and it needs the driver initialized: a cuprof_* call made
 *   earlier (a Python program's `import cuprof; cuprof._record_memory_history()` at its top)
 *   must neither initialize CUDA on the program's behalf nor build a runtime that would find no
 *   device and pass everything through for good. Such calls see API_NOT_STARTED: annotations
 *   wait like NVTX events (preload/nvtx.h), counters are zero, and a history switch is kept for
 *   the runtime to start with.
 * Locking: one private mutex around the kept history switch.
 * Hot path: no (the public API). */
#ifndef CUPROF_API_START_H
#define CUPROF_API_START_H

#include <stdbool.h>
#include <stddef.h>

#include "snapshot/trace_ring.h"

struct cuprof_runtime;

enum api_state {
    API_READY,       /* *rt is the runtime */
    API_NOT_STARTED, /* the driver is not initialized yet: no CUDA call so far */
    API_OFF,         /* cuprof records nothing in this process (off mode, no device, ...) */
};

/* The runtime if it exists or can be built now (runtime_get), else why not. */
enum api_state api_start_runtime(struct cuprof_runtime **rt);

/* _record_memory_history before the runtime exists: kept for runtime_init (true), or false when
 * the runtime has started meanwhile (the caller then switches the live ring). */
bool api_start_keep_history(enum history_mode mode, size_t max_entries);

/* runtime_init: the history to start the ring with (the configuration's, unless a switch was
 * kept); from then on nothing more is kept. */
void api_start_history(enum history_mode *mode, size_t *max_entries);

#endif
