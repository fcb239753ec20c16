/* cmd_plot.c: `cuprof plot FILE -o report.html`: one self-contained HTML page (the viewer template
 *   compiled into the binary, with the snapshot's numbers embedded as JSON). */
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
#include "cli/ranges.h"
#include "cli/out_file.h"
#include "cli/report_html.h"

static const char plot_text[] =
    "usage: cuprof plot [-o report.html] [--all-frames] FILE...\n\n"
    "Writes one self-contained HTML file (no network, no CDN) showing, per device: the\n"
    "allocated and reserved timeline (click it to pick an event), the segment map at the chosen\n"
    "event with blocks coloured by call site (hover for sizes and stacks), and the top call\n"
    "sites table; with NVTX ranges, summary's phases section and the ranges as bands under the\n"
    "timeline. The peaks it shows are those `cuprof summary` prints. Stacks that differ only\n"
    "in frames of the allocation machinery (cuprof, CUDA, PyTorch's allocator, the Python\n"
    "interpreter, libc start-up) are one call site, shown from the user's first frame.\n"
    "Several files (a job's ranks): the report opens with summary's cross-rank view (rank,\n"
    "peaks, OOMs, fragmentation, spread, outliers, the call sites that differ most), and the\n"
    "per-device sections show the first FILE.\n\n";

