/* explain_whatif.c: the history replayed from its start under the recorded settings (the state
 *   at the instant, and how far the replays are exact) and under the settings that might have
 *   avoided the OOM (see explain.h). */
#include "cli/explain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/alloc_config.h"
#include "allocator/alloc_policy.h"
#include "allocator/allocator.h"
#include "allocator/trace_sink.h"
#include "cli/replay.h"
#include "cli/replay_run.h"

/* max_split_size_mb values tried (those far above every request would change nothing). */
static const unsigned split_values[] = {64, 256, 1024};
/* garbage_collection_threshold values tried where a memory fraction is set. */
static const char *const gc_values[] = {"0.6", "0.8"};

#define WHATIF_MAX 12

/* The largest request of the history (a max_split_size far above it changes nothing). */
static uint64_t
largest_request(const struct explain *x)
{
    uint64_t most = 0;
    const struct snap_device_trace *t =
        x->device < x->snap->device_count ? &x->snap->device_traces[x->device] : NULL;
    for (size_t i = 0; t != NULL && i < t->count; i++)
        if ((t->entries[i].action == TRACE_ALLOC || t->entries[i].action == TRACE_OOM) &&
            t->entries[i].size > most)
            most = t->entries[i].size;
    return most;
}

static void
add_whatif(struct explain *x, struct replay_opts *opts, const char *label, const char *conf)
{
    struct explain_whatif *w = &x->whatifs[x->nwhatifs];
    snprintf(w->label, sizeof w->label, "%s", label);
    snprintf(w->conf, sizeof w->conf, "%s", conf);
    opts[x->nwhatifs] =
        (struct replay_opts){.conf = w->conf, .watch = x->is_oom, .watch_at = x->at};
    if (x->driver_call != NULL) {
        /* cuprof's cache hands back all it can before a driver's own call fails: each setting's
         * cache emptied there, and what it kept read. */
        struct replay_opts *o = &opts[x->nwhatifs];
        o->empty_cache = o->capture = true;
        o->empty_cache_at = o->capture_at = x->at;
    }
    x->nwhatifs++;
}

/* The recorded settings first (checked, the state kept), then the alternatives. */
static size_t
plan_whatifs(struct explain *x, const struct alloc_config *recorded, struct replay_opts *opts)
{
    char conf[512], label[96];
    const char *base = x->recorded_conf;
    snprintf(label, sizeof label, "recorded settings (%.70s)", base[0] ? base : "defaults");
    add_whatif(x, opts, label, base);
    x->whatifs[0].recorded = true;
    opts[0].recorded = opts[0].check = opts[0].capture = true;
    opts[0].capture_at = x->is_oom ? x->at + 1 : x->at;
    const char *expandable = recorded->expandable_segments ? "False" : "True";
    replay_conf_with(base, "expandable_segments", expandable, conf, sizeof conf);
    snprintf(label, sizeof label, "expandable_segments:%s", expandable);
    add_whatif(x, opts, label, conf);
    uint64_t most = largest_request(x);
    for (size_t k = 0; k < sizeof split_values / sizeof split_values[0]; k++) {
        uint64_t mib = split_values[k];
        if ((k > 0 && (mib << 20) > 4 * most) || (mib << 20) == recorded->max_split_size)
            continue;
        char v[16];
        snprintf(v, sizeof v, "%u", split_values[k]);
        replay_conf_with(base, "max_split_size_mb", v, conf, sizeof conf);
        snprintf(label, sizeof label, "max_split_size_mb:%s", v);
        add_whatif(x, opts, label, conf);
    }
    for (size_t k = 0;
         recorded->per_process_memory_fraction > 0.0 && k < sizeof gc_values / sizeof gc_values[0];
         k++) {
        replay_conf_with(base, "garbage_collection_threshold", gc_values[k], conf, sizeof conf);
        snprintf(label, sizeof label, "garbage_collection_threshold:%s", gc_values[k]);
        add_whatif(x, opts, label, conf);
    }
    if (x->is_oom) {
        add_whatif(x, opts, "empty_cache() right before the request", base);
        opts[x->nwhatifs - 1].empty_cache = true;
        opts[x->nwhatifs - 1].empty_cache_at = x->at;
    }
    return x->nwhatifs;
}

/* Free space by pool and by segment, the largest block the request could have taken, and the
 * allocated bytes, from the recorded settings' replay at the instant. */
