/* run_side.h: one run on one device, as diff and check compare it: the peaks of allocated and
 *   reserved bytes with the entry, time and call site that made each, the bytes at the end, the
 *   device allocations and frees made, the blocks still allocated and the first OOM.
 * Locking: none (single-threaded command).
 * Hot path: no; O(entries). */
#ifndef CUPROF_CLI_RUN_SIDE_H
#define CUPROF_CLI_RUN_SIDE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapshot/snapshot_model.h"

/* A peak and where it happened. */
struct run_peak {
    uint64_t bytes;
    size_t at;      /* the state after `at` entries (0: the start of the history) */
    uint32_t stack; /* the call site of the entry that made it (entry at - 1); 0 when none */
    bool has_time;
    int64_t time_us;  /* that entry's time (µs since the Unix epoch) */
    int64_t since_us; /* since the history's first entry */
};

/* One run on one device. "Allocated" bytes are the live ones of analysis.h: requested sizes of
 * allocations not yet freed, as the trace records them. */
struct run_side {
    bool present; /* the file holds the device */
    size_t entries;
    uint64_t dropped;
    bool mid_run; /* the history starts mid-run: a peak before it is not seen */
    struct run_peak allocated, reserved;
    uint64_t end_allocated, end_reserved;
    size_t segments; /* at the end */
    /* Device allocations and frees the history shows (segment_alloc / segment_free entries;
     * expandable segments' page maps and unmaps apart), and cuprof's own counters for the whole
     * run (memory_stats num_device_alloc / num_device_free; -1 when the file has none). */
    uint64_t segment_allocs, segment_frees, segment_maps, segment_unmaps;
    int64_t counted_allocs, counted_frees;
    size_t ooms;
    size_t first_oom;   /* its entry index (SIZE_MAX: none) */
    uint64_t oom_size;  /* that OOM's request (rounded, as recorded) */
    uint32_t oom_stack; /* and its call site */
    /* Refusals of the driver's own calls (kernel code, arrays, stacks: cuprof.oom_messages' api),
     * no entry of their own; the first one the history reaches: its call and the entries before
     * it (driver_call NULL: none). */
    size_t driver_ooms;
    const char *driver_call;
    size_t driver_at;
    uint64_t leaked_bytes; /* blocks still allocated at the end, their requested sizes */
    size_t leaked_blocks;
    uint32_t leak_stack; /* the call site holding the most of them (0: none) */
    uint64_t leak_stack_bytes;
};

/* One run on one device (`snap` read with frame_filter unless --all-frames). Returns 0, or -1
 * when host memory runs out. */
__attribute__((warn_unused_result)) int run_side_make(const struct snapshot *snap, size_t device,
                                                      struct run_side *out);

#endif
