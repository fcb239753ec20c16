/* cmd_replay.c: `cuprof replay FILE [--alloc-conf C]... [--check] [--json]`: feeds the recorded
 *   requests through the real allocator on an in-process fake device, once per setting
 *   (replay_run.c), and prints the figures side by side, as text or JSON. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/alloc_config.h"
#include "allocator/alloc_policy.h"
#include "allocator/allocator.h"
#include "allocator/cuprof_errors.h"
#include "cli/analysis.h"
#include "cli/cli_commands.h"
#include "cli/cli_options.h"
#include "cli/cli_util.h"
#include "cli/replay.h"
#include "cli/replay_run.h"
#include "snapshot/snapshot_usage.h"
#include "stats/memory_stats.h"

static const char replay_text[] =
    "usage: cuprof replay [--alloc-conf CONF]... [--check] [--memory SIZE] [--device N] [--json]\n"
    "                     FILE\n\n"
    "Feeds FILE's recorded alloc/free sequence through cuprof's allocator (PyTorch's rules) on a\n"
    "simulated device, first with the snapshot's own settings, then with every --alloc-conf, and\n"
    "prints peak reserved, segments, retries and OOMs side by side: \"would\n"
    "max_split_size_mb:256 have avoided this OOM?\" answered without running the program.\n"
    "A history that starts mid-run starts from the state at its first entry, rebuilt backwards\n"
    "from the segments (as MemoryViz does), not from an empty device; what the segments do not\n"
    "show (unsplit remainders of live blocks) is learnt from the recording's later decisions;\n"
    "that state was made under the recorded settings, so its blocks keep their recorded sizes\n"
    "and every other setting applies from the first entry on (as a setting changed at run time).\n"
    "Output: the device memory it ran with and where that figure came from, then the table\n"
    "(text); or with --json one object: file, device, capacity (bytes, or null when\n"
    "unlimited), with --check `check` {reproduced, checked, start_misses, differences:\n"
    "the first ones, each entry, size, stream, recorded_addr, recorded_segment, replay_addr,\n"
    "replay_segment}, and `settings`, one object per setting: setting, recorded, peak_reserved,\n"
    "peak_allocated, segments_at_peak, segments_allocated, alloc_retries, ooms, recorded_ooms\n"
    "(bytes exact).\n\n";
#define REPLAY_MAX_CONFS 16

static const struct cli_option replay_options[] = {
    {"alloc-conf", 'a', "CONF",
     "another setting to compare (PYTORCH_CUDA_ALLOC_CONF syntax); repeatable", 0},
    {"check", 'c', NULL,
     "with the snapshot's own settings, count the recorded decisions the replay reproduces (each "
     "alloc's address and the size of the segment it made) as `reproduced N/M allocations`, and "
     "list the first differences; exit 1 when N < M",
     0},
    {"memory", 'm', "SIZE",
     "device capacity, e.g. 80GiB or 300M (K, M, G are powers of 1024: 80GB is 74.51 GiB; "
     "default: from the first OOM's free bytes, else none)",
     0},
    {"device", 'd', "N", "the device to replay (default 0)", 0},
    {"json", 'j', NULL, "the figures as one JSON object (described above), bytes exact", 0},
    {0},
};

struct replay_args {
    const char *confs[REPLAY_MAX_CONFS + 1]; /* [0]: the recorded settings */
    size_t nconf;
    bool check, json;
    uint64_t memory, device;
};

static int
replay_option(void *ctx, int key, const char *value)
{
    struct replay_args *a = ctx;
    switch (key) {
    case 'a':
        if (a->nconf > REPLAY_MAX_CONFS)
            return cli_usage_error("replay", "at most %d --alloc-conf", REPLAY_MAX_CONFS);
        a->confs[a->nconf++] = value;
        break;
    case 'c':
        a->check = true;
        break;
    case 'j':
        a->json = true;
        break;
    case 'm':
        if (!cli_parse_size(value, &a->memory) || a->memory == 0)
            return cli_usage_error("replay", "--memory: bad value \"%s\": expected %s", value,
                                   CLI_SIZE_ACCEPTED);
        break;
    case 'd':
        if (!cli_parse_u64(value, &a->device))
            return cli_usage_error("replay", "--device wants a number, not \"%s\"", value);
        break;
    }
    return CLI_OK;
}

const struct cli_command cmd_replay_command = {
    .name = "replay",
    .text = replay_text,
    .options = replay_options,
    .unknown = "unknown option or missing value",
    .operands = 1,
    .operands_error = "expected one snapshot FILE",
    .option = replay_option,
    .read = 1,
};

