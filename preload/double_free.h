/* double_free.h: the one log line for a free of a pointer cuprof already freed: this call's stack
 *   (always captured), the stack that allocated it and the one that freed it first (from the
 *   trace history, when recorded); or, when a context reset dropped the block, that reset.
 *   Stacks are symbolized and start at the program's first frame outside CUDA and cuprof.
 * Locking: report takes each device's allocator lock briefly to copy its history (call with no
 *   lock held: it symbolizes and mallocs outside every lock); the reset notes are atomics.
 * Hot path: no (error path and context resets only; report allocates a copy of the history). */
#ifndef CUPROF_DOUBLE_FREE_H
#define CUPROF_DOUBLE_FREE_H

#include <stdbool.h>
#include <stdint.h>

#include "preload/runtime.h"

/* Looks addr up in the history. When it was allocated and freed before (and not allocated
 * again), writes the line and returns true; false when the history does not show that. Call it
 * from the wrapper of the bad free: this call's stack is captured inside it. Line format:
 * "cuprof: double free of device pointer 0x.. (device D): freed at STACK; allocated at STACK;
 * first freed at STACK", each STACK "fn (file:line) < caller (file:line) < ..." innermost first. */
bool double_free_report(struct cuprof_runtime *rt, uint64_t addr);

/* Brackets a context reset's drop of `device`'s blocks (allocator_forget_device): the frees it
 * records between begin and end are told as "freed by cudaDeviceReset/context reset" later. The
 * last DOUBLE_FREE_RESETS resets are remembered. begin returns the token end takes. */
#define DOUBLE_FREE_RESETS 64
unsigned double_free_reset_begin(int device);
void double_free_reset_end(unsigned token);

#endif
