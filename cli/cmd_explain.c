/* cmd_explain.c: `cuprof explain FILE [--at oom|peak|ENTRY] [--device N] [--json]`: prints what
 *   explain.c computed, as one screen of text or one JSON object. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli/analysis.h"
#include "cli/cli_commands.h"
#include "cli/cli_options.h"
#include "cli/cli_util.h"
#include "cli/explain.h"
#include "cli/explain_print.h"

static const char explain_text[] =
    "usage: cuprof explain [--at oom|peak|ENTRY] [--device N] [--memory SIZE] [--top N] [--json]\n"
    "                      [--all-frames] FILE\n\n"
    "Why the device ran out of memory, on one screen. At an instant of FILE's history (default:\n"
    "the first OOM, else the peak of reserved memory):\n"
    "  - the request: its size, stream and stack (by the user's first frames), what the driver\n"
    "    said was free, and the OOM's message when the snapshot kept it;\n"
    "  - the whole device in bytes that add up to its capacity: live blocks by call site, cached\n"
    "    free bytes with the largest free block of each pool and the segments holding them,\n"
    "    pass-through memory (managed, VMM, the driver's pools), and memory outside the\n"
    "    allocator (the context, libraries' own pools, other processes, CUDA graphs), from the\n"
    "    device footprint cuprof records or, for PyTorch's files, the free bytes of the OOM "
    "entry;\n"
    "  - a verdict with its numbers: live memory alone exceeds the device; memory outside the\n"
    "    allocator; a per_process_memory_fraction cap; fragmentation (the bytes were free, in no\n"
    "    block large enough); the driver refusing a segment it had room for; or a combination;\n"
    "    and, for cuprof's own recordings in cache mode, whether cuprof's cache caused it (the\n"
    "    program's live bytes and the request fit in what the cache held and the driver had\n"
    "    free: without the cache, as in CUPROF_MODE=trace, the request could have succeeded);\n"
    "  - what would have avoided it: the history replayed from its start (the same replay as\n"
    "    `cuprof replay`, one setting per CPU) under expandable_segments, a few\n"
    "    max_split_size_mb values, garbage_collection_threshold where a fraction is set, and an\n"
    "    empty_cache() right before the request: OOM avoided or not, the new peaks, and how exact\n"
    "    the replay is (placements of the recording it reproduced, a history starting mid-run).\n"
    "    A request cuprof passed through to the driver (managed memory, the driver's pools,\n"
    "    cuMemCreate) was refused by the driver itself: no setting applies to it.\n"
    "An OOM in one of the driver's own calls (kernel code, an array, a thread stack, a context\n"
    "or a graph's memory, which it takes outside every allocation; cuprof's snapshots keep it in\n"
    "cuprof.oom_messages) has no request: the instant is the state the call met, the verdict\n"
    "says what was free then, what cuprof's cache kept in segments still holding live blocks\n"
    "and what the driver would have had without it, and the replays say what each setting's\n"
    "cache would have kept there once emptied (as cuprof's is before such a call fails).\n"
    "Output: the text above, or with --json one object: file, device, entries, at, chosen\n"
    "(oom, peak or entry), is_oom, ooms, driver_call (the driver's own call refused, or\n"
    "null), driver_ooms, driver_message, request {size, segment_size, stream, device_free,\n"
    "passed_through, frames, message}, device_bytes {capacity, capacity_from (footprint,\n"
    "option or assumed), live_requested, live_allocated, reserved, replay_reserved,\n"
    "private_pools, pending_free, cached_free, passthrough, outside, outside_at_start,\n"
    "graphs, outside_estimated, free}, pools {small, large: free_bytes, largest_free,\n"
    "free_blocks, segments_with_free}, largest_fit, segments [{address, size, free_bytes,\n"
    "largest_free, stream, pool, expandable}], sites [{bytes, count, frames}], settings\n"
    "{recorded, fraction, allowed}, verdict {kinds: [live_exceeds, outside, cap,\n"
    "fragmentation, driver, driver_own], missing, cache_caused, free_without_cache}, exactness\n"
    "{mid_run, dropped_entries, state_from_replay, start_misses, checked, reproduced,\n"
    "oom_reproduced}, whatif [{label, setting, recorded, ok, avoided, ooms, peak_reserved,\n"
    "peak_allocated, device_allocs, kept_reserved}] (bytes exact).\n\n";

static const struct cli_option explain_options[] = {
    {"at", 'a', "WHEN",
     "oom (the first OOM), peak (of reserved memory) or ENTRY (a trace entry's index: the state "
     "right after it, or that OOM); default: oom when there is one, else peak",
     0},
    {"device", 'd', "N", "the device (default 0)", 0},
    {"memory", 'm', "SIZE",
     "the card's capacity when FILE does not record it (PyTorch's files), e.g. 80GiB or 24G (K, "
     "M, G are powers of 1024: 80GB is 74.51 GiB)",
     0},
    {"top", 't', "N", "call sites and segments listed (default 5)", 0},
    {"json", 'j', NULL, "one JSON object (described above), bytes exact", 0},
    {"all-frames", 0, NULL,
     "hide no frame: a call site is a whole stack, named by its innermost frame", CLI_ALL_FRAMES},
    {0},
};

struct explain_args {
    struct explain_request req;
    bool json;
};

static int
explain_option(void *ctx, int key, const char *value)
{
    struct explain_args *a = ctx;
    uint64_t v = 0;
    switch (key) {
    case 'a':
        if (strcmp(value, "oom") == 0)
            a->req.at = EXPLAIN_AT_OOM;
        else if (strcmp(value, "peak") == 0)
            a->req.at = EXPLAIN_AT_PEAK;
        else if (cli_parse_u64(value, &v) && v < SIZE_MAX) {
            a->req.at = EXPLAIN_AT_ENTRY;
            a->req.entry = (size_t)v;
        } else
            return cli_usage_error(
                "explain", "--at: bad value \"%s\": expected oom, peak or an entry number", value);
        break;
    case 'd':
        if (!cli_parse_u64(value, &v) || v > INT32_MAX)
            return cli_usage_error("explain", "--device: bad value \"%s\": expected a number",
                                   value);
        a->req.device = (size_t)v;
        break;
    case 'm':
        if (!cli_parse_size(value, &a->req.memory) || a->req.memory == 0)
            return cli_usage_error("explain", "--memory: bad value \"%s\": expected %s", value,
                                   CLI_SIZE_ACCEPTED);
        break;
    case 't':
        if (!cli_parse_u64(value, &v) || v == 0 || v > 1000)
            return cli_usage_error("explain", "--top: bad value \"%s\": expected 1 to 1000", value);
        a->req.top = (size_t)v;
        break;
    case 'j':
        a->json = true;
        break;
    }
    return CLI_OK;
}

const struct cli_command cmd_explain_command = {
    .name = "explain",
    .text = explain_text,
    .options = explain_options,
    .unknown = "unknown option or missing value",
    .operands = 1,
    .operands_error = "expected one snapshot FILE",
    .option = explain_option,
    .read = 1,
    .filter_frames = true,
};

int
cmd_explain(int argc, char **argv)
{
    struct explain_args args = {.req = {.top = 5}};
    struct cli_input in;
    if (!cli_begin(&cmd_explain_command, argc, argv, &args, &in))
        return in.status;
    const struct snapshot *snap = in.snap[0];
    int status = analysis_check_device(in.paths[0], snap, args.req.device);
    struct explain x;
    char err[1024] = "", safe[1024];
    if (status == CLI_OK && explain_compute(snap, &args.req, &x, err, sizeof err) != 0) {
        fprintf(stderr, "cuprof: %s: %s\n", cli_term(in.paths[0], safe, sizeof safe), err);
        status = CLI_BADUSE;
    } else if (status == CLI_OK) {
        if (args.json)
            status = explain_print_json(stdout, in.paths[0], &x) ? CLI_OK : CLI_BADUSE;
        else
            explain_print_text(stdout, in.paths[0], &x);
        explain_free(&x);
    }
    cli_input_free(&in);
    return status;
}
