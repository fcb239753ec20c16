/* cmd_replay.c: `cuprof replay FILE [--alloc-conf C]... [--check]`: feeds the recorded requests
 *   through the real allocator on an in-process fake device, once per setting, and compares. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/alloc_policy.h"
#include "allocator/allocator.h"
#include "allocator/cuprof_errors.h"
#include "cli/analysis.h"
#include "cli/cli_commands.h"
#include "cli/cli_options.h"
#include "cli/cli_util.h"
#include "cli/replay.h"
#include "snapshot/snapshot_usage.h"
#include "stats/memory_stats.h"

static const char replay_text[] =
    "usage: cuprof replay [--alloc-conf CONF]... [--check] [--memory BYTES] [--device N] FILE\n\n"
    "Feeds FILE's recorded alloc/free sequence through cuprof's allocator (PyTorch's rules) on a\n"
    "simulated device, first with the snapshot's own settings, then with every --alloc-conf, and\n"
    "prints peak reserved, segments, retries and OOMs side by side: \"would\n"
    "max_split_size_mb:256 have avoided this OOM?\" answered without running the program.\n"
    "A history that starts mid-run starts from the state at its first entry, rebuilt backwards\n"
    "from the segments (as MemoryViz does), not from an empty device; what the segments do not\n"
    "show (unsplit remainders of live blocks) is learnt from the recording's later decisions.\n\n";
#define REPLAY_MAX_CONFS  16
#define REPLAY_SHOW_DIFFS 10

static const struct cli_option replay_options[] = {
    {"alloc-conf", 'a', "CONF",
     "another setting to compare (PYTORCH_CUDA_ALLOC_CONF syntax); repeatable", 0},
    {"check", 'c', NULL,
     "with the snapshot's own settings, count the recorded decisions the replay reproduces (each "
     "alloc's address and the size of the segment it made) as `reproduced N/M allocations`, and "
     "list the first differences; exit 1 when N < M",
     0},
    {"memory", 'm', "SIZE",
     "device capacity, e.g. 80GB or 300MiB (default: from the first OOM's free bytes, else "
     "none)",
     0},
    {"device", 'd', "N", "the device to replay (default 0)", 0},
    {0},
};

struct replay_args {
    const char *confs[REPLAY_MAX_CONFS + 1]; /* [0]: the recorded settings */
    size_t nconf;
    bool check;
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

struct replay_result {
    const char *label;
    bool ok;
    struct memory_stats stats;
    size_t ooms, recorded_ooms, prelude_misses;
    size_t checked, reproduced;
};

/* An allocation outside the cache (its pool says so): tracked at a fresh address. */
static int
replay_external(struct replay_run *r, const struct snap_entry *e)
{
    struct span_map_item old;
    if (e->action == TRACE_ALLOC) {
        uint64_t addr = r->dev.bump;
        r->dev.bump += (e->size + (2u << 20) - 1) & ~(uint64_t)((2u << 20) - 1);
        if (allocator_track_external(r->alloc, (int)r->device, addr, e->size, e->stream, e->pool,
                                     e->stack) != 0)
            return 0; /* not ours to judge: the recording had it */
        return span_map_put(&r->addr_of, e->addr, addr, REPLAY_BLOCK_EXTERNAL);
    }
    if (e->action == TRACE_FREE_REQUESTED && span_map_remove(&r->addr_of, e->addr, &old))
        (void)allocator_untrack_external(r->alloc, old.size, 0);
    return 0;
}

static void
show_diff(struct replay_run *r, size_t i, const struct snap_entry *e, uint64_t got, size_t first,
          size_t nsegs)
{
    if (r->diffs_shown++ >= REPLAY_SHOW_DIFFS)
        return;
    /* The heading comes with the first difference: none, no heading. */
    if (r->diffs_shown == 1)
        printf("differences from the recording (first %d):\n", REPLAY_SHOW_DIFFS);
    char s1[32];
    printf("  entry %zu: alloc of %s on stream %" PRIu64 ": recorded 0x%" PRIx64, i,
           cli_size(e->size, s1, sizeof(s1)), e->stream, e->addr);
    if (nsegs > 0)
        printf(" (new segment of %" PRIu64 " bytes)",
               r->snap->device_traces[r->device].entries[first].size);
    printf(", replay 0x%" PRIx64, got);
    if (r->dev.made_count > 0)
        printf(" (new segment of %" PRIu64 " bytes)", r->dev.made[0]);
    printf("\n");
}

