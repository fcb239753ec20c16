/* fake_device.h: an in-process device for allocator tests: bump-pointer segments from
 *   0x7f0000000000 with 2 MiB alignment, a capacity, events completed by hand, call counters.
 * Locking: none; tests drive it from the thread that calls the allocator (or accept races in
 *   counters only).
 * Hot path: no (tests only). */
#ifndef CUPROF_TEST_FAKE_DEVICE_H
#define CUPROF_TEST_FAKE_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "allocator/device_ops.h"
#include "allocator/trace_sink.h"

#define FAKE_BASE       0x7f0000000000ULL
#define FAKE_MAX_EVENTS 4096
#define FAKE_MAX_TRACE  4096
#define FAKE_DEVICES    4

struct fake_event {
    uint64_t stream;
    bool recorded;
    bool done;
};

struct fake_device {
    size_t capacity[FAKE_DEVICES];
    size_t used[FAKE_DEVICES];
    uint64_t next_addr[FAKE_DEVICES];
    int fail_next_alloc;   /* positive backend error returned once by segment_alloc */
    bool auto_complete;    /* events complete as soon as they are recorded */
    int event_query_error; /* nonzero: every event_query returns it (a backend error) */
    int event_sync_error;  /* nonzero: every event_synchronize returns it */
    bool lie_once;         /* the next segment_alloc succeeds with lie_addr (a driver bug) */
    uint64_t lie_addr;
    long segment_allocs, segment_frees, syncs, event_creates, event_records, event_queries;
    long event_syncs, event_destroys;
    struct fake_event events[FAKE_MAX_EVENTS];
    size_t event_count;
    /* trace sink */
    struct trace_event trace[FAKE_MAX_TRACE];
    size_t trace_count;
    bool keep_trace;
};

/* Device d's segments start at FAKE_BASE + d * 2^40. */
void fake_device_init(struct fake_device *fake, size_t capacity);
struct device_ops fake_device_ops(struct fake_device *fake);
struct trace_sink fake_device_sink(struct fake_device *fake);
/* Completes every recorded event on `stream` (UINT64_MAX: all streams). */
void fake_device_complete(struct fake_device *fake, uint64_t stream);

#endif
