/* diff_print.h: diff's answer in words: the peaks side by side with where each happened, the call
 *   sites at each run's peak and at the end, the segments by kind. Written to any stream, so
 *   `cuprof diff` and the report page's two-run view say the same thing.
 * Locking: none (single-threaded command).
 * Hot path: no. */
#ifndef CUPROF_CLI_DIFF_PRINT_H
#define CUPROF_CLI_DIFF_PRINT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/run_diff.h"
#include "snapshot/snapshot_model.h"

/* A call site at the end that changed, and its device. */
struct diff_end_site {
    const struct run_device_diff *d;
    const struct run_site *r;
};

/* Every device's sites at the end that changed, largest growth first (one list for all); NULL
 * (and *n 0) when none changed or host memory ran out (*n is then SIZE_MAX). */
struct diff_end_site *diff_end_sites(const struct run_diff *diff, size_t *n);

/* diff's text for A (paths[0]) against B (paths[1]), `top` sites per list. false when host memory
 * ran out. */
bool diff_print_text(FILE *out, const struct run_diff *diff, uint64_t top, const struct snapshot *a,
                     const struct snapshot *b, char *const *paths);

#endif
