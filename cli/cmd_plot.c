/* cmd_plot.c: `cuprof plot FILE -o report.html`: one self-contained HTML page (the viewer template
 *   compiled into the binary, with the snapshot's numbers embedded as JSON). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/trace_sink.h"
#include "cli/analysis.h"
#include "cli/cli_commands.h"
#include "cli/cli_options.h"
#include "cli/cli_util.h"
#include "cli/cross_rank.h"
#include "cli/library_report.h"
#include "cli/report_html.h"

static const char plot_text[] =
    "usage: cuprof plot [-o report.html] [--all-frames] FILE...\n\n"
    "Writes one self-contained HTML file (no network, no CDN) showing, per device: the\n"
    "allocated and reserved timeline (click it to pick an event), the segment map at the chosen\n"
    "event with blocks coloured by call site (hover for sizes and stacks), and the top call\n"
    "sites table. The peaks it shows are those `cuprof summary` prints. Stacks that differ\n"
    "only in frames of the allocation machinery (cuprof, CUDA, PyTorch's allocator, the Python\n"
    "interpreter, libc start-up) are one call site, shown from the user's first frame.\n"
    "Several files (a job's ranks): the report opens with summary's cross-rank view (rank,\n"
    "peaks, OOMs, fragmentation, spread, outliers, the call sites that differ most), and the\n"
    "per-device sections show the first FILE.\n\n";

static const struct cli_option plot_options[] = {
    {"output", 'o', "FILE", "where to write (default: report.html)", 0},
    {"all-frames", 0, NULL, "hide no frame: a call site is a whole stack", CLI_ALL_FRAMES},
    {0},
};

static int
plot_option(void *ctx, int key, const char *value)
{
    if (key == 'o')
        *(const char **)ctx = value;
    return CLI_OK;
}

const struct cli_command cmd_plot_command = {
    .name = "plot",
    .text = plot_text,
    .options = plot_options,
    .unknown = "unknown option or missing value",
    .operands = CLI_ONE_OR_MORE,
    .operands_error = "expected at least one snapshot FILE",
    .option = plot_option,
    .read = 1, /* the others are read by the cross-rank view */
    .filter_frames = true,
};

#define PLOT_MAX_POINTS 4000 /* timeline points: bucket maxima beyond this */
#define PLOT_MAX_STATES 40   /* segment-map states offered */
#define PLOT_MAX_BLOCKS 5000 /* blocks drawn per state (the largest) */
#define PLOT_TOP_SITES  25

struct plot_ctx {
    FILE *out;
    const struct snapshot *snap;
    struct span_map site_of; /* stack + 1 -> site id */
    uint32_t *site_stack;    /* site id -> stack */
    size_t site_count;
};

static long
site_id(struct plot_ctx *p, uint32_t stack)
{
    struct span_map_item *it = span_map_get(&p->site_of, (uint64_t)stack + 1);
    if (it != NULL)
        return (long)it->size;
    uint32_t *bigger = realloc(p->site_stack, (p->site_count + 1) * sizeof(uint32_t));
    if (bigger == NULL)
        return -1;
    p->site_stack = bigger;
    p->site_stack[p->site_count] = stack;
    if (span_map_put(&p->site_of, (uint64_t)stack + 1, p->site_count, 0) != 0)
        return -1;
    return (long)p->site_count++;
}

static void
emit_series(FILE *out, const struct device_analysis *a)
{
    size_t n = a->count + 1;
    size_t step = (n + PLOT_MAX_POINTS - 1) / PLOT_MAX_POINTS;
    const char *names[] = {"index", "live", "reserved"};
    fprintf(out, "\"series\": {");
    for (int k = 0; k < 3; k++) {
        fprintf(out, "%s\"%s\": [", k ? ", " : "", names[k]);
        for (size_t i = 0; i < n; i += step) {
            uint64_t v = 0;
            for (size_t j = i; j < i + step && j < n; j++) {
                uint64_t x = k == 0 ? i : k == 1 ? a->live_series[j] : a->reserved_series[j];
                if (x > v)
                    v = x;
            }
            fprintf(out, "%s%" PRIu64, i ? "," : "", v);
        }
        fprintf(out, "]");
    }
    fprintf(out, "}");
}

static int
cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int
cmp_size_desc(const void *a, const void *b)
{
    uint64_t x = ((const struct span_map_item *)a)->size;
    uint64_t y = ((const struct span_map_item *)b)->size;
    return (x < y) - (x > y);
}

static void
where_text(char *buf, size_t len, const struct snapshot *snap, size_t device, size_t at)
{
    int64_t t0;
    bool known = analysis_time_at(snap, device, 1, &t0);
    analysis_where(buf, len, snap, device, at, known ? &t0 : NULL);
}