/* The free_requested entries whose free_completed follows (before the address is handed out
 * again): a block used on other streams stays pending until its events complete. Returns a
 * calloc'd flag per entry, or NULL when host memory runs out. */
static uint8_t *
pending_requests(const struct snap_device_trace *t)
{
    size_t n = t ? t->count : 0;
    uint8_t *pending = calloc(n + 1, 1);
    struct span_map completions;
    span_map_init(&completions);
    for (size_t i = n; pending != NULL && i-- > 0;) {
        const struct snap_entry *e = &t->entries[i];
        if (e->pool != TRACE_POOL_DEFAULT && e->pool != TRACE_POOL_TRACE)
            continue;
        if (e->action == TRACE_FREE_COMPLETED) {
            if (span_map_put(&completions, e->addr, 1, 0) != 0) {
                free(pending);
                pending = NULL;
            }
        } else if (e->action == TRACE_FREE_REQUESTED) {
            pending[i] = span_map_remove(&completions, e->addr, NULL);
        } else if (e->action == TRACE_ALLOC) {
            (void)span_map_remove(&completions, e->addr, NULL);
        }
    }
    span_map_free(&completions);
    return pending;
}

static bool
recorded_trace_mode(const struct snapshot *snap)
{
    return snap->cuprof.present && snap->cuprof.mode != NULL &&
           strcmp(snap->cuprof.mode, "trace") == 0;
}

/* Ends a replay: its pending events complete (empty_cache waits for them) and are destroyed
 * with the allocator. */
static void
run_free(struct replay_run *r)
{
    for (int d = 0; r->alloc != NULL && d <= (int)r->device; d++) {
        (void)allocator_empty_cache(r->alloc, d);
        allocator_destroy_idle_events(r->alloc, d);
    }
    allocator_destroy(r->alloc);
    span_map_free(&r->dev.live);
    span_map_free(&r->dev.pending_events);
    span_map_free(&r->addr_of);
    free(r->guesses);
}

/* How one replay runs: `learn` stops it at the first difference, which replay_start_learn may
 * explain (then *learnt is set and the caller replays again). */
struct replay_mode {
    bool recorded, check, learn, learnt;
    size_t guesses; /* guessed free blocks of the starting state */
    struct span_map *remainders;
};

/* A segment going back to the device: freed, or (expandable segments) pages unmapped. */
static bool
is_release(uint8_t action)
{
    return action == TRACE_SEGMENT_FREE || action == TRACE_SEGMENT_UNMAP;
}

/* Whether the request `e` would be served from the replay's cache as it stands: PyTorch's
 * get_free_block finds a free block of its stream and pool at least as large (oversize rules
 * kept). Only a request the cache cannot serve makes segments, or retries after releasing them.
 * Returns 0, or -1 when host memory runs out. */
static int
fits_cache(struct replay_run *r, const struct alloc_config *config, const struct snap_entry *e,
           bool *fits)
{
    size_t got_seg, got_blk;
    uint64_t size = alloc_policy_round_size(config, e->size);
    bool small = alloc_policy_is_small(size);
    *fits = false;
    struct segment_info *segs;
    struct block_info *blks;
    int rc = replay_copy_state(r, &segs, &got_seg, &blks, &got_blk);
    for (size_t s = 0; rc == 0 && s < got_seg && !*fits; s++) {
        if (segs[s].stream != e->stream || (bool)segs[s].is_small != small ||
            segs[s].pool != TRACE_POOL_DEFAULT)
            continue;
        for (uint32_t k = 0; k < segs[s].block_count && !*fits; k++) {
            const struct block_info *b = &blks[segs[s].first_block + k];
            *fits = b->state == BLOCK_INACTIVE && b->size >= size &&
                    alloc_policy_may_use(config, size, b->size);
        }
    }
    free(segs);
    free(blks);
    return rc == 0 ? 0 : -1;
}

/* Whether the replay empties the cache at the releases at entry i: they are the program's
 * empty_cache unless a request's retry explains them. A retry's releases come right before the
 * segments its request then makes (or its OOM), and only for a request the cache could not
 * serve: one the cache could serve had them from empty_cache. A retry is left to the replayed
 * allocator, which makes it when it runs out of memory too; a replay on a device of unknown size
 * never does, so there the releases are made here when they unmap pages (only PyTorch's
 * release_cached_blocks unmaps them, which releases all that empty_cache releases). */
