/* cmd_flamegraph.c: `cuprof flamegraph FILE`: folded stacks of live bytes for flamegraph.pl,
 *   speedscope and inferno; with --html, the report page's flame graph alone. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli/analysis.h"
#include "cli/cli_commands.h"
#include "cli/cli_options.h"
#include "cli/cli_util.h"
#include "cli/out_file.h"
#include "cli/plot_data.h"
#include "cli/report_html.h"

static const char flamegraph_text[] =
    "usage: cuprof flamegraph [--at peak|end|ENTRY] [--device N] [--all-frames] FILE\n"
    "       cuprof flamegraph --html [-o flamegraph.html] [--at peak|end] [--device N] FILE\n\n"
    "Prints folded stacks, one line per call site: the frames from outermost to innermost\n"
    "joined by ';', a space, and the live bytes allocated there (requested sizes), as\n"
    "flamegraph.pl, inferno-flamegraph and speedscope read them:\n"
    "  cuprof flamegraph run.pickle | flamegraph.pl --countname bytes > live.svg\n"
    "Stacks that differ only in frames of the allocation machinery (cuprof, CUDA, PyTorch's\n"
    "allocator, the Python interpreter, libc start-up) are one line, without those frames.\n"
    "--html writes one self-contained page (no network) with the flame graph drawn as an icicle\n"
    "of live bytes at the peak, at the end and of the bytes allocated over the run, per device:\n"
    "click a frame to zoom, search to highlight, hover for bytes and share.\n"
    "\n";

static const struct cli_option flamegraph_options[] = {
    {"at", 'a', "WHEN",
     "peak: the live peak of the history (default)\n"
     "end: the end of the history (what was still allocated when FILE was written)\n"
     "ENTRY: just after trace entry number ENTRY (0-based)",
     0},
    {"device", 'd', "N",
     "the device (default: every device, prefixed with a \"device N\" frame when the snapshot "
     "has more than one)",
     0},
    {"all-frames", 0, NULL, "hide no frame: one line per whole stack", CLI_ALL_FRAMES},
    {"html", 'H', NULL, "write the flame graph as a self-contained HTML page", 0},
    {"output", 'o', "FILE",
     "where to write (default: standard output; flamegraph.html with --html). A file is "
     "replaced only once all of it is written",
     0},
    {0},
};

struct flamegraph_args {
    const char *at;
    uint64_t device;
    bool html;
    const char *output;
};

static int
flamegraph_option(void *ctx, int key, const char *value)
{
    struct flamegraph_args *a = ctx;
    uint64_t entry;
    if (key == 'a') {
        a->at = value;
        if (strcmp(value, "peak") != 0 && strcmp(value, "end") != 0 &&
            !cli_parse_u64(value, &entry))
            return cli_usage_error("flamegraph",
                                   "--at wants peak, end or an entry number, not \"%s\"", value);
    } else if (key == 'd' && !cli_parse_u64(value, &a->device)) {
        return cli_usage_error("flamegraph", "--device wants a number, not \"%s\"", value);
    } else if (key == 'H') {
        a->html = true;
    } else if (key == 'o') {
        a->output = value;
    }
    return CLI_OK;
}

const struct cli_command cmd_flamegraph_command = {
    .name = "flamegraph",
    .text = flamegraph_text,
    .options = flamegraph_options,
    .unknown = "unknown option",
    .operands = 1,
    .operands_error = "expected one snapshot FILE",
    .option = flamegraph_option,
    .read = 1,
    .filter_frames = true,
};

/* Frame text without the folded format's separators. */
static void
clean(char *s)
{
    for (; *s; s++)
        if (*s == ';' || *s == '\n')
            *s = ',';
}

static int
fold_device(FILE *out, const struct snapshot *snap, size_t device, const char *at_text, bool prefix)
{
    struct device_analysis a;
    if (analysis_run(snap, device, false, &a) != 0)
        return -1;
    size_t at = a.peak_live_at;
    uint64_t entry;
    if (strcmp(at_text, "end") == 0)
        at = a.count;
    else if (cli_parse_u64(at_text, &entry))
        at = entry + 1 > a.count ? a.count : (size_t)entry + 1;
    size_t nsites;
    struct site_total *sites;
    if (analysis_sites_at(snap, device, at, &sites, &nsites) != 0)
        return -1;
    for (size_t i = 0; i < nsites; i++) {
        char *line = cli_stack_line(snap, sites[i].stack, "\x1f", true);
        if (line == NULL) {
            free(sites);
            return -1;
        }
        clean(line);
        for (char *p = line; *p; p++)
            if (*p == '\x1f')
                *p = ';';
        if (prefix)
            fprintf(out, "device %zu;", device);
        fprintf(out, "%s %" PRIu64 "\n", line, sites[i].bytes);
        free(line);
    }
    free(sites);
    return 0;
}

