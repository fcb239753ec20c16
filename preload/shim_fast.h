/* shim_fast.h: cudaMalloc and cudaFree answered at the runtime's export when the cache alone can
 *   answer: a cached block fits, or the pointer is a block the cache handed out. The runtime
 *   would only have forwarded such a call to cuprof's own driver-level wrapper, which gives the
 *   same answer from the same cache; skipping the runtime and the second wrapper layer is most
 *   of the shim's cost per call. Anything else (a miss, a pointer cuprof does not hold, no
 *   current context, trace or off mode, before initialisation, an allocation under a runtime
 *   older than 12, whose cudaSetDevice switched contexts lazily) goes the long way.
 * Locking: the device lock, inside the allocator; entered holding no cuprof lock.
 * Hot path: yes. */
#ifndef CUPROF_SHIM_FAST_H
#define CUPROF_SHIM_FAST_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "preload/guard.h"
#include "preload/shim_call.h"

/* Whether to try at all: not cuprof's own call, and cuprof initialised (never in off mode).
 * Inline: off mode and the first calls pay two loads. */
static inline bool
shim_fast_may_answer(void)
{
    return !guard_active() && shim_call_runtime_if_ready() != NULL;
}

/* Call when shim_fast_may_answer(). True: answered, *result is what the program gets. False:
 * nothing was recorded; forward the call, tagged with *stack_id when *has_stack (the stack
 * already captured for it). `caller` is the export's return address. */
bool shim_fast_malloc(void **ptr, size_t size, const void *caller, cudaError_t *result,
                      uint32_t *stack_id, bool *has_stack);
bool shim_fast_free(void *ptr, cudaError_t *result, uint32_t *stack_id, bool *has_stack);

#endif
