/* check_budget.c: each budget held against run_diff's figures. */
#include "cli/check_budget.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_util.h"

const char *
check_budget_name(const struct check_budgets *b, enum check_kind kind, char *buf, size_t len)
{
    char s[32];
    switch (kind) {
    case CHECK_PEAK_RESERVED:
        snprintf(buf, len, "--max-peak-reserved %s", cli_size(b->max_peak_reserved, s, sizeof s));
        break;
    case CHECK_PEAK_ALLOCATED:
        snprintf(buf, len, "--max-peak-allocated %s", cli_size(b->max_peak_allocated, s, sizeof s));
        break;
    case CHECK_GROWTH_ALLOCATED:
    case CHECK_GROWTH_RESERVED:
    case CHECK_GROWTH_SITE:
        if (b->growth_is_percent)
            snprintf(buf, len, "--max-growth %g%%", b->growth_percent);
        else
            snprintf(buf, len, "--max-growth %s", cli_size(b->growth_bytes, s, sizeof s));
        break;
    case CHECK_LEAKS:
        snprintf(buf, len, "--no-leaks");
        break;
    case CHECK_OOM:
        snprintf(buf, len, "--no-oom");
        break;
    }
    return buf;
}

/* The growth allowed over `base`, in bytes (a percentage rounded down). */
static uint64_t
allowed(const struct check_budgets *b, uint64_t base)
{
    if (!b->growth_is_percent)
        return b->growth_bytes;
    double v = (double)base * b->growth_percent / 100.0;
    return v >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)v;
}

static bool
grew_over(const struct check_budgets *b, uint64_t base, int64_t growth)
{
    if (growth <= 0)
        return false;
    if (b->growth_is_percent)
        return (double)growth * 100.0 > (double)base * b->growth_percent;
    return (uint64_t)growth > b->growth_bytes;
}

/* The call site that grew most at the peak (without a baseline every site "grew" by its bytes:
 * the largest); NULL when none grew. */
static const struct run_site *
top_site(const struct run_device_diff *d)
{
    return d->at_peak_count > 0 && d->at_peak[0].growth > 0 && d->at_peak[0].stack_b != 0
               ? &d->at_peak[0]
               : NULL;
}

static struct check_result
result(enum check_kind kind, const struct run_device_diff *d)
{
    struct check_result r = {.kind = kind, .device = d->device};
    const struct run_site *top = top_site(d);
    if (top != NULL) {
        r.stack = top->stack_b;
        r.stack_growth = top->growth;
        r.stack_bytes = top->bytes_b;
    }
    return r;
}

static struct check_result
peak_budget(enum check_kind kind, const struct run_device_diff *d, uint64_t value, uint64_t limit)
{
    struct check_result r = result(kind, d);
    r.value = value;
    r.limit = limit;
    r.crossed = value > limit;
    return r;
}

static struct check_result
growth_budget(const struct check_budgets *b, enum check_kind kind, const struct run_device_diff *d,
              uint64_t base, uint64_t value)
{
    struct check_result r = result(kind, d);
    r.base = base;
    r.value = value;
    r.growth = run_diff_growth(base, value);
    r.limit = allowed(b, base);
    r.crossed = grew_over(b, base, r.growth);
    return r;
}

/* Appends the device's results to v (room for every kind). */
static size_t
device_results(const struct check_budgets *b, const struct run_device_diff *d, bool baseline,
               struct check_result *v)
{
    size_t n = 0;
    if (b->max_peak_reserved_set)
        v[n++] = peak_budget(CHECK_PEAK_RESERVED, d, d->b.reserved.bytes, b->max_peak_reserved);
    if (b->max_peak_allocated_set)
        v[n++] = peak_budget(CHECK_PEAK_ALLOCATED, d, d->b.allocated.bytes, b->max_peak_allocated);
    if (b->max_growth_set && baseline) {
        v[n++] =
            growth_budget(b, CHECK_GROWTH_ALLOCATED, d, d->a.allocated.bytes, d->b.allocated.bytes);
        v[n++] =
            growth_budget(b, CHECK_GROWTH_RESERVED, d, d->a.reserved.bytes, d->b.reserved.bytes);
        /* A site's growth is held against the baseline's peak allocated bytes. */
        const struct run_site *top = top_site(d);
        struct check_result r =
            growth_budget(b, CHECK_GROWTH_SITE, d, d->a.allocated.bytes, d->a.allocated.bytes);
        r.value = top != NULL ? (uint64_t)top->growth : 0;
        r.growth = top != NULL ? top->growth : 0;
        r.crossed = grew_over(b, d->a.allocated.bytes, r.growth);
        v[n++] = r;
    }
    if (b->no_leaks) {
        struct check_result r = {.kind = CHECK_LEAKS, .device = d->device};
        r.value = d->b.leaked_bytes;
        r.count = d->b.leaked_blocks;
        r.crossed = d->b.leaked_blocks > 0;
        r.stack = d->b.leak_stack;
        r.stack_bytes = d->b.leak_stack_bytes;
        v[n++] = r;
    }
    if (b->no_oom) {
        struct check_result r = {.kind = CHECK_OOM, .device = d->device};
        r.value = r.count = d->b.ooms + d->b.driver_ooms;
        r.crossed = r.count > 0;
        /* The first: a refusal of the driver's own call that came before the first oom entry. */
        if (d->b.driver_call != NULL &&
            (d->b.first_oom == SIZE_MAX || d->b.driver_at <= d->b.first_oom)) {
            r.driver_call = d->b.driver_call;
            r.driver_at = d->b.driver_at;
        } else if (d->b.ooms > 0) {
            r.entry = d->b.first_oom;
            r.size = d->b.oom_size;
            r.stack = d->b.oom_stack;
        }
        v[n++] = r;
    }
    return n;
}

int
check_budget_run(const struct check_budgets *b, const struct run_diff *diff, bool has_baseline,
                 struct check_result **out, size_t *n)
{
    *n = 0;
    *out = calloc(diff->device_count * 8 + 1, sizeof(**out));
    if (*out == NULL)
        return -1;
    for (size_t i = 0; i < diff->device_count; i++) {
        const struct run_device_diff *d = &diff->devices[i];
        if (d->b.present) /* a device only the baseline has: nothing of this run to check */
            *n += device_results(b, d, has_baseline, *out + *n);
    }
    return 0;
}
