/* nvtx.h: cuprof as an NVTX tool. NVTX (the header-only nvtx3 inside a program or library) loads
 *   the library NVTX_INJECTION64_PATH names at its first call and calls its exported
 *   InitializeInjectionNvtx2, which fills NVTX's callback tables: every mark becomes an annotation
 *   (as cuprof_annotate makes) and every range a START and an END annotation, named by the
 *   message ("domain:message" in a domain of its own), in every device's trace, from any thread.
 *   Events before the first CUDA call wait in a bounded list until the trace exists; a program
 *   that makes no NVTX call never reaches this code.
 * Locking: an event takes the trace ring's device locks (leaves, never an allocator lock), or
 *   before the runtime exists the pending list's mutex; each thread's open ranges are its own.
 * Hot path: the callbacks are NVTX's (a lock-free label lookup, then the ring). */
#ifndef CUPROF_NVTX_H
#define CUPROF_NVTX_H

#include <stdbool.h>
#include <stdint.h>

struct cuprof_runtime;

/* Called by runtime_init just before the runtime is published: records the events that waited
 * into rt's ring (rt NULL: the runtime will not exist; they are dropped, and so are later ones). */
void nvtx_runtime_ready(struct cuprof_runtime *rt);

/* Whether this copy of libcuprof.so attaches to NVTX: preloaded (else one line says why not),
 * not an inert second copy, not in off mode. The core's and the extensions' entry points ask. */
bool nvtx_attachable(void);

/* One annotation of label `id` (0: none) now: into the ring, or the pending list before the
 * runtime exists. The NVTX callbacks' and cuprof_annotate_start/_end's way in. */
void nvtx_emit(uint32_t id);

/* In the child after fork(): re-initialises the mutexes another thread may have held (NVTX's,
 * its names' and the labels'). Registered with pthread_atfork when NVTX attaches, and called
 * by lifecycle's handler too (twice is harmless). */
void nvtx_reset_after_fork(void);

#endif
