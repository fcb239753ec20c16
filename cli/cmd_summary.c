/* cmd_summary.c: `cuprof summary FILE...`: per file (rank) and device, the memory_summary table,
 *   peaks and where they happened, fragmentation, top call sites and OOM events. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/allocator.h"
#include "allocator/trace_sink.h"
#include "cli/analysis.h"
#include "cli/cli_commands.h"
#include "cli/cli_options.h"
#include "cli/cli_util.h"
#include "cli/cross_rank.h"
#include "cli/frame_filter.h"
#include "cli/library_report.h"
#include "cli/phases.h"
#include "cli/ranges.h"
#include "snapshot/snapshot_oom.h"
#include "stats/memory_stats.h"
#include "stats/memory_summary.h"

static const char summary_text[] =
    "usage: cuprof summary [--top N] [--brief] [--all-frames] FILE...\n\n"
    "For every snapshot FILE (one per rank), and every device in it:\n"
    "  - PyTorch's memory_summary table (cuprof's counters, or rebuilt from the block table);\n"
    "  - peak reserved and peak live bytes and the trace entry where each happened (live bytes\n"
    "    are requested sizes of allocations not yet freed, as the trace records them);\n"
    "  - fragmentation: reserved minus allocated, largest free block against all free bytes;\n"
    "  - device memory by library (cuprof's snapshots): per shared object that made the device\n"
    "    call, live and peak bytes in cuprof's cache and passed through, and the device's\n"
    "    footprint as the driver reports it (device-wide) at start and at the dump, with what\n"
    "    CUDA graphs' memory nodes held at the dump;\n"
    "  - phases (NVTX ranges, cuprof.annotate, PyTorch's record_function): per range name its\n"
    "    calls, the highest live bytes inside it, its rise above the range's start and the\n"
    "    growth from start to end; the ranges still open at the end and at each OOM;\n"
    "  - the top call sites by live bytes at the end and at the live peak, with their stacks\n"
    "    from the user's first frame (stacks that differ only in frames of the allocation\n"
    "    machinery: cuprof, CUDA, PyTorch's allocator, the Python interpreter, libc start-up,\n"
    "    are one call site; a stripped library's offsets collapse into its named entry point,\n"
    "    and a Python package's frames give way to the program's line, `via` the package's\n"
    "    entry point);\n"
    "  - annotations (cuprof_annotate, and PyTorch's user_metadata wherever it changes), per\n"
    "    label: how often, the highest live and reserved bytes in its phases (each annotation\n"
    "    up to the next) and their growth of live bytes in all;\n"
    "  - OOM events: the request, what the device still had free, what was cached; and the\n"
    "    driver's own calls refused for lack of memory (kernel code, arrays, thread stacks,\n"
    "    contexts, graphs' memory).\n"
    "Given several files (a job's ranks), it opens with a cross-rank view: per file its rank,\n"
    "host, pid, peak allocated and reserved, OOMs and fragmentation at the live peak; the\n"
    "spread (max/min) and the outlier ranks (peak reserved more than 10% from the median), a\n"
    "file without a rank named by its path; then the call sites whose live bytes at the end\n"
    "differ most between ranks. The files are read in parallel, one snapshot per thread in\n"
    "memory. The per-file reports follow for up to 16 files (--each for more).\n\n";

static const struct cli_option summary_options[] = {
    {"top", 't', "N", "call sites to list (default 10)", 0},
    {"brief", 'b', NULL, "one screen: no table, 5 call sites", 0},
    {"all-frames", 0, NULL,
     "hide no frame: a call site is a whole stack, named by its innermost frame", CLI_ALL_FRAMES},
    {"each", 0, NULL, "per-file reports after the cross-rank view, however many files", 'E'},
    {"ranks-only", 0, NULL, "the cross-rank view alone", 'R'},
    {"jobs", 0, "N", "files read at once (default: the number of CPUs, at most 16)", 'j'},
    {0},
};

struct summary_args {
    uint64_t top, jobs;
    bool brief, each, ranks_only;
};

static int
summary_option(void *ctx, int key, const char *value)
{
    struct summary_args *a = ctx;
    switch (key) {
    case 't':
        if (!cli_parse_u64(value, &a->top))
            return cli_usage_error("summary", "--top wants a number, not \"%s\"", value);
        break;
    case 'b':
        a->brief = true;
        break;
    case 'E':
        a->each = true;
        break;
    case 'R':
        a->ranks_only = true;
        break;
    case 'j':
        if (!cli_parse_u64(value, &a->jobs) || a->jobs == 0 || a->jobs > 16)
            return cli_usage_error("summary", "--jobs wants 1 to 16, not \"%s\"", value);
        break;
    }
    return CLI_OK;
}

const struct cli_command cmd_summary_command = {
    .name = "summary",
    .text = summary_text,
    .options = summary_options,
    .unknown = "unknown option",
    .operands = CLI_ONE_OR_MORE,
    .operands_error = "expected at least one snapshot FILE",
    .option = summary_option,
};

static void
print_when(FILE *out, const struct snapshot *snap, size_t device, size_t at, int64_t t0)
{
    char where[160];
    analysis_where(where, sizeof(where), snap, device, at, &t0);
    fputs(where, out);
}

static int
print_sites(FILE *out, const struct snapshot *snap, size_t device, size_t at, size_t top,
            size_t max_frames)
{
    size_t nsites;
    struct site_total *sites;
    if (analysis_sites_at(snap, device, at, &sites, &nsites) != 0)
        return -1;
    char a[32];
    if (nsites == 0)
        fprintf(out, "    (nothing live)\n");
    for (size_t i = 0; i < nsites && i < top; i++) {
        fprintf(out, "  %2zu. %s in %" PRIu64 " allocation%s\n", i + 1,
                cli_size(sites[i].bytes, a, sizeof(a)), sites[i].count,
                sites[i].count == 1 ? "" : "s");
        cli_print_stack(out, snap, sites[i].stack, 7, max_frames);
    }
    if (nsites > top)
        fprintf(out, "  ... %zu more call sites\n", nsites - top);
    free(sites);
    return 0;
}

/* Refusals of the driver's own calls (cuprof.oom_messages rows with `api`): no `oom` entry, the
 * driver not saying how much it wanted. */
