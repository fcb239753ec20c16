/* fake_device.h: an in-process device for allocator tests: bump-pointer segments from
 *   0x7f0000000000 with 2 MiB alignment, a VMM (reservations from FAKE_VMM_BASE, pages mapped
 *   at 2 MiB granularity and charged to the capacity), a capacity, events completed by hand,
 *   call counters.
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

#define FAKE_BASE        0x7f0000000000ULL
#define FAKE_MAX_EVENTS  4096
#define FAKE_MAX_TRACE   4096
#define FAKE_DEVICES     4
#define FAKE_VMM_BASE    0x7f8000000000ULL /* device d's reservations: + d * 2^40 */
#define FAKE_GRANULARITY ((size_t)2 << 20)
#define FAKE_MAX_PAGES   4096
#define FAKE_MAX_CALLS   256

/* One VMM call that succeeded, in order: 'M' vmm_map (count * page bytes, the owner's access),
 * 'A' vmm_set_access (for `peer`), 'U' vmm_unmap. */
struct fake_vmm_call {
    char kind;
    int device;
    uint64_t addr;
    size_t size;
    int peer;
};

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
    /* VMM: mapped pages (address, size), any device; reservations bump per device. */
    uint64_t vmm_next[FAKE_DEVICES];
    uint64_t page_addr[FAKE_MAX_PAGES];
    size_t page_size[FAKE_MAX_PAGES];
    int page_device[FAKE_MAX_PAGES];
    uint32_t page_access[FAKE_MAX_PAGES]; /* devices (bit d) that may access the page */
    size_t page_count;
    struct fake_vmm_call calls[FAKE_MAX_CALLS];
    size_t call_count;
    int set_access_error; /* nonzero: the next vmm_set_access fails with this backend error */
    long fail_create_at;  /* >0: the fail_create_at-th page created from now on fails (OOM) */
    int vmm_error;        /* nonzero: the next vmm_map fails with this backend error */
    long vmm_reserves, vmm_releases, pages_created, pages_mapped, pages_unmapped, stream_syncs;
    long vmm_map_calls, vmm_unmap_calls; /* successful ones */
    uint64_t last_stream_sync;
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
/* The same without the vmm_* calls (expandable_segments:True then gets ordinary segments). */
struct device_ops fake_device_ops_no_vmm(struct fake_device *fake);
/* True when the page at addr is mapped. */
bool fake_device_mapped(const struct fake_device *fake, uint64_t addr);
/* True when the page at addr is mapped and `device` may access it. */
bool fake_device_accessible(const struct fake_device *fake, uint64_t addr, int device);
struct trace_sink fake_device_sink(struct fake_device *fake);
/* Completes every recorded event on `stream` (UINT64_MAX: all streams). */
void fake_device_complete(struct fake_device *fake, uint64_t stream);

#endif
