/* cmd_tune.c: `cuprof tune FILE [--memory SIZE] [--objective reserved|calls] [--json]`: prints
 *   the search tune.c made, as a ranked table with the lines to paste, or as JSON. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli/analysis.h"
#include "cli/cli_commands.h"
#include "cli/cli_options.h"
#include "cli/cli_util.h"
#include "cli/replay.h"
#include "cli/tune.h"

static const char tune_text[] =
    "usage: cuprof tune [--memory SIZE] [--objective reserved|calls] [--device N] [--top N]\n"
    "                   [--jobs N] [--json] FILE\n\n"
    "Searches allocator settings by replaying FILE's history (as `cuprof replay` does) under\n"
    "each, on every CPU, and recommends one. The recorded settings are replayed first, checked\n"
    "as `replay --check` checks them: the share of the recording's placements the replay\n"
    "reproduced says how far to trust the ranking. The grid: max_split_size_mb (unset, 32 to\n"
    "1024) with roundup_power2_divisions (unset, 2, 4, 8, [256:1,512:2,>:8]);\n"
    "expandable_segments:True with unset, 4 or 8 divisions; two more per-size lists; and\n"
    "garbage_collection_threshold 0.6 to 0.9 with the recorded fraction (or 0.99). A ranked\n"
    "table: peak reserved, fragmentation at the peak (reserved but unused bytes then), OOMs\n"
    "under --memory (default: the device in the file: what the allocator could reach at the\n"
    "first OOM, else the card less what was in use before the program began, else no limit)\n"
    "and how many of them came at requests the recording served, and the device allocations\n"
    "and frees each setting made (cudaMalloc/cudaFree, or page maps and unmaps: each costs\n"
    "microseconds to milliseconds on a real device; a setting making 2x the recorded calls or\n"
    "more is flagged). Ranked by OOMs (new ones last), then the objective (reserved: the peak,\n"
    "then calls; calls: the calls, then the peak). Then the lines to paste for the best,\n"
    "PYTORCH_CUDA_ALLOC_CONF=... (PyTorch's keys; a fraction is\n"
    "torch.cuda.set_per_process_memory_fraction there) and CUPROF_ALLOC_CONF=....\n"
    "Output: the text above, or with --json one object: file, device, entries, objective,\n"
    "capacity (bytes, or null), capacity_from (option, oom, footprint or unknown), exactness\n"
    "{checked, reproduced, start_misses, mid_run, dropped_entries}, settings [{rank, label,\n"
    "recorded, ok, cuprof_alloc_conf, pytorch_cuda_alloc_conf, fraction, ooms, new_ooms,\n"
    "peak_reserved, peak_allocated, free_at_peak, device_allocs, device_frees, calls_ratio}]\n"
    "best first, and recommended (the best one's rank, 1) (bytes exact).\n\n";

static const struct cli_option tune_options[] = {
    {"memory", 'm', "SIZE",
     "the bytes the allocator may reserve, e.g. 80GiB or 24G (K, M, G are powers of 1024: 80GB "
     "is 74.51 GiB; default: the device in FILE)",
     0},
    {"objective", 'o', "WHAT",
     "reserved (default: the lowest peak reserved) or calls (the fewest device allocations and "
     "frees)",
     0},
    {"device", 'd', "N", "the device (default 0)", 0},
    {"top", 't', "N", "rows of the table (default 10; the recorded settings are always shown)", 0},
    {"jobs", 'J', "N", "replays at once (default: one per CPU)", 0},
    {"json", 'j', NULL, "one JSON object (described above), bytes exact", 0},
    {0},
};

struct tune_args {
    struct tune_request req;
    uint64_t top;
    bool json;
};

static int
tune_option(void *ctx, int key, const char *value)
{
    struct tune_args *a = ctx;
    uint64_t v = 0;
    switch (key) {
    case 'm':
        if (!cli_parse_size(value, &a->req.memory) || a->req.memory == 0)
            return cli_usage_error("tune", "--memory: bad value \"%s\": expected %s", value,
                                   CLI_SIZE_ACCEPTED);
        break;
    case 'o':
        if (strcmp(value, "reserved") == 0)
            a->req.objective = TUNE_OBJECTIVE_RESERVED;
        else if (strcmp(value, "calls") == 0)
            a->req.objective = TUNE_OBJECTIVE_CALLS;
        else
            return cli_usage_error(
                "tune", "--objective: bad value \"%s\": expected reserved or calls", value);
        break;
    case 'd':
        if (!cli_parse_u64(value, &v) || v > INT32_MAX)
            return cli_usage_error("tune", "--device: bad value \"%s\": expected a number", value);
        a->req.device = (size_t)v;
        break;
    case 't':
        if (!cli_parse_u64(value, &a->top) || a->top == 0)
            return cli_usage_error("tune", "--top: bad value \"%s\": expected a number >= 1",
                                   value);
        break;
    case 'J':
        if (!cli_parse_u64(value, &v) || v == 0 || v > 1024)
            return cli_usage_error("tune", "--jobs: bad value \"%s\": expected 1 to 1024", value);
        a->req.threads = (unsigned)v;
        break;
    case 'j':
        a->json = true;
        break;
    }
    return CLI_OK;
}

const struct cli_command cmd_tune_command = {
    .name = "tune",
    .text = tune_text,
    .options = tune_options,
    .unknown = "unknown option or missing value",
    .operands = 1,
    .operands_error = "expected one snapshot FILE",
    .option = tune_option,
    .read = 1,
};

static void
print_trust(const struct tune *t)
{
    static const char *const from[] = {"--memory",
                                       "what the allocator could reach at the "
                                       "recording's first OOM",
                                       "the card less what was in use before the program began",
                                       "unknown: no OOM can happen; give --memory"};
    char s[32];
    printf("device %zu, %zu entries; OOMs counted against ", t->device, t->entries);
    if (t->capacity_from != TUNE_CAPACITY_UNKNOWN)
        printf("%s (%s)\n", cli_size(t->capacity, s, 32), from[t->capacity_from]);
    else
        printf("no limit (%s)\n", from[t->capacity_from]);
    printf("trust: the recorded settings' replay reproduced %zu/%zu placements", t->reproduced,
           t->checked);
    if (t->checked > 0)
        printf(" (%.1f%%)", 100.0 * (double)t->reproduced / (double)t->checked);
    if (t->reproduced < t->checked)
        printf(": the replay departs from the recording, so take close ranks as equal");
    if (t->mid_run)
        printf("; the history starts mid-run (%" PRIu64 " entries dropped): every setting applies "
               "from its first entry, the state then is the recording's",
               t->dropped);
    if (t->start_misses > 0)
        printf("; %zu blocks of that state could not be placed", t->start_misses);
    printf("\n\n");
}

static void
print_row(const struct tune *t, size_t rank, const struct tune_row *r)
{
    char s1[32], s2[32], label[160];
    const struct tune_row *rec = &t->rows[0];
    double delta = rec->peak_reserved > 0
                       ? 100.0 * ((double)r->peak_reserved - (double)rec->peak_reserved) /
                             (double)rec->peak_reserved
                       : 0.0;
    double frag =
        r->peak_reserved > 0 ? 100.0 * (double)r->free_at_peak / (double)r->peak_reserved : 0.0;
    double calls = tune_calls_ratio(t, r);
    printf("%4zu  %12s %+7.1f%%  %5.1f%% %12s %5zu %4zu %9" PRIu64 " %6.2fx%s  %s\n", rank,
           cli_size(r->peak_reserved, s1, 32), delta, frag, cli_size(r->free_at_peak, s2, 32),
           r->ooms, r->new_ooms, r->device_allocs + r->device_frees, calls,
           calls >= TUNE_CALLS_WARN ? "!" : " ", cli_term(r->label, label, sizeof label));
}

/* True when some replay ran out of memory: the device's size mattered, and with it cuprof's last
 * step before an OOM, which PyTorch's allocator lacks. */
