/* explain.c: the instant, the request, the device's bytes and the verdict (see explain.h); the
 *   replays and the allocator's state at the instant are explain_whatif.c's. */
#include "cli/explain.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/alloc_config.h"
#include "allocator/alloc_policy.h"
#include "allocator/trace_sink.h"
#include "cli/replay_run.h"
#include "cli/span_map.h"
#include "snapshot/snapshot_oom.h"
#include "snapshot/snapshot_usage.h"

static const struct snap_device_trace *
trace_of(const struct snapshot *snap, size_t device)
{
    static const struct snap_device_trace empty = {0};
    return device < snap->device_count ? &snap->device_traces[device] : &empty;
}

/* Bytes of the allocator's segments after `at` entries that belong to private (CUDA graph)
 * pools. Returns 0 or -1. */
static int
private_pools_at(const struct snapshot *snap, size_t device, size_t at, uint64_t *bytes)
{
    struct analysis_segment *segs;
    size_t n;
    if (analysis_segment_list_at(snap, device, at, &segs, &n) != 0)
        return -1;
    *bytes = 0;
    for (size_t i = 0; i < n; i++) {
        if (segs[i].index == UINT32_MAX)
            continue;
        const struct snap_segment *s = &snap->segments[segs[i].index];
        if ((s->pool_id[0] != 0 || s->pool_id[1] != 0) && !analysis_pool_passed(s->cuprof_pool))
            *bytes += segs[i].size;
    }
    free(segs);
    return 0;
}

static const struct snap_footprint *
footprint_of(const struct snapshot *snap, size_t device)
{
    for (size_t i = 0; i < snap->cuprof.footprint_count; i++)
        if ((size_t)snap->cuprof.footprints[i].device == device &&
            snap->cuprof.footprints[i].total > 0)
            return &snap->cuprof.footprints[i];
    return NULL;
}

/* The instant req asks for; -1 with err when there is none. */
static int
choose_instant(struct explain *x, const struct device_analysis *a,
               const struct explain_request *req, char *err, size_t errlen)
{
    const struct snap_device_trace *t = trace_of(x->snap, x->device);
    size_t first_oom = SIZE_MAX;
    for (size_t i = 0; i < t->count && first_oom == SIZE_MAX; i++)
        if (t->entries[i].action == TRACE_OOM)
            first_oom = i;
    /* A refusal of the driver's own call at the same index came before the entry. */
    const struct snap_oom_message *own = snapshot_driver_oom_first(x->snap, x->device);
    bool own_first =
        own != NULL && (first_oom == SIZE_MAX || (size_t)own->trace_index <= first_oom);
    x->driver_ooms = snapshot_driver_oom_count(x->snap, x->device);
    enum explain_at at = req->at;
    if (at == EXPLAIN_AT_DEFAULT)
        at = first_oom != SIZE_MAX || own != NULL ? EXPLAIN_AT_OOM : EXPLAIN_AT_PEAK;
    x->chosen = at;
    if (at == EXPLAIN_AT_DRIVER) {
        const struct snap_oom_message *m = req->entry < x->snap->cuprof.oom_message_count
                                               ? &x->snap->cuprof.oom_messages[req->entry]
                                               : NULL;
        if (m == NULL || m->api == NULL || (size_t)m->device != x->device || m->trace_index < 0 ||
            (size_t)m->trace_index > t->count) {
            snprintf(err, errlen, "no refusal of the driver's own call at row %zu", req->entry);
            return -1;
        }
        own = m;
        own_first = true;
        at = EXPLAIN_AT_OOM; /* x->chosen stays: not necessarily the first */
    }
    if (at == EXPLAIN_AT_OOM && own_first) {
        x->at = (size_t)own->trace_index;
        x->driver_call = own->api;
        x->driver_time_us = own->time_us;
        x->message = own->message;
    } else if (at == EXPLAIN_AT_OOM) {
        if (first_oom == SIZE_MAX) {
            snprintf(err, errlen, "no OOM in device %zu's history (--at peak or an entry)",
                     x->device);
            return -1;
        }
        x->at = first_oom;
        x->is_oom = true;
    } else if (at == EXPLAIN_AT_PEAK) {
        /* A segment is recorded before the request it serves: the peak is met by that request,
         * and the state is shown once it is served (reserved bytes stay the same). */
        x->at = a->peak_reserved_at;
        if (x->at > 0 && (t->entries[x->at - 1].action == TRACE_SEGMENT_ALLOC ||
                          t->entries[x->at - 1].action == TRACE_SEGMENT_MAP)) {
            while (x->at < t->count && (t->entries[x->at].action == TRACE_SEGMENT_ALLOC ||
                                        t->entries[x->at].action == TRACE_SEGMENT_MAP))
                x->at++;
            if (x->at < t->count && t->entries[x->at].action == TRACE_ALLOC)
                x->at++;
        }
    } else {
        if (req->entry >= t->count) {
            snprintf(err, errlen, "--at %zu: device %zu's history has %zu entries (0 to %zu)",
                     req->entry, x->device, t->count, t->count ? t->count - 1 : 0);
            return -1;
        }
        x->is_oom = t->entries[req->entry].action == TRACE_OOM;
        x->at = x->is_oom ? req->entry : req->entry + 1;
    }
    return 0;
}

