/* cmd_diff.c: `cuprof diff A B`: two runs (or two dumps of one, or two ranks) compared, as text or
 *   JSON; the figures are run_diff's (cli/run_diff.h), this file only prints them. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli/analysis.h"
#include "cli/cli_commands.h"
#include "cli/cli_options.h"
#include "cli/cli_util.h"
#include "cli/run_diff.h"

static const char diff_text[] =
    "usage: cuprof diff [--json] [--top N] [--all-frames] A B\n\n"
    "Compares two snapshots: two runs of a program (A the earlier, B the new one), two dumps of\n"
    "one run, or two ranks. Per device:\n"
    "  - peak allocated and peak reserved bytes side by side, with where each happened (the\n"
    "    trace entry, its time since the history began, and the call site that made the\n"
    "    peak), bytes at the end, device allocations and frees made (segment_alloc and\n"
    "    segment_free entries; cuprof's own counters for the whole run in --json) and OOMs;\n"
    "  - call sites compared at each run's own peak of allocated bytes, and at the end;\n"
    "  - reserved memory by segment: segments matched by size, pool and the call site that\n"
    "    made them (never by address, which differs from run to run): new in B, released.\n"
    "Call sites are matched by their frames, so the files need not share stack indices or\n"
    "addresses; a site whose lines moved (the program was edited) is matched by its\n"
    "functions and files when that match is unique. Stacks that differ only in frames of the\n"
    "allocation machinery (cuprof, CUDA, PyTorch's allocator, the Python interpreter, libc\n"
    "start-up) are one call site, shown from the user's first frame. \"Allocated\" bytes are\n"
    "requested sizes of allocations not yet freed, as the trace records them.\n\n";

static const char diff_epilog[] =
    "--json writes one object: \"a\" and \"b\" (the files), \"growth_bytes\" (allocated bytes\n"
    "at the end, B - A), \"sites\" (the call sites at the end that changed: device, a_bytes,\n"
    "b_bytes, a_count, b_count, growth, frames) and \"devices\": per device \"a\" and \"b\"\n"
    "(present, entries, dropped_entries, mid_run, peak_allocated and peak_reserved as {bytes,\n"
    "entry, time_us, seconds, frames}, end_allocated, end_reserved, segments, segment_allocs,\n"
    "segment_frees, segment_maps, segment_unmaps, counted_allocs, counted_frees (null without\n"
    "cuprof's counters), ooms, leaked_bytes, leaked_blocks), the growth of each peak,\n"
    "\"sites_at_peak\", \"sites_at_end\", \"segment_kinds\" (size, pool, expandable, pool_id,\n"
    "a_count, b_count, frames) and the totals reserved_a/b, segments_a/b, new_segments,\n"
    "new_bytes, released_segments, released_bytes.\n";

static const struct cli_option diff_options[] = {
    {"json", 'j', NULL, "one JSON object (below) instead of the text", 0},
    {"top", 't', "N", "call sites to list in each comparison (default 20)", 0},
    {"all-frames", 0, NULL,
     "hide no frame: a call site is a whole stack, named by its innermost frame", CLI_ALL_FRAMES},
    {0},
};

struct diff_args {
    bool json;
    uint64_t top;
};

static int
diff_option(void *ctx, int key, const char *value)
{
    struct diff_args *a = ctx;
    if (key == 'j')
        a->json = true;
    else if (key == 't' && !cli_parse_u64(value, &a->top))
        return cli_usage_error("diff", "--top: bad value \"%s\": expected a number", value);
    return CLI_OK;
}

const struct cli_command cmd_diff_command = {
    .name = "diff",
    .text = diff_text,
    .options = diff_options,
    .epilog = diff_epilog,
    .unknown = "unknown option",
    .operands = 2,
    .operands_error = "expected two snapshot files A and B",
    .option = diff_option,
    .read = 2,
    .filter_frames = true,
};

/* Every device's sites at the end that changed, largest growth first (one list for all). */
struct end_site {
    const struct run_device_diff *d;
    const struct run_site *r;
};

static int
end_by_growth(const void *x, const void *y)
{
    const struct end_site *p = x, *q = y;
    if (p->r->growth != q->r->growth)
        return p->r->growth < q->r->growth ? 1 : -1;
    return (p->d->device > q->d->device) - (p->d->device < q->d->device);
}

