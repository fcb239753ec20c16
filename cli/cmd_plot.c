/* cmd_plot.c: `cuprof plot FILE... -o report.html`: one self-contained HTML page, the report
 *   viewer (viewer/, built into the binary) with the files' data in it (plot_data.h). */
#include <stdlib.h>
#include <string.h>

#include "cli/cli_commands.h"
#include "cli/cli_options.h"
#include "cli/cli_util.h"
#include "cli/cross_rank.h"
#include "cli/out_file.h"
#include "cli/plot_answers.h"
#include "cli/plot_data.h"
#include "cli/report_html.h"

static const char plot_text[] =
    "usage: cuprof plot [-o report.html] [--compare] [--no-history] [--all-frames] FILE...\n\n"
    "Writes one self-contained HTML file (no network) that shows, for every device:\n"
    "  - every allocation as a band over time, stacked and coloured by call site, with the\n"
    "    allocated and reserved lines, annotations and OOMs (wheel to zoom, drag to pan,\n"
    "    shift+drag a range; hover for a band's sizes, times and stack, click to pin it);\n"
    "  - the allocator's state after any trace entry (slider, arrow keys): segments, blocks,\n"
    "    the entry's stack and the counters there;\n"
    "  - flame graphs of live bytes at the peak, at the end and of the bytes allocated over the\n"
    "    run; the call sites, sortable and searchable; memory by library and the device's\n"
    "    footprint.\n"
    "The peaks it shows are those `cuprof summary` prints. Stacks that differ only in frames of\n"
    "the allocation machinery are one call site, shown from the user's first frame.\n"
    "Several files (a job's ranks): the page adds the cross-rank view (every rank's peaks and\n"
    "timeline, outliers marked, the call sites that differ most) and shows the first FILE in\n"
    "full. --compare A B: two runs side by side, both in full.\n\n";

static const struct cli_option plot_options[] = {
    {"output", 'o', "FILE",
     "where to write (default: report.html; - for standard output). A file is replaced only "
     "once the whole report is written",
     0},
    {"compare", 'c', NULL, "two files are two runs to put side by side (not ranks of one job)", 0},
    {"no-history", 'n', NULL,
     "leave the trace history out: figures, lines, call sites and flame graphs only, a page of "
     "a few hundred kB whatever the history's length",
     0},
    {"all-frames", 0, NULL, "hide no frame: a call site is a whole stack", CLI_ALL_FRAMES},
    {0},
};

struct plot_args {
    const char *output;
    bool compare, no_history;
};

static int
plot_option(void *ctx, int key, const char *value)
{
    struct plot_args *a = ctx;
    if (key == 'o')
        a->output = value;
    else if (key == 'c')
        a->compare = true;
    else if (key == 'n')
        a->no_history = true;
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
};

/* Analyses other commands will add (plot_data.h): none yet. */

/* Summary's cross-rank view of every file as JSON, made before the output is touched (it reads
 * every file). CLI_OK, or CLI_BADUSE when a file could not be read (said). */
static int
ranks_json(const struct cli_input *in, char **json)
{
    size_t len = 0;
    *json = NULL;
    FILE *mem = open_memstream(json, &len);
    struct emitter *e = mem != NULL ? cli_json_open(mem) : NULL;
    int rc = e != NULL ? cross_rank_emit(e, in->paths, in->count, in->all_frames, 25, 0) : -1;
    bool closed = cli_json_close(e);
    if (mem != NULL)
        fclose(mem);
    if (rc < 0 || !closed)
        fprintf(stderr, "cuprof: plot: out of memory\n");
    if (rc == 0 && closed)
        return CLI_OK;
    free(*json);
    *json = NULL;
    return CLI_BADUSE;
}

/* The page's runs: every file shown in full (the first, or both with --compare). */
static int
write_runs(struct plot_page *page, struct snapshot **snaps, const struct cli_input *in,
           const struct plot_args *args, size_t nruns)
{
    static const char *const names[] = {"A", "B"};
    emitter_key(page->e, "runs");
    emitter_begin_list(page->e);
    int rc = 0;
    for (size_t i = 0; i < nruns && rc == 0; i++) {
        struct plot_run_options opt = {.history = !args->no_history,
                                       .all_frames = in->all_frames,
                                       .name = nruns > 1 ? names[i] : "",
                                       .device = -1};
        rc = plot_data_run(page, snaps[i], in->paths[i], &opt, &plot_answers);
    }
    emitter_end(page->e);
    if (rc == 0 && nruns == 2 && plot_answers.diff != NULL)
        rc = plot_answers.diff(page->e, in->paths, in->all_frames);
    return rc;
}

static int
write_page(FILE *out, struct snapshot **snaps, const struct cli_input *in,
           const struct plot_args *args, size_t nruns, const char *ranks)
{
    struct plot_page page;
    if (plot_page_begin(&page, out, report_html) != 0)
        return CLI_BADUSE;
    const char *mode = args->compare ? "compare" : in->count > 1 ? "ranks" : "single";
    emitter_begin_dict(page.e);
    plot_data_header(&page, "report", mode, in->paths[0]);
    int rc = write_runs(&page, snaps, in, args, nruns);
    emitter_end(page.e);
    if (!plot_page_end(&page, "ranks", ranks))
        rc = -1;
    return rc == 0 ? CLI_OK : CLI_BADUSE;
}

int
cmd_plot(int argc, char **argv)
{
    struct plot_args args = {.output = "report.html"};
    struct cli_input in;
    if (!cli_parse(&cmd_plot_command, argc, argv, &args, &in))
        return in.status;
    if (args.compare && in.count != 2)
        return cli_usage_error("plot", "--compare takes two files, not %zu", in.count);
    size_t nruns = args.compare ? 2 : 1;
    struct snapshot *snaps[2] = {NULL, NULL};
    char *ranks = NULL;
    struct out_file out;
    /* Every input is read before the output is touched. */
    int status = in.count > 1 ? ranks_json(&in, &ranks) : CLI_OK;
    for (size_t i = 0; i < nruns && status == CLI_OK; i++)
        status = cli_load(in.paths[i], &snaps[i]);
    if (status == CLI_OK && out_file_open(&out, args.output) != 0)
        status = CLI_BADUSE;
    if (status == CLI_OK) {
        status = write_page(out.f, snaps, &in, &args, nruns, ranks);
        if (out_file_end(&out, status == CLI_OK) != 0)
            status = CLI_BADUSE;
    }
    for (size_t i = 0; i < nruns; i++)
        snapshot_free(snaps[i]);
    free(ranks);
    return status;
}