static int
emit_state(struct plot_ctx *p, size_t device, size_t at, const char *label)
{
    FILE *out = p->out;
    struct span_map segs;
    if (analysis_segments_at(p->snap, device, at, &segs) != 0) {
        span_map_free(&segs);
        return -1;
    }
    struct span_map_item *items, *blocks;
    size_t nseg = span_map_sorted(&segs, &items), nb;
    span_map_free(&segs);
    if (nseg == (size_t)-1)
        return -1;
    if (analysis_live_at(p->snap, device, at, &blocks, &nb) != 0) {
        free(items);
        return -1;
    }
    uint64_t reserved = 0, live = 0;
    for (size_t i = 0; i < nseg; i++)
        reserved += items[i].size;
    for (size_t i = 0; i < nb; i++)
        live += blocks[i].size;
    fprintf(out, "{\"label\": ");
    cli_json_string(out, label);
    fprintf(out, ", \"at\": %zu, \"reserved\": %" PRIu64 ", \"live\": %" PRIu64 ", \"segments\": [",
            at, reserved, live);
    for (size_t i = 0; i < nseg; i++) {
        uint32_t tag = items[i].stack;
        uint64_t stream = 0;
        if (tag != (ANALYSIS_SEGMENT_UNKNOWN) && (tag >> 1) < p->snap->segment_count)
            stream = p->snap->segments[tag >> 1].stream;
        fprintf(out, "%s[%" PRIu64 ",%" PRIu64 ",%d,%" PRIu64 "]", i ? "," : "", items[i].addr,
                items[i].size, (int)(tag & 1), stream);
    }
    fprintf(out, "], \"blocks\": [");
    if (nb > PLOT_MAX_BLOCKS) {
        qsort(blocks, nb, sizeof(*blocks), cmp_size_desc);
        nb = PLOT_MAX_BLOCKS;
    }
    int rc = 0;
    for (size_t i = 0; i < nb; i++) {
        long site = site_id(p, blocks[i].stack);
        if (site < 0) {
            rc = -1;
            break;
        }
        fprintf(out, "%s[%" PRIu64 ",%" PRIu64 ",%ld]", i ? "," : "", blocks[i].addr,
                blocks[i].size, site);
    }
    fprintf(out, "]}");
    free(items);
    free(blocks);
    return rc;
}

/* Totals by call site of the blocks live after `at`; every site gets an id. */
static int
site_totals(struct plot_ctx *p, size_t device, size_t at, struct site_total **sites, size_t *ns)
{
    int rc = analysis_sites_at(p->snap, device, at, sites, ns);
    for (size_t i = 0; rc == 0 && i < *ns; i++)
        if (site_id(p, (*sites)[i].stack) < 0)
            rc = -1;
    return rc;
}

/* Spreads totals into arrays indexed by site id (sized for every site known now). */
static int
by_site(struct plot_ctx *p, const struct site_total *sites, size_t ns, uint64_t **bytes,
        uint64_t **counts)
{
    *bytes = calloc(p->site_count + 1, sizeof(uint64_t));
    *counts = calloc(p->site_count + 1, sizeof(uint64_t));
    if (*bytes == NULL || *counts == NULL)
        return -1;
    for (size_t i = 0; i < ns; i++) {
        long id = site_id(p, sites[i].stack);
        (*bytes)[id] = sites[i].bytes;
        (*counts)[id] = sites[i].count;
    }
    return 0;
}

/* The device's peaks and totals, its library report and its timeline. */
static void
emit_overview(struct plot_ctx *p, size_t device, const struct device_analysis *a)
{
    FILE *out = p->out;
    char where_r[160], where_l[160], s[6][32];
    where_text(where_r, sizeof(where_r), p->snap, device, a->peak_reserved_at);
    where_text(where_l, sizeof(where_l), p->snap, device, a->peak_live_at);
    fprintf(out,
            "{\"device\": %zu, \"count\": %zu, \"dropped\": %" PRIu64 ", \"oom_count\": %zu, "
            "\"peak_reserved\": %" PRIu64 ", \"peak_reserved_at\": %zu, \"peak_live\": %" PRIu64
            ", \"peak_live_at\": %zu, \"end_reserved\": %" PRIu64 ", \"end_live\": %" PRIu64
            ", \"free_total\": %" PRIu64 ", \"largest_free\": %" PRIu64 ", ",
            device, a->count, a->dropped, a->oom_count, a->peak_reserved, a->peak_reserved_at,
            a->peak_live, a->peak_live_at, a->table_reserved, a->end_live, a->free_total,
            a->largest_free);
    fprintf(out, "\"peak_reserved_where\": ");
    cli_json_string(out, where_r);
    fprintf(out, ", \"peak_live_where\": ");
    cli_json_string(out, where_l);
    fprintf(out,
            ", \"text\": {\"peak_reserved\": \"%s\", \"peak_live\": \"%s\", \"end_reserved\": "
            "\"%s\", \"end_live\": \"%s\", \"free_total\": \"%s\", \"largest_free\": \"%s\"}, ",
            cli_size(a->peak_reserved, s[0], 32), cli_size(a->peak_live, s[1], 32),
            cli_size(a->table_reserved, s[2], 32), cli_size(a->end_live, s[3], 32),
            cli_size(a->free_total, s[4], 32), cli_size(a->largest_free, s[5], 32));
    char *libraries = library_report_text(p->snap, device);
    if (libraries != NULL) {
        fprintf(out, "\"libraries_text\": ");
        cli_json_string(out, libraries);
        fprintf(out, ", ");
        free(libraries);
    }
    emit_series(out, a);
}

