/* double_free.h: the one log line for a free of a pointer cuprof already freed: the stack that
 *   allocated it and the stack that freed it first (from the trace history), and this call's.
 * Locking: takes each device's allocator lock briefly to copy its history; call with no lock held.
 * Hot path: no (error path only; allocates a copy of the history). */
#ifndef CUPROF_DOUBLE_FREE_H
#define CUPROF_DOUBLE_FREE_H

#include <stdbool.h>
#include <stdint.h>

#include "preload/runtime.h"

/* Looks addr up in the history. When it was allocated and freed before (and not allocated
 * again), writes the line and returns true; false when the history does not show that. */
bool double_free_report(struct cuprof_runtime *rt, uint64_t addr, uint32_t this_free_stack);

#endif
