/* double_free.h: the one log line for a free of a pointer cuprof already freed: the stack that
 *   allocated it and the stack that freed it first (from the trace history), and this call's; or,
 *   when a context reset dropped the block, that reset.
 * Locking: report takes each device's allocator lock briefly to copy its history (call with no
 *   lock held); the reset notes are lock-free atomics.
 * Hot path: no (error path and context resets only; report allocates a copy of the history). */
#ifndef CUPROF_DOUBLE_FREE_H
#define CUPROF_DOUBLE_FREE_H

#include <stdbool.h>
#include <stdint.h>

#include "preload/runtime.h"

/* Looks addr up in the history. When it was allocated and freed before (and not allocated
 * again), writes the line and returns true; false when the history does not show that. */
bool double_free_report(struct cuprof_runtime *rt, uint64_t addr, uint32_t this_free_stack);

/* Brackets a context reset's drop of `device`'s blocks (allocator_forget_device): the frees it
 * records between begin and end are told as "freed by cudaDeviceReset/context reset" later. The
 * last DOUBLE_FREE_RESETS resets are remembered. begin returns the token end takes. */
#define DOUBLE_FREE_RESETS 64
unsigned double_free_reset_begin(int device);
void double_free_reset_end(unsigned token);

#endif
