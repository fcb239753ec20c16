/* replay_run.c: one replay of a recorded history through the real allocator on an in-process fake
 *   device (replay_device.c), from the starting state the recording had (replay_start.c): the
 *   engine under `cuprof replay`, `explain` and `tune`. */
#include "cli/replay_run.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/alloc_config.h"
#include "allocator/alloc_policy.h"
#include "allocator/allocator.h"
#include "allocator/cuprof_errors.h"
#include "cli/analysis.h"
#include "cli/cli_util.h"
#include "cli/replay.h"
#include "snapshot/snapshot_usage.h"

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
    bool learn, learnt;
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
    bool watch;
    size_t watch_at;
    size_t seg_first, seg_count;
    uint64_t seg_sizes[8];
};

/* Keeps the first differences for --check to list. */
static void
record_diff(struct replay_run *r, struct replay_cursor *c, size_t i, const struct snap_entry *e,
            uint64_t got)
{
    if (c->res->ndiffs >= REPLAY_MAX_DIFFS)
        return;
    c->res->diffs[c->res->ndiffs++] = (struct replay_diff){
        .entry = i,
        .size = e->size,
        .stream = e->stream,
        .recorded_addr = e->addr,
        .recorded_segment = c->seg_count > 0 ? c->t->entries[c->seg_first].size : 0,
        .replay_addr = got,
        .replay_segment = r->dev.made_count > 0 ? r->dev.made[0] : 0,
    };
}

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
        record_diff(r, c, i, e, addr);
    }
    return 0;
}

/* After a request: the device's reserved bytes may have reached a new peak (only a request makes
 * segments or maps pages), and how much of it was cached but unused then. */
static void
note_peak(struct replay_run *r, struct replay_cursor *c, size_t i)
{
    if (r->dev.used <= c->res->peak_reserved)
        return;
    struct memory_stats st;
    allocator_get_stats(r->alloc, (int)r->device, &st);
    int64_t allocated = st.allocated_bytes[STAT_ALL].current;
    c->res->peak_reserved = r->dev.used;
    c->res->peak_reserved_at = i + 1;
    c->res->free_at_peak =
        r->dev.used > (uint64_t)allocated ? r->dev.used - (uint64_t)allocated : 0;
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
        if (c->res->ooms++ == 0)
            c->res->first_oom = i;
        c->res->watched_oom |= c->watch && i == c->watch_at;
        c->res->new_ooms += e->action == TRACE_ALLOC;
        addr = 0;
    } else if (rc != 0) {
        return -1;
    }
    note_peak(r, c, i);
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
    char err[ALLOC_CONFIG_ERR_LEN];
    if (alloc_config_parse(conf, config, err, sizeof(err)) != 0) {
        fputs("cuprof: replay: ", stderr);
        cli_fputs_term(err, stderr);
        fputc('\n', stderr);
        return false;
    }
    config->free_sync = FREE_SYNC_NONE;
    /* The allocator that made the recording, whatever the setting: cuprof's cache asks a segment
     * of just the request before an OOM (the snapshot says so), PyTorch's never does. */
    config->fit_segment_on_oom = snap->cuprof.fit_segment_on_oom;
    /* The recording's own settings include its mode: trace mode never caches. */
    if (recorded && recorded_trace_mode(snap))
        config->caching = false;
    return true;
}

/* Rebuilds the starting state in r->alloc, then counts peaks from the first entry. Returns 0 or
 * -1. */
static int
replay_prepare(struct replay_run *r, const struct alloc_config *start,
               const struct alloc_config *config, size_t trace_count, struct replay_mode *mode,
               struct replay_result *res)
{
    /* No recorded segment address is offered while the starting state is rebuilt. */
    r->dev.cursor = trace_count;
    if (replay_start_state(r, start, &res->prelude_misses) != 0)
        return -1;
    mode->guesses = r->nguesses;
    /* Peaks count from the first entry: the fillers that built the starting state held its free
     * blocks (and a spare page) only for a moment. From here on the replayed setting rules. */
    allocator_reset_peak_stats(r->alloc, (int)r->device);
    allocator_apply_settings(r->alloc, config);
    res->peak_reserved = r->dev.used;
    struct memory_stats st;
    allocator_get_stats(r->alloc, (int)r->device, &st);
    int64_t allocated = st.allocated_bytes[STAT_ALL].current;
    res->free_at_peak = r->dev.used > (uint64_t)allocated ? r->dev.used - (uint64_t)allocated : 0;
    res->device_allocs = (uint64_t)st.num_device_alloc;
    res->device_frees = (uint64_t)st.num_device_free;
    r->dev.cursor = 0;
    return 0;
}

