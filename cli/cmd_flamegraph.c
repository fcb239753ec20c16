/* cmd_flamegraph.c: `cuprof flamegraph FILE`: folded stacks of live bytes for flamegraph.pl,
 *   speedscope and inferno. */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli/analysis.h"
#include "cli/cli_commands.h"
#include "cli/cli_util.h"
#include "cli/frame_filter.h"

static const char usage_text[] =
    "usage: cuprof flamegraph [--at peak|end|ENTRY] [--device N] [--all-frames] FILE\n\n"
    "Prints folded stacks, one line per call site: the frames from outermost to innermost\n"
    "joined by ';', a space, and the live bytes allocated there (requested sizes), as\n"
    "flamegraph.pl, inferno-flamegraph and speedscope read them:\n"
    "  cuprof flamegraph run.pickle | flamegraph.pl --countname bytes > live.svg\n"
    "Stacks that differ only in frames of the allocation machinery (cuprof, CUDA, PyTorch's\n"
    "allocator, the Python interpreter, libc start-up) are one line, without those frames.\n"
    "\n"
    "  --at peak     the live peak of the history (default)\n"
    "  --at end      the end of the history (what was still allocated when FILE was written)\n"
    "  --at ENTRY    just after trace entry number ENTRY (0-based)\n"
    "  --device N    the device (default: every device, prefixed with a \"device N\" frame when\n"
    "                the snapshot has more than one)\n"
    "  --all-frames  hide no frame: one line per whole stack\n"
    "  -h, --help    this text\n";

/* Frame text without the folded format's separators. */
static void
clean(char *s)
{
    for (; *s; s++)
        if (*s == ';' || *s == '\n')
            *s = ',';
}

static int
fold_device(const struct snapshot *snap, size_t device, const char *at_text, bool prefix)
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
            printf("device %zu;", device);
        printf("%s %" PRIu64 "\n", line, sites[i].bytes);
        free(line);
    }
    free(sites);
    return 0;
}

int
cmd_flamegraph(int argc, char **argv)
{
    static const struct option options[] = {
        {"at", required_argument, NULL, 'a'},
        {"device", required_argument, NULL, 'd'},
        {"all-frames", no_argument, NULL, 'A'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *at = "peak";
    bool all_frames = false;
    uint64_t device = UINT64_MAX, entry;
    struct cli_options o = {.cmd = "flamegraph",
                            .usage = usage_text,
                            .shortopts = "a:d:h",
                            .longopts = options,
                            .unknown = "unknown option",
                            .operands = 1,
                            .operands_error = "expected one snapshot FILE"};
    int c;
    while ((c = cli_next_option(&o, argc, argv)) != -1) {
        switch (c) {
        case 'a':
            at = optarg;
            if (strcmp(at, "peak") != 0 && strcmp(at, "end") != 0 && !cli_parse_u64(at, &entry))
                return cli_usage_error("flamegraph",
                                       "--at wants peak, end or an entry number, "
                                       "not \"%s\"",
                                       at);
            break;
        case 'd':
            if (!cli_parse_u64(optarg, &device))
                return cli_usage_error("flamegraph", "--device wants a number, not \"%s\"", optarg);
            break;
        case 'A':
            all_frames = true;
            break;
        }
    }
    if (o.finished)
        return o.status;
    struct snapshot *snap;
    int rc = frame_filter_load(argv[optind], all_frames, &snap);
    if (rc != CLI_OK)
        return rc;
    size_t ndev = analysis_device_count(snap);
    int status = CLI_OK;
    for (size_t d = 0; d < ndev; d++) {
        if (device != UINT64_MAX && d != device)
            continue;
        if (fold_device(snap, d, at, device == UINT64_MAX && ndev > 1) != 0) {
            fprintf(stderr, "cuprof: %s: out of memory\n", argv[optind]);
            status = CLI_BADUSE;
            break;
        }
    }
    snapshot_free(snap);
    return status;
}
