/* analysis.h: one device's history walked once: live and reserved bytes after every trace entry,
 *   their peaks and where they happened, the state at the first entry rebuilt backwards from the
 *   segments (as MemoryViz does), live blocks at any entry, and totals by call site.
 * Locking: none (single-threaded command).
 * Hot path: no; O(entries) with one hash map. */
#ifndef CUPROF_CLI_ANALYSIS_H
#define CUPROF_CLI_ANALYSIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/span_map.h"
#include "snapshot/snapshot_model.h"

/* "live" bytes are the requested sizes of allocations not yet free_completed: exactly what the
 * trace records, and what MemoryViz's Active Memory Timeline stacks. "reserved" bytes are segment
 * bytes (segment_alloc/map minus segment_free/unmap). Index k means "after k entries": 0 is the
 * state at the first entry, count is the state at the end (the snapshot's block table). */
struct device_analysis {
    size_t device;
    size_t count; /* trace entries */
    uint64_t dropped;
    bool mid_run; /* the history does not start from an empty device */
    uint64_t start_live, start_reserved;
    uint64_t end_live, end_reserved;
    uint64_t peak_live, peak_reserved;
    size_t peak_live_at, peak_reserved_at;
    uint64_t reserved_at_peak_live;
    size_t oom_count;
    bool has_time;
    /* The block table (final state). */
    size_t segments, blocks;
    uint64_t table_reserved, table_allocated, table_active, table_requested;
    uint64_t free_total, largest_free; /* inactive blocks */
    /* Optional series (count + 1 values each), when asked for. */
    uint64_t *live_series, *reserved_series;
};

/* Devices a snapshot speaks about: device_traces and every segment's device. A bound for
 * loops: the devices in it are those analysis_device_present says are. */
size_t analysis_device_count(const struct snapshot *snap);
/* Whether the file holds anything of device `device`: a segment, trace entries (or entries the
 * ring dropped) or recorded counters. One segment on device 4095 is one device, not 4096. */
bool analysis_device_present(const struct snapshot *snap, size_t device);
/* The devices present, as text for a message: "0, 1 and 4095", or "none". */
void analysis_device_list(const struct snapshot *snap, char *buf, size_t len);

/* A --device N the command was given: CLI_OK when the snapshot holds device N, else one line
 * naming the devices it holds (`cuprof: FILE: no device 5 (the snapshot has devices 0 and 1)`)
 * and CLI_BADUSE. */
__attribute__((warn_unused_result)) int
analysis_check_device(const char *path, const struct snapshot *snap, uint64_t device);

/* Walks device `device`. With `series` fills the two series (free with analysis_free).
 * Returns 0, or -1 when host memory runs out. */
__attribute__((warn_unused_result)) int analysis_run(const struct snapshot *snap, size_t device,
                                                     bool series, struct device_analysis *out);
void analysis_free(struct device_analysis *a);

/* Live allocations (addr, requested size, stack) after `at` entries, sorted by address.
 * *out is malloc'd (NULL when none). Returns 0, or -1 when host memory runs out. */
__attribute__((warn_unused_result)) int analysis_live_at(const struct snapshot *snap, size_t device,
                                                         size_t at, struct span_map_item **out,
                                                         size_t *n);

/* True for memory cuprof passed through to the driver (managed, VMM, the driver's pools): not
 * its allocator's, though the history records it as one-block segments. */
bool analysis_pool_passed(uint8_t pool);

/* Pass-through bytes live after `at` entries: the snapshot's own such segments with the trace
 * undone back to the start, then replayed forward. Returns 0, or -1 when host memory runs out. */
__attribute__((warn_unused_result)) int
analysis_passthrough_at(const struct snapshot *snap, size_t device, size_t at, uint64_t *bytes);

/* Bytes and allocation count per call site (stack index) of the allocations live after `at`
 * entries, largest bytes first (ties: lower stack first). *out is malloc'd (NULL when none).
 * Returns 0, or -1 when host memory runs out. */
