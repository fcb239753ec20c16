/* library_usage.h: device memory by library: per device and library (library_table.h), live and
 *   peak bytes in cuprof's cache and in pass-through pools, kept by a trace sink that sits in
 *   front of the history ring, so every allocator event counts, whatever CUPROF_HISTORY says.
 * Locking: a device's counters and address maps are protected by that device's allocator lock
 *   (the sink runs under it); the library of the thread's current call is thread-local.
 * Hot path: yes: library_usage_begin_alloc once per allocating call, the sink once per event
 *   (no malloc: the address maps grow with mmap). */
#ifndef CUPROF_LIBRARY_USAGE_H
#define CUPROF_LIBRARY_USAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "allocator/trace_sink.h"

struct allocator;
struct snap_library;

/* Before the allocator is created: per-device tables for `device_count` devices, and the sink
 * that counts each event and then hands it to `next`. False when host memory ran out (the caller
 * then uses `next` alone and no library is counted). */
__attribute__((warn_unused_result)) bool
library_usage_init(int device_count, struct trace_sink next, struct trace_sink *sink);

/* An allocating call is about to reach the allocator: its bytes belong to the library of
 * `stack_id`, or, without a stack, of `caller` (a return address into the calling code), or,
 * when that lies in the CUDA libraries (or is NULL), of the caller found by a short unwind. Call
 * with no cuprof lock held; library_usage_end_call when the call is over. Returns the library:
 * the owner tag to give the allocator for the call's blocks (their alloc and free events carry
 * it, so a free is counted against the allocating library without a lookup). */
uint16_t library_usage_begin_alloc(uint32_t stack_id, const void *caller);
void library_usage_end_call(void);

/* Rows (device, library) that ever held memory, each device's counters read under its lock;
 * *rows is malloc'ed (free it). 0 or -CUPROF_EHOSTMEM. */
__attribute__((warn_unused_result)) int
library_usage_collect(struct allocator *alloc, struct snap_library **rows, size_t *count);

/* In the child after fork (the parent held every device lock, so no map was mid-update). */
void library_usage_reset_after_fork(void);

#endif
