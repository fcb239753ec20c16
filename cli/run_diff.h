/* run_diff.h: two runs compared, computed once for every output (diff's text and JSON, check's
 *   budgets, the report page): per device the peaks of allocated and reserved bytes with where
 *   each happened and the call site that made it, the call sites at each run's peak and at the
 *   end matched by their (user) frames, the segments at the end matched by size, pool and call
 *   site (never by address: two runs share none), and the device allocations each run made.
 * Locking: none (single-threaded command).
 * Hot path: no; O(entries) per device and run, plus the sites' sort. */
#ifndef CUPROF_CLI_RUN_DIFF_H
#define CUPROF_CLI_RUN_DIFF_H

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
    size_t first_oom;      /* its entry index (SIZE_MAX: none) */
    uint64_t oom_size;     /* that OOM's request (rounded, as recorded) */
    uint32_t oom_stack;    /* and its call site */
    uint64_t leaked_bytes; /* blocks still allocated at the end, their requested sizes */
    size_t leaked_blocks;
    uint32_t leak_stack; /* the call site holding the most of them (0: none) */
    uint64_t leak_stack_bytes;
};

/* A call site seen in A, B or both, matched by the text of its frames; a site whose lines moved
 * (the program was edited) is matched by its functions and files when that match is unique. */
struct run_site {
    uint32_t stack_a, stack_b; /* into each snapshot; 0 where the run does not have it */
    uint64_t bytes_a, bytes_b;
    uint64_t count_a, count_b;
    int64_t growth; /* bytes_b - bytes_a */
};

/* The segments at the end of one kind: size, pool and the call site that made them. */
struct run_segments {
    uint64_t size;
    bool is_small, is_expandable;
    int64_t pool_id[2];
    uint8_t cuprof_pool;
    uint32_t stack_a, stack_b;
    size_t count_a, count_b;
};

struct run_device_diff {
    size_t device;
    struct run_side a, b;
    /* Largest growth first (then largest shrink last), ties by B's then A's bytes. */
    struct run_site *at_peak; /* A at A's peak of allocated bytes against B at B's */
    size_t at_peak_count;
    struct run_site *at_end;
    size_t at_end_count;
    /* Kinds whose count changed first (most new bytes first), then the others. */
    struct run_segments *segments;
    size_t segment_kinds;
    size_t new_segments, released_segments;
    uint64_t new_bytes, released_bytes;
};

struct run_diff {
    struct run_device_diff *devices; /* devices present in either file, in order */
    size_t device_count;
    int64_t end_growth; /* allocated bytes at the end, B - A, over every device */
};

/* One run on one device (`snap` read with frame_filter unless --all-frames). Returns 0, or -1
 * when host memory runs out. */
__attribute__((warn_unused_result)) int run_side_make(const struct snapshot *snap, size_t device,
                                                      struct run_side *out);

/* A (NULL: no baseline, every figure of B is growth) against B. Returns 0, or -1 when host memory
 * runs out. */
__attribute__((warn_unused_result)) int
run_diff_make(const struct snapshot *a, const struct snapshot *b, struct run_diff *out);
void run_diff_free(struct run_diff *d);

/* The growth of a peak or a total, B - A, saturating. */
int64_t run_diff_growth(uint64_t a, uint64_t b);

#endif
