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

#include "cli/run_side.h"
#include "snapshot/snapshot_model.h"

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

/* A (NULL: no baseline, every figure of B is growth) against B. Returns 0, or -1 when host memory
 * runs out. */
__attribute__((warn_unused_result)) int
run_diff_make(const struct snapshot *a, const struct snapshot *b, struct run_diff *out);
void run_diff_free(struct run_diff *d);

/* The growth of a peak or a total, B - A, saturating. */
int64_t run_diff_growth(uint64_t a, uint64_t b);

#endif