static int
emptied_by_program(struct replay_run *r, const struct alloc_config *config,
                   const struct snap_device_trace *t, size_t i, bool *emptied)
{
    size_t j = i;
    bool unmaps = false;
    while (j < t->count && is_release(t->entries[j].action))
        unmaps |= t->entries[j++].action == TRACE_SEGMENT_UNMAP;
    size_t k = j;
    while (k < t->count && (t->entries[k].action == TRACE_SEGMENT_ALLOC ||
                            t->entries[k].action == TRACE_SEGMENT_MAP))
        k++;
    *emptied = j == t->count ||
               (t->entries[j].action != TRACE_SEGMENT_ALLOC &&
                t->entries[j].action != TRACE_SEGMENT_MAP && t->entries[j].action != TRACE_OOM);
    if (*emptied || k == j || k == t->count || t->entries[k].action != TRACE_ALLOC)
        return 0;
    if (unmaps && r->dev.capacity >= REPLAY_UNLIMITED) {
        *emptied = true;
        return 0;
    }
    return fits_cache(r, config, &t->entries[k], emptied);
}

/* Where a replay stands in the trace: the segments recorded since the last request. */
struct replay_cursor {
    const struct snap_device_trace *t;
    const struct alloc_config *config;
    struct replay_mode *mode;
    struct replay_result *res;
    const uint8_t *pending; /* per entry: a free_requested whose free_completed follows */
    size_t seg_first, seg_count;
    uint64_t seg_sizes[8];
};

/* --check of the request at entry i, which got `addr`: its address and the segments it made
 * against the recording's. Returns 0, 1 when a learning replay stops here, or -1. */
static int
check_request(struct replay_run *r, struct replay_cursor *c, size_t i, const struct snap_entry *e,
              uint64_t addr)
{
    bool same = addr == e->addr && r->dev.made_count == c->seg_count;
    for (size_t k = 0; same && k < c->seg_count && k < 8; k++)
        same = r->dev.made[k] == c->seg_sizes[k];
    c->res->checked++;
    if (same) {
        c->res->reproduced++;
    } else if (c->mode->learn) {
        int learnt = addr == 0
                         ? 0
                         : replay_start_learn(r, addr, alloc_policy_round_size(c->config, e->size));
        if (learnt < 0)
            return -1;
        c->mode->learnt = learnt == 1;
        return 1;
    } else {
        show_diff(r, i, e, addr, c->seg_first, c->seg_count);
    }
    return 0;
}

/* An alloc (or a recorded OOM) at entry i. Returns 0, 1 when the replay stops here, or -1. */
static int
replay_request(struct replay_run *r, struct replay_cursor *c, size_t i, const struct snap_entry *e)
{
    uint64_t addr = 0;
    r->dev.made_count = 0;
    /* Offer the recorded segment address only to the request that made it. */
    r->dev.cursor = c->seg_count ? c->seg_first : c->t->count;
    int rc = allocator_malloc(r->alloc, (int)r->device, e->size, e->stream, e->stack, &addr);
    if (rc == -CUPROF_ENOMEM) {
        c->res->ooms++;
        addr = 0;
    } else if (rc != 0) {
        return -1;
    }
    if (e->action == TRACE_OOM) {
        c->res->recorded_ooms++;
        /* The program never got this block: give it back at once. */
        if (addr != 0 && allocator_free(r->alloc, addr, 0) != 0)
            return -1;
    } else {
        int stop = r->check ? check_request(r, c, i, e, addr) : 0;
        if (stop != 0)
            return stop;
        if (addr != 0 && span_map_put(&r->addr_of, e->addr, addr, REPLAY_BLOCK_CACHED) != 0)
            return -1;
    }
    c->seg_count = 0;
    return 0;
}

/* A free_requested or free_completed at entry i. Returns 0 or -1. */
static int
replay_free(struct replay_run *r, struct replay_cursor *c, size_t i, const struct snap_entry *e)
{
    if (e->action == TRACE_FREE_REQUESTED && c->pending[i]) {
        /* A block used on other streams: freed now (PyTorch's allocated counters drop at the
         * request), cached only at its free_completed, through an event that waits for it.
         * Its own pseudo-stream keeps each such wait independent of the others. */
        struct span_map_item *it = span_map_get(&r->addr_of, e->addr);
        if (it != NULL && it->stack == REPLAY_BLOCK_CACHED) {
            r->dev.event_key = it->size;
            int rc = allocator_free_on_stream(r->alloc, it->size, UINT64_MAX - i, 0);
            r->dev.event_key = 0;
            if (rc != 0)
                return -1;
            it->stack = REPLAY_BLOCK_PENDING; /* its completion only ends the wait */
        }
        return 0;
    }
    /* Freed at the request when no completion follows; a completion whose request came before
     * the first entry frees a block of the starting state. */
    struct span_map_item old;
    if (span_map_remove(&r->addr_of, e->addr, &old) && old.stack != REPLAY_BLOCK_EXTERNAL) {
        if (old.stack == REPLAY_BLOCK_PENDING)
            (void)replay_device_complete(&r->dev, old.size);
        else if (allocator_free(r->alloc, old.size, 0) != 0)
            return -1;
        replay_guess_freed(r, old.size);
    }
    return 0;
}

