/* cmd_diff.c: `cuprof diff A B`: what grew between two snapshots, by call site and by segment. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli/analysis.h"
#include "cli/cli_commands.h"
#include "cli/cli_options.h"
#include "cli/cli_util.h"

static const char diff_text[] =
    "usage: cuprof diff [--json] [--top N] [--all-frames] A B\n\n"
    "Compares two snapshots (two dumps of one run, or two runs, or two ranks): live bytes at\n"
    "the end of each by call site (stacks are matched by their frames, so the files need not\n"
    "share indices), largest growth first, and reserved memory by segment: segments only in B\n"
    "(new), only in A (released), and per device the reserved totals. Stacks that differ only\n"
    "in frames of the allocation machinery (cuprof, CUDA, PyTorch's allocator, the Python\n"
    "interpreter, libc start-up) are one call site, shown from the user's first frame.\n\n";

static const struct cli_option diff_options[] = {
    {"json", 'j', NULL, "one JSON object with \"sites\" and \"devices\"", 0},
    {"top", 't', "N", "call sites to list (default 20)", 0},
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
        return cli_usage_error("diff", "--top wants a number, not \"%s\"", value);
    return CLI_OK;
}

const struct cli_command cmd_diff_command = {
    .name = "diff",
    .text = diff_text,
    .options = diff_options,
    .unknown = "unknown option",
    .operands = 2,
    .operands_error = "expected two snapshot files A and B",
    .option = diff_option,
    .read = 2,
    .filter_frames = true,
};

struct diff_site {
    char *key; /* "device\x1fframes..." */
    size_t device;
    uint32_t stack;
    const struct snapshot *snap;
    uint64_t bytes, count;
};

static int
cmp_key(const void *a, const void *b)
{
    return strcmp(((const struct diff_site *)a)->key, ((const struct diff_site *)b)->key);
}

/* Live bytes at the end per (device, frames) of one snapshot, sorted by key. */
static long
collect_sites(const struct snapshot *snap, struct diff_site **out)
{
    struct diff_site *all = NULL;
    size_t n = 0;
    for (size_t d = 0; d < analysis_device_count(snap); d++) {
        if (!analysis_device_present(snap, d))
            continue;
        size_t ns;
        struct site_total *sites;
        if (analysis_sites_at(snap, d, SIZE_MAX, &sites, &ns) != 0)
            goto fail;
        struct diff_site *bigger = realloc(all, (n + ns + 1) * sizeof(*all));
        if (bigger == NULL) {
            free(sites);
            goto fail;
        }
        all = bigger;
        for (size_t i = 0; i < ns; i++) {
            char *line = cli_stack_line(snap, sites[i].stack, "\x1f", false);
            size_t len = line ? strlen(line) + 32 : 0;
            char *key = line ? malloc(len) : NULL;
            if (key == NULL) {
                free(line);
                free(sites);
                goto fail;
            }
            snprintf(key, len, "%zu\x1e%s", d, line);
            free(line);
            all[n++] =
                (struct diff_site){key, d, sites[i].stack, snap, sites[i].bytes, sites[i].count};
        }
        free(sites);
    }
    if (n > 1)
        qsort(all, n, sizeof(*all), cmp_key);
    *out = all;
    return (long)n;
fail:
    for (size_t i = 0; i < n; i++)
        free(all[i].key);
    free(all);
    return -1;
}

struct diff_row {
    const struct diff_site *a, *b;
    int64_t growth;
};

static int
cmp_growth(const void *x, const void *y)
{
    const struct diff_row *p = x, *q = y;
    if (p->growth != q->growth)
        return p->growth < q->growth ? 1 : -1;
    return 0;
}

static bool
segment_in(const struct snapshot *snap, const struct snap_segment *seg)
{
    for (size_t i = 0; i < snap->segment_count; i++)
        if (snap->segments[i].device == seg->device && snap->segments[i].addr == seg->addr &&
            snap->segments[i].total_size == seg->total_size)
            return true;
    return false;
}

/* Reserved memory of one device in A and B, and the segments new in B or gone from A. */
struct segment_change {
    uint64_t reserved_a, reserved_b, new_bytes, released_bytes;
    size_t segments_a, segments_b, new_segments, released_segments;
};

