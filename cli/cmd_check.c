/* cmd_check.c: `cuprof check FILE... [--baseline OLD] [budgets]`: a memory gate for CI. Each
 *   FILE is held against the budgets (check_budget.h), one line per budget crossed naming the call
 *   site that grew most; exit 1 when any was crossed. The same results as JSON or JUnit XML. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/check_budget.h"
#include "cli/check_report.h"
#include "cli/cli_commands.h"
#include "cli/cli_options.h"
#include "cli/cli_util.h"
#include "cli/frame_filter.h"
#include "cli/run_diff.h"
#include "snapshot/snapshot_oom.h"

static const char check_text[] =
    "usage: cuprof check [--baseline OLD] [--max-peak-reserved SIZE] [--max-peak-allocated SIZE]\n"
    "                    [--max-growth P%|SIZE] [--no-leaks] [--no-oom] [--junit FILE]\n"
    "                    [--json] [--all-frames] FILE...\n\n"
    "A memory gate for CI: holds each snapshot FILE (one per rank, or one per test) against the\n"
    "budgets given, on every device it holds, and exits 1 when any budget was crossed (0 when\n"
    "none was, 2 on bad usage or a file that cannot be read). Each budget crossed is one line,\n"
    "`FILE: device N: ...`, naming the call site that grew most at the peak of allocated bytes\n"
    "(against the baseline; without one, the largest), the call site of the largest leak, or\n"
    "the first OOM's; a last line sums up. Peaks are those of `cuprof summary` and `cuprof diff`:\n"
    "allocated bytes are requested sizes of allocations not yet freed, reserved bytes segment\n"
    "bytes, both from the history. Sizes take units (4096, 300M, 300MiB, 1.5GiB): K, M, G and\n"
    "KiB, MiB, GiB are powers of 1024, KB, MB, GB powers of 1000 (80GB is 74.51 GiB).\n\n";

static const char check_epilog[] =
    "Example, in a CI step after the tests wrote their snapshot:\n"
    "  cuprof check --baseline main.pickle --max-growth 5% --max-peak-reserved 10GiB \\\n"
    "      --no-leaks --junit cuprof-junit.xml run.pickle\n"
    "--json writes one object: \"baseline\", \"files\", \"budgets\", \"crossed\" (how many),\n"
    "\"unreadable\" (files) and \"results\": one per file, device and budget, crossed or not:\n"
    "file, device, budget, check (peak_reserved, peak_allocated, growth_allocated,\n"
    "growth_reserved, growth_site, leaks, oom), crossed, value, limit, base, growth, count,\n"
    "message (the line) and site (the call site named).\n";

static const struct cli_option check_options[] = {
    {"baseline", 0, "OLD",
     "the snapshot to compare with (an earlier run of the same program): --max-growth is held "
     "against its peaks and call sites",
     'B'},
    {"max-peak-reserved", 0, "SIZE", "the most reserved bytes a device may reach at its peak", 'r'},
    {"max-peak-allocated", 0, "SIZE", "the most allocated bytes a device may reach at its peak",
     'p'},
    {"max-growth", 0, "P%|SIZE",
     "with --baseline: how much peak allocated and peak reserved bytes may grow, and how much one "
     "call site may grow at the peak, as a percentage of the baseline's peak (5%) or in bytes",
     'g'},
    {"no-leaks", 0, NULL, "no block may still be allocated at the end (as `cuprof leaks`)", 'L'},
    {"no-oom", 0, NULL,
     "no out-of-memory error may have been recorded (an allocation's, or one of the driver's own "
     "calls': " SNAP_DRIVER_OWN_MEMORY ")",
     'O'},
    {"junit", 0, "FILE",
     "also write the results as JUnit XML for CI systems (one test case per file, device and "
     "budget); replaced only once whole, - for standard output",
     'J'},
    {"json", 0, NULL, "one JSON object (below) instead of the text", 'j'},
    {"all-frames", 0, NULL,
     "hide no frame: a call site is a whole stack, named by its innermost frame", CLI_ALL_FRAMES},
    {0},
};

struct check_args {
    struct check_budgets budgets;
    const char *baseline, *junit;
    bool json;
};

static int
size_value(const char *option, const char *value, uint64_t *out)
{
    if (!cli_parse_size(value, out))
        return cli_usage_error("check", "%s: bad value \"%s\": expected %s", option, value,
                               CLI_SIZE_ACCEPTED);
    return CLI_OK;
}

/* "5%", "2.5%" or a size. */
static int
growth_value(const char *value, struct check_budgets *b)
{
    size_t len = strlen(value);
    if (len > 1 && value[len - 1] == '%') {
        char *end = NULL;
        double p = strtod(value, &end);
        if (value[0] >= '0' && value[0] <= '9' && end == value + len - 1 && isfinite(p) && p >= 0) {
            b->growth_is_percent = true;
            b->growth_percent = p;
            return CLI_OK;
        }
    } else if (cli_parse_size(value, &b->growth_bytes)) {
        b->growth_is_percent = false;
        return CLI_OK;
    }
    return cli_usage_error("check",
                           "--max-growth: bad value \"%s\": expected a percentage such as 5%% "
                           "or %s",
                           value, CLI_SIZE_ACCEPTED);
}

