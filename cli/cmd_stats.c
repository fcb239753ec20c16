/* cmd_stats.c: `cuprof stats FILE`: torch.cuda.memory_stats() of a snapshot as JSON. */
#include <stdlib.h>
#include <string.h>

#include "allocator/allocator.h"
#include "cli/analysis.h"
#include "cli/cli_commands.h"
#include "cli/cli_options.h"
#include "cli/cli_util.h"
#include "stats/memory_stats.h"
#include "stats/stats_json.h"

static const char stats_text[] =
    "usage: cuprof stats [--device N | --all-devices] FILE\n\n"
    "Prints the memory_stats dict of FILE as JSON, with PyTorch's flat key names, sorted, the\n"
    "way json.dumps(torch.cuda.memory_stats(N)) prints it. Snapshots written by cuprof carry\n"
    "the counters; for a snapshot PyTorch wrote they are rebuilt from the block table (current\n"
    "values) and the trace (reserved and requested peaks); accumulated counts are then 0.\n\n";

static const struct cli_option stats_options[] = {
    {"device", 'd', "N", "the device to print (default 0): one JSON object", 0},
    {"all-devices", 'a', NULL, "a JSON list with one object per device", 0},
    {0},
};

struct stats_args {
    uint64_t device;
    bool all, device_given;
};

static int
stats_option(void *ctx, int key, const char *value)
{
    struct stats_args *a = ctx;
    if (key == 'a')
        a->all = true;
    else if (key == 'd' && !cli_parse_u64(value, &a->device))
        return cli_usage_error("stats", "--device wants a device number, not \"%s\"", value);
    a->device_given = a->device_given || key == 'd';
    return CLI_OK;
}

const struct cli_command cmd_stats_command = {
    .name = "stats",
    .text = stats_text,
    .options = stats_options,
    .unknown = "unknown option",
    .operands = 1,
    .operands_error = "expected one snapshot FILE",
    .option = stats_option,
    .read = 1,
};

static void
add_block(struct memory_stats *st, const struct snap_block *b, bool is_small, bool split)
{
    enum stat_pool pool = memory_stats_pool(is_small);
    bool oversize = st->max_split_size >= 0 && b->size >= (uint64_t)st->max_split_size;
    if (b->state == BLOCK_ACTIVE_ALLOCATED) {
        memory_stats_increase_pool(st->allocated_bytes, pool, (int64_t)b->size);
        memory_stats_increase_pool(st->requested_bytes, pool, (int64_t)b->requested_size);
        memory_stats_increase_pool(st->allocation, pool, 1);
        if (oversize)
            memory_stats_increase(&st->oversize_allocations, 1);
    }
    if (b->state != BLOCK_INACTIVE) {
        memory_stats_increase_pool(st->active_bytes, pool, (int64_t)b->size);
        memory_stats_increase_pool(st->active, pool, 1);
    } else if (split) {
        memory_stats_increase_pool(st->inactive_split_bytes, pool, (int64_t)b->size);
        memory_stats_increase_pool(st->inactive_split, pool, 1);
    }
}

bool
stats_for_device(const struct snapshot *snap, size_t device, struct memory_stats *out)
{
    const struct snap_cuprof *c = &snap->cuprof;
    if (c->present && c->stats != NULL && c->stats_count != NULL && device < snap->device_count &&
        c->stats_count[device] > 0) {
        size_t n = c->stats_count[device];
        struct memory_stat_kv *kv = malloc(n * sizeof(*kv));
        if (kv != NULL) {
            for (size_t i = 0; i < n; i++) {
                kv[i].key = c->stats[device][i].key;
                kv[i].value = c->stats[device][i].value;
            }
            size_t known = memory_stats_from_flat(kv, n, out);
            free(kv);
            if (known > 0)
                return true;
        }
    }
    int64_t max_split = snap->has_allocator_settings ? snap->allocator_settings.max_split_size : -1;
    memory_stats_init(out, max_split);
    for (size_t s = 0; s < snap->segment_count; s++) {
        const struct snap_segment *seg = &snap->segments[s];
        if ((size_t)seg->device != device)
            continue;
        enum stat_pool pool = memory_stats_pool(seg->is_small);
        memory_stats_increase_pool(out->reserved_bytes, pool, (int64_t)seg->total_size);
        memory_stats_increase_pool(out->segment, pool, 1);
        if (max_split >= 0 && seg->total_size >= (uint64_t)max_split)
            memory_stats_increase(&out->oversize_segments, 1);
        for (uint32_t k = 0; k < seg->block_count; k++)
            add_block(out, &snap->blocks[seg->first_block + k], seg->is_small,
                      seg->block_count > 1);
    }
    struct device_analysis a;
    if (analysis_run(snap, device, false, &a) == 0) {
        if ((int64_t)a.peak_reserved > out->reserved_bytes[STAT_ALL].peak)
            out->reserved_bytes[STAT_ALL].peak = (int64_t)a.peak_reserved;
        if ((int64_t)a.peak_live > out->requested_bytes[STAT_ALL].peak)
            out->requested_bytes[STAT_ALL].peak = (int64_t)a.peak_live;
        out->num_ooms = (int64_t)a.oom_count;
        analysis_free(&a);
    }
    return false;
}

/* The stats of `count` devices from `first` as JSON on stdout. Returns false when host memory
 * runs out. */
static bool
print_stats(const struct snapshot *snap, size_t first, size_t count, bool all)
{
    struct memory_stats *st = calloc(count, sizeof(*st));
    if (st == NULL) {
        fprintf(stderr, "cuprof: out of memory\n");
        return false;
    }
    for (size_t i = 0; i < count; i++)
        (void)stats_for_device(snap, first + i, &st[i]);
    size_t len = all ? stats_json_devices(st, (int)count, NULL, 0) : stats_json(st, NULL, 0);
    char *text = malloc(len + 1);
    bool ok = text != NULL;
    if (ok) {
        if (all)
            (void)stats_json_devices(st, (int)count, text, len + 1);
        else
            (void)stats_json(st, text, len + 1);
        printf("%s\n", text);
    }
    free(text);
    free(st);
    return ok;
}

int
cmd_stats(int argc, char **argv)
{
    struct stats_args args = {0};
    struct cli_input in;
    if (!cli_begin(&cmd_stats_command, argc, argv, &args, &in))
        return in.status;
    size_t ndev = analysis_device_count(in.snap[0]);
    int status = CLI_OK;
    /* The device asked for is one the file holds; device 0, the default, may be empty (as
     * torch.cuda.memory_stats() of an unused device is). */
    if (!args.all && args.device_given)
        status = analysis_check_device(in.paths[0], in.snap[0], args.device);
    if (ndev == 0)
        ndev = 1;
    if (status == CLI_OK &&
        !print_stats(in.snap[0], args.all ? 0 : (size_t)args.device, args.all ? ndev : 1, args.all))
        status = CLI_BADUSE;
    cli_input_free(&in);
    return status;
}