static void
print_driver_ooms(FILE *out, const struct snapshot *snap, size_t device,
                  const struct device_analysis *a, int64_t t0)
{
    size_t n = snapshot_driver_oom_count(snap, device);
    char s1[32], s2[32];
    if (n == 0)
        return;
    fprintf(out,
            "out of memory in the driver's own calls: %zu (" SNAP_DRIVER_OWN_MEMORY
            ", which it takes outside every allocation; `cuprof explain` says what would have "
            "left it room)\n",
            n);
    for (size_t i = 0; i < snap->cuprof.oom_message_count; i++) {
        const struct snap_oom_message *m = &snap->cuprof.oom_messages[i];
        if ((size_t)m->device != device || m->api == NULL)
            continue;
        fputs("  ", out);
        cli_fputs_term(m->api, out);
        if (m->trace_index >= 0)
            fprintf(out, " after %zu entr%s", (size_t)m->trace_index,
                    m->trace_index == 1 ? "y" : "ies");
        else
            fputs(" before the history's first entry", out);
        if (a->has_time)
            fprintf(out, " (t=+%.6f s)", (double)(m->time_us - t0) / 1e6);
        if (m->trace_index >= 0 && (size_t)m->trace_index <= a->count && a->live_series != NULL) {
            size_t k = (size_t)m->trace_index;
            uint64_t cached = a->reserved_series[k] > a->live_series[k]
                                  ? a->reserved_series[k] - a->live_series[k]
                                  : 0;
            fprintf(out, ": %s was reserved and %s of it not live (cached)",
                    cli_size(a->reserved_series[k], s1, sizeof(s1)),
                    cli_size(cached, s2, sizeof(s2)));
        }
        fputc('\n', out);
    }
}