/* Replays entry i. Returns 0, 1 when the replay stops here, or -1. */
static int
replay_step(struct replay_run *r, struct replay_cursor *c, size_t i)
{
    const struct snap_device_trace *t = c->t;
    const struct snap_entry *e = &t->entries[i];
    if (e->pool == TRACE_POOL_NVTX)
        return 0; /* the program's own pool (NVTX regions): inside a block the cache holds */
    if (e->pool != TRACE_POOL_DEFAULT && e->pool != TRACE_POOL_TRACE)
        return replay_external(r, e); /* managed, VMM or driver-pool memory: never cached */
    if (e->action == TRACE_SEGMENT_ALLOC || e->action == TRACE_SEGMENT_MAP) {
        if (c->seg_count == 0)
            c->seg_first = i;
        if (c->seg_count < 8)
            c->seg_sizes[c->seg_count] = e->size;
        c->seg_count++;
        return 0;
    }
    if (is_release(e->action)) {
        bool emptied = false;
        if (i > 0 && is_release(t->entries[i - 1].action))
            return 0;
        if (emptied_by_program(r, c->config, t, i, &emptied) != 0)
            return -1;
        if (emptied)
            (void)allocator_empty_cache(r->alloc, (int)r->device);
        return 0;
    }
    if (e->action == TRACE_ALLOC || e->action == TRACE_OOM)
        return replay_request(r, c, i, e);
    if (e->action == TRACE_FREE_REQUESTED || e->action == TRACE_FREE_COMPLETED)
        return replay_free(r, c, i, e);
    return 0;
}

/* The fake device of one replay: its capacity, the recorded card's size, and fresh addresses
 * above every recorded one. */
static void
fake_device_init(struct fake_device *dev, const struct snapshot *snap, size_t device, bool check,
                 uint64_t capacity)
{
    const struct snap_device_trace *t =
        device < snap->device_count ? &snap->device_traces[device] : NULL;
    dev->trace = check ? t : NULL;
    dev->capacity = capacity;
    for (size_t i = 0; i < snap->cuprof.footprint_count; i++)
        if (snap->cuprof.footprints[i].device == (int32_t)device &&
            snap->cuprof.footprints[i].total > 0)
            dev->card_total = (uint64_t)snap->cuprof.footprints[i].total;
    uint64_t top = 0;
    for (size_t i = 0; i < snap->segment_count; i++)
        if (snap->segments[i].addr + snap->segments[i].total_size > top)
            top = snap->segments[i].addr + snap->segments[i].total_size;
    for (size_t i = 0; t && i < t->count; i++)
        if (t->entries[i].addr + t->entries[i].size > top)
            top = t->entries[i].addr + t->entries[i].size;
    dev->bump = ((top >> 30) + 1) << 30;
    span_map_init(&dev->live);
    span_map_init(&dev->pending_events);
}

/* The setting `conf` as the replay uses it; false (said why) when it does not parse. */
static bool
replay_config(const struct snapshot *snap, const char *conf, bool recorded,
              struct alloc_config *config)
{
    char err[256];
    if (alloc_config_parse(conf, config, err, sizeof(err)) != 0) {
        char safe[512];
        fprintf(stderr, "cuprof: replay: %s\n", cli_term(err, safe, sizeof safe));
        return false;
    }
    config->free_sync = FREE_SYNC_NONE;
    /* The recording's own settings include its mode: trace mode never caches. */
    if (recorded && recorded_trace_mode(snap))
        config->caching = false;
    return true;
}

/* Rebuilds the starting state in r->alloc, then counts peaks from the first entry. Returns 0 or
 * -1. */
