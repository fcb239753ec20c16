/* check_budget.h: the memory budgets of `cuprof check` held against one run (and a baseline):
 *   peak reserved and peak allocated bytes, growth of the peaks and of each call site at the peak
 *   against the baseline's, leaks, OOMs; one result per device and budget, crossed or not, each
 *   with the figure checked and the call site to name. The figures are run_diff's.
 * Locking: none (single-threaded command).
 * Hot path: no. */
#ifndef CUPROF_CLI_CHECK_BUDGET_H
#define CUPROF_CLI_CHECK_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/run_diff.h"

/* The budgets asked for. Growth is a percentage of the baseline's figure or a size in bytes. */
struct check_budgets {
    bool max_peak_reserved_set, max_peak_allocated_set, max_growth_set, no_leaks, no_oom;
    uint64_t max_peak_reserved, max_peak_allocated;
    bool growth_is_percent;
    double growth_percent;
    uint64_t growth_bytes;
};

enum check_kind {
    CHECK_PEAK_RESERVED,    /* --max-peak-reserved */
    CHECK_PEAK_ALLOCATED,   /* --max-peak-allocated */
    CHECK_GROWTH_ALLOCATED, /* --max-growth: peak allocated against the baseline's */
    CHECK_GROWTH_RESERVED,  /* --max-growth: peak reserved against the baseline's */
    CHECK_GROWTH_SITE,      /* --max-growth: the call site that grew most at the peak */
    CHECK_LEAKS,            /* --no-leaks */
    CHECK_OOM,              /* --no-oom */
};

struct check_result {
    enum check_kind kind;
    size_t device;
    bool crossed;
    uint64_t value; /* the figure checked: bytes (peaks, a site's growth, leaks) or OOMs */
    uint64_t base;  /* the baseline's figure (growth budgets) */
    int64_t growth; /* value - base (growth budgets) */
    uint64_t limit; /* the bytes allowed (for a percentage, of this baseline), or 0 */
    /* The call site to name: the one that grew most at the peak (the largest without a
     * baseline), the largest leak, the first OOM; in the checked run's snapshot (0: none). */
    uint32_t stack;
    int64_t stack_growth;
    uint64_t stack_bytes;
    size_t count;  /* leaked blocks, OOMs (the driver's own calls' too) */
    size_t entry;  /* the first OOM's entry */
    uint64_t size; /* the first OOM's request */
    /* The first OOM was one of the driver's own calls (no request): its name, and the entries
     * before it; NULL otherwise. */
    const char *driver_call;
    size_t driver_at;
};

/* The results of every budget set in `b`, per device of `diff` (A: the baseline, NULL-made when
 * there is none: growth budgets are then not checked). *out is malloc'd. Returns 0, or -1 when
 * host memory runs out. */
__attribute__((warn_unused_result)) int check_budget_run(const struct check_budgets *b,
                                                         const struct run_diff *diff,
                                                         bool has_baseline,
                                                         struct check_result **out, size_t *n);

/* The budget's option as text for messages: "--max-peak-reserved 10.00 GiB", "--max-growth 5%",
 * "--no-leaks". */
const char *check_budget_name(const struct check_budgets *b, enum check_kind kind, char *buf,
                              size_t len);

#endif
