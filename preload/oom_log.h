/* oom_log.h: each out-of-memory error of the process: PyTorch's message (in cuprof's words)
 *   logged once per OOM, rate-limited, and kept with the history position of its `oom` trace
 *   entry for the snapshots (cuprof.oom_messages).
 * Locking: its own mutex, a leaf (allocator/lock_order.h, 5): the message is read under the
 *   device's allocator lock first, the ring under its own lock, then this one is taken alone.
 * Hot path: no (after an OOM, and at dump time). */
#ifndef CUPROF_OOM_LOG_H
#define CUPROF_OOM_LOG_H

#include <stddef.h>

#include "snapshot/snapshot_dump.h"

struct cuprof_runtime;

/* Messages kept for the snapshots: the latest ones (a program that catches its OOMs and goes on
 * may have millions). */
#define OOM_LOG_KEPT 64
/* Room for one message (the allocator's are at most 1 KiB). */
#define OOM_LOG_MESSAGE_LEN 1024
/* Lines logged before the rate limit (at most one a second) applies. */
#define OOM_LOG_BURST 3

/* The allocator reported an out-of-memory on `device` and the program is about to get the error:
 * keeps its message (once per OOM: two threads that ran out on one device at the same moment
 * share the latest message) and logs it unless CUPROF_LOG=quiet or the rate limit holds it
 * back (the next line logged says how many were). Call with no cuprof lock held. */
void oom_log_note(struct cuprof_runtime *rt, int device);

/* One of the driver's own calls (`api`, a name that lives as long as the process) was refused for
 * lack of memory and the refusal stands: keeps `message` with the history position the next
 * entry of `device` would take (no `oom` entry: the driver does not say how much it wanted). Does
 * not log (the caller says it once). The same call refused again with nothing recorded between
 * is kept once. Call with no cuprof lock held. */
void oom_log_note_driver(struct cuprof_runtime *rt, int device, const char *api,
                         const char *message);

/* How many times the driver's own calls on `device` were refused and the refusal stood (each
 * retry counts; devices past the 64th count none). */
uint64_t oom_log_driver_refusals(int device);

/* Copies the kept messages, oldest first, into out (at most cap; each message points into a
 * buffer the caller provides: `text`, cap * OOM_LOG_MESSAGE_LEN bytes). Returns the count. */
size_t oom_log_copy(struct dump_oom_message *out, char *text, size_t cap);

/* In a forked child: the parent's lock may have been held by a thread that is gone. */
void oom_log_reset_after_fork(void);

#endif