static void
print_ooms(FILE *out, const struct snapshot *snap, size_t device, const struct device_analysis *a,
           int64_t t0)
{
    const struct snap_device_trace *t = &snap->device_traces[device];
    char s1[32], s2[32], s3[32];
    fprintf(out, "OOM events: %zu\n", a->oom_count);
    for (size_t i = 0; i < t->count; i++) {
        const struct snap_entry *e = &t->entries[i];
        if (e->action != TRACE_OOM)
            continue;
        uint64_t cached = 0;
        if (a->live_series != NULL && a->reserved_series[i] > a->live_series[i])
            cached = a->reserved_series[i] - a->live_series[i];
        fprintf(out, "  entry %zu", i);
        if (e->has_time)
            fprintf(out, " (t=+%.6f s)", (double)(e->time_us - t0) / 1e6);
        fprintf(out, ": %s requested on stream %" PRIu64 "; the device had %s free",
                cli_size(e->size, s1, sizeof(s1)), e->stream,
                cli_size(e->device_free, s2, sizeof(s2)));
        if (a->live_series != NULL)
            fprintf(out, ", %s was reserved and %s of it not live (cached)",
                    cli_size(a->reserved_series[i], s3, sizeof(s3)),
                    cli_size(cached, s2, sizeof(s2)));
        fprintf(out, "\n    why: %s\n",
                analysis_pool_passed(e->pool)
                    ? "the driver refused it itself (memory cuprof passes through: managed, VMM "
                      "or a driver pool)"
                : e->device_free < e->size
                    ? "no cached free block fit, and the device could not give a new segment "
                      "that large"
                    : "no cached free block fit, and the device refused the new segment "
                      "(memory fraction or fragmentation of device memory)");
        cli_print_stack(out, snap, e->stack, 6, 8);
    }
    print_driver_ooms(out, snap, device, a, t0);
}

/* Annotations as phases, per label (cli/phases.h): how often, the highest peaks, the growth. */
static int
print_phases(FILE *out, const struct snapshot *snap, size_t device, const struct device_analysis *a,
             size_t top)
{
    struct phase_mark *marks;
    struct phase_label *labels = NULL;
    size_t n, nl = 0;
    if (phases_marks(snap, device, a, &marks, &n) != 0 ||
        phases_by_label(marks, n, &labels, &nl) != 0) {
        free(marks);
        return -1;
    }
    if (n > 0)
        fprintf(out,
                "annotations: %zu (%zu label%s); per label, over its phases (each annotation up "
                "to the next):\n",
                n, nl, nl == 1 ? "" : "s");
    for (size_t i = 0; i < nl && i < top; i++) {
        const struct phase_label *l = &labels[i];
        char s1[32], s2[32], s3[32];
        int64_t g = l->growth;
        fputs("  ", out);
        if (l->label != NULL) {
            fputc('"', out);
            cli_fputs_term(l->label, out);
            fputc('"', out);
        } else {
            fputs("(metadata cleared)", out);
        }
        fprintf(out, " x%zu: peak live %s ", l->count, cli_size(l->peak_live, s1, sizeof s1));
        if (l->peak_live_at > 0)
            fprintf(out, "(entry %zu)", l->peak_live_at - 1);
        else
            fprintf(out, "(at the start of the history)");
        fprintf(out, ", peak reserved %s; live %s%s in all\n",
                cli_size(l->peak_reserved, s2, sizeof s2), g >= 0 ? "+" : "-",
                cli_size(g >= 0 ? (uint64_t)g : 0 - (uint64_t)g, s3, sizeof s3));
    }
    if (nl > top)
        fprintf(out, "  ... %zu more labels\n", nl - top);
    free(marks);
    free(labels);
    return 0;
}

/* The history's extent and its peaks, with when they came. Without a history
 * (CUPROF_HISTORY=state or off) those peaks would be the dump's state named as the run's: only
 * the counters, printed after, know the run's peaks. */