static bool
near_capacity(const struct tune *t)
{
    for (size_t i = 0; i < t->nrows; i++)
        if (t->rows[i].ooms > 0)
            return true;
    return false;
}

static void
print_best(const struct tune *t, bool fit_segment_on_oom)
{
    const struct tune_row *b = &t->rows[t->best];
    char label[160], s1[32], s2[32];
    if (b->recorded) {
        printf("\nrecommended: keep the recorded settings (no setting of the grid does better by "
               "this objective)\n");
        return;
    }
    printf("\nrecommended: %s: peak reserved %s (recorded %s), %zu OOM%s\n",
           cli_term(b->label, label, sizeof label), cli_size(b->peak_reserved, s1, 32),
           cli_size(t->rows[0].peak_reserved, s2, 32), b->ooms, b->ooms == 1 ? "" : "s");
    double calls = tune_calls_ratio(t, b);
    if (calls >= TUNE_CALLS_WARN)
        printf("  it saves memory by calling the device %.1fx as often as the recorded settings "
               "(%" PRIu64 " allocations and frees against %" PRIu64 "): each costs microseconds "
               "to milliseconds on a real device\n",
               calls, b->device_allocs + b->device_frees,
               t->rows[0].device_allocs + t->rows[0].device_frees);
    if (fit_segment_on_oom && near_capacity(t))
        printf("  (replayed with cuprof's last step before an OOM, which PyTorch lacks: for "
               "PyTorch, tune a snapshot of PyTorch's own)\n");
    printf("  PYTORCH_CUDA_ALLOC_CONF=%s\n", cli_term(b->pytorch, label, sizeof label));
    if (b->fraction > 0.0)
        printf("  torch.cuda.set_per_process_memory_fraction(%g)\n", b->fraction);
    printf("  CUPROF_ALLOC_CONF=%s\n", cli_term(b->conf, label, sizeof label));
}