static const struct cli_option plot_options[] = {
    {"output", 'o', "FILE",
     "where to write (default: report.html; - for standard output). A file is replaced only "
     "once the whole report is written",
     0},
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
    struct emitter *e;
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
emit_series(struct emitter *e, const struct device_analysis *a)
{
    size_t n = a->count + 1;
    size_t step = (n + PLOT_MAX_POINTS - 1) / PLOT_MAX_POINTS;
    const char *names[] = {"index", "live", "reserved"};
    emitter_key(e, "series");
    emitter_begin_dict(e);
    for (int k = 0; k < 3; k++) {
        emitter_key(e, names[k]);
        emitter_begin_list(e);
        for (size_t i = 0; i < n; i += step) {
            uint64_t v = 0;
            for (size_t j = i; j < i + step && j < n; j++) {
                uint64_t x = k == 0 ? i : k == 1 ? a->live_series[j] : a->reserved_series[j];
                if (x > v)
                    v = x;
            }
            emitter_u64(e, v);
        }
        emitter_end(e);
    }
    emitter_end(e);
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

/* "segments": [addr, size, is_small, stream] per segment (stream 0 when unknown). */
static void
emit_segment_rows(struct plot_ctx *p, const struct span_map_item *items, size_t nseg)
{
    emitter_key(p->e, "segments");
    emitter_begin_list(p->e);
    for (size_t i = 0; i < nseg; i++) {
        uint32_t tag = items[i].stack;
        uint64_t stream = 0;
        if (tag != (ANALYSIS_SEGMENT_UNKNOWN) && (tag >> 1) < p->snap->segment_count)
            stream = p->snap->segments[tag >> 1].stream;
        emitter_begin_list(p->e);
        emitter_u64(p->e, items[i].addr);
        emitter_u64(p->e, items[i].size);
        emitter_int(p->e, tag & 1);
        emitter_u64(p->e, stream);
        emitter_end(p->e);
    }
    emitter_end(p->e);
}

/* "blocks": [addr, size, site id] per block, the largest PLOT_MAX_BLOCKS. -1 on OOM. */
static int
emit_block_rows(struct plot_ctx *p, struct span_map_item *blocks, size_t nb)
{
    if (nb > PLOT_MAX_BLOCKS) {
        qsort(blocks, nb, sizeof(*blocks), cmp_size_desc);
        nb = PLOT_MAX_BLOCKS;
    }
    int rc = 0;
    emitter_key(p->e, "blocks");
    emitter_begin_list(p->e);
    for (size_t i = 0; i < nb; i++) {
        long site = site_id(p, blocks[i].stack);
        if (site < 0) {
            rc = -1;
            break;
        }
        emitter_begin_list(p->e);
        emitter_u64(p->e, blocks[i].addr);
        emitter_u64(p->e, blocks[i].size);
        emitter_int(p->e, site);
        emitter_end(p->e);
    }
    emitter_end(p->e);
    return rc;
}

static int
emit_state(struct plot_ctx *p, size_t device, size_t at, const char *label)
{
    struct emitter *e = p->e;
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
    emitter_begin_dict(e);
    cli_json_key_string(e, "label", label);
    cli_json_key_u64(e, "at", at);
    cli_json_key_u64(e, "reserved", reserved);
    cli_json_key_u64(e, "live", live);
    emit_segment_rows(p, items, nseg);
    free(items);
    int rc = emit_block_rows(p, blocks, nb);
    free(blocks);
    emitter_end(e);
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

/* Sizes as PyTorch's format_size prints them, for the page to show. */
static void
emit_size_texts(struct emitter *e, const struct device_analysis *a)
{
    const char *keys[] = {"peak_reserved", "peak_live",  "end_reserved",
                          "end_live",      "free_total", "largest_free"};
    uint64_t values[] = {a->peak_reserved, a->peak_live,  a->table_reserved,
                         a->end_live,      a->free_total, a->largest_free};
    char text[32];
    emitter_key(e, "text");
    emitter_begin_dict(e);
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
        cli_json_key_string(e, keys[k], cli_size(values[k], text, sizeof(text)));
    emitter_end(e);
}

/* The device's peaks and totals, its library report and its timeline (the device dict is open). */
static void
emit_overview(struct plot_ctx *p, size_t device, const struct device_analysis *a)
{
    struct emitter *e = p->e;
    char where[160];
    cli_json_key_u64(e, "device", device);
    cli_json_key_u64(e, "count", a->count);
    cli_json_key_u64(e, "dropped", a->dropped);
    cli_json_key_u64(e, "oom_count", a->oom_count);
    cli_json_key_u64(e, "peak_reserved", a->peak_reserved);
    cli_json_key_u64(e, "peak_reserved_at", a->peak_reserved_at);
    cli_json_key_u64(e, "peak_live", a->peak_live);
    cli_json_key_u64(e, "peak_live_at", a->peak_live_at);
    cli_json_key_u64(e, "end_reserved", a->table_reserved);
    cli_json_key_u64(e, "end_live", a->end_live);
    cli_json_key_u64(e, "free_total", a->free_total);
    cli_json_key_u64(e, "largest_free", a->largest_free);
    where_text(where, sizeof(where), p->snap, device, a->peak_reserved_at);
    cli_json_key_string(e, "peak_reserved_where", where);
    where_text(where, sizeof(where), p->snap, device, a->peak_live_at);
    cli_json_key_string(e, "peak_live_where", where);
    emit_size_texts(e, a);
    char *libraries = library_report_text(p->snap, device);
    if (libraries != NULL) {
        cli_json_key_string(e, "libraries_text", libraries);
        free(libraries);
    }
    emit_series(e, a);
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
    emitter_key(p->e, "states");
    emitter_begin_list(p->e);
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
        rc = emit_state(p, device, (size_t)at[i], label);
        emitted++;
    }
    emitter_end(p->e);
    cli_json_key_u64(p->e, "initial_state", initial);
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
    struct emitter *e = p->e;
    emitter_key(e, "sites");
    emitter_begin_list(e);
    for (size_t i = 0; i < p->site_count; i++) {
        emitter_begin_dict(e);
        cli_json_key_u64(e, "end_bytes", ps->end_bytes[i]);
        cli_json_key_u64(e, "end_count", ps->end_counts[i]);
        cli_json_key_u64(e, "peak_bytes", ps->peak_bytes[i]);
        emitter_key(e, "frames");
        emitter_begin_list(e);
        const struct snap_stack *st = &p->snap->stacks[p->site_stack[i]];
        for (uint32_t k = 0; p->site_stack[i] != 0 && k < st->count && k < 24; k++) {
            char text[1024];
            cli_frame_text(p->snap, p->snap->stack_frames[st->first + k], text, sizeof(text));
            cli_json_string(e, text);
        }
        emitter_end(e);
        emitter_end(e);
    }
    emitter_end(e);
}

/* The top sites' ids: by bytes live at the end, then at the peak. */
static void
emit_top(struct plot_ctx *p, const struct plot_sites *ps)
{
    emitter_key(p->e, "top");
    emitter_begin_list(p->e);
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
            emitter_u64(p->e, best);
            shown++;
        }
    }
    free(used);
    emitter_end(p->e);
}