static void
print_history(FILE *out, const struct snapshot *snap, size_t device,
              const struct device_analysis *a, int64_t t0, const char *not_kept)
{
    char s1[32], s2[32];
    if (not_kept != NULL) {
        fprintf(out,
                "history: not kept (CUPROF_HISTORY=%s: the blocks live at the dump and their "
                "stacks; %zu entr%s, %" PRIu64 " dropped); the run's peaks are the counters "
                "below; CUPROF_HISTORY=all records when and where\n",
                not_kept, a->count, a->count == 1 ? "y" : "ies", a->dropped);
    } else {
        fprintf(out, "history: %zu trace entries", a->count);
        if (a->dropped > 0)
            fprintf(out, ", %" PRIu64 " older entries dropped by the ring", a->dropped);
        if (a->mid_run)
            fprintf(out, "; starts mid-run with %s live and %s reserved",
                    cli_size(a->start_live, s1, sizeof(s1)),
                    cli_size(a->start_reserved, s2, sizeof(s2)));
        fprintf(out, "\n");
        fprintf(out, "peak reserved: %s ", cli_size(a->peak_reserved, s1, sizeof(s1)));
        print_when(out, snap, device, a->peak_reserved_at, t0);
        fprintf(out, "\npeak live:     %s ", cli_size(a->peak_live, s1, sizeof(s1)));
        print_when(out, snap, device, a->peak_live_at, t0);
        fprintf(out, "; reserved then %s\n", cli_size(a->reserved_at_peak_live, s2, sizeof(s2)));
    }
}

static int
summary_device(FILE *out, const struct snapshot *snap, size_t device, bool brief, size_t top)
{
    struct device_analysis a;
    if (analysis_run(snap, device, true, &a) != 0)
        return -1;
    char s1[32], s2[32], s3[32];
    fprintf(out, "-- device %zu\n", device);
    struct memory_stats st;
    bool recorded = stats_for_device(snap, device, &st);
    if (!brief) {
        size_t len = memory_summary(&st, (int)device, false, NULL, 0);
        char *table = malloc(len + 1);
        if (table != NULL) {
            (void)memory_summary(&st, (int)device, false, table, len + 1);
            fputs(table, out);
            free(table);
        }
        if (!recorded)
            fprintf(out, "(no recorded counters: rebuilt from the block table; accumulated "
                         "columns are 0)\n");
    }
    int64_t t0 = 0;
    if (device < snap->device_count && snap->device_traces[device].count > 0 &&
        snap->device_traces[device].entries[0].has_time)
        t0 = snap->device_traces[device].entries[0].time_us;
    const char *not_kept = analysis_history_not_kept(snap);
    print_history(out, snap, device, &a, t0, not_kept);
    fprintf(out, "peak counters: allocated_bytes.all.peak %s, reserved_bytes.all.peak %s%s\n",
            cli_size((uint64_t)st.allocated_bytes[STAT_ALL].peak, s1, sizeof(s1)),
            cli_size((uint64_t)st.reserved_bytes[STAT_ALL].peak, s2, sizeof(s2)),
            recorded ? "" : " (rebuilt)");
    fprintf(out, "at the end: %s reserved in %zu segments, %s allocated, %s live\n",
            cli_size(a.table_reserved, s1, sizeof(s1)), a.segments,
            cli_size(a.table_allocated, s2, sizeof(s2)), cli_size(a.end_live, s3, sizeof(s3)));
    uint64_t frag_peak =
        a.reserved_at_peak_live > a.peak_live ? a.reserved_at_peak_live - a.peak_live : 0;
    fprintf(out, "fragmentation: ");
    if (not_kept == NULL)
        fprintf(out, "reserved - live at the live peak %s; ", cli_size(frag_peak, s1, sizeof(s1)));
    fprintf(out, "at the end %s cached free", cli_size(a.free_total, s2, sizeof(s2)));
    if (a.free_total > 0)
        fprintf(out, ", largest free block %s (%.1f%% of free)",
                cli_size(a.largest_free, s3, sizeof(s3)),
                100.0 * (double)a.largest_free / (double)a.free_total);
    fprintf(out, "\n");
    if (print_phases(out, snap, device, &a, top) != 0)
        goto oom;
    library_report_print(out, snap, device);
    if (ranges_report(out, snap, device, &a, top) != 0)
        goto oom;
    size_t frames = brief ? 4 : 12;
    fprintf(out, "top call sites by live bytes at the end:\n");
    if (print_sites(out, snap, device, a.count, top, frames) != 0)
        goto oom;
    if (a.peak_live_at != a.count && not_kept == NULL) {
        fprintf(out, "top call sites at the live peak (entry %zu):\n",
                a.peak_live_at ? a.peak_live_at - 1 : 0);
        if (print_sites(out, snap, device, a.peak_live_at, top, frames) != 0)
            goto oom;
    }
    if (a.oom_count > 0 || snapshot_driver_oom_count(snap, device) > 0 || !brief)
        print_ooms(out, snap, device, &a, t0);
    analysis_free(&a);
    return 0;
oom:
    analysis_free(&a);
    return -1;
}