/* The states offered in the segment map: start, peaks, end, and evenly spaced points. */
static int
emit_states(struct plot_ctx *p, size_t device, const struct device_analysis *a)
{
    uint64_t at[PLOT_MAX_STATES + 4];
    size_t nat = 0;
    at[nat++] = 0;
    at[nat++] = a->peak_live_at;
    at[nat++] = a->peak_reserved_at;
    at[nat++] = a->count;
    for (size_t k = 1; k < PLOT_MAX_STATES - 4; k++)
        at[nat++] = a->count * k / (PLOT_MAX_STATES - 4);
    qsort(at, nat, sizeof(at[0]), cmp_u64);
    fprintf(p->out, ", \"states\": [");
    size_t emitted = 0, initial = 0;
    int rc = 0;
    for (size_t i = 0; i < nat && rc == 0; i++) {
        if (i > 0 && at[i] == at[i - 1])
            continue;
        char label[256], where[160];
        where_text(where, sizeof(where), p->snap, device, (size_t)at[i]);
        snprintf(label, sizeof(label), "after %" PRIu64 " entries (%s)%s%s", at[i], where,
                 at[i] == a->peak_live_at ? " - live peak" : "", at[i] == a->count ? " - end" : "");
        if (at[i] == a->peak_live_at)
            initial = emitted;
        fprintf(p->out, "%s", emitted ? ", " : "");
        rc = emit_state(p, device, (size_t)at[i], label);
        emitted++;
    }
    fprintf(p->out, "], \"initial_state\": %zu", initial);
    return rc;
}

/* Bytes and counts by site id, live at the end and at the live peak. */
struct plot_sites {
    uint64_t *end_bytes, *end_counts, *peak_bytes, *peak_counts;
};

static int
plot_sites_collect(struct plot_ctx *p, size_t device, const struct device_analysis *a,
                   struct plot_sites *ps)
{
    struct site_total *end_sites = NULL, *peak_sites = NULL;
    size_t n_end = 0, n_peak = 0;
    memset(ps, 0, sizeof(*ps));
    int rc = site_totals(p, device, a->count, &end_sites, &n_end);
    if (rc == 0)
        rc = site_totals(p, device, a->peak_live_at, &peak_sites, &n_peak);
    if (rc == 0)
        rc = by_site(p, end_sites, n_end, &ps->end_bytes, &ps->end_counts);
    if (rc == 0)
        rc = by_site(p, peak_sites, n_peak, &ps->peak_bytes, &ps->peak_counts);
    free(end_sites);
    free(peak_sites);
    return rc;
}

static void
plot_sites_free(struct plot_sites *ps)
{
    free(ps->end_bytes);
    free(ps->end_counts);
    free(ps->peak_bytes);
    free(ps->peak_counts);
}

/* Every site: its bytes and its frames (innermost 24). */
static void
emit_site_list(struct plot_ctx *p, const struct plot_sites *ps)
{
    FILE *out = p->out;
    fprintf(out, ", \"sites\": [");
    for (size_t i = 0; i < p->site_count; i++) {
        fprintf(out,
                "%s{\"end_bytes\": %" PRIu64 ", \"end_count\": %" PRIu64
                ", \"peak_bytes\": %" PRIu64 ", \"frames\": [",
                i ? ", " : "", ps->end_bytes[i], ps->end_counts[i], ps->peak_bytes[i]);
        const struct snap_stack *st = &p->snap->stacks[p->site_stack[i]];
        for (uint32_t k = 0; p->site_stack[i] != 0 && k < st->count && k < 24; k++) {
            char text[1024];
            cli_frame_text(p->snap, p->snap->stack_frames[st->first + k], text, sizeof(text));
            fprintf(out, "%s", k ? ", " : "");
            cli_json_string(out, text);
        }
        fprintf(out, "]}");
    }
    fprintf(out, "]");
}

