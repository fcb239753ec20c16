/* plot_history.h: one device's history as the report page's tables (rows of varints, plot_blob.h):
 *   every allocation with its life, address, sizes, stacks and stream; every other trace entry;
 *   every segment range with its life (analysis_segment_spans); each entry's time. The page draws
 *   the timeline's bands and rebuilds the allocator's state at any entry from them.
 * Locking: none (single-threaded command).
 * Hot path: no; O(entries) with one hash map. */
#ifndef CUPROF_CLI_PLOT_HISTORY_H
#define CUPROF_CLI_PLOT_HISTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/plot_blob.h"
#include "cli/span_map.h"
#include "snapshot/snapshot_model.h"

/* A state index `at` means "after `at` entries", as in analysis.h: an allocation is live in the
 * states born <= at < died. Every table's field list, in row order, is written beside it in the
 * page's data; viewer/DATA.md says what each field holds. */
#define PLOT_ALLOC_FIELDS                                                                          \
    "born+", "life", "pending", "addr~", "size", "extra", "stack", "free_stack", "stream"
#define PLOT_EVENT_FIELDS   "entry+", "action", "addr~", "size", "stack", "stream"
#define PLOT_SEGMENT_FIELDS "from+", "life", "addr~", "size", "stream", "flags"
#define PLOT_TIME_FIELDS    "time~"

/* Segment row flags. */
enum plot_segment_flag {
    PLOT_SEGMENT_SMALL = 1,      /* small pool (meaningful when PLOT_SEGMENT_IN_TABLE) */
    PLOT_SEGMENT_EXPANDABLE = 2, /* a mapped run of an expandable segment */
    PLOT_SEGMENT_IN_TABLE = 4,   /* in the snapshot's table (else freed or unmapped later) */
};

/* Raw stream handles numbered in order of first appearance: the tables hold the numbers. */
struct plot_streams {
    struct span_map index; /* stream + 1 -> number (size field) */
    uint64_t *values;
    size_t count, cap;
    long max_stream; /* number of stream UINT64_MAX (its key would be 0), or -1 */
};

struct plot_history {
    struct plot_blob allocs, events, segments, times;
    size_t alloc_count, event_count, segment_count;
    bool has_time;
    int64_t t0_us; /* the first timed entry's time (times are deltas from it) */
};

void plot_streams_init(struct plot_streams *s);
void plot_streams_free(struct plot_streams *s);
/* The number of stream `raw` (a new one when first seen); -1 when host memory runs out. */
long plot_streams_number(struct plot_streams *s, uint64_t raw);

/* Builds device `device`'s tables. Stacks are the snapshot's own indices. Returns 0, or -1 when
 * host memory runs out (h is then freed). */
__attribute__((warn_unused_result)) int plot_history_build(const struct snapshot *snap,
                                                           size_t device,
                                                           struct plot_streams *streams,
                                                           struct plot_history *h);
void plot_history_free(struct plot_history *h);

#endif