static int
emit_device(struct plot_ctx *p, size_t device)
{
    struct device_analysis a;
    if (analysis_run(p->snap, device, true, &a) != 0)
        return -1;
    span_map_init(&p->site_of);
    p->site_count = 0;
    emitter_begin_dict(p->e);
    emit_overview(p, device, &a);
    struct device_ranges phases;
    int rc = ranges_run(p->snap, device, &a, &phases);
    if (rc == 0) {
        ranges_emit(p->e, p->snap, device, &a, &phases);
        ranges_free(&phases);
        rc = emit_states(p, device, &a);
    }
    struct plot_sites ps = {0};
    if (rc == 0)
        rc = plot_sites_collect(p, device, &a, &ps);
    if (rc == 0) {
        emit_site_list(p, &ps);
        emit_top(p, &ps);
    }
    emitter_end(p->e);
    plot_sites_free(&ps);
    span_map_free(&p->site_of);
    free(p->site_stack);
    p->site_stack = NULL;
    analysis_free(&a);
    return rc;
}

/* The report's header: the file, who wrote it, and for several files summary's cross-rank view
 * (as text, made before the output was opened). */
static void
emit_header(struct emitter *e, const struct snapshot *snap, const struct cli_input *in,
            const char *cross_rank)
{
    cli_json_key_string(e, "file", in->paths[0]);
    char meta[512] = "written by PyTorch (no cuprof section)";
    if (snap->cuprof.present)
        snprintf(meta, sizeof(meta),
                 "cuprof %s, mode %s, pid %" PRId64 ", rank %" PRId64 ", host %s",
                 snap->cuprof.version ? snap->cuprof.version : "?",
                 snap->cuprof.mode ? snap->cuprof.mode : "?", snap->cuprof.pid, snap->cuprof.rank,
                 snap->cuprof.host ? snap->cuprof.host : "?");
    cli_json_key_string(e, "meta", meta);
    if (cross_rank != NULL)
        cli_json_key_string(e, "cross_rank_text", cross_rank);
}

/* Summary's cross-rank view of every file, as text: it reads every file, so it is made before
 * the output is touched. Returns CLI_OK, or CLI_BADUSE when a file could not be read (said). */
static int
cross_rank_text(const struct cli_input *in, char **text)
{
    size_t len = 0;
    *text = NULL;
    FILE *mem = open_memstream(text, &len);
    int crc = mem != NULL ? cross_rank_print(mem, in->paths, in->count, in->all_frames, 10, 0) : -1;
    if (mem != NULL)
        fclose(mem);
    if (crc < 0 || mem == NULL)
        fprintf(stderr, "cuprof: plot: out of memory\n");
    if (crc == 0)
        return CLI_OK;
    free(*text);
    *text = NULL;
    return CLI_BADUSE;
}

/* The report's data: the header, then every device of the first file. */
static int
emit_report(FILE *out, const struct snapshot *snap, const struct cli_input *in,
            const char *cross_rank)
{
    struct plot_ctx p = {cli_json_open(out), snap, {NULL, 0, 0}, NULL, 0};
    if (p.e == NULL)
        return CLI_BADUSE;
    int status = CLI_OK;
    emitter_begin_dict(p.e);
    emit_header(p.e, snap, in, cross_rank);
    emitter_key(p.e, "devices");
    emitter_begin_list(p.e);
    size_t ndev = analysis_device_count(snap);
    for (size_t d = 0; d < ndev; d++) {
        if (!analysis_device_present(snap, d))
            continue;
        if (emit_device(&p, d) != 0) {
            char safe[1024];
            fprintf(stderr, "cuprof: %s: out of memory\n",
                    cli_term(in->paths[0], safe, sizeof safe));
            status = CLI_BADUSE;
            break;
        }
    }
    emitter_end(p.e);
    emitter_end(p.e);
    if (!cli_json_close(p.e))
        status = CLI_BADUSE;
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
    char *cross = NULL;
    struct out_file out;
    int status = split == NULL ? CLI_BADUSE : CLI_OK;
    if (split == NULL)
        fprintf(stderr, "cuprof: plot: bad built-in template\n");
    /* Every input is read before the output is touched. */
    if (status == CLI_OK && in.count > 1)
        status = cross_rank_text(&in, &cross);
    if (status == CLI_OK && out_file_open(&out, output) != 0)
        status = CLI_BADUSE;
    if (status != CLI_OK) {
        free(cross);
        cli_input_free(&in);
        return status;
    }
    /* The template, with the data where its marker stands. */
    fwrite(report_html, 1, (size_t)(split - report_html), out.f);
    status = emit_report(out.f, in.snap[0], &in, cross);
    fputs(split + strlen(marker), out.f);
    if (out_file_end(&out, status == CLI_OK) != 0)
        status = CLI_BADUSE;
    free(cross);
    cli_input_free(&in);
    return status;
}