struct site_total {
    uint32_t stack;
    uint64_t bytes;
    uint64_t count;
};
__attribute__((warn_unused_result)) int analysis_sites_at(const struct snapshot *snap,
                                                          size_t device, size_t at,
                                                          struct site_total **out, size_t *nsites);

/* Bytes and allocation count per call site of every alloc entry of the history (what the run
 * allocated there, freed or not; blocks live before the history began are not counted), largest
 * first. *out is malloc'd (NULL when none). Returns 0, or -1 when host memory runs out. */
__attribute__((warn_unused_result)) int analysis_sites_allocated(const struct snapshot *snap,
                                                                 size_t device,
                                                                 struct site_total **out,
                                                                 size_t *nsites);

/* A series of n values cut to at most `points` buckets, each its bucket's maximum (so no peak is
 * lost): writes out[0..m) and returns m = min(n, points). */
size_t analysis_downsample(const uint64_t *series, size_t n, size_t points, uint64_t *out);

/* One device range after `at` entries: an ordinary segment, or (expandable segments) one
 * contiguous mapped run of a reservation, as a snapshot reports them. */
struct analysis_segment {
    uint64_t addr, size;
    uint64_t stream;
    uint32_t index; /* into snap->segments (a part of it, for a run), or UINT32_MAX: a range the
                     * trace frees or unmaps later, not in the snapshot */
    bool is_small;  /* meaningful only when index != UINT32_MAX */
    bool is_expandable;
};

/* The ranges after `at` entries, sorted by address: the final segments with later events undone,
 * segment_map and segment_unmap at page granularity (a map may have extended a run or joined two,
 * an unmap may have cut one in two or shrunk it). *out is malloc'd (NULL when none). Returns 0,
 * or -1 when host memory runs out. */
__attribute__((warn_unused_result)) int analysis_segment_list_at(const struct snapshot *snap,
                                                                 size_t device, size_t at,
                                                                 struct analysis_segment **out,
                                                                 size_t *n);

/* The same as addr -> (size, tag). tag is (index into snap->segments << 1 | is_small), or
 * ANALYSIS_SEGMENT_UNKNOWN for a range the trace freed later (its pool is not in the snapshot). */
#define ANALYSIS_SEGMENT_UNKNOWN (UINT32_MAX & ~1u)
__attribute__((warn_unused_result)) int
analysis_segments_at(const struct snapshot *snap, size_t device, size_t at, struct span_map *segs);

/* Every range the history ever had, with its life: it is in the states after `from` to `to - 1`
 * entries (to = count + 1: it is in the snapshot's table). One range per shape: a map or unmap
 * that changes a run ends its range and begins another. The same walk as
 * analysis_segment_list_at, done once for the whole history. Sorted by from, then address;
 * *out is malloc'd (NULL when none). Returns 0, or -1 when host memory runs out. */
struct analysis_span {
    struct analysis_segment seg;
    size_t from, to;
};
__attribute__((warn_unused_result)) int analysis_segment_spans(const struct snapshot *snap,
                                                               size_t device,
                                                               struct analysis_span **out,
                                                               size_t *n);

/* The time of the state after `at` entries (the entry's time_us); false when unknown. */
bool analysis_time_at(const struct snapshot *snap, size_t device, size_t at, int64_t *time_us);

/* Where the state after `at` entries is, as text: "at the start of the history", or "at entry N
 * (action)" followed by ", t=+S s" (seconds since *t0) when the entry has a time and t0 is not
 * NULL. Truncated to len. */
void analysis_where(char *buf, size_t len, const struct snapshot *snap, size_t device, size_t at,
                    const int64_t *t0);

/* "state" or "off" when cuprof recorded the snapshot with CUPROF_HISTORY set so (no trace kept:
 * PyTorch's "state" keeps one entry), else NULL: its history's peaks are not the run's. */
const char *analysis_history_not_kept(const struct snapshot *snap);

#endif