static int
check_option(void *ctx, int key, const char *value)
{
    struct check_args *a = ctx;
    struct check_budgets *b = &a->budgets;
    switch (key) {
    case 'B':
        a->baseline = value;
        break;
    case 'r':
        b->max_peak_reserved_set = true;
        return size_value("--max-peak-reserved", value, &b->max_peak_reserved);
    case 'p':
        b->max_peak_allocated_set = true;
        return size_value("--max-peak-allocated", value, &b->max_peak_allocated);
    case 'g':
        b->max_growth_set = true;
        return growth_value(value, b);
    case 'L':
        b->no_leaks = true;
        break;
    case 'O':
        b->no_oom = true;
        break;
    case 'J':
        a->junit = value;
        break;
    case 'j':
        a->json = true;
        break;
    }
    return CLI_OK;
}

const struct cli_command cmd_check_command = {
    .name = "check",
    .text = check_text,
    .options = check_options,
    .epilog = check_epilog,
    .unknown = "unknown option",
    .operands = CLI_ONE_OR_MORE,
    .operands_error = "expected at least one snapshot FILE",
    .option = check_option,
};

/* Every file held against the budgets: its results, as lines made while its snapshot is read. */
static int
check_file(struct check_report *rep, size_t file, const char *path, const struct snapshot *baseline,
           bool all_frames)
{
    struct snapshot *snap;
    if (frame_filter_load(path, all_frames, &snap) != CLI_OK)
        return check_report_unreadable(rep, file);
    struct run_diff diff;
    struct check_result *results = NULL;
    size_t n = 0;
    int rc = run_diff_make(baseline, snap, &diff);
    if (rc == 0) {
        rc = check_budget_run(&rep->budgets, &diff, baseline != NULL, &results, &n);
        run_diff_free(&diff);
    }
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = check_report_add(rep, file, snap, &results[i]);
    free(results);
    snapshot_free(snap);
    if (rc != 0) {
        char safe[1024];
        fprintf(stderr, "cuprof: %s: out of memory\n", cli_term(path, safe, sizeof safe));
    }
    return rc;
}

static int
check_usage(const struct check_args *a)
{
    const struct check_budgets *b = &a->budgets;
    if (!b->max_peak_reserved_set && !b->max_peak_allocated_set && !b->max_growth_set &&
        !b->no_leaks && !b->no_oom)
        return cli_usage_error("check", "no budget given: name at least one of "
                                        "--max-peak-reserved, --max-peak-allocated, "
                                        "--max-growth, --no-leaks, --no-oom");
    if (b->max_growth_set && a->baseline == NULL)
        return cli_usage_error("check", "--max-growth needs --baseline OLD to grow from");
    return CLI_OK;
}

int
cmd_check(int argc, char **argv)
{
    struct check_args args = {0};
    struct cli_input in;
    if (!cli_parse(&cmd_check_command, argc, argv, &args, &in))
        return in.status;
    if (check_usage(&args) != CLI_OK)
        return CLI_BADUSE;
    struct snapshot *baseline = NULL;
    if (args.baseline != NULL &&
        frame_filter_load(args.baseline, in.all_frames, &baseline) != CLI_OK)
        return CLI_BADUSE;
    struct check_report rep;
    check_report_init(&rep, &args.budgets, args.baseline, in.paths, in.count);
    int status = CLI_OK;
    for (size_t i = 0; i < in.count && status == CLI_OK; i++)
        if (check_file(&rep, i, in.paths[i], baseline, in.all_frames) != 0)
            status = CLI_BADUSE;
    snapshot_free(baseline);
    if (status == CLI_OK) {
        bool ok = args.json ? check_report_json(&rep, stdout) : check_report_text(&rep, stdout);
        if (!ok || (args.junit != NULL && check_report_junit(&rep, args.junit) != 0))
            status = CLI_BADUSE;
        else
            status = rep.unreadable > 0 ? CLI_BADUSE : rep.crossed > 0 ? CLI_FOUND : CLI_OK;
    }
    check_report_free(&rep);
    return status;
}