/* Keeps a copy of the allocator's state (opts->capture). Returns 0 or -1. */
static int
capture_state(struct replay_run *r, struct replay_state *st)
{
    if (replay_copy_state(r, &st->segments, &st->segment_count, &st->blocks, &st->block_count) != 0)
        return -1;
    allocator_get_stats(r->alloc, (int)r->device, &st->stats);
    st->captured = true;
    return 0;
}

/* Replays the entries in order, with progress on a terminal when asked. Returns 0 or -1. */
static int
replay_entries(struct replay_run *r, struct replay_cursor *c, size_t count,
               const struct replay_opts *opts)
{
    struct cli_progress bar;
    if (opts->progress)
        cli_progress_begin(&bar, "replaying");
    int rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++) {
        if (opts->progress)
            cli_progress_update(&bar, i, c->t->count);
        /* Emptied first: a capture at the same instant sees what the cache kept. */
        if (opts->empty_cache && i == opts->empty_cache_at)
            (void)allocator_empty_cache(r->alloc, (int)r->device);
        if (opts->capture && i == opts->capture_at && capture_state(r, &c->res->state) != 0)
            rc = -1;
        if (rc == 0)
            rc = replay_step(r, c, i);
    }
    if (rc == 0 && opts->empty_cache && opts->empty_cache_at >= count)
        (void)allocator_empty_cache(r->alloc, (int)r->device);
    if (rc == 0 && opts->capture && opts->capture_at >= count && !c->res->state.captured &&
        capture_state(r, &c->res->state) != 0)
        rc = -1;
    if (opts->progress)
        cli_progress_end(&bar);
    return rc < 0 ? -1 : 0;
}

/* The configuration the starting state is rebuilt with: it was made under the recorded settings,
 * so its blocks keep their recorded rounding and split rules (a live block of the recording is
 * never re-rounded or left holding a whole segment under another max_split_size: peak allocated
 * then depends only on the requests and the replayed rounding). Runs of expandable segments are
 * rebuilt as runs when the replayed setting has them, ordinary segments as ordinary ones; the
 * replayed setting then applies to every later request, as PyTorch's settings changed at run
 * time (torch.cuda.memory._set_allocator_settings) do. */
static void
start_config(const struct replay_plan *plan, const struct alloc_config *config,
             struct alloc_config *start)
{
    *start = *config;
    start->max_split_size = plan->recorded.max_split_size;
    start->max_non_split_rounding_size = plan->recorded.max_non_split_rounding_size;
    memcpy(start->roundup_power2_divisions, plan->recorded.roundup_power2_divisions,
           sizeof(start->roundup_power2_divisions));
    bool runs = false;
    const struct snapshot *snap = plan->snap;
    for (size_t s = 0; s < snap->segment_count && !runs; s++)
        runs = (size_t)snap->segments[s].device == plan->device && snap->segments[s].is_expandable;
    for (size_t i = 0;
         plan->device < snap->device_count && !runs && i < snap->device_traces[plan->device].count;
         i++) {
        uint8_t a = snap->device_traces[plan->device].entries[i].action;
        runs = a == TRACE_SEGMENT_MAP || a == TRACE_SEGMENT_UNMAP;
    }
    start->expandable_segments = config->expandable_segments && runs;
}