/* The failing request (an OOM instant). */
static void
fill_request(struct explain *x, const struct alloc_config *recorded)
{
    const struct snap_entry *e = &trace_of(x->snap, x->device)->entries[x->at];
    x->request_size = e->size;
    x->request_stream = e->stream;
    x->request_pool = e->pool;
    x->request_stack = e->stack;
    x->device_free_known = true;
    x->device_free = e->device_free;
    x->message = snapshot_oom_message_of(x->snap, x->device, x->at);
    uint64_t s = e->size;
    if (explain_request_passed(x)) {
        x->request_segment = s; /* the driver's own allocation */
    } else if (recorded->expandable_segments) {
        /* Expandable segments map whole pages for the request. */
        uint64_t page = s <= ALLOC_SMALL_SIZE ? ALLOC_SMALL_BUFFER : ALLOC_LARGE_BUFFER;
        x->request_segment = (s + page - 1) / page * page;
    } else {
        x->request_segment = alloc_policy_segment_size(s);
    }
}

/* The device's bytes: capacity, outside the allocator, free. */
static void
fill_device(struct explain *x, const struct device_analysis *a, uint64_t passthrough_end,
            const struct explain_request *req)
{
    const struct snap_footprint *fp = footprint_of(x->snap, x->device);
    uint64_t held = x->reserved + x->passthrough;
    x->capacity_known = true;
    if (fp != NULL) {
        x->capacity_from = EXPLAIN_CAPACITY_FOOTPRINT;
        x->capacity = (uint64_t)fp->total;
    } else if (req->memory > 0) {
        x->capacity_from = EXPLAIN_CAPACITY_OPTION;
        x->capacity = req->memory;
    } else {
        x->capacity_from = EXPLAIN_CAPACITY_ASSUMED;
        x->capacity_known = false;
    }
    if (x->is_oom) {
        x->free_bytes = x->device_free;
        if (!x->capacity_known)
            x->capacity = held + x->free_bytes;
        x->outside = x->capacity > held + x->free_bytes ? x->capacity - held - x->free_bytes : 0;
    } else if (fp != NULL && fp->used_at_dump >= 0) {
        /* No driver figure at this instant: what lay outside at the dump, taken as constant. */
        uint64_t end_held = a->end_reserved + passthrough_end;
        x->outside =
            (uint64_t)fp->used_at_dump > end_held ? (uint64_t)fp->used_at_dump - end_held : 0;
        x->outside_estimated = true;
        x->free_bytes = x->capacity > held + x->outside ? x->capacity - held - x->outside : 0;
    } else {
        if (!x->capacity_known)
            x->capacity = held;
        x->free_bytes = x->capacity > held ? x->capacity - held : 0;
    }
    if (fp != NULL && fp->used_at_start >= 0)
        x->outside_at_start =
            (uint64_t)fp->used_at_start < x->outside ? (uint64_t)fp->used_at_start : x->outside;
    if (fp != NULL && fp->graph_reserved_at_dump > 0)
        x->graphs = (uint64_t)fp->graph_reserved_at_dump < x->outside
                        ? (uint64_t)fp->graph_reserved_at_dump
                        : x->outside;
    if (x->fraction > 0.0 && x->capacity_known)
        x->allowed = (uint64_t)(x->fraction * (double)x->capacity);
}

/* Recorded by cuprof's own cache (not PyTorch's, not trace mode). */
static bool
cuprof_cache_mode(const struct snapshot *snap)
{
    return snap->cuprof.present && snap->cuprof.mode != NULL &&
           strcmp(snap->cuprof.mode, "cache") == 0;
}

/* The verdict of a driver's own refusal: what was free, and had cuprof's cache kept nothing. */
static void
fill_driver_verdict(struct explain *x)
{
    x->verdict = EXPLAIN_DRIVER_OWN;
    if (!cuprof_cache_mode(x->snap) || x->cached_free == 0 || !x->capacity_known)
        return;
    uint64_t used = x->live_requested + x->passthrough + x->outside;
    x->free_without_cache = x->capacity > used ? x->capacity - used : 0;
}