/* Each column is as wide as its setting (22 at least), so no setting is cut. */
static void
print_table(const struct replay_result *res, const char *const *confs, size_t n)
{
    char s[32], label[256];
    int width[REPLAY_MAX_CONFS + 1];
    printf("%-26s", "setting");
    for (size_t i = 0; i < n; i++) {
        const char *name = confs[i][0] ? cli_term(confs[i], label, sizeof label) : "(defaults)";
        size_t len = strlen(name);
        width[i] = len > 22 ? (int)len : 22;
        printf(" %*s", width[i], name);
    }
    printf("\n%-26s", "peak reserved");
    for (size_t i = 0; i < n; i++)
        printf(" %*s", width[i],
               cli_size((uint64_t)res[i].stats.reserved_bytes[STAT_ALL].peak, s, 32));
    printf("\n%-26s", "peak allocated");
    for (size_t i = 0; i < n; i++)
        printf(" %*s", width[i],
               cli_size((uint64_t)res[i].stats.allocated_bytes[STAT_ALL].peak, s, 32));
    /* PyTorch's segment.peak: the most segments held at once (an expandable segment's pages
     * are not counted as segments, as in PyTorch's stats). */
    printf("\n%-26s", "most segments at once");
    for (size_t i = 0; i < n; i++)
        printf(" %*" PRId64, width[i], res[i].stats.segment[STAT_ALL].peak);
    printf("\n%-26s", "segments allocated");
    for (size_t i = 0; i < n; i++)
        printf(" %*" PRId64, width[i], res[i].stats.num_device_alloc);
    printf("\n%-26s", "alloc retries");
    for (size_t i = 0; i < n; i++)
        printf(" %*" PRId64, width[i], res[i].stats.num_alloc_retries);
    printf("\n%-26s", "OOMs (recorded)");
    for (size_t i = 0; i < n; i++) {
        char cell[64];
        snprintf(cell, sizeof(cell), "%zu (%zu)", res[i].ooms, res[i].recorded_ooms);
        printf(" %*s", width[i], cell);
    }
    printf("\n");
}

/* Which device memory the replay ran with, and where that figure came from. */
static void
print_capacity(const struct replay_args *a, uint64_t capacity)
{
    char s[32];
    printf("device %" PRIu64 " memory: ", a->device);
    if (capacity >= REPLAY_UNLIMITED)
        printf("unlimited (no --memory and no OOM recorded: no setting runs out)\n\n");
    else if (a->memory != 0)
        printf("%s (--memory)\n\n", cli_size(capacity, s, sizeof s));
    else
        printf("%s (the first recorded OOM's reserved plus free bytes; --memory sets it)\n\n",
               cli_size(capacity, s, sizeof s));
}

/* The settings given, each of which must parse, before the file is read. */
static int
check_confs(const struct replay_args *a)
{
    char err[ALLOC_CONFIG_ERR_LEN];
    struct alloc_config probe;
    for (size_t i = 1; i < a->nconf; i++)
        if (alloc_config_parse(a->confs[i], &probe, err, sizeof(err)) != 0)
            return cli_usage_error("replay", "--alloc-conf: %s", err);
    return CLI_OK;
}

/* Every setting replayed in turn, the recorded one first (after learning its remainders). */
static int
replay_all(const struct snapshot *snap, const struct replay_args *a, uint64_t capacity,
           struct replay_result *res)
{
    struct replay_plan plan;
    int status = replay_plan_init(&plan, snap, (size_t)a->device, a->confs[0], capacity) == 0
                     ? CLI_OK
                     : CLI_BADUSE;
    for (size_t i = 0; i < a->nconf && status == CLI_OK; i++) {
        struct replay_opts opts = {
            .conf = a->confs[i], .recorded = i == 0, .check = a->check && i == 0, .progress = true};
        if (replay_setting(&plan, &opts, &res[i]) != 0)
            status = CLI_BADUSE;
    }
    replay_plan_free(&plan);
    return status;
}

/* The first differences --check found, under a heading (none, no heading). */
static void
print_diffs(const struct replay_result *res)
{
    if (res->ndiffs > 0)
        printf("differences from the recording (first %d):\n", REPLAY_MAX_DIFFS);
    for (size_t k = 0; k < res->ndiffs; k++) {
        const struct replay_diff *d = &res->diffs[k];
        char s1[32];
        printf("  entry %zu: alloc of %s on stream %" PRIu64 ": recorded 0x%" PRIx64, d->entry,
               cli_size(d->size, s1, sizeof(s1)), d->stream, d->recorded_addr);
        if (d->recorded_segment > 0)
            printf(" (new segment of %" PRIu64 " bytes)", d->recorded_segment);
        printf(", replay 0x%" PRIx64, d->replay_addr);
        if (d->replay_segment > 0)
            printf(" (new segment of %" PRIu64 " bytes)", d->replay_segment);
        printf("\n");
    }
}

/* The --check count, then the table; CLI_FOUND when the replay differs from the recording. */
static int
print_results(const struct replay_result *res, const struct replay_args *a, uint64_t capacity)
{
    const char *const *confs = a->confs;
    size_t n = a->nconf;
    bool check = a->check;
    if (check) {
        print_diffs(&res[0]);
        printf("reproduced %zu/%zu allocations", res[0].reproduced, res[0].checked);
        if (res[0].prelude_misses > 0)
            printf(" (%zu blocks of the starting state could not be placed)",
                   res[0].prelude_misses);
        printf("\n\n");
    }
    print_capacity(a, capacity);
    print_table(res, confs, n);
    return check && res[0].reproduced < res[0].checked ? CLI_FOUND : CLI_OK;
}