static int
fill_state(struct explain *x, const struct replay_state *st, const struct alloc_config *recorded,
           size_t top)
{
    x->state_from_replay = true;
    x->live_allocated = (uint64_t)st->stats.allocated_bytes[STAT_ALL].current;
    int64_t pending =
        st->stats.active_bytes[STAT_ALL].current - st->stats.allocated_bytes[STAT_ALL].current;
    x->pending_free = pending > 0 ? (uint64_t)pending : 0;
    x->replay_reserved = (uint64_t)st->stats.reserved_bytes[STAT_ALL].current;
    x->segments = calloc(st->segment_count + 1, sizeof(*x->segments));
    if (x->segments == NULL)
        return -1;
    bool small_request = alloc_policy_is_small(x->request_size);
    for (size_t s = 0; s < st->segment_count; s++) {
        const struct segment_info *seg = &st->segments[s];
        if (seg->pool != TRACE_POOL_DEFAULT)
            continue;
        struct explain_segment row = {.addr = seg->addr,
                                      .size = seg->total_size,
                                      .stream = seg->stream,
                                      .small = seg->is_small,
                                      .expandable = seg->expandable};
        struct explain_pool *pool = &x->pools[seg->is_small ? 0 : 1];
        for (uint32_t k = 0; k < seg->block_count; k++) {
            const struct block_info *b = &st->blocks[seg->first_block + k];
            if (b->state != BLOCK_INACTIVE)
                continue;
            row.free_bytes += b->size;
            row.largest_free = b->size > row.largest_free ? b->size : row.largest_free;
            pool->free_bytes += b->size;
            pool->free_blocks++;
            pool->largest_free = b->size > pool->largest_free ? b->size : pool->largest_free;
            /* PyTorch's get_free_block: same stream and pool, oversize rules kept. */
            if (x->is_oom && seg->stream == x->request_stream &&
                (bool)seg->is_small == small_request &&
                alloc_policy_may_use(recorded, x->request_size, b->size) &&
                b->size > x->largest_fit)
                x->largest_fit = b->size;
        }
        if (row.free_bytes > 0) {
            pool->segments_with_free++;
            x->segments[x->segments_with_free++] = row;
        }
    }
    /* Most free bytes first; ties by address. */
    for (size_t i = 1; i < x->segments_with_free; i++) {
        struct explain_segment v = x->segments[i];
        size_t j = i;
        while (j > 0 && (x->segments[j - 1].free_bytes < v.free_bytes ||
                         (x->segments[j - 1].free_bytes == v.free_bytes &&
                          x->segments[j - 1].addr > v.addr))) {
            x->segments[j] = x->segments[j - 1];
            j--;
        }
        x->segments[j] = v;
    }
    x->nsegments = x->segments_with_free < top ? x->segments_with_free : top;
    return 0;
}

/* Without the replay's state: the live blocks' rounded sizes (no unsplit remainders). */
static int
fill_state_rounded(struct explain *x, const struct alloc_config *recorded)
{
    struct span_map_item *live;
    size_t n;
    if (analysis_live_at(x->snap, x->device, x->at, &live, &n) != 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        x->live_allocated += alloc_policy_round_size(recorded, live[i].size);
    free(live);
    return 0;
}

/* The capacity a replay may reserve: at an OOM what the allocator could reach then (its
 * reserved bytes and the driver's free bytes); else the device less what lies outside. */
static uint64_t
replay_capacity(const struct explain *x)
{
    if (x->is_oom)
        return x->reserved + x->free_bytes;
    if (x->capacity_known && x->capacity > x->outside + x->passthrough)
        return x->capacity - x->outside - x->passthrough;
    return REPLAY_UNLIMITED;
}

static void
fill_rows(struct explain *x, const struct replay_result *res)
{
    for (size_t i = 0; i < x->nwhatifs; i++) {
        struct explain_whatif *w = &x->whatifs[i];
        w->ok = res[i].ok;
        w->avoided = x->is_oom && res[i].ok && !res[i].watched_oom;
        w->ooms = res[i].ooms;
        w->peak_reserved = res[i].peak_reserved;
        w->peak_allocated = (uint64_t)res[i].stats.allocated_bytes[STAT_ALL].peak;
        w->device_allocs = res[i].device_allocs;
        if (x->driver_call != NULL && res[i].ok && res[i].state.captured) {
            uint64_t kept = (uint64_t)res[i].state.stats.reserved_bytes[STAT_ALL].current;
            w->kept_known = true;
            w->kept_reserved = kept > x->passthrough ? kept - x->passthrough : 0;
        }
    }
    x->start_misses = res[0].prelude_misses;
    x->checked = res[0].checked;
    x->reproduced = res[0].reproduced;
    x->baseline_oom = x->is_oom && res[0].ok && res[0].watched_oom;
}

int
explain_whatif(struct explain *x, const struct explain_request *req)
{
    struct alloc_config recorded;
    char err[ALLOC_CONFIG_ERR_LEN];
    if (alloc_config_parse(x->recorded_conf, &recorded, err, sizeof err) != 0)
        alloc_config_defaults(&recorded);
    x->whatifs = calloc(WHATIF_MAX, sizeof(*x->whatifs));
    struct replay_opts opts[WHATIF_MAX];
    struct replay_result *res = calloc(WHATIF_MAX, sizeof(*res));
    struct replay_plan plan;
    int rc = x->whatifs != NULL && res != NULL ? 0 : -1;
    bool planned = rc == 0;
    if (planned)
        rc = replay_plan_init(&plan, x->snap, x->device, x->recorded_conf, replay_capacity(x));
    if (rc == 0) {
        plan.total = x->capacity_known ? x->capacity : 0;
        size_t n = plan_whatifs(x, &recorded, opts);
        rc = replay_settings(&plan, opts, res, n, req->threads, true);
        fill_rows(x, res);
        if (res[0].state.captured)
            rc |= fill_state(x, &res[0].state, &recorded, req->top);
        else
            rc |= fill_state_rounded(x, &recorded);
    }
    if (planned)
        replay_plan_free(&plan);
    for (size_t i = 0; res != NULL && i < WHATIF_MAX; i++)
        replay_result_free(&res[i]);
    free(res);
    return rc == 0 ? 0 : -1;
}
