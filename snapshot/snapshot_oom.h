/* snapshot_oom.h: cuprof.oom_messages: each out-of-memory error's message (PyTorch's words),
 *   kept beside the `oom` trace entry it belongs to: the model's records, their emission and
 *   reading.
 * Locking: none: a model belongs to one thread.
 * Hot path: no (dump time and the command line). */
#ifndef CUPROF_SNAPSHOT_OOM_H
#define CUPROF_SNAPSHOT_OOM_H

#include <stddef.h>
#include <stdint.h>

#include "snapshot/emitter.h"
#include "snapshot/snapshot_field.h"
#include "snapshot/snapshot_model.h"

/* What the driver takes device memory for outside every allocation: the words of every message
 * about a refusal of the driver's own calls (the log line, explain, summary, check). */
#define SNAP_DRIVER_OWN_MEMORY                                                                     \
    "kernel code, an array, a thread stack, a context or a graph's memory"

/* One OOM: its device, the index of its `oom` entry in device_traces[device] (-1 when the
 * history no longer holds it, or it had none: a request of 1 EiB or more), when it happened
 * (µs since the Unix epoch, the entry's time_us) and the message the program's error stood for.
 * A refusal of one of the driver's own calls (kernel code, arrays, a thread stack, a context: `api`
 * names it) has no `oom` entry: its index counts the entries before it (the state it met is the
 * state after them; -1 when the history no longer reaches back to it). */
struct snap_oom_message {
    int32_t device;
    int64_t trace_index;
    int64_t time_us;
    const char *message;
    const char *api; /* NULL: an allocation's OOM */
};

/* Replaces the model's rows (strings and the array are copied into its arena). 0 or
 * -CUPROF_EHOSTMEM. */
__attribute__((warn_unused_result)) int
snapshot_set_oom_messages(struct snapshot *snap, const struct snap_oom_message *rows, size_t count);

/* The message of trace entry `index` of `device` (an `oom` entry): the row naming that index,
 * else the row of that device with the entry's time; NULL when none. */
const char *snapshot_oom_message_of(const struct snapshot *snap, size_t device, size_t index);

/* The first refusal of one of the driver's own calls on `device` the history reaches (a row with
 * `api` and an index), else NULL. */
const struct snap_oom_message *snapshot_driver_oom_first(const struct snapshot *snap,
                                                         size_t device);

/* Rows of `device` for refusals of the driver's own calls (the history reaching them or not). */
size_t snapshot_driver_oom_count(const struct snapshot *snap, size_t device);

/* Emits the "oom_messages" key into the open cuprof dict when the model has rows (absent
 * otherwise: a process that never ran out of memory writes what it always wrote). */
void snapshot_oom_emit(const struct snapshot *snap, struct emitter *e);

/* Reads cuprof.oom_messages (absent: none); a bad row is skipped with one warning per field
 * name. 0 or -CUPROF_EHOSTMEM. */
__attribute__((warn_unused_result)) int snapshot_oom_import(struct snapshot_fields *f,
                                                            const struct sval *cuprof);

#endif
