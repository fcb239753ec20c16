/* ranges.h: a device's ranges (NVTX ranges: annotations with a START and an END stage) as the
 *   history's phases: each start matched with its end, live bytes when it starts and ends and the
 *   highest inside it; per range name the calls, peak, rise above the start and growth; the
 *   ranges open at each OOM. One analysis for summary's section, plot's data and timeline.
 * Locking: none (single-threaded command).
 * Hot path: no; O(entries log entries) with one max-tree over the live series. */
#ifndef CUPROF_CLI_RANGES_H
#define CUPROF_CLI_RANGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/analysis.h"
#include "snapshot/emitter.h"
#include "snapshot/snapshot_model.h"

#define RANGE_OPEN SIZE_MAX /* a range's end when the history ends with it open */

/* One range. Live bytes are analysis.h's (requested sizes not yet freed); an END that matches no
 * START (its start was before the history, or dropped by the ring) starts at entry 0. */
struct range_span {
    uint32_t name;       /* index into device_ranges.names */
    size_t start, end;   /* entry indices of its START and END (end: RANGE_OPEN) */
    uint64_t live_start; /* after the START entry */
    uint64_t live_end;   /* after the END entry, or at the end of the history */
    uint64_t peak;       /* the highest live bytes from start to end */
    size_t peak_at;      /* the state (after that many entries) holding the peak */
    uint32_t depth;      /* ranges of any name open around it when it started */
    bool start_unknown;  /* its START is not in the history */
};

/* One range name: its ranges together. */
struct range_name {
    const char *text;   /* the snapshot's (escape it for where it goes) */
    size_t calls, open; /* ranges of that name; those still open at the end */
    uint64_t peak;      /* the highest live bytes inside any of them */
    size_t peak_range;  /* the range holding that peak */
    uint64_t max_rise;  /* the largest peak - live_start of one range */
    int64_t growth;     /* sum of live_end - live_start over its closed ranges */
};

struct device_ranges {
    struct range_span *ranges; /* in START order */
    size_t range_count;
    struct range_name *names; /* highest peak first */
    size_t name_count;
    size_t marks; /* annotations without a stage (cuprof_annotate, NVTX marks) */
};

/* Matches the ranges of device `device` over `a` (analysis_run with series). An END goes to the
 * latest open START of its name. Returns 0, or -1 when host memory runs out (*out is then
 * empty). */
__attribute__((warn_unused_result)) int ranges_run(const struct snapshot *snap, size_t device,
                                                   const struct device_analysis *a,
                                                   struct device_ranges *out);
void ranges_free(struct device_ranges *p);

/* The ranges open in the state after `at` entries, outermost first, as "train > forward" (names
 * escaped for a terminal), cut to len; "" when none. Returns how many are open. */
size_t ranges_open_at(const struct device_ranges *p, size_t at, char *buf, size_t len);

/* summary's section "phases (NVTX ranges)": the names by peak (at most `top`), the ranges open
 * at the end and at each OOM. Prints nothing when the device has no range. */
void ranges_print(FILE *out, const struct snapshot *snap, size_t device,
                  const struct device_analysis *a, const struct device_ranges *p, size_t top);

/* ranges_run, ranges_print, ranges_free: summary's one call. 0, or -1 when host memory runs out. */
__attribute__((warn_unused_result)) int ranges_report(FILE *out, const struct snapshot *snap,
                                                      size_t device,
                                                      const struct device_analysis *a, size_t top);

/* The report page's data (inside the device's dict): "ranges": {"names": [{name, calls, open,
 * peak, rise, growth}], "ranges": [[name, start, end or -1, live_start, peak, live_end, depth]]}
 * and "ranges_text" (the summary section's text). Nothing when the device has no range. */
void ranges_emit(struct emitter *e, const struct snapshot *snap, size_t device,
                 const struct device_analysis *a, const struct device_ranges *p);

#endif
