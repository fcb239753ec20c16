/* control_sample.h: `top`'s history: per device one sample a second of the allocated and
 *   reserved bytes, each the peak within its second (rebuilt from the trace ring's entries of
 *   that second; the values at its two ends when the ring holds none), ten minutes kept.
 * Locking: the control thread's own state; a sample takes each device's allocator lock once, to
 *   read the counters and the ring's position together, then reads the ring under its own lock.
 * Hot path: no (nothing is added to the allocator's paths; the program's own peaks and their
 *   resets are untouched). */
#ifndef CUPROF_CONTROL_SAMPLE_H
#define CUPROF_CONTROL_SAMPLE_H

#include <stdint.h>

#include "preload/control_json.h"

struct cuprof_runtime;

#define CONTROL_SAMPLE_MS 1000

/* Forgets every sample and sizes the history for the runtime's devices (the first call, and a
 * forked child's). 0, or -1 without host memory (then nothing is sampled). */
int control_sample_start(const struct cuprof_runtime *rt);

/* Takes the next sample when CONTROL_SAMPLE_MS have passed since the last one (now_ms: the
 * monotonic clock in milliseconds). Returns the milliseconds until the next one is due. */
int64_t control_sample_tick(struct cuprof_runtime *rt, int64_t now_ms);

/* ,"sample_interval_ms":1000,"samples":[{"device":D,"allocated":[...],"reserved":[...]},...]:
 * oldest first. */
void control_sample_put_json(struct control_json *b);

#endif