static void
print_text(const char *path, const struct snapshot *snap, const struct tune *t, uint64_t top)
{
    printf("tune: ");
    cli_fputs_term(path, stdout);
    printf(", %zu settings, ranked by %s\n", t->nrows,
           t->objective == TUNE_OBJECTIVE_CALLS ? "device calls" : "peak reserved");
    print_trust(t);
    printf("%4s  %12s %8s  %6s %12s %5s %4s %9s %7s  %s\n", "rank", "peak reserved", "vs rec",
           "frag", "unused", "OOMs", "new", "calls", "vs rec", "setting");
    bool shown_recorded = false;
    for (size_t i = 0; i < t->nrows; i++) {
        const struct tune_row *r = &t->rows[t->order[i]];
        if (i < top || (r->recorded && !shown_recorded)) {
            if (i >= top && i > top)
                printf("   ...\n");
            print_row(t, i + 1, r);
            shown_recorded |= r->recorded;
        }
    }
    printf("(frag: reserved but unused at the peak, as a share of it; new: OOMs at requests the "
           "recording served; calls: device allocations and frees; !: %gx the recorded calls or "
           "more)\n",
           TUNE_CALLS_WARN);
    print_best(t, snap->cuprof.fit_segment_on_oom);
}

static bool
print_json(const char *path, const struct tune *t)
{
    static const char *const from[] = {"option", "oom", "footprint", "unknown"};
    struct emitter *e = cli_json_open(stdout);
    if (e == NULL)
        return false;
    emitter_begin_dict(e);
    cli_json_key_string(e, "file", path);
    cli_json_key_u64(e, "device", t->device);
    cli_json_key_u64(e, "entries", t->entries);
    cli_json_key_string(e, "objective",
                        t->objective == TUNE_OBJECTIVE_CALLS ? "calls" : "reserved");
    emitter_key(e, "capacity");
    if (t->capacity_from == TUNE_CAPACITY_UNKNOWN)
        emitter_none(e);
    else
        emitter_u64(e, t->capacity);
    cli_json_key_string(e, "capacity_from", from[t->capacity_from]);
    emitter_key(e, "exactness");
    emitter_begin_dict(e);
    cli_json_key_u64(e, "checked", t->checked);
    cli_json_key_u64(e, "reproduced", t->reproduced);
    cli_json_key_u64(e, "start_misses", t->start_misses);
    emitter_key(e, "mid_run");
    emitter_bool(e, t->mid_run);
    cli_json_key_u64(e, "dropped_entries", t->dropped);
    emitter_end(e);
    emitter_key(e, "settings");
    emitter_begin_list(e);
    for (size_t i = 0; i < t->nrows; i++) {
        const struct tune_row *r = &t->rows[t->order[i]];
        emitter_begin_dict(e);
        cli_json_key_u64(e, "rank", i + 1);
        cli_json_key_string(e, "label", r->label);
        emitter_key(e, "recorded");
        emitter_bool(e, r->recorded);
        emitter_key(e, "ok");
        emitter_bool(e, r->ok);
        cli_json_key_string(e, "cuprof_alloc_conf", r->conf);
        cli_json_key_string(e, "pytorch_cuda_alloc_conf", r->pytorch);
        emitter_key(e, "fraction");
        emitter_float(e, r->fraction);
        cli_json_key_u64(e, "ooms", r->ooms);
        cli_json_key_u64(e, "new_ooms", r->new_ooms);
        cli_json_key_u64(e, "peak_reserved", r->peak_reserved);
        cli_json_key_u64(e, "peak_allocated", r->peak_allocated);
        cli_json_key_u64(e, "free_at_peak", r->free_at_peak);
        cli_json_key_u64(e, "device_allocs", r->device_allocs);
        cli_json_key_u64(e, "device_frees", r->device_frees);
        emitter_key(e, "calls_ratio");
        emitter_float(e, tune_calls_ratio(t, r));
        emitter_end(e);
    }
    emitter_end(e);
    cli_json_key_u64(e, "recommended", 1);
    emitter_end(e);
    return cli_json_close(e);
}

int
cmd_tune(int argc, char **argv)
{
    struct tune_args args = {.top = 10};
    struct cli_input in;
    if (!cli_begin(&cmd_tune_command, argc, argv, &args, &in))
        return in.status;
    const struct snapshot *snap = in.snap[0];
    args.req.path = in.paths[0];
    args.req.progress = true; /* on stderr, only when it is a terminal */
    int status = analysis_check_device(in.paths[0], snap, args.req.device);
    struct tune t;
    char err[1024] = "", safe[1024];
    if (status == CLI_OK && tune_compute(snap, &args.req, &t, err, sizeof err) != 0) {
        fprintf(stderr, "cuprof: %s: %s\n", cli_term(in.paths[0], safe, sizeof safe), err);
        status = CLI_BADUSE;
    } else if (status == CLI_OK) {
        if (args.json)
            status = print_json(in.paths[0], &t) ? CLI_OK : CLI_BADUSE;
        else
            print_text(in.paths[0], snap, &t, args.top);
        tune_free(&t);
    }
    cli_input_free(&in);
    return status;
}
