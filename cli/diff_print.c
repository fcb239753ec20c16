/* diff_print.c: diff's answer in words (see diff_print.h). */
#include "cli/diff_print.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli/analysis.h"
#include "cli/cli_util.h"

static int
end_by_growth(const void *x, const void *y)
{
    const struct diff_end_site *p = x, *q = y;
    if (p->r->growth != q->r->growth)
        return p->r->growth < q->r->growth ? 1 : -1;
    return (p->d->device > q->d->device) - (p->d->device < q->d->device);
}

struct diff_end_site *
diff_end_sites(const struct run_diff *diff, size_t *n)
{
    size_t total = 0;
    for (size_t i = 0; i < diff->device_count; i++)
        total += diff->devices[i].at_end_count;
    struct diff_end_site *v = malloc((total + 1) * sizeof(*v));
    *n = 0;
    if (v == NULL) {
        *n = SIZE_MAX;
        return NULL;
    }
    for (size_t i = 0; i < diff->device_count; i++)
        for (size_t j = 0; j < diff->devices[i].at_end_count; j++)
            if (diff->devices[i].at_end[j].growth != 0)
                v[(*n)++] = (struct diff_end_site){&diff->devices[i], &diff->devices[i].at_end[j]};
    if (*n > 1)
        qsort(v, *n, sizeof(*v), end_by_growth);
    return v;
}

/* ---- Text ------------------------------------------------------------------------------------ */

static const char *
signed_size(int64_t v, char *buf, size_t len)
{
    char s[32];
    uint64_t mag = v >= 0 ? (uint64_t)v : 0 - (uint64_t)v;
    snprintf(buf, len, "%s%s", v >= 0 ? "+" : "-", cli_size(mag, s, sizeof s));
    return buf;
}

/* "+100.00 MiB (+40.0%)" for two sizes. */
static const char *
change_text(uint64_t a, uint64_t b, char *buf, size_t len)
{
    char g[48];
    int64_t growth = run_diff_growth(a, b);
    signed_size(growth, g, sizeof g);
    if (a > 0 && growth != 0)
        snprintf(buf, len, "%s (%+.1f%%)", g, 100.0 * (double)growth / (double)a);
    else
        snprintf(buf, len, "%s", g);
    return buf;
}

static void
row_sizes(FILE *out, const char *what, uint64_t a, uint64_t b)
{
    char sa[32], sb[32], c[64];
    fprintf(out, "  %-34s %14s %14s  %s\n", what, cli_size(a, sa, sizeof sa),
            cli_size(b, sb, sizeof sb), change_text(a, b, c, sizeof c));
}

static void
row_counts(FILE *out, const char *what, uint64_t a, uint64_t b)
{
    fprintf(out, "  %-34s %14" PRIu64 " %14" PRIu64 "  %+" PRId64 "\n", what, a, b,
            run_diff_growth(a, b));
}

/* "entry 412 (alloc), t=+0.012345 s: main (train_loop.c:120) < ..." */
static void
print_where(FILE *out, const struct snapshot *snap, size_t device, const struct run_side *s,
            const struct run_peak *p)
{
    if (!s->present) {
        fprintf(out, "(no such device)\n");
        return;
    }
    char where[160], name[1024];
    int64_t t0 = 0;
    bool timed = p->has_time && analysis_time_at(snap, device, 1, &t0);
    analysis_where(where, sizeof where, snap, device, p->at, timed ? &t0 : NULL);
    fprintf(out, "%s", where);
    if (p->at > 0)
        fprintf(out, ": %s", cli_site_name(snap, p->stack, 3, name, sizeof name));
    fprintf(out, "\n");
}

static void
print_peaks(FILE *out, const struct snapshot *a, const struct snapshot *b,
            const struct run_device_diff *d)
{
    fprintf(out, "== device %zu%s%s\n", d->device, d->a.present ? "" : " (not in A)",
            d->b.present ? "" : " (not in B)");
    fprintf(out, "  %-34s %14s %14s  %s\n", "", "A", "B", "change");
    row_sizes(out, "peak allocated", d->a.allocated.bytes, d->b.allocated.bytes);
    row_sizes(out, "peak reserved", d->a.reserved.bytes, d->b.reserved.bytes);
    row_sizes(out, "allocated at the end", d->a.end_allocated, d->b.end_allocated);
    row_sizes(out, "reserved at the end", d->a.end_reserved, d->b.end_reserved);
    row_counts(out, "device allocations (segment_alloc)", d->a.segment_allocs, d->b.segment_allocs);
    row_counts(out, "device frees (segment_free)", d->a.segment_frees, d->b.segment_frees);
    if (d->a.segment_maps + d->b.segment_maps + d->a.segment_unmaps + d->b.segment_unmaps > 0) {
        row_counts(out, "pages mapped (segment_map)", d->a.segment_maps, d->b.segment_maps);
        row_counts(out, "pages unmapped (segment_unmap)", d->a.segment_unmaps, d->b.segment_unmaps);
    }
    row_counts(out, "OOMs", d->a.ooms, d->b.ooms);
    if (d->a.driver_ooms + d->b.driver_ooms > 0)
        row_counts(out, "OOMs in the driver's own calls", d->a.driver_ooms, d->b.driver_ooms);
    if (d->a.mid_run || d->b.mid_run)
        fprintf(out,
                "  (the history of %s starts mid-run: a peak before its first entry is not seen)\n",
                d->a.mid_run && d->b.mid_run ? "A and B"
                : d->a.mid_run               ? "A"
                                             : "B");
    fprintf(out, "where each peak happened (the entry that made it, and its call site):\n");
    fprintf(out, "  peak allocated  A: ");
    print_where(out, a, d->device, &d->a, &d->a.allocated);
    fprintf(out, "                  B: ");
    print_where(out, b, d->device, &d->b, &d->b.allocated);
    fprintf(out, "  peak reserved   A: ");
    print_where(out, a, d->device, &d->a, &d->a.reserved);
    fprintf(out, "                  B: ");
    print_where(out, b, d->device, &d->b, &d->b.reserved);
}