static struct segment_change
segment_change(const struct snapshot *a, const struct snapshot *b, size_t d)
{
    struct segment_change c = {0};
    for (size_t i = 0; i < a->segment_count; i++)
        if ((size_t)a->segments[i].device == d) {
            c.reserved_a += a->segments[i].total_size;
            c.segments_a++;
            if (!segment_in(b, &a->segments[i])) {
                c.released_segments++;
                c.released_bytes += a->segments[i].total_size;
            }
        }
    for (size_t i = 0; i < b->segment_count; i++)
        if ((size_t)b->segments[i].device == d) {
            c.reserved_b += b->segments[i].total_size;
            c.segments_b++;
            if (!segment_in(a, &b->segments[i])) {
                c.new_segments++;
                c.new_bytes += b->segments[i].total_size;
            }
        }
    return c;
}

static size_t
max_device_count(const struct snapshot *a, const struct snapshot *b)
{
    size_t na = analysis_device_count(a), nb = analysis_device_count(b);
    return na > nb ? na : nb;
}

static void
print_segments(const struct snapshot *a, const struct snapshot *b)
{
    char s1[32], s2[32], s3[32];
    printf("reserved memory by segment:\n");
    for (size_t d = 0; d < max_device_count(a, b); d++) {
        if (!analysis_device_present(a, d) && !analysis_device_present(b, d))
            continue;
        struct segment_change c = segment_change(a, b, d);
        uint64_t ra = c.reserved_a, rb = c.reserved_b;
        printf("  device %zu: reserved %s -> %s (%s%s) in %zu -> %zu segments\n", d,
               cli_size(ra, s1, sizeof(s1)), cli_size(rb, s2, sizeof(s2)), rb >= ra ? "+" : "-",
               cli_size(rb >= ra ? rb - ra : ra - rb, s3, sizeof(s3)), c.segments_a, c.segments_b);
        printf("    %zu new segment%s (%s), %zu released (%s)\n", c.new_segments,
               c.new_segments == 1 ? "" : "s", cli_size(c.new_bytes, s1, sizeof(s1)),
               c.released_segments, cli_size(c.released_bytes, s2, sizeof(s2)));
        for (size_t i = 0; i < b->segment_count; i++) {
            const struct snap_segment *seg = &b->segments[i];
            if ((size_t)seg->device == d && !segment_in(a, seg)) {
                printf("      + 0x%" PRIx64 " %s (%s pool, stream %" PRIu64 ")\n", seg->addr,
                       cli_size(seg->total_size, s1, sizeof(s1)), seg->is_small ? "small" : "large",
                       seg->stream);
                cli_print_stack(stdout, b, seg->stack, 10, 4);
            }
        }
    }
}

static void
emit_segments(struct emitter *e, const struct snapshot *a, const struct snapshot *b)
{
    emitter_begin_list(e);
    for (size_t d = 0; d < max_device_count(a, b); d++) {
        if (!analysis_device_present(a, d) && !analysis_device_present(b, d))
            continue;
        struct segment_change c = segment_change(a, b, d);
        emitter_begin_dict(e);
        cli_json_key_u64(e, "device", d);
        cli_json_key_u64(e, "reserved_a", c.reserved_a);
        cli_json_key_u64(e, "reserved_b", c.reserved_b);
        cli_json_key_u64(e, "segments_a", c.segments_a);
        cli_json_key_u64(e, "segments_b", c.segments_b);
        cli_json_key_u64(e, "new_segments", c.new_segments);
        cli_json_key_u64(e, "new_bytes", c.new_bytes);
        cli_json_key_u64(e, "released_segments", c.released_segments);
        cli_json_key_u64(e, "released_bytes", c.released_bytes);
        emitter_end(e);
    }
    emitter_end(e);
}

/* Every call site of A and B, matched by key, largest growth first. */
struct diff_table {
    struct diff_site *sa, *sb;
    long na, nb;
    struct diff_row *rows;
    size_t nr;
    int64_t total; /* growth of all sites */
};

static int
diff_table_build(const struct snapshot *a, const struct snapshot *b, struct diff_table *d)
{
    memset(d, 0, sizeof(*d));
    d->na = collect_sites(a, &d->sa);
    d->nb = d->na < 0 ? -1 : collect_sites(b, &d->sb);
    if (d->na < 0 || d->nb < 0 ||
        (d->rows = malloc((size_t)(d->na + d->nb + 1) * sizeof(*d->rows))) == NULL)
        return -1;
    for (long i = 0, j = 0; i < d->na || j < d->nb;) {
        int cmp = i >= d->na ? 1 : j >= d->nb ? -1 : strcmp(d->sa[i].key, d->sb[j].key);
        struct diff_row r = {cmp <= 0 ? &d->sa[i] : NULL, cmp >= 0 ? &d->sb[j] : NULL, 0};
        r.growth = cli_add_i64(cli_i64(r.b ? r.b->bytes : 0), -cli_i64(r.a ? r.a->bytes : 0));
        d->rows[d->nr++] = r;
        i += cmp <= 0;
        j += cmp >= 0;
    }
    qsort(d->rows, d->nr, sizeof(*d->rows), cmp_growth);
    for (size_t i = 0; i < d->nr; i++)
        d->total = cli_add_i64(d->total, d->rows[i].growth);
    return 0;
}