/* --device and --at name what the file holds: a device in it, an entry of its history (of every
 * device shown). CLI_OK, or CLI_BADUSE after one line naming what there is. */
static int
check_args(const char *path, const struct snapshot *snap, const struct flamegraph_args *args)
{
    if (args->device != UINT64_MAX && analysis_check_device(path, snap, args->device) != CLI_OK)
        return CLI_BADUSE;
    uint64_t entry;
    if (!cli_parse_u64(args->at, &entry))
        return CLI_OK;
    char safe[1024];
    size_t ndev = analysis_device_count(snap);
    for (size_t d = 0; d < ndev; d++) {
        if ((args->device != UINT64_MAX && d != args->device) || !analysis_device_present(snap, d))
            continue;
        size_t count = d < snap->device_count ? snap->device_traces[d].count : 0;
        if (entry < count)
            continue;
        if (count == 0)
            fprintf(stderr, "cuprof: %s: --at %" PRIu64 ": device %zu has no history\n",
                    cli_term(path, safe, sizeof safe), entry, d);
        else
            fprintf(stderr,
                    "cuprof: %s: --at %" PRIu64 ": device %zu's history has entries 0 to %zu\n",
                    cli_term(path, safe, sizeof safe), entry, d, count - 1);
        return CLI_BADUSE;
    }
    return CLI_OK;
}

/* The flame graph page: the report page's data for the file's devices, without the history. */
static int
write_html(FILE *out, struct snapshot *snap, const struct cli_input *in,
           const struct flamegraph_args *args)
{
    struct plot_page page;
    if (plot_page_begin(&page, out, report_html) != 0)
        return CLI_BADUSE;
    emitter_begin_dict(page.e);
    plot_data_header(&page, "flamegraph", "single", in->paths[0]);
    cli_json_key_string(page.e, "flame_at", strcmp(args->at, "end") == 0 ? "end" : "peak");
    emitter_key(page.e, "runs");
    emitter_begin_list(page.e);
    struct plot_run_options opt = {.history = false,
                                   .all_frames = in->all_frames,
                                   .name = "",
                                   .device = args->device == UINT64_MAX ? -1 : (long)args->device};
    int rc = plot_data_run(&page, snap, in->paths[0], &opt, NULL);
    emitter_end(page.e);
    emitter_end(page.e);
    if (!plot_page_end(&page, NULL, NULL))
        rc = -1;
    return rc == 0 ? CLI_OK : CLI_BADUSE;
}

/* The folded lines of every device shown. */
static int
write_folded(FILE *out, const struct snapshot *snap, const struct cli_input *in,
             const struct flamegraph_args *args)
{
    size_t ndev = analysis_device_count(snap), shown = 0;
    for (size_t d = 0; d < ndev; d++)
        shown += analysis_device_present(snap, d);
    for (size_t d = 0; d < ndev; d++) {
        if ((args->device != UINT64_MAX && d != args->device) || !analysis_device_present(snap, d))
            continue;
        if (fold_device(out, snap, d, args->at, args->device == UINT64_MAX && shown > 1) != 0) {
            char safe[1024];
            fprintf(stderr, "cuprof: %s: out of memory\n",
                    cli_term(in->paths[0], safe, sizeof safe));
            return CLI_BADUSE;
        }
    }
    return CLI_OK;
}

int
cmd_flamegraph(int argc, char **argv)
{
    struct flamegraph_args args = {.at = "peak", .device = UINT64_MAX};
    struct cli_input in;
    if (!cli_parse(&cmd_flamegraph_command, argc, argv, &args, &in))
        return in.status;
    uint64_t entry;
    if (args.html && cli_parse_u64(args.at, &entry))
        return cli_usage_error("flamegraph",
                               "--html shows the peak, the end and the run's allocations: --at "
                               "takes peak or end there, not an entry");
    /* The page keeps every frame and names call sites itself (plot_data.h). */
    int status = args.html                                ? cli_load(in.paths[0], &in.snap[0])
                 : cli_read(&cmd_flamegraph_command, &in) ? CLI_OK
                                                          : in.status;
    if (status == CLI_OK)
        status = check_args(in.paths[0], in.snap[0], &args);
    struct out_file out;
    const char *output = args.output != NULL ? args.output : args.html ? "flamegraph.html" : "-";
    if (status == CLI_OK && out_file_open(&out, output) != 0)
        status = CLI_BADUSE;
    if (status == CLI_OK) {
        status = args.html ? write_html(out.f, in.snap[0], &in, &args)
                           : write_folded(out.f, in.snap[0], &in, &args);
        if (out_file_end(&out, status == CLI_OK) != 0)
            status = CLI_BADUSE;
    }
    cli_input_free(&in);
    return status;
}