static int
replay_prepare(struct replay_run *r, const struct alloc_config *config, size_t trace_count,
               struct replay_mode *mode, struct replay_result *res)
{
    /* No recorded segment address is offered while the starting state is rebuilt. */
    r->dev.cursor = trace_count;
    if (replay_start_state(r, config, &res->prelude_misses) != 0)
        return -1;
    mode->guesses = r->nguesses;
    /* Peaks count from the first entry: the fillers that built the starting state held its free
     * blocks (and a spare page) only for a moment. */
    allocator_reset_peak_stats(r->alloc, (int)r->device);
    allocator_set_roundup_divisions(r->alloc, config->roundup_power2_divisions);
    r->dev.cursor = 0;
    return 0;
}

/* Replays the entries in order, with progress on a terminal. Returns 0 or -1. */
static int
replay_entries(struct replay_run *r, struct replay_cursor *c, size_t count)
{
    struct cli_progress progress;
    cli_progress_begin(&progress, "replaying");
    int rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++) {
        cli_progress_update(&progress, i, c->t->count);
        rc = replay_step(r, c, i);
    }
    cli_progress_end(&progress);
    return rc < 0 ? -1 : 0;
}

static int
replay_once(const struct snapshot *snap, size_t device, const char *conf, struct replay_mode *mode,
            uint64_t capacity, struct replay_result *res)
{
    struct alloc_config config;
    if (!replay_config(snap, conf, mode->recorded, &config))
        return CLI_BADUSE;
    struct replay_run r = {
        .snap = snap, .device = device, .check = mode->check, .remainders = mode->remainders};
    const struct snap_device_trace *t =
        device < snap->device_count ? &snap->device_traces[device] : NULL;
    fake_device_init(&r.dev, snap, device, mode->check, capacity);
    span_map_init(&r.addr_of);
    struct device_ops ops;
    replay_device_ops(&r.dev, &ops);
    /* The starting state is rebuilt with exact sizes (its blocks were rounded when they were
     * made, and its fillers hold exact gaps): no rounding divisions until it stands. */
    struct alloc_config exact = config;
    memset(exact.roundup_power2_divisions, 0, sizeof(exact.roundup_power2_divisions));
    r.alloc = allocator_create(&exact, &ops, NULL, (int)device + 1);
    if (r.alloc == NULL) {
        fprintf(stderr, "cuprof: replay: out of memory\n");
        return CLI_BADUSE;
    }
    struct replay_cursor c = {.t = t, .config = &config, .mode = mode, .res = res};
    /* A learning replay has nothing to learn without a guess. */
    int rc = replay_prepare(&r, &config, t ? t->count : 0, mode, res);
    size_t count = t && !(mode->learn && r.nguesses == 0) ? t->count : 0;
    uint8_t *pending = rc == 0 ? pending_requests(t) : NULL;
    c.pending = pending;
    if (pending == NULL || replay_entries(&r, &c, count) != 0) {
        fprintf(stderr, "cuprof: replay: the allocator failed on a recorded request\n");
        run_free(&r);
        free(pending);
        return CLI_BADUSE;
    }
    allocator_get_stats(r.alloc, (int)device, &res->stats);
    res->ok = true;
    run_free(&r);
    free(pending);
    return CLI_OK;
}

/* A mid-run history's starting state guesses where some free blocks begin (their owners may hold
 * unsplit remainders no entry shows). Replays with the recorded settings until the recording's
 * decisions no longer contradict a guess: each contradiction grows one remainder to the smallest
 * size that explains it, so the guesses only shrink free blocks that the recording proves were
 * smaller. */
#define REPLAY_MAX_LEARN 256

static int
learn_remainders(const struct snapshot *snap, size_t device, const char *conf, uint64_t capacity,
                 struct span_map *remainders)
{
    for (int k = 0; k < REPLAY_MAX_LEARN; k++) {
        struct replay_mode mode = {
            .recorded = true, .check = true, .learn = true, .remainders = remainders};
        struct replay_result res;
        memset(&res, 0, sizeof(res));
        int rc = replay_once(snap, device, conf, &mode, capacity, &res);
        if (rc != CLI_OK || !mode.learnt || mode.guesses == 0)
            return rc;
    }
    return CLI_OK;
}

static uint64_t
capacity_from_ooms(const struct snapshot *snap, size_t device)
{
    struct device_analysis a;
    uint64_t capacity = REPLAY_UNLIMITED;
    if (analysis_run(snap, device, true, &a) != 0)
        return capacity;
    const struct snap_device_trace *t = &snap->device_traces[device];
    for (size_t i = 0; i < t->count; i++)
        if (t->entries[i].action == TRACE_OOM) {
            capacity = a.reserved_series[i] + t->entries[i].device_free;
            break;
        }
    analysis_free(&a);
    return capacity;
}