/* One replay; `mode` says whether it learns. Returns 0 or -1 (said why). */
static int
replay_once(const struct replay_plan *plan, const struct replay_opts *opts,
            struct replay_mode *mode, struct replay_result *res)
{
    struct alloc_config config, start;
    if (!replay_config(plan->snap, opts->conf, opts->recorded, &config))
        return -1;
    start_config(plan, &config, &start);
    size_t device = plan->device;
    struct replay_run r = {.snap = plan->snap,
                           .device = device,
                           .check = opts->check || mode->learn,
                           .index = plan->index,
                           .remainders = mode->remainders};
    const struct snap_device_trace *t =
        device < plan->snap->device_count ? &plan->snap->device_traces[device] : NULL;
    fake_device_init(&r.dev, plan->snap, device, r.check, plan->capacity);
    r.dev.total = plan->total;
    span_map_init(&r.addr_of);
    struct device_ops ops;
    replay_device_ops(&r.dev, &ops);
    /* The starting state is rebuilt with exact sizes (its blocks were rounded when they were
     * made, and its fillers hold exact gaps): no rounding divisions until it stands. */
    struct alloc_config exact = start;
    memset(exact.roundup_power2_divisions, 0, sizeof(exact.roundup_power2_divisions));
    r.alloc = allocator_create(&exact, &ops, NULL, (int)device + 1);
    if (r.alloc == NULL) {
        fprintf(stderr, "cuprof: replay: out of memory\n");
        return -1;
    }
    memset(res, 0, sizeof(*res));
    res->first_oom = SIZE_MAX;
    struct replay_cursor c = {.t = t,
                              .config = &config,
                              .mode = mode,
                              .res = res,
                              .pending = plan->pending,
                              .watch = opts->watch,
                              .watch_at = opts->watch_at};
    int rc = replay_prepare(&r, &start, &config, t ? t->count : 0, mode, res);
    /* A learning replay has nothing to learn without a guess. */
    size_t count = t && !(mode->learn && r.nguesses == 0) ? t->count : 0;
    if (rc != 0 || replay_entries(&r, &c, count, opts) != 0) {
        fprintf(stderr, "cuprof: replay: the allocator failed on a recorded request\n");
        run_free(&r);
        replay_result_free(res);
        return -1;
    }
    allocator_get_stats(r.alloc, (int)device, &res->stats);
    res->peak_reserved = (uint64_t)res->stats.reserved_bytes[STAT_ALL].peak;
    res->device_allocs = (uint64_t)res->stats.num_device_alloc - res->device_allocs;
    res->device_frees = (uint64_t)res->stats.num_device_free - res->device_frees;
    res->ok = true;
    run_free(&r);
    return 0;
}

void
replay_result_free(struct replay_result *res)
{
    free(res->state.segments);
    free(res->state.blocks);
    res->state = (struct replay_state){0};
}

int
replay_setting(const struct replay_plan *plan, const struct replay_opts *opts,
               struct replay_result *res)
{
    /* The learnt remainders are only read: parallel replays share them. */
    struct replay_mode mode = {.remainders = (struct span_map *)&plan->remainders};
    return replay_once(plan, opts, &mode, res);
}

/* A mid-run history's starting state guesses where some free blocks begin (their owners may hold
 * unsplit remainders no entry shows). Replays with the recorded settings until the recording's
 * decisions no longer contradict a guess: each contradiction grows one remainder to the smallest
 * size that explains it, so the guesses only shrink free blocks that the recording proves were
 * smaller. */
#define REPLAY_MAX_LEARN 256

static int
learn_remainders(struct replay_plan *plan)
{
    struct replay_opts opts = {.conf = plan->recorded_conf, .recorded = true, .check = true};
    struct replay_result *res = malloc(sizeof(*res));
    int rc = res != NULL ? 0 : -1;
    for (int k = 0; k < REPLAY_MAX_LEARN && rc == 0; k++) {
        struct replay_mode mode = {.learn = true, .remainders = &plan->remainders};
        rc = replay_once(plan, &opts, &mode, res);
        if (!mode.learnt || mode.guesses == 0)
            break;
    }
    free(res);
    return rc;
}

int
replay_plan_init(struct replay_plan *plan, const struct snapshot *snap, size_t device,
                 const char *recorded_conf, uint64_t capacity)
{
    memset(plan, 0, sizeof(*plan));
    plan->snap = snap;
    plan->device = device;
    plan->recorded_conf = recorded_conf;
    plan->capacity = capacity;
    span_map_init(&plan->remainders);
    if (!replay_config(snap, recorded_conf, true, &plan->recorded))
        return -1;
    const struct snap_device_trace *t =
        device < snap->device_count ? &snap->device_traces[device] : NULL;
    plan->pending = pending_requests(t);
    /* Only the blocks live at the first entry need the index (a history from an empty device
     * has none): an empty one otherwise. */
    struct span_map_item *live = NULL;
    size_t nlive = 0;
    if (analysis_live_at(snap, device, 0, &live, &nlive) == 0)
        plan->index = replay_index_build(nlive > 0 ? t : NULL);
    free(live);
    if (plan->pending == NULL || plan->index == NULL) {
        fprintf(stderr, "cuprof: replay: out of memory\n");
        return -1;
    }
    return learn_remainders(plan);
}

void
replay_plan_free(struct replay_plan *plan)
{
    span_map_free(&plan->remainders);
    free(plan->pending);
    plan->pending = NULL;
    replay_index_free(plan->index);
    plan->index = NULL;
}