/* The verdict of an OOM instant, from the figures above and the allocator's state. */
static void
fill_verdict(struct explain *x)
{
    if (x->driver_call != NULL)
        fill_driver_verdict(x);
    if (!x->is_oom)
        return;
    x->cache_caused = cuprof_cache_mode(x->snap) &&
                      alloc_policy_cache_caused(x->live_requested, x->request_size, x->reserved,
                                                x->free_bytes, x->allowed, &x->without_cache);
    uint64_t need = x->live_allocated + x->request_size;
    uint64_t reach = x->reserved + x->free_bytes; /* what the allocator could have used */
    uint64_t seg = x->request_segment;
    if (x->capacity_known && need + x->passthrough > x->capacity) {
        x->verdict = EXPLAIN_LIVE_EXCEEDS;
        x->missing = need + x->passthrough - x->capacity;
        return;
    }
    if (need > reach) {
        x->verdict |= EXPLAIN_OUTSIDE;
        x->missing = need - reach;
    }
    /* A request the driver refused itself: no block, cap or segment of the cache was asked. */
    if (explain_request_passed(x)) {
        if (x->verdict == 0)
            x->verdict = EXPLAIN_DRIVER;
        return;
    }
    bool cached_fit = x->largest_fit >= x->request_size;
    if (x->allowed > 0 && x->reserved + seg > x->allowed && !cached_fit)
        x->verdict |= EXPLAIN_CAP;
    if (!(x->verdict & EXPLAIN_OUTSIDE) && !cached_fit && x->free_bytes < seg) {
        x->verdict |= EXPLAIN_FRAGMENTATION;
        /* A new segment would have fit in what lies outside the allocator. */
        if (x->free_bytes + x->outside + x->passthrough >= seg && x->outside + x->passthrough > 0)
            x->verdict |= EXPLAIN_OUTSIDE;
    }
    if (x->verdict == 0)
        x->verdict = EXPLAIN_DRIVER;
}

/* The live call sites, at most req->top. */
static int
fill_sites(struct explain *x, size_t top)
{
    if (analysis_sites_at(x->snap, x->device, x->at, &x->sites, &x->all_sites) != 0)
        return -1;
    x->nsites = x->all_sites < top ? x->all_sites : top;
    return 0;
}

static int
fill_recorded(struct explain *x, const char *path_conf, struct alloc_config *recorded)
{
    snprintf(x->recorded_conf, sizeof x->recorded_conf, "%s", path_conf);
    char err[ALLOC_CONFIG_ERR_LEN];
    if (alloc_config_parse(x->recorded_conf, recorded, err, sizeof err) != 0) {
        x->recorded_conf[0] = '\0';
        alloc_config_defaults(recorded);
    }
    x->fraction = recorded->per_process_memory_fraction;
    return 0;
}

int
explain_compute(const struct snapshot *snap, const struct explain_request *req, struct explain *x,
                char *err, size_t errlen)
{
    memset(x, 0, sizeof(*x));
    x->snap = snap;
    x->device = req->device;
    struct device_analysis a;
    if (analysis_run(snap, req->device, true, &a) != 0) {
        snprintf(err, errlen, "out of host memory");
        return -1;
    }
    int rc = choose_instant(x, &a, req, err, errlen);
    x->count = a.count;
    x->oom_count = a.oom_count;
    x->mid_run = a.mid_run;
    x->dropped = a.dropped;
    struct alloc_config recorded;
    const char *conf = snap->has_allocator_settings && snap->allocator_settings.alloc_conf
                           ? snap->allocator_settings.alloc_conf
                           : "";
    uint64_t passthrough_end = 0;
    if (rc == 0) {
        (void)fill_recorded(x, conf, &recorded);
        if (x->is_oom)
            fill_request(x, &recorded);
        x->reserved = a.reserved_series[x->at];
        x->live_requested = a.live_series[x->at];
        if (analysis_passthrough_at(snap, x->device, x->at, &x->passthrough) != 0 ||
            analysis_passthrough_at(snap, x->device, a.count, &passthrough_end) != 0 ||
            private_pools_at(snap, x->device, x->at, &x->private_pools) != 0 ||
            fill_sites(x, req->top) != 0) {
            snprintf(err, errlen, "out of host memory");
            rc = -1;
        }
        /* The history's figures count pass-through memory (one-block segments of its own) too:
         * the allocator's are the rest, so that no byte counts twice. */
        x->reserved -= x->passthrough < x->reserved ? x->passthrough : x->reserved;
        x->live_requested -=
            x->passthrough < x->live_requested ? x->passthrough : x->live_requested;
    }
    if (rc == 0) {
        fill_device(x, &a, passthrough_end, req);
        if (explain_whatif(x, req) != 0) {
            snprintf(err, errlen, "the replays failed");
            rc = -1;
        }
    }
    if (rc == 0) {
        /* The replay tracked the pass-through memory too. */
        x->live_allocated -=
            x->passthrough < x->live_allocated ? x->passthrough : x->live_allocated;
        x->replay_reserved -=
            x->passthrough < x->replay_reserved ? x->passthrough : x->replay_reserved;
        x->cached_free = x->reserved > x->live_allocated ? x->reserved - x->live_allocated : 0;
        fill_verdict(x);
    }
    analysis_free(&a);
    if (rc != 0)
        explain_free(x);
    return rc;
}

void
explain_free(struct explain *x)
{
    free(x->sites);
    free(x->segments);
    free(x->whatifs);
    x->sites = NULL;
    x->segments = NULL;
    x->whatifs = NULL;
}
