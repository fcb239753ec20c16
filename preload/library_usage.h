/* library_usage.h: device memory by library: per device and library (library_table.h), live and
 *   peak bytes in cuprof's cache and in pass-through pools. A block's requested bytes are the
 *   allocator's own per-owner counters (the block carries its library as the owner tag); segments
 *   and mapped pages are counted by a trace sink that sits in front of the history ring, so they
 *   count whatever CUPROF_HISTORY says.
 * Locking: a device's counters and address maps are protected by that device's allocator lock
 *   (the sink runs under it); the library of the thread's current call is thread-local.
 * Hot path: yes: library_usage_begin_alloc once per allocating call; the sink only on segment
 *   events (no malloc: the address maps grow with mmap). */
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

/* The events the sink needs (allocator_set_traced_actions): segments and their pages. */
#define LIBRARY_USAGE_TRACED_ACTIONS TRACE_ACTIONS_SEGMENTS

/* An allocating call is about to reach the allocator: its bytes belong to the library of
 * `stack_id`, or, without a stack, of `caller` (a return address into the calling code), or,
 * when that lies in the CUDA libraries (or is NULL), of the caller found by a short unwind. Call
 * with no cuprof lock held; library_usage_end_call when the call is over. Returns the library:
 * the owner tag to give the allocator for the call's blocks (the allocator counts their
 * requested bytes by it, so a free is counted against the allocating library without a lookup).
 * Inline: without a stack, a thread calling again from its last call site reads its library
 * back (the segment events of the call are counted against library_usage_current). */
extern _Thread_local uint16_t library_usage_current __attribute__((tls_model("initial-exec")));
extern _Thread_local const void *library_usage_last_caller
    __attribute__((tls_model("initial-exec")));
extern _Thread_local uint16_t library_usage_last_library __attribute__((tls_model("initial-exec")));
uint16_t library_usage_begin_alloc_slow(uint32_t stack_id, const void *caller);
static inline uint16_t
library_usage_begin_alloc(uint32_t stack_id, const void *caller)
{
    if (stack_id != 0 || caller == NULL || caller != library_usage_last_caller)
        return library_usage_begin_alloc_slow(stack_id, caller);
    uint16_t library = library_usage_last_library;
    library_usage_current = library;
    return library;
}

static inline void
library_usage_end_call(void)
{
    library_usage_current = 0; /* LIBRARY_UNKNOWN */
}

/* Rows (device, library) that ever held memory, each device's counters read under its lock;
 * *rows is malloc'ed (free it). 0 or -CUPROF_EHOSTMEM. */
__attribute__((warn_unused_result)) int
library_usage_collect(struct allocator *alloc, struct snap_library **rows, size_t *count);

/* In the child after fork (the parent held every device lock, so no map was mid-update). */
void library_usage_reset_after_fork(void);

#endif
