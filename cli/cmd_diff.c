/* cmd_diff.c: `cuprof diff A B`: what grew between two snapshots, by call site and by segment. */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli/analysis.h"
#include "cli/cli_commands.h"
#include "cli/cli_util.h"
#include "cli/frame_filter.h"

static const char usage_text[] =
    "usage: cuprof diff [--json] [--top N] [--all-frames] A B\n\n"
    "Compares two snapshots (two dumps of one run, or two runs, or two ranks): live bytes at\n"
    "the end of each by call site (stacks are matched by their frames, so the files need not\n"
    "share indices), largest growth first, and reserved memory by segment: segments only in B\n"
    "(new), only in A (released), and per device the reserved totals. Stacks that differ only\n"
    "in frames of the allocation machinery (cuprof, CUDA, PyTorch's allocator, the Python\n"
    "interpreter, libc start-up) are one call site, shown from the user's first frame.\n\n"
    "  --json        one JSON object with \"sites\" and \"devices\"\n"
    "  --top N       call sites to list (default 20)\n"
    "  --all-frames  hide no frame: a call site is a whole stack, named by its innermost frame\n"
    "  -h, --help    this text\n";

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

static void
print_segments(bool json, const struct snapshot *a, const struct snapshot *b)
{
    size_t ndev = analysis_device_count(a);
    if (analysis_device_count(b) > ndev)
        ndev = analysis_device_count(b);
    char s1[32], s2[32], s3[32];
    if (!json)
        printf("reserved memory by segment:\n");
    for (size_t d = 0; d < ndev; d++) {
        uint64_t ra = 0, rb = 0, new_bytes = 0, gone_bytes = 0;
        size_t na = 0, nb = 0, nnew = 0, ngone = 0;
        for (size_t i = 0; i < a->segment_count; i++)
            if ((size_t)a->segments[i].device == d) {
                ra += a->segments[i].total_size;
                na++;
                if (!segment_in(b, &a->segments[i])) {
                    ngone++;
                    gone_bytes += a->segments[i].total_size;
                }
            }
        for (size_t i = 0; i < b->segment_count; i++)
            if ((size_t)b->segments[i].device == d) {
                rb += b->segments[i].total_size;
                nb++;
                if (!segment_in(a, &b->segments[i])) {
                    nnew++;
                    new_bytes += b->segments[i].total_size;
                }
            }
        if (json) {
            printf("%s\n  {\"device\": %zu, \"reserved_a\": %" PRIu64 ", \"reserved_b\": %" PRIu64
                   ", \"segments_a\": %zu, \"segments_b\": %zu, \"new_segments\": %zu, "
                   "\"new_bytes\": %" PRIu64 ", \"released_segments\": %zu, \"released_bytes\": "
                   "%" PRIu64 "}",
                   d ? "," : "", d, ra, rb, na, nb, nnew, new_bytes, ngone, gone_bytes);
            continue;
        }
        printf("  device %zu: reserved %s -> %s (%s%s) in %zu -> %zu segments\n", d,
               cli_size(ra, s1, sizeof(s1)), cli_size(rb, s2, sizeof(s2)), rb >= ra ? "+" : "-",
               cli_size(rb >= ra ? rb - ra : ra - rb, s3, sizeof(s3)), na, nb);
        printf("    %zu new segment%s (%s), %zu released (%s)\n", nnew, nnew == 1 ? "" : "s",
               cli_size(new_bytes, s1, sizeof(s1)), ngone, cli_size(gone_bytes, s2, sizeof(s2)));
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

int
cmd_diff(int argc, char **argv)
{
    static const struct option options[] = {
        {"json", no_argument, NULL, 'j'},
        {"top", required_argument, NULL, 't'},
        {"all-frames", no_argument, NULL, 'A'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool json = false, all_frames = false;
    uint64_t top = 20;
    struct cli_options o = {.cmd = "diff",
                            .usage = usage_text,
                            .shortopts = "jt:h",
                            .longopts = options,
                            .unknown = "unknown option",
                            .operands = 2,
                            .operands_error = "expected two snapshot files A and B"};
    int c;
    while ((c = cli_next_option(&o, argc, argv)) != -1) {
        switch (c) {
        case 'j':
            json = true;
            break;
        case 't':
            if (!cli_parse_u64(optarg, &top))
                return cli_usage_error("diff", "--top wants a number, not \"%s\"", optarg);
            break;
        case 'A':
            all_frames = true;
            break;
        }
    }
    if (o.finished)
        return o.status;
    struct snapshot *a, *b;
    if (frame_filter_load(argv[optind], all_frames, &a) != CLI_OK)
        return CLI_BADUSE;
    if (frame_filter_load(argv[optind + 1], all_frames, &b) != CLI_OK) {
        snapshot_free(a);
        return CLI_BADUSE;
    }
    struct diff_site *sa = NULL, *sb = NULL;
    struct diff_row *rows = NULL;
    long na = collect_sites(a, &sa), nb = na < 0 ? -1 : collect_sites(b, &sb);
    int status = CLI_OK;
    if (na < 0 || nb < 0 || (rows = malloc((size_t)(na + nb + 1) * sizeof(*rows))) == NULL) {
        fprintf(stderr, "cuprof: diff: out of memory\n");
        status = CLI_BADUSE;
        goto done;
    }
    size_t nr = 0;
    for (long i = 0, j = 0; i < na || j < nb;) {
        int cmp = i >= na ? 1 : j >= nb ? -1 : strcmp(sa[i].key, sb[j].key);
        struct diff_row r = {cmp <= 0 ? &sa[i] : NULL, cmp >= 0 ? &sb[j] : NULL, 0};
        r.growth = cli_add_i64(cli_i64(r.b ? r.b->bytes : 0), -cli_i64(r.a ? r.a->bytes : 0));
        rows[nr++] = r;
        i += cmp <= 0;
        j += cmp >= 0;
    }
    qsort(rows, nr, sizeof(*rows), cmp_growth);
    int64_t total = 0;
    for (size_t i = 0; i < nr; i++)
        total = cli_add_i64(total, rows[i].growth);
    char s1[32], s2[32], s3[32];
    if (json) {
        printf("{\"growth_bytes\": %" PRId64 ", \"sites\": [", total);
        for (size_t i = 0, k = 0; i < nr && k < top; i++) {
            if (rows[i].growth == 0)
                continue;
            const struct diff_site *s = rows[i].b ? rows[i].b : rows[i].a;
            printf("%s\n  {\"device\": %zu, \"a_bytes\": %" PRIu64 ", \"b_bytes\": %" PRIu64
                   ", \"growth\": %" PRId64 ", \"frames\": ",
                   k ? "," : "", s->device, rows[i].a ? rows[i].a->bytes : 0,
                   rows[i].b ? rows[i].b->bytes : 0, rows[i].growth);
            cli_json_frames(stdout, s->snap, s->stack);
            printf("}");
            k++;
        }
        printf("], \"devices\": [");
        print_segments(true, a, b);
        printf("]}\n");
    } else {
        printf("live bytes at the end: %s%s from %s to %s\n", total >= 0 ? "+" : "-",
               cli_size(total >= 0 ? (uint64_t)total : 0 - (uint64_t)total, s1, sizeof(s1)),
               argv[optind], argv[optind + 1]);
        printf("by call site (largest growth first):\n");
        size_t shown = 0;
        for (size_t i = 0; i < nr && shown < top; i++) {
            if (rows[i].growth == 0)
                continue;
            const struct diff_site *s = rows[i].b ? rows[i].b : rows[i].a;
            uint64_t g =
                rows[i].growth > 0 ? (uint64_t)rows[i].growth : 0 - (uint64_t)rows[i].growth;
            printf("  %s%s on device %zu (%s -> %s)\n", rows[i].growth > 0 ? "+" : "-",
                   cli_size(g, s1, sizeof(s1)), s->device,
                   cli_size(rows[i].a ? rows[i].a->bytes : 0, s2, sizeof(s2)),
                   cli_size(rows[i].b ? rows[i].b->bytes : 0, s3, sizeof(s3)));
            cli_print_stack(stdout, s->snap, s->stack, 6, 8);
            shown++;
        }
        if (shown == 0)
            printf("  (no call site changed)\n");
        print_segments(false, a, b);
    }
done:
    for (long i = 0; i < na; i++)
        free(sa[i].key);
    for (long i = 0; i < nb; i++)
        free(sb[i].key);
    free(sa);
    free(sb);
    free(rows);
    snapshot_free(a);
    snapshot_free(b);
    return status;
}
