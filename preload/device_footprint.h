/* device_footprint.h: what the driver says each device holds (cuMemGetInfo: total minus free),
 *   once when cuprof first sees a call on the device and again at every dump. Device-wide: other
 *   processes and every context's own memory count there, which is the point of showing it.
 * Locking: per-device atomics; the query itself runs under no cuprof lock.
 * Hot path: device_footprint_note_start is (one acquire load once the device is recorded). */
#ifndef CUPROF_DEVICE_FOOTPRINT_H
#define CUPROF_DEVICE_FOOTPRINT_H

#include <stdbool.h>
#include <stddef.h>

struct snap_footprint;

/* Tables for `device_count` devices (more are ignored). False when host memory ran out. */
__attribute__((warn_unused_result)) bool device_footprint_init(int device_count);

/* The calling thread's current context is on `device`: the first time, records the footprint
 * at start. Call with the guard raised and no cuprof lock held. Inline: a thread that already
 * saw the device recorded remembers it (device + 1; 0 = none). */
extern _Thread_local int device_footprint_seen __attribute__((tls_model("initial-exec")));
void device_footprint_note_start_slow(int device);
static inline void
device_footprint_note_start(int device)
{
    if (device + 1 != device_footprint_seen)
        device_footprint_note_start_slow(device);
}

/* One row per device recorded at start, with the footprint now. Asks the device only through a
 * context that exists (the thread's current one, or an active primary context, retained for the
 * query): a dump never creates a context, whose own memory would be measured. `out` has room
 * for every device; returns the rows written. Call with no cuprof lock held. */
size_t device_footprint_collect(struct snap_footprint *out, size_t cap);

#endif