int
summary_print(FILE *out, const char *path, const struct snapshot *snap, bool brief, size_t top)
{
    /* Every string here came from the file or the command line: escaped (cli_term). */
    fputs("== ", out);
    cli_fputs_term(path, out);
    fputc('\n', out);
    const struct snap_cuprof *c = &snap->cuprof;
    if (c->present) {
        char v[64], m[64];
        fprintf(out, "cuprof %s, mode %s, pid %" PRId64 ", rank ",
                c->version ? cli_term(c->version, v, sizeof v) : "?",
                c->mode ? cli_term(c->mode, m, sizeof m) : "?", c->pid);
        if (c->rank >= 0)
            fprintf(out, "%" PRId64, c->rank);
        else
            fprintf(out, "-");
        fputs(", host ", out);
        cli_fputs_term(c->host ? c->host : "?", out);
        if (c->argc > 0) {
            fprintf(out, ", command:");
            for (size_t i = 0; i < c->argc && i < 8; i++) {
                fputc(' ', out);
                cli_fputs_term(c->argv[i], out);
            }
            if (c->argc > 8)
                fprintf(out, " ...");
        }
        fprintf(out, "\n");
    } else {
        fprintf(out, "(no cuprof section: a snapshot written by PyTorch)\n");
    }
    if (snap->has_allocator_settings && snap->allocator_settings.alloc_conf != NULL &&
        snap->allocator_settings.alloc_conf[0] != '\0') {
        fputs("allocator settings: ", out);
        cli_fputs_term(snap->allocator_settings.alloc_conf, out);
        fputc('\n', out);
    }
    size_t ndev = analysis_device_count(snap);
    if (ndev == 0)
        fprintf(out, "(no devices: nothing was allocated)\n");
    /* Only the devices the file holds: one segment on device 4095 is one section. */
    for (size_t d = 0; d < ndev; d++)
        if (analysis_device_present(snap, d) && summary_device(out, snap, d, brief, top) != 0)
            return -1;
    return 0;
}

int
cmd_summary(int argc, char **argv)
{
    struct summary_args args = {.top = 10};
    struct cli_input in;
    if (!cli_parse(&cmd_summary_command, argc, argv, &args, &in))
        return in.status;
    if (args.brief && args.top == 10)
        args.top = 5;
    int status = CLI_OK;
    if (in.count > 1) {
        int rc = cross_rank_print(stdout, in.paths, in.count, in.all_frames, (size_t)args.top,
                                  (unsigned)args.jobs);
        if (rc != 0)
            status = CLI_BADUSE;
        if (args.ranks_only || (in.count > 16 && !args.each))
            return status;
        printf("\n");
    }
    /* One snapshot in memory at a time. */
    for (size_t i = 0; i < in.count; i++) {
        struct snapshot *snap;
        char safe[1024];
        if (frame_filter_load(in.paths[i], in.all_frames, &snap) != CLI_OK) {
            status = CLI_BADUSE;
            continue;
        }
        if (i > 0)
            printf("\n");
        if (summary_print(stdout, in.paths[i], snap, args.brief, (size_t)args.top) != 0) {
            fprintf(stderr, "cuprof: %s: out of memory\n",
                    cli_term(in.paths[i], safe, sizeof safe));
            status = CLI_BADUSE;
        }
        snapshot_free(snap);
    }
    return status;
}