/* NULL (and *n 0) when none changed or host memory ran out (*n is then SIZE_MAX). */
static struct end_site *
end_sites(const struct run_diff *diff, size_t *n)
{
    size_t total = 0;
    for (size_t i = 0; i < diff->device_count; i++)
        total += diff->devices[i].at_end_count;
    struct end_site *v = malloc((total + 1) * sizeof(*v));
    *n = 0;
    if (v == NULL) {
        *n = SIZE_MAX;
        return NULL;
    }
    for (size_t i = 0; i < diff->device_count; i++)
        for (size_t j = 0; j < diff->devices[i].at_end_count; j++)
            if (diff->devices[i].at_end[j].growth != 0)
                v[(*n)++] = (struct end_site){&diff->devices[i], &diff->devices[i].at_end[j]};
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
row_sizes(const char *what, uint64_t a, uint64_t b)
{
    char sa[32], sb[32], c[64];
    printf("  %-34s %14s %14s  %s\n", what, cli_size(a, sa, sizeof sa), cli_size(b, sb, sizeof sb),
           change_text(a, b, c, sizeof c));
}

static void
row_counts(const char *what, uint64_t a, uint64_t b)
{
    printf("  %-34s %14" PRIu64 " %14" PRIu64 "  %+" PRId64 "\n", what, a, b,
           run_diff_growth(a, b));
}

/* "entry 412 (alloc), t=+0.012345 s: main (train_loop.c:120) < ..." */
static void
print_where(const struct snapshot *snap, size_t device, const struct run_side *s,
            const struct run_peak *p)
{
    if (!s->present) {
        printf("(no such device)\n");
        return;
    }
    char where[160], name[1024];
    int64_t t0 = 0;
    bool timed = p->has_time && analysis_time_at(snap, device, 1, &t0);
    analysis_where(where, sizeof where, snap, device, p->at, timed ? &t0 : NULL);
    printf("%s", where);
    if (p->at > 0)
        printf(": %s", cli_site_name(snap, p->stack, 3, name, sizeof name));
    printf("\n");
}

static void
print_peaks(const struct snapshot *a, const struct snapshot *b, const struct run_device_diff *d)
{
    printf("== device %zu%s%s\n", d->device, d->a.present ? "" : " (not in A)",
           d->b.present ? "" : " (not in B)");
    printf("  %-34s %14s %14s  %s\n", "", "A", "B", "change");
    row_sizes("peak allocated", d->a.allocated.bytes, d->b.allocated.bytes);
    row_sizes("peak reserved", d->a.reserved.bytes, d->b.reserved.bytes);
    row_sizes("allocated at the end", d->a.end_allocated, d->b.end_allocated);
    row_sizes("reserved at the end", d->a.end_reserved, d->b.end_reserved);
    row_counts("device allocations (segment_alloc)", d->a.segment_allocs, d->b.segment_allocs);
    row_counts("device frees (segment_free)", d->a.segment_frees, d->b.segment_frees);
    if (d->a.segment_maps + d->b.segment_maps + d->a.segment_unmaps + d->b.segment_unmaps > 0) {
        row_counts("pages mapped (segment_map)", d->a.segment_maps, d->b.segment_maps);
        row_counts("pages unmapped (segment_unmap)", d->a.segment_unmaps, d->b.segment_unmaps);
    }
    row_counts("OOMs", d->a.ooms, d->b.ooms);
    if (d->a.mid_run || d->b.mid_run)
        printf("  (the history of %s starts mid-run: a peak before its first entry is not seen)\n",
               d->a.mid_run && d->b.mid_run ? "A and B"
               : d->a.mid_run               ? "A"
                                            : "B");
    printf("where each peak happened (the entry that made it, and its call site):\n");
    printf("  peak allocated  A: ");
    print_where(a, d->device, &d->a, &d->a.allocated);
    printf("                  B: ");
    print_where(b, d->device, &d->b, &d->b.allocated);
    printf("  peak reserved   A: ");
    print_where(a, d->device, &d->a, &d->a.reserved);
    printf("                  B: ");
    print_where(b, d->device, &d->b, &d->b.reserved);
}

static void
print_site(const struct snapshot *a, const struct snapshot *b, const struct run_device_diff *d,
           const struct run_site *r)
{
    char g[48], sa[32], sb[32];
    printf("  %s on device %zu (%s -> %s)\n", signed_size(r->growth, g, sizeof g), d->device,
           cli_size(r->bytes_a, sa, sizeof sa), cli_size(r->bytes_b, sb, sizeof sb));
    if (r->stack_b != 0 || r->stack_a == 0)
        cli_print_stack(stdout, b, r->stack_b, 6, 8);
    else
        cli_print_stack(stdout, a, r->stack_a, 6, 8);
}

/* The sites that changed, largest growth first: "  +4.00 MiB on device 0 (8.00 MiB -> 12.00
 * MiB)" and the stack. */
static size_t
print_sites(const struct snapshot *a, const struct snapshot *b, const struct run_device_diff *d,
            const struct run_site *rows, size_t n, uint64_t top)
{
    size_t shown = 0;
    for (size_t i = 0; i < n && shown < top; i++) {
        if (rows[i].growth == 0)
            continue;
        print_site(a, b, d, &rows[i]);
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
print_segments(const struct snapshot *a, const struct snapshot *b, const struct run_device_diff *d)
{
    char s1[32], s2[32], s3[48];
    printf("  device %zu: reserved %s -> %s (%s) in %zu -> %zu segments\n", d->device,
           cli_size(d->a.end_reserved, s1, sizeof s1), cli_size(d->b.end_reserved, s2, sizeof s2),
           signed_size(run_diff_growth(d->a.end_reserved, d->b.end_reserved), s3, sizeof s3),
           d->a.segments, d->b.segments);
    printf("    %zu new segment%s (%s), %zu released (%s)\n", d->new_segments,
           d->new_segments == 1 ? "" : "s", cli_size(d->new_bytes, s1, sizeof s1),
           d->released_segments, cli_size(d->released_bytes, s2, sizeof s2));
    for (size_t i = 0; i < d->segment_kinds; i++) {
        const struct run_segments *k = &d->segments[i];
        if (k->count_a == k->count_b)
            break; /* sorted: the changed kinds first */
        size_t n = k->count_b > k->count_a ? k->count_b - k->count_a : k->count_a - k->count_b;
        printf("      %c %zu x %s (%s): %zu in A, %zu in B\n", k->count_b > k->count_a ? '+' : '-',
               n, cli_size(k->size, s1, sizeof s1), pool_text(k), k->count_a, k->count_b);
        if (k->stack_b != 0 || k->count_a == 0)
            cli_print_stack(stdout, b, k->stack_b, 10, 4);
        else
            cli_print_stack(stdout, a, k->stack_a, 10, 4);
    }
}

static bool
print_text(const struct run_diff *diff, uint64_t top, const struct snapshot *a,
           const struct snapshot *b, char **paths)
{
    size_t n;
    struct end_site *ends = end_sites(diff, &n);
    if (n == SIZE_MAX)
        return false;
    printf("A: ");
    cli_fputs_term(paths[0], stdout);
    printf("\nB: ");
    cli_fputs_term(paths[1], stdout);
    printf("\n");
    for (size_t i = 0; i < diff->device_count; i++) {
        const struct run_device_diff *d = &diff->devices[i];
        print_peaks(a, b, d);
        printf("call sites at each run's peak of allocated bytes (largest growth first):\n");
        if (print_sites(a, b, d, d->at_peak, d->at_peak_count, top) == 0)
            printf("  (no call site changed)\n");
    }
    char g[48], pa[1024], pb[1024];
    printf("live bytes at the end: %s from %s to %s\n", signed_size(diff->end_growth, g, sizeof g),
           cli_term(paths[0], pa, sizeof pa), cli_term(paths[1], pb, sizeof pb));
    printf("by call site (largest growth first):\n");
    for (size_t i = 0; i < n && i < top; i++)
        print_site(a, b, ends[i].d, ends[i].r);
    if (n == 0)
        printf("  (no call site changed)\n");
    printf("reserved memory by segment (matched by size, pool and call site, not by address):\n");
    for (size_t i = 0; i < diff->device_count; i++)
        print_segments(a, b, &diff->devices[i]);
    free(ends);
    return true;
}

/* ---- JSON ------------------------------------------------------------------------------------ */

static void
emit_peak(struct emitter *e, const struct snapshot *snap, const struct run_peak *p)
{
    emitter_begin_dict(e);
    cli_json_key_u64(e, "bytes", p->bytes);
    emitter_key(e, "entry"); /* the entry that made it; null: the state at the start */
    if (p->at > 0)
        emitter_u64(e, p->at - 1);
    else
        emitter_none(e);
    emitter_key(e, "time_us");
    if (p->has_time)
        emitter_int(e, p->time_us);
    else
        emitter_none(e);
    emitter_key(e, "seconds"); /* since the history's first entry */
    if (p->has_time)
        emitter_float(e, (double)p->since_us / 1e6);
    else
        emitter_none(e);
    emitter_key(e, "frames");
    cli_json_frames(e, snap, p->at > 0 ? p->stack : 0);
    emitter_end(e);
}

static void
emit_counter(struct emitter *e, const char *key, int64_t v)
{
    emitter_key(e, key);
    if (v >= 0)
        emitter_int(e, v);
    else
        emitter_none(e);
}

static void
emit_side(struct emitter *e, const struct snapshot *snap, const struct run_side *s)
{
    emitter_begin_dict(e);
    emitter_key(e, "present");
    emitter_bool(e, s->present);
    cli_json_key_u64(e, "entries", s->entries);
    cli_json_key_u64(e, "dropped_entries", s->dropped);
    emitter_key(e, "mid_run");
    emitter_bool(e, s->mid_run);
    emitter_key(e, "peak_allocated");
    emit_peak(e, snap, &s->allocated);
    emitter_key(e, "peak_reserved");
    emit_peak(e, snap, &s->reserved);
    cli_json_key_u64(e, "end_allocated", s->end_allocated);
    cli_json_key_u64(e, "end_reserved", s->end_reserved);
    cli_json_key_u64(e, "segments", s->segments);
    cli_json_key_u64(e, "segment_allocs", s->segment_allocs);
    cli_json_key_u64(e, "segment_frees", s->segment_frees);
    cli_json_key_u64(e, "segment_maps", s->segment_maps);
    cli_json_key_u64(e, "segment_unmaps", s->segment_unmaps);
    emit_counter(e, "counted_allocs", s->counted_allocs);
    emit_counter(e, "counted_frees", s->counted_frees);
    cli_json_key_u64(e, "ooms", s->ooms);
    cli_json_key_u64(e, "leaked_bytes", s->leaked_bytes);
    cli_json_key_u64(e, "leaked_blocks", s->leaked_blocks);
    emitter_end(e);
}

static void
emit_site(struct emitter *e, const struct snapshot *a, const struct snapshot *b,
          const struct run_site *r, size_t device)
{
    emitter_begin_dict(e);
    cli_json_key_u64(e, "device", device);
    cli_json_key_u64(e, "a_bytes", r->bytes_a);
    cli_json_key_u64(e, "b_bytes", r->bytes_b);
    cli_json_key_u64(e, "a_count", r->count_a);
    cli_json_key_u64(e, "b_count", r->count_b);
    cli_json_key_int(e, "growth", r->growth);
    emitter_key(e, "frames");
    if (r->stack_b != 0 || r->stack_a == 0)
        cli_json_frames(e, b, r->stack_b);
    else
        cli_json_frames(e, a, r->stack_a);
    emitter_end(e);
}

static void
emit_sites(struct emitter *e, const struct snapshot *a, const struct snapshot *b,
           const struct run_device_diff *d, const struct run_site *rows, size_t n, uint64_t top)
{
    emitter_begin_list(e);
    for (size_t i = 0, k = 0; i < n && k < top; i++)
        if (rows[i].growth != 0) {
            emit_site(e, a, b, &rows[i], d->device);
            k++;
        }
    emitter_end(e);
}

static void
emit_segment_kinds(struct emitter *e, const struct snapshot *a, const struct snapshot *b,
                   const struct run_device_diff *d)
{
    emitter_begin_list(e);
    for (size_t i = 0; i < d->segment_kinds; i++) {
        const struct run_segments *k = &d->segments[i];
        emitter_begin_dict(e);
        cli_json_key_u64(e, "size", k->size);
        cli_json_key_string(e, "pool", k->is_small ? "small" : "large");
        emitter_key(e, "expandable");
        emitter_bool(e, k->is_expandable);
        emitter_key(e, "pool_id");
        emitter_begin_list(e);
        emitter_int(e, k->pool_id[0]);
        emitter_int(e, k->pool_id[1]);
        emitter_end(e);
        cli_json_key_u64(e, "a_count", k->count_a);
        cli_json_key_u64(e, "b_count", k->count_b);
        emitter_key(e, "frames");
        if (k->stack_b != 0 || k->count_a == 0)
            cli_json_frames(e, b, k->stack_b);
        else
            cli_json_frames(e, a, k->stack_a);
        emitter_end(e);
    }
    emitter_end(e);
}

static void
emit_device(struct emitter *e, const struct snapshot *a, const struct snapshot *b,
            const struct run_device_diff *d, uint64_t top)
{
    emitter_begin_dict(e);
    cli_json_key_u64(e, "device", d->device);
    emitter_key(e, "a");
    emit_side(e, a, &d->a);
    emitter_key(e, "b");
    emit_side(e, b, &d->b);
    cli_json_key_int(e, "peak_allocated_growth",
                     run_diff_growth(d->a.allocated.bytes, d->b.allocated.bytes));
    cli_json_key_int(e, "peak_reserved_growth",
                     run_diff_growth(d->a.reserved.bytes, d->b.reserved.bytes));
    emitter_key(e, "sites_at_peak");
    emit_sites(e, a, b, d, d->at_peak, d->at_peak_count, top);
    emitter_key(e, "sites_at_end");
    emit_sites(e, a, b, d, d->at_end, d->at_end_count, top);
    emitter_key(e, "segment_kinds");
    emit_segment_kinds(e, a, b, d);
    cli_json_key_u64(e, "reserved_a", d->a.end_reserved);
    cli_json_key_u64(e, "reserved_b", d->b.end_reserved);
    cli_json_key_u64(e, "segments_a", d->a.segments);
    cli_json_key_u64(e, "segments_b", d->b.segments);
    cli_json_key_u64(e, "new_segments", d->new_segments);
    cli_json_key_u64(e, "new_bytes", d->new_bytes);
    cli_json_key_u64(e, "released_segments", d->released_segments);
    cli_json_key_u64(e, "released_bytes", d->released_bytes);
    emitter_end(e);
}

static bool
print_json(const struct run_diff *diff, uint64_t top, const struct snapshot *a,
           const struct snapshot *b, char **paths)
{
    size_t n;
    struct end_site *ends = end_sites(diff, &n);
    struct emitter *e = n != SIZE_MAX ? cli_json_open(stdout) : NULL;
    if (e == NULL) {
        free(ends);
        return false;
    }
    emitter_begin_dict(e);
    cli_json_key_string(e, "a", paths[0]);
    cli_json_key_string(e, "b", paths[1]);
    cli_json_key_int(e, "growth_bytes", diff->end_growth);
    /* Every device's changed sites at the end, largest growth first, top N in all. */
    emitter_key(e, "sites");
    emitter_begin_list(e);
    for (size_t i = 0; i < n && i < top; i++)
        emit_site(e, a, b, ends[i].r, ends[i].d->device);
    emitter_end(e);
    emitter_key(e, "devices");
    emitter_begin_list(e);
    for (size_t i = 0; i < diff->device_count; i++)
        emit_device(e, a, b, &diff->devices[i], top);
    emitter_end(e);
    emitter_end(e);
    free(ends);
    return cli_json_close(e);
}

int
cmd_diff(int argc, char **argv)
{
    struct diff_args args = {.top = 20};
    struct cli_input in;
    if (!cli_begin(&cmd_diff_command, argc, argv, &args, &in))
        return in.status;
    struct run_diff diff;
    int status = CLI_OK;
    if (run_diff_make(in.snap[0], in.snap[1], &diff) != 0) {
        fprintf(stderr, "cuprof: diff: out of memory\n");
        status = CLI_BADUSE;
    } else {
        if (args.json) {
            if (!print_json(&diff, args.top, in.snap[0], in.snap[1], in.paths))
                status = CLI_BADUSE;
        } else if (!print_text(&diff, args.top, in.snap[0], in.snap[1], in.paths)) {
            fprintf(stderr, "cuprof: diff: out of memory\n");
            status = CLI_BADUSE;
        }
        run_diff_free(&diff);
    }
    cli_input_free(&in);
    return status;
}