/* The top sites' ids: by bytes live at the end, then at the peak. */
static void
emit_top(struct plot_ctx *p, const struct plot_sites *ps)
{
    fprintf(p->out, ", \"top\": [");
    size_t shown = 0;
    bool *used = calloc(p->site_count + 1, sizeof(bool));
    for (int pass = 0; used != NULL && pass < 2; pass++) {
        const uint64_t *by = pass == 0 ? ps->end_bytes : ps->peak_bytes;
        while (shown < PLOT_TOP_SITES) {
            size_t best = SIZE_MAX;
            for (size_t i = 0; i < p->site_count; i++)
                if (!used[i] && by[i] > 0 && (best == SIZE_MAX || by[i] > by[best]))
                    best = i;
            if (best == SIZE_MAX)
                break;
            used[best] = true;
            fprintf(p->out, "%s%zu", shown ? "," : "", best);
            shown++;
        }
    }
    free(used);
    fprintf(p->out, "]}");
}

static int
emit_device(struct plot_ctx *p, size_t device)
{
    struct device_analysis a;
    if (analysis_run(p->snap, device, true, &a) != 0)
        return -1;
    span_map_init(&p->site_of);
    p->site_count = 0;
    emit_overview(p, device, &a);
    int rc = emit_states(p, device, &a);
    struct plot_sites ps = {0};
    if (rc == 0)
        rc = plot_sites_collect(p, device, &a, &ps);
    if (rc == 0) {
        emit_site_list(p, &ps);
        emit_top(p, &ps);
    }
    plot_sites_free(&ps);
    span_map_free(&p->site_of);
    free(p->site_stack);
    p->site_stack = NULL;
    analysis_free(&a);
    return rc;
}

/* The report's header: the file, who wrote it, and for several files summary's cross-rank view
 * (as text). Returns CLI_OK, or CLI_BADUSE when the cross-rank view failed. */
static int
emit_header(FILE *out, const struct snapshot *snap, const struct cli_input *in)
{
    int status = CLI_OK;
    fprintf(out, "{\"file\": ");
    cli_json_string(out, in->paths[0]);
    char meta[512] = "written by PyTorch (no cuprof section)";
    if (snap->cuprof.present)
        snprintf(meta, sizeof(meta),
                 "cuprof %s, mode %s, pid %" PRId64 ", rank %" PRId64 ", host %s",
                 snap->cuprof.version ? snap->cuprof.version : "?",
                 snap->cuprof.mode ? snap->cuprof.mode : "?", snap->cuprof.pid, snap->cuprof.rank,
                 snap->cuprof.host ? snap->cuprof.host : "?");
    fprintf(out, ", \"meta\": ");
    cli_json_string(out, meta);
    if (in->count > 1) {
        char *text = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&text, &len);
        int crc =
            mem != NULL ? cross_rank_print(mem, in->paths, in->count, in->all_frames, 10, 0) : -1;
        if (mem != NULL)
            fclose(mem);
        if (crc != 0)
            status = CLI_BADUSE;
        if (text != NULL) {
            fprintf(out, ", \"cross_rank_text\": ");
            cli_json_string(out, text);
        }
        free(text);
    }
    return status;
}

/* The report's data: the header, then every device of the first file. */
static int
emit_report(FILE *out, const struct snapshot *snap, const struct cli_input *in)
{
    struct plot_ctx p = {out, snap, {NULL, 0, 0}, NULL, 0};
    int status = emit_header(out, snap, in);
    fprintf(out, ", \"devices\": [");
    size_t ndev = analysis_device_count(snap);
    for (size_t d = 0; d < ndev; d++) {
        fprintf(out, "%s", d ? ",\n" : "\n");
        if (emit_device(&p, d) != 0) {
            fprintf(stderr, "cuprof: %s: out of memory\n", in->paths[0]);
            status = CLI_BADUSE;
            break;
        }
    }
    fprintf(out, "]}");
    return status;
}

int
cmd_plot(int argc, char **argv)
{
    const char *output = "report.html";
    struct cli_input in;
    if (!cli_begin(&cmd_plot_command, argc, argv, &output, &in))
        return in.status;
    const char *marker = "/*CUPROF_DATA*/";
    const char *split = strstr(report_html, marker);
    FILE *out = fopen(output, "w");
    if (out == NULL || split == NULL) {
        fprintf(stderr, "cuprof: %s: %s\n", output,
                out ? "bad built-in template" : strerror(errno));
        if (out != NULL)
            fclose(out);
        cli_input_free(&in);
        return CLI_BADUSE;
    }
    /* The template, with the data where its marker stands. */
    fwrite(report_html, 1, (size_t)(split - report_html), out);
    int status = emit_report(out, in.snap[0], &in);
    fputs(split + strlen(marker), out);
    if (fclose(out) != 0) {
        fprintf(stderr, "cuprof: %s: %s\n", output, strerror(errno));
        status = CLI_BADUSE;
    }
    cli_input_free(&in);
    if (status != CLI_OK)
        remove(output);
    return status;
}