/* The same figures as one JSON object (--json). */
static bool
print_json(const char *path, const struct replay_args *a, uint64_t capacity,
           const struct replay_result *res)
{
    struct emitter *e = cli_json_open(stdout);
    if (e == NULL)
        return false;
    emitter_begin_dict(e);
    cli_json_key_string(e, "file", path);
    cli_json_key_u64(e, "device", a->device);
    emitter_key(e, "capacity");
    if (capacity >= REPLAY_UNLIMITED)
        emitter_none(e);
    else
        emitter_u64(e, capacity);
    if (a->check) {
        emitter_key(e, "check");
        emitter_begin_dict(e);
        cli_json_key_u64(e, "reproduced", res[0].reproduced);
        cli_json_key_u64(e, "checked", res[0].checked);
        cli_json_key_u64(e, "start_misses", res[0].prelude_misses);
        emitter_key(e, "differences");
        emitter_begin_list(e);
        for (size_t k = 0; k < res[0].ndiffs; k++) {
            const struct replay_diff *d = &res[0].diffs[k];
            emitter_begin_dict(e);
            cli_json_key_u64(e, "entry", d->entry);
            cli_json_key_u64(e, "size", d->size);
            cli_json_key_u64(e, "stream", d->stream);
            cli_json_key_u64(e, "recorded_addr", d->recorded_addr);
            cli_json_key_u64(e, "recorded_segment", d->recorded_segment);
            cli_json_key_u64(e, "replay_addr", d->replay_addr);
            cli_json_key_u64(e, "replay_segment", d->replay_segment);
            emitter_end(e);
        }
        emitter_end(e);
        emitter_end(e);
    }
    emitter_key(e, "settings");
    emitter_begin_list(e);
    for (size_t i = 0; i < a->nconf; i++) {
        const struct memory_stats *st = &res[i].stats;
        emitter_begin_dict(e);
        cli_json_key_string(e, "setting", a->confs[i]);
        emitter_key(e, "recorded");
        emitter_bool(e, i == 0);
        cli_json_key_int(e, "peak_reserved", st->reserved_bytes[STAT_ALL].peak);
        cli_json_key_int(e, "peak_allocated", st->allocated_bytes[STAT_ALL].peak);
        cli_json_key_int(e, "segments_at_peak", st->segment[STAT_ALL].peak);
        cli_json_key_int(e, "segments_allocated", st->num_device_alloc);
        cli_json_key_int(e, "alloc_retries", st->num_alloc_retries);
        cli_json_key_u64(e, "ooms", res[i].ooms);
        cli_json_key_u64(e, "recorded_ooms", res[i].recorded_ooms);
        emitter_end(e);
    }
    emitter_end(e);
    emitter_end(e);
    return cli_json_close(e);
}

int
cmd_replay(int argc, char **argv)
{
    struct replay_args args = {.nconf = 1};
    struct cli_input in;
    if (!cli_parse(&cmd_replay_command, argc, argv, &args, &in))
        return in.status;
    int status = check_confs(&args);
    if (status != CLI_OK)
        return status;
    if (!cli_read(&cmd_replay_command, &in))
        return in.status;
    const struct snapshot *snap = in.snap[0];
    if (args.device >= snap->device_count) {
        char safe[1024], has[64] = "it has no trace";
        if (snap->device_count == 1)
            snprintf(has, sizeof has, "it has a trace for device 0");
        else if (snap->device_count > 1)
            snprintf(has, sizeof has, "it has traces for devices 0 to %zu", snap->device_count - 1);
        fprintf(stderr, "cuprof: %s: no trace for device %" PRIu64 " (%s)\n",
                cli_term(in.paths[0], safe, sizeof safe), args.device, has);
        cli_input_free(&in);
        return CLI_BADUSE;
    }
    args.confs[0] = replay_recorded_conf(snap, in.paths[0]);
    struct replay_result *res = calloc(REPLAY_MAX_CONFS + 1, sizeof(*res));
    uint64_t capacity =
        args.memory ? args.memory : replay_capacity_from_ooms(snap, (size_t)args.device);
    status = res != NULL ? replay_all(snap, &args, capacity, res) : CLI_BADUSE;
    if (status == CLI_OK && args.json)
        status = !print_json(in.paths[0], &args, capacity, res)     ? CLI_BADUSE
                 : args.check && res[0].reproduced < res[0].checked ? CLI_FOUND
                                                                    : CLI_OK;
    else if (status == CLI_OK)
        status = print_results(res, &args, capacity);
    free(res);
    cli_input_free(&in);
    return status;
}