static void
print_table(const struct replay_result *res, size_t n)
{
    char s[32], label[256];
    printf("%-26s", "setting");
    for (size_t i = 0; i < n; i++)
        printf(" %22.22s",
               res[i].label[0] ? cli_term(res[i].label, label, sizeof label) : "(defaults)");
    printf("\n%-26s", "peak reserved");
    for (size_t i = 0; i < n; i++)
        printf(" %22s", cli_size((uint64_t)res[i].stats.reserved_bytes[STAT_ALL].peak, s, 32));
    printf("\n%-26s", "peak allocated");
    for (size_t i = 0; i < n; i++)
        printf(" %22s", cli_size((uint64_t)res[i].stats.allocated_bytes[STAT_ALL].peak, s, 32));
    printf("\n%-26s", "segments at peak");
    for (size_t i = 0; i < n; i++)
        printf(" %22" PRId64, res[i].stats.segment[STAT_ALL].peak);
    printf("\n%-26s", "segments allocated");
    for (size_t i = 0; i < n; i++)
        printf(" %22" PRId64, res[i].stats.num_device_alloc);
    printf("\n%-26s", "alloc retries");
    for (size_t i = 0; i < n; i++)
        printf(" %22" PRId64, res[i].stats.num_alloc_retries);
    printf("\n%-26s", "OOMs (recorded)");
    for (size_t i = 0; i < n; i++) {
        char cell[64];
        snprintf(cell, sizeof(cell), "%zu (%zu)", res[i].ooms, res[i].recorded_ooms);
        printf(" %22s", cell);
    }
    printf("\n");
}

/* The settings given, each of which must parse, before the file is read. */
static int
check_confs(const struct replay_args *a)
{
    char err[256];
    struct alloc_config probe;
    for (size_t i = 1; i < a->nconf; i++)
        if (alloc_config_parse(a->confs[i], &probe, err, sizeof(err)) != 0)
            return cli_usage_error("replay", "--alloc-conf: %s", err);
    return CLI_OK;
}

/* The snapshot's own settings, or the defaults when they do not parse. */
static const char *
recorded_conf(const struct snapshot *snap, const char *path)
{
    const char *conf = snap->has_allocator_settings && snap->allocator_settings.alloc_conf
                           ? snap->allocator_settings.alloc_conf
                           : "";
    char err[256];
    struct alloc_config probe;
    if (alloc_config_parse(conf, &probe, err, sizeof(err)) != 0) {
        char safe[1024], why[512];
        fprintf(stderr, "cuprof: %s: the recorded settings do not parse (%s): using defaults\n",
                cli_term(path, safe, sizeof safe), cli_term(err, why, sizeof why));
        conf = "";
    }
    return conf;
}

/* Every setting replayed in turn, the recorded one first (after learning its remainders). */
static int
replay_all(const struct snapshot *snap, const struct replay_args *a, struct replay_result *res)
{
    uint64_t capacity = a->memory ? a->memory : capacity_from_ooms(snap, (size_t)a->device);
    struct span_map remainders;
    span_map_init(&remainders);
    int status = learn_remainders(snap, (size_t)a->device, a->confs[0], capacity, &remainders);
    for (size_t i = 0; i < a->nconf && status == CLI_OK; i++) {
        res[i].label = a->confs[i];
        struct replay_mode mode = {
            .recorded = i == 0, .check = a->check && i == 0, .remainders = &remainders};
        status = replay_once(snap, (size_t)a->device, a->confs[i], &mode, capacity, &res[i]);
    }
    span_map_free(&remainders);
    return status;
}

/* The --check count, then the table; CLI_FOUND when the replay differs from the recording. */
static int
print_results(const struct replay_result *res, size_t n, bool check)
{
    if (check) {
        printf("reproduced %zu/%zu allocations", res[0].reproduced, res[0].checked);
        if (res[0].prelude_misses > 0)
            printf(" (%zu blocks of the starting state could not be placed)",
                   res[0].prelude_misses);
        printf("\n\n");
    }
    print_table(res, n);
    return check && res[0].reproduced < res[0].checked ? CLI_FOUND : CLI_OK;
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
    args.confs[0] = recorded_conf(snap, in.paths[0]);
    struct replay_result res[REPLAY_MAX_CONFS + 1];
    memset(res, 0, sizeof(res));
    status = replay_all(snap, &args, res);
    if (status == CLI_OK)
        status = print_results(res, args.nconf, args.check);
    cli_input_free(&in);
    return status;
}