static void
diff_table_free(struct diff_table *d)
{
    for (long i = 0; i < d->na; i++)
        free(d->sa[i].key);
    for (long i = 0; i < d->nb; i++)
        free(d->sb[i].key);
    free(d->sa);
    free(d->sb);
    free(d->rows);
}

static bool
print_json(const struct diff_table *d, uint64_t top, const struct snapshot *a,
           const struct snapshot *b)
{
    struct emitter *e = cli_json_open(stdout);
    if (e == NULL)
        return false;
    emitter_begin_dict(e);
    cli_json_key_int(e, "growth_bytes", d->total);
    emitter_key(e, "sites");
    emitter_begin_list(e);
    for (size_t i = 0, k = 0; i < d->nr && k < top; i++) {
        const struct diff_row *r = &d->rows[i];
        if (r->growth == 0)
            continue;
        const struct diff_site *s = r->b ? r->b : r->a;
        emitter_begin_dict(e);
        cli_json_key_u64(e, "device", s->device);
        cli_json_key_u64(e, "a_bytes", r->a ? r->a->bytes : 0);
        cli_json_key_u64(e, "b_bytes", r->b ? r->b->bytes : 0);
        cli_json_key_int(e, "growth", r->growth);
        emitter_key(e, "frames");
        cli_json_frames(e, s->snap, s->stack);
        emitter_end(e);
        k++;
    }
    emitter_end(e);
    emitter_key(e, "devices");
    emit_segments(e, a, b);
    emitter_end(e);
    return cli_json_close(e);
}

static void
print_text(const struct diff_table *d, uint64_t top, const struct snapshot *a,
           const struct snapshot *b, char **paths)
{
    char s1[32], s2[32], s3[32], a_path[1024], b_path[1024];
    printf("live bytes at the end: %s%s from %s to %s\n", d->total >= 0 ? "+" : "-",
           cli_size(d->total >= 0 ? (uint64_t)d->total : 0 - (uint64_t)d->total, s1, sizeof(s1)),
           cli_term(paths[0], a_path, sizeof a_path), cli_term(paths[1], b_path, sizeof b_path));
    printf("by call site (largest growth first):\n");
    size_t shown = 0;
    for (size_t i = 0; i < d->nr && shown < top; i++) {
        const struct diff_row *r = &d->rows[i];
        if (r->growth == 0)
            continue;
        const struct diff_site *s = r->b ? r->b : r->a;
        uint64_t g = r->growth > 0 ? (uint64_t)r->growth : 0 - (uint64_t)r->growth;
        printf("  %s%s on device %zu (%s -> %s)\n", r->growth > 0 ? "+" : "-",
               cli_size(g, s1, sizeof(s1)), s->device,
               cli_size(r->a ? r->a->bytes : 0, s2, sizeof(s2)),
               cli_size(r->b ? r->b->bytes : 0, s3, sizeof(s3)));
        cli_print_stack(stdout, s->snap, s->stack, 6, 8);
        shown++;
    }
    if (shown == 0)
        printf("  (no call site changed)\n");
    print_segments(a, b);
}

int
cmd_diff(int argc, char **argv)
{
    struct diff_args args = {.top = 20};
    struct cli_input in;
    if (!cli_begin(&cmd_diff_command, argc, argv, &args, &in))
        return in.status;
    struct diff_table d;
    int status = CLI_OK;
    if (diff_table_build(in.snap[0], in.snap[1], &d) != 0) {
        fprintf(stderr, "cuprof: diff: out of memory\n");
        status = CLI_BADUSE;
    } else if (args.json) {
        if (!print_json(&d, args.top, in.snap[0], in.snap[1]))
            status = CLI_BADUSE;
    } else {
        print_text(&d, args.top, in.snap[0], in.snap[1], in.paths);
    }
    diff_table_free(&d);
    cli_input_free(&in);
    return status;
}