static void
print_site(FILE *out, const struct snapshot *a, const struct snapshot *b,
           const struct run_device_diff *d, const struct run_site *r)
{
    char g[48], sa[32], sb[32];
    fprintf(out, "  %s on device %zu (%s -> %s)\n", signed_size(r->growth, g, sizeof g), d->device,
            cli_size(r->bytes_a, sa, sizeof sa), cli_size(r->bytes_b, sb, sizeof sb));
    if (r->stack_b != 0 || r->stack_a == 0)
        cli_print_stack(out, b, r->stack_b, 6, 8);
    else
        cli_print_stack(out, a, r->stack_a, 6, 8);
}

/* The sites that changed, largest growth first: "  +4.00 MiB on device 0 (8.00 MiB -> 12.00
 * MiB)" and the stack. */
static size_t
print_sites(FILE *out, const struct snapshot *a, const struct snapshot *b,
            const struct run_device_diff *d, const struct run_site *rows, size_t n, uint64_t top)
{
    size_t shown = 0;
    for (size_t i = 0; i < n && shown < top; i++) {
        if (rows[i].growth == 0)
            continue;
        print_site(out, a, b, d, &rows[i]);
        shown++;
    }
    return shown;
}

static const char *
pool_text(const struct run_segments *s)
{
    if (s->is_expandable)
        return s->is_small ? "small pool, expandable" : "large pool, expandable";
    return s->is_small ? "small pool" : "large pool";
}

static void
print_segments(FILE *out, const struct snapshot *a, const struct snapshot *b,
               const struct run_device_diff *d)
{
    char s1[32], s2[32], s3[48];
    fprintf(out, "  device %zu: reserved %s -> %s (%s) in %zu -> %zu segments\n", d->device,
            cli_size(d->a.end_reserved, s1, sizeof s1), cli_size(d->b.end_reserved, s2, sizeof s2),
            signed_size(run_diff_growth(d->a.end_reserved, d->b.end_reserved), s3, sizeof s3),
            d->a.segments, d->b.segments);
    fprintf(out, "    %zu new segment%s (%s), %zu released (%s)\n", d->new_segments,
            d->new_segments == 1 ? "" : "s", cli_size(d->new_bytes, s1, sizeof s1),
            d->released_segments, cli_size(d->released_bytes, s2, sizeof s2));
    for (size_t i = 0; i < d->segment_kinds; i++) {
        const struct run_segments *k = &d->segments[i];
        if (k->count_a == k->count_b)
            break; /* sorted: the changed kinds first */
        size_t n = k->count_b > k->count_a ? k->count_b - k->count_a : k->count_a - k->count_b;
        fprintf(out, "      %c %zu x %s (%s): %zu in A, %zu in B\n",
                k->count_b > k->count_a ? '+' : '-', n, cli_size(k->size, s1, sizeof s1),
                pool_text(k), k->count_a, k->count_b);
        if (k->stack_b != 0 || k->count_a == 0)
            cli_print_stack(out, b, k->stack_b, 10, 4);
        else
            cli_print_stack(out, a, k->stack_a, 10, 4);
    }
}

bool
diff_print_text(FILE *out, const struct run_diff *diff, uint64_t top, const struct snapshot *a,
                const struct snapshot *b, char *const *paths)
{
    size_t n;
    struct diff_end_site *ends = diff_end_sites(diff, &n);
    if (n == SIZE_MAX)
        return false;
    fprintf(out, "A: ");
    cli_fputs_term(paths[0], out);
    fprintf(out, "\nB: ");
    cli_fputs_term(paths[1], out);
    fprintf(out, "\n");
    for (size_t i = 0; i < diff->device_count; i++) {
        const struct run_device_diff *d = &diff->devices[i];
        print_peaks(out, a, b, d);
        fprintf(out, "call sites at each run's peak of allocated bytes (largest growth first):\n");
        if (print_sites(out, a, b, d, d->at_peak, d->at_peak_count, top) == 0)
            fprintf(out, "  (no call site changed)\n");
    }
    char g[48], pa[1024], pb[1024];
    fprintf(out, "live bytes at the end: %s from %s to %s\n",
            signed_size(diff->end_growth, g, sizeof g), cli_term(paths[0], pa, sizeof pa),
            cli_term(paths[1], pb, sizeof pb));
    fprintf(out, "by call site (largest growth first):\n");
    for (size_t i = 0; i < n && i < top; i++)
        print_site(out, a, b, ends[i].d, ends[i].r);
    if (n == 0)
        fprintf(out, "  (no call site changed)\n");
    fprintf(out,
            "reserved memory by segment (matched by size, pool and call site, not by address):\n");
    for (size_t i = 0; i < diff->device_count; i++)
        print_segments(out, a, b, &diff->devices[i]);
    free(ends);
    return true;
}
