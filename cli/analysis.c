/* analysis.c: trace walks shared by summary, flamegraph, timeline, plot and diff. */
#include "cli/analysis.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/alloc_policy.h"
#include "allocator/allocator.h"
#include "allocator/trace_sink.h"
#include "cli/cli_util.h"

size_t
analysis_device_count(const struct snapshot *snap)
{
    size_t n = snap->device_count;
    for (size_t i = 0; i < snap->segment_count; i++)
        if (snap->segments[i].device >= 0 && (size_t)snap->segments[i].device + 1 > n)
            n = (size_t)snap->segments[i].device + 1;
    return n;
}

bool
analysis_device_present(const struct snapshot *snap, size_t device)
{
    /* device_traces is grown to every segment's device, so its length alone says nothing. */
    if (device < snap->device_count) {
        const struct snap_device_trace *t = &snap->device_traces[device];
        const struct snap_cuprof *c = &snap->cuprof;
        if (t->count > 0 || t->dropped > 0 ||
            (c->present && c->stats_count != NULL && c->stats_count[device] > 0))
            return true;
    }
    /* Segments are sorted by (device, addr): the first one at or past `device`. */
    size_t lo = 0, hi = snap->segment_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (snap->segments[mid].device >= 0 && (size_t)snap->segments[mid].device >= device)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo < snap->segment_count && (size_t)snap->segments[lo].device == device;
}

void
analysis_device_list(const struct snapshot *snap, char *buf, size_t len)
{
    size_t n = analysis_device_count(snap), shown = 0, total = 0, used = 0;
    for (size_t d = 0; d < n; d++)
        total += analysis_device_present(snap, d);
    snprintf(buf, len, "none");
    for (size_t d = 0; d < n && used < len; d++) {
        if (!analysis_device_present(snap, d))
            continue;
        const char *sep = shown == 0 ? "" : shown + 1 == total ? " and " : ", ";
        int w = snprintf(buf + used, len - used, "%s%zu", sep, d);
        used += w > 0 ? (size_t)w : 0;
        shown++;
    }
}

int
analysis_check_device(const char *path, const struct snapshot *snap, uint64_t device)
{
    if (device <= SIZE_MAX && analysis_device_present(snap, (size_t)device))
        return CLI_OK;
    char list[256], safe[1024];
    analysis_device_list(snap, list, sizeof list);
    bool one = strchr(list, ',') == NULL && strstr(list, " and ") == NULL;
    fprintf(stderr, "cuprof: %s: no device %" PRIu64 " (the snapshot has %s%s)\n",
            cli_term(path, safe, sizeof safe), device,
            strcmp(list, "none") == 0 ? "no device"
            : one                     ? "device "
                                      : "devices ",
            strcmp(list, "none") == 0 ? "" : list);
    return CLI_BADUSE;
}

static const struct snap_device_trace *
trace_of(const struct snapshot *snap, size_t device)
{
    static const struct snap_device_trace empty = {0};
    return device < snap->device_count ? &snap->device_traces[device] : &empty;
}

static bool
block_is_live(const struct snap_block *b)
{
    return b->state == BLOCK_ACTIVE_ALLOCATED || b->state == BLOCK_ACTIVE_PENDING_FREE;
}

/* The live allocations at the first entry: the final active blocks with the trace undone
 * backwards (MemoryViz's rule: an alloc was not live before it, a free_completed was). */
static int
initial_map(const struct snapshot *snap, size_t device, struct span_map *map)
{
    span_map_init(map);
    for (size_t s = 0; s < snap->segment_count; s++) {
        const struct snap_segment *seg = &snap->segments[s];
        if ((size_t)seg->device != device)
            continue;
        for (uint32_t k = 0; k < seg->block_count; k++) {
            const struct snap_block *b = &snap->blocks[seg->first_block + k];
            if (!block_is_live(b))
                continue;
            uint64_t size = b->requested_size ? b->requested_size : b->size;
            if (span_map_put(map, b->addr, size, b->stack) != 0)
                return -1;
        }
    }
    const struct snap_device_trace *t = trace_of(snap, device);
    for (size_t i = t->count; i-- > 0;) {
        const struct snap_entry *e = &t->entries[i];
        if (e->action == TRACE_ALLOC)
            (void)span_map_remove(map, e->addr, NULL);
        else if (e->action == TRACE_FREE_COMPLETED &&
                 span_map_put(map, e->addr, e->size, e->stack) != 0)
            return -1;
    }
    return 0;
}

static uint64_t
map_total(const struct span_map *map)
{
    uint64_t total = 0;
    for (size_t i = 0; i < map->cap; i++)
        if (map->slots[i].addr != 0)
            total =
                map->slots[i].size > UINT64_MAX - total ? UINT64_MAX : total + map->slots[i].size;
    return total;
}

/* Applies one entry to the live map; returns the change of live bytes. */
static int
apply(struct span_map *map, const struct snap_entry *e, int64_t *delta)
{
    struct span_map_item old;
    *delta = 0;
    if (e->action == TRACE_ALLOC) {
        if (span_map_remove(map, e->addr, &old))
            *delta = -cli_i64(old.size);
        if (span_map_put(map, e->addr, e->size, e->stack) != 0)
            return -1;
        *delta = cli_add_i64(*delta, cli_i64(e->size));
    } else if (e->action == TRACE_FREE_COMPLETED) {
        if (span_map_remove(map, e->addr, &old))
            *delta = -cli_i64(old.size);
    }
    return 0;
}

static int64_t
reserved_delta(const struct snap_entry *e)
{
    switch (e->action) {
    case TRACE_SEGMENT_ALLOC:
    case TRACE_SEGMENT_MAP:
        return cli_i64(e->size);
    case TRACE_SEGMENT_FREE:
    case TRACE_SEGMENT_UNMAP:
        return -cli_i64(e->size);
    default:
        return 0;
    }
}

static void
table_totals(const struct snapshot *snap, size_t device, struct device_analysis *a)
{
    for (size_t s = 0; s < snap->segment_count; s++) {
        const struct snap_segment *seg = &snap->segments[s];
        if ((size_t)seg->device != device)
            continue;
        a->segments++;
        a->table_reserved += seg->total_size;
        for (uint32_t k = 0; k < seg->block_count; k++) {
            const struct snap_block *b = &snap->blocks[seg->first_block + k];
            a->blocks++;
            if (b->state == BLOCK_ACTIVE_ALLOCATED)
                a->table_allocated += b->size;
            if (block_is_live(b)) {
                a->table_active += b->size;
                a->table_requested += b->requested_size;
            } else {
                a->free_total += b->size;
                if (b->size > a->largest_free)
                    a->largest_free = b->size;
            }
        }
    }
}

int
analysis_run(const struct snapshot *snap, size_t device, bool series, struct device_analysis *out)
{
    memset(out, 0, sizeof(*out));
    out->device = device;
    const struct snap_device_trace *t = trace_of(snap, device);
    out->count = t->count;
    out->dropped = t->dropped;
    table_totals(snap, device, out);

    struct span_map map;
    if (initial_map(snap, device, &map) != 0) {
        span_map_free(&map);
        return -1;
    }
    /* Reserved bytes at the first entry: the final segments minus what the trace added. */
    int64_t reserved = cli_i64(out->table_reserved);
    for (size_t i = 0; i < t->count; i++)
        reserved = cli_add_i64(reserved, -reserved_delta(&t->entries[i]));
    if (reserved < 0)
        reserved = 0;
    int64_t live = cli_i64(map_total(&map));
    out->start_live = (uint64_t)live;
    out->start_reserved = (uint64_t)reserved;
    out->mid_run = t->dropped > 0 || live > 0 || reserved > 0;
    out->peak_live = (uint64_t)live;
    out->peak_reserved = (uint64_t)reserved;
    out->reserved_at_peak_live = (uint64_t)reserved;
    if (series) {
        out->live_series = malloc((t->count + 1) * sizeof(uint64_t));
        out->reserved_series = malloc((t->count + 1) * sizeof(uint64_t));
        if (out->live_series == NULL || out->reserved_series == NULL) {
            span_map_free(&map);
            analysis_free(out);
            return -1;
        }
        out->live_series[0] = (uint64_t)live;
        out->reserved_series[0] = (uint64_t)reserved;
    }
    for (size_t i = 0; i < t->count; i++) {
        const struct snap_entry *e = &t->entries[i];
        int64_t d;
        if (apply(&map, e, &d) != 0) {
            span_map_free(&map);
            analysis_free(out);
            return -1;
        }
        live = cli_add_i64(live, d);
        reserved = cli_add_i64(reserved, reserved_delta(e));
        if (reserved < 0)
            reserved = 0;
        if (e->action == TRACE_OOM)
            out->oom_count++;
        if (e->has_time)
            out->has_time = true;
        /* Ties keep the first time a peak was reached. */
        if ((uint64_t)live > out->peak_live) {
            out->peak_live = (uint64_t)live;
            out->peak_live_at = i + 1;
            out->reserved_at_peak_live = (uint64_t)reserved;
        }
        if ((uint64_t)reserved > out->peak_reserved) {
            out->peak_reserved = (uint64_t)reserved;
            out->peak_reserved_at = i + 1;
        }
        if (series) {
            out->live_series[i + 1] = (uint64_t)live;
            out->reserved_series[i + 1] = (uint64_t)reserved;
        }
    }
    out->end_live = (uint64_t)live;
    out->end_reserved = (uint64_t)reserved;
    span_map_free(&map);
    return 0;
}

void
analysis_free(struct device_analysis *a)
{
    free(a->live_series);
    free(a->reserved_series);
    a->live_series = NULL;
    a->reserved_series = NULL;
}

int
analysis_live_at(const struct snapshot *snap, size_t device, size_t at, struct span_map_item **out,
                 size_t *n)
{
    *out = NULL;
    *n = 0;
    struct span_map map;
    if (initial_map(snap, device, &map) != 0) {
        span_map_free(&map);
        return -1;
    }
    const struct snap_device_trace *t = trace_of(snap, device);
    if (at > t->count)
        at = t->count;
    for (size_t i = 0; i < at; i++) {
        int64_t d;
        if (apply(&map, &t->entries[i], &d) != 0) {
            span_map_free(&map);
            return -1;
        }
    }
    size_t count = span_map_sorted(&map, out);
    span_map_free(&map);
    if (count == (size_t)-1)
        return -1;
    *n = count;
    return 0;
}

static int
cmp_site(const void *a, const void *b)
{
    const struct site_total *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? 1 : -1;
    return (x->stack > y->stack) - (x->stack < y->stack);
}

/* Adds one allocation of `bytes` to its stack's total (key: stack + 1, as 0 means empty; size:
 * bytes, stack: count). */
static int
count_site(struct span_map *by_stack, uint32_t stack, uint64_t bytes)
{
    struct span_map_item *s = span_map_get(by_stack, (uint64_t)stack + 1);
    if (s == NULL)
        return span_map_put(by_stack, (uint64_t)stack + 1, bytes, 1);
    s->size = bytes > UINT64_MAX - s->size ? UINT64_MAX : s->size + bytes;
    s->stack++;
    return 0;
}

static int sites_of_map(struct span_map *by_stack, struct site_total **out, size_t *nsites);

/* Groups live allocations by stack. */
static int
group_sites(const struct span_map_item *items, size_t n, struct site_total **out, size_t *nsites)
{
    *out = NULL;
    *nsites = 0;
    struct span_map by_stack;
    span_map_init(&by_stack);
    for (size_t i = 0; i < n; i++)
        if (count_site(&by_stack, items[i].stack, items[i].size) != 0) {
            span_map_free(&by_stack);
            return -1;
        }
    return sites_of_map(&by_stack, out, nsites);
}

/* The totals of a count_site map, largest first; frees the map. */
static int
sites_of_map(struct span_map *by_stack, struct site_total **out, size_t *nsites)
{
    *out = NULL;
    *nsites = 0;
    struct site_total *sites = by_stack->count ? malloc(by_stack->count * sizeof(*sites)) : NULL;
    if (by_stack->count && sites == NULL) {
        span_map_free(by_stack);
        return -1;
    }
    size_t k = 0;
    for (size_t i = 0; i < by_stack->cap; i++) {
        if (by_stack->slots[i].addr == 0)
            continue;
        sites[k].stack = (uint32_t)(by_stack->slots[i].addr - 1);
        sites[k].bytes = by_stack->slots[i].size;
        sites[k].count = by_stack->slots[i].stack;
        k++;
    }
    span_map_free(by_stack);
    if (k > 1)
        qsort(sites, k, sizeof(*sites), cmp_site);
    *out = sites;
    *nsites = k;
    return 0;
}

int
analysis_sites_at(const struct snapshot *snap, size_t device, size_t at, struct site_total **out,
                  size_t *nsites)
{
    struct span_map_item *items;
    size_t n;
    *out = NULL;
    *nsites = 0;
    if (analysis_live_at(snap, device, at, &items, &n) != 0)
        return -1;
    int rc = group_sites(items, n, out, nsites);
    free(items);
    return rc;
}

int
analysis_sites_allocated(const struct snapshot *snap, size_t device, struct site_total **out,
                         size_t *nsites)
{
    struct span_map by_stack;
    span_map_init(&by_stack);
    const struct snap_device_trace *t = trace_of(snap, device);
    for (size_t i = 0; i < t->count; i++)
        if (t->entries[i].action == TRACE_ALLOC &&
            count_site(&by_stack, t->entries[i].stack, t->entries[i].size) != 0) {
            span_map_free(&by_stack);
            *out = NULL;
            *nsites = 0;
            return -1;
        }
    return sites_of_map(&by_stack, out, nsites);
}

size_t
analysis_downsample(const uint64_t *series, size_t n, size_t points, uint64_t *out)
{
    size_t m = n < points ? n : points;
    for (size_t k = 0; k < m; k++) {
        size_t lo = (size_t)((double)k * (double)n / (double)m);
        size_t hi = (size_t)((double)(k + 1) * (double)n / (double)m);
        uint64_t v = 0;
        for (size_t i = lo; i < hi && i < n; i++)
            if (series[i] > v)
                v = series[i];
        out[k] = v;
    }
    return m;
}

bool
analysis_time_at(const struct snapshot *snap, size_t device, size_t at, int64_t *time_us)
{
    const struct snap_device_trace *t = trace_of(snap, device);
    if (at == 0 || at > t->count || !t->entries[at - 1].has_time)
        return false;
    *time_us = t->entries[at - 1].time_us;
    return true;
}

void
analysis_where(char *buf, size_t len, const struct snapshot *snap, size_t device, size_t at,
               const int64_t *t0)
{
    int64_t t;
    int n;
    if (at == 0)
        n = snprintf(buf, len, "at the start of the history");
    else
        n = snprintf(buf, len, "at entry %zu (%s)", at - 1,
                     cli_action_name(trace_of(snap, device)->entries[at - 1].action));
    if (t0 != NULL && n > 0 && (size_t)n < len && analysis_time_at(snap, device, at, &t))
        snprintf(buf + n, len - (size_t)n, ", t=+%.6f s", (double)(t - *t0) / 1e6);
}

/* A growable array of ranges kept sorted by address. */
struct seg_list {
    struct analysis_segment *v;
    size_t n, cap;
};

/* Index of the first range that ends after addr. */
static size_t
seg_list_lower(const struct seg_list *l, uint64_t addr)
{
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (l->v[mid].addr + l->v[mid].size <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int
seg_list_insert(struct seg_list *l, size_t at, const struct analysis_segment *s)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        struct analysis_segment *v = realloc(l->v, cap * sizeof(*v));
        if (v == NULL)
            return -1;
        l->v = v;
        l->cap = cap;
    }
    memmove(&l->v[at + 1], &l->v[at], (l->n - at) * sizeof(*l->v));
    l->v[at] = *s;
    l->n++;
    return 0;
}

static void
seg_list_erase(struct seg_list *l, size_t at)
{
    memmove(&l->v[at], &l->v[at + 1], (l->n - at - 1) * sizeof(*l->v));
    l->n--;
}

/* Undoes a segment_map: the pages [addr, end) were not mapped before it. A run may lose its
 * head or tail, or be cut in two (the map joined two runs). */
static int
undo_map(struct seg_list *l, uint64_t addr, uint64_t end)
{
    for (size_t i = seg_list_lower(l, addr); i < l->n && l->v[i].addr < end;) {
        struct analysis_segment *s = &l->v[i];
        uint64_t s_end = s->addr + s->size;
        if (!s->is_expandable) {
            i++;
            continue;
        }
        if (s->addr < addr && s_end > end) {
            struct analysis_segment right = *s;
            right.addr = end;
            right.size = s_end - end;
            s->size = addr - s->addr;
            return seg_list_insert(l, i + 1, &right);
        }
        if (s->addr < addr) {
            s->size = addr - s->addr;
            i++;
        } else if (s_end > end) {
            s->size = s_end - end;
            s->addr = end;
            i++;
        } else {
            seg_list_erase(l, i);
        }
    }
    return 0;
}

/* Undoes a segment_unmap: the pages [addr, addr + size) were mapped before it, joined to the runs
 * of the same reservation that touch them. */
static int
undo_unmap(struct seg_list *l, const struct snap_entry *e)
{
    struct analysis_segment run = {e->addr, e->size, e->stream, UINT32_MAX, false, true};
    size_t i = seg_list_lower(l, e->addr);
    if (i < l->n && l->v[i].addr < e->addr + e->size)
        return 0; /* already mapped: not a history this snapshot can end */
    if (i > 0 && l->v[i - 1].is_expandable && l->v[i - 1].stream == e->stream &&
        l->v[i - 1].addr + l->v[i - 1].size == e->addr) {
        l->v[i - 1].size += e->size;
        if (i < l->n && l->v[i].is_expandable && l->v[i].stream == e->stream &&
            l->v[i].addr == e->addr + e->size) {
            l->v[i - 1].size += l->v[i].size;
            if (l->v[i - 1].index == UINT32_MAX) {
                l->v[i - 1].index = l->v[i].index;
                l->v[i - 1].is_small = l->v[i].is_small;
            }
            seg_list_erase(l, i);
        }
        return 0;
    }
    if (i < l->n && l->v[i].is_expandable && l->v[i].stream == e->stream &&
        l->v[i].addr == e->addr + e->size) {
        l->v[i].addr = e->addr;
        l->v[i].size += e->size;
        return 0;
    }
    return seg_list_insert(l, i, &run);
}

/* Undoes one trace entry on the ranges (the state after it becomes the state before it). */
static int
undo_segment_entry(struct seg_list *l, const struct snap_entry *e)
{
    size_t k;
    switch (e->action) {
    case TRACE_SEGMENT_ALLOC:
        k = seg_list_lower(l, e->addr);
        if (k < l->n && l->v[k].addr == e->addr && !l->v[k].is_expandable)
            seg_list_erase(l, k);
        return 0;
    case TRACE_SEGMENT_FREE: {
        /* PyTorch's small-pool segments are exactly 2 MiB (large ones never are). */
        struct analysis_segment a = {
            e->addr, e->size, e->stream, UINT32_MAX, e->size == ALLOC_SMALL_BUFFER, false};
        k = seg_list_lower(l, e->addr);
        if (k == l->n || l->v[k].addr >= e->addr + e->size)
            return seg_list_insert(l, k, &a);
        return 0;
    }
    case TRACE_SEGMENT_MAP:
        return undo_map(l, e->addr, e->addr + e->size);
    case TRACE_SEGMENT_UNMAP:
        return undo_unmap(l, e);
    default:
        return 0;
    }
}

/* The ranges of the snapshot's table (the state after the last entry), sorted by address. */
static int
final_segments(const struct snapshot *snap, size_t device, struct seg_list *l)
{
    for (size_t i = 0; i < snap->segment_count; i++) {
        const struct snap_segment *s = &snap->segments[i];
        if ((size_t)s->device != device)
            continue;
        struct analysis_segment a = {s->addr,     s->total_size, s->stream,
                                     (uint32_t)i, s->is_small,   s->is_expandable};
        if (seg_list_insert(l, seg_list_lower(l, s->addr), &a) != 0)
            return -1;
    }
    return 0;
}

int
analysis_segment_list_at(const struct snapshot *snap, size_t device, size_t at,
                         struct analysis_segment **out, size_t *n)
{
    struct seg_list l = {NULL, 0, 0};
    *out = NULL;
    *n = 0;
    if (final_segments(snap, device, &l) != 0) {
        free(l.v);
        return -1;
    }
    const struct snap_device_trace *t = trace_of(snap, device);
    for (size_t i = t->count; i-- > at;)
        if (undo_segment_entry(&l, &t->entries[i]) != 0) {
            free(l.v);
            return -1;
        }
    *out = l.v;
    *n = l.n;
    return 0;
}

int
analysis_segments_at(const struct snapshot *snap, size_t device, size_t at, struct span_map *segs)
{
    struct analysis_segment *v;
    size_t n;
    span_map_init(segs);
    if (analysis_segment_list_at(snap, device, at, &v, &n) != 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        uint32_t tag = v[i].index == UINT32_MAX
                           ? ANALYSIS_SEGMENT_UNKNOWN
                           : (uint32_t)(v[i].is_small ? 1 : 0) | (uint32_t)(v[i].index << 1);
        if (span_map_put(segs, v[i].addr, v[i].size, tag) != 0) {
            free(v);
            return -1;
        }
    }
    free(v);
    return 0;
}

/* The ranges touching [lo, hi], ends included: [*first, *end) (an unmap joins the runs that end
 * where it begins and begin where it ends). */
static void
seg_window(const struct seg_list *l, uint64_t lo, uint64_t hi, size_t *first, size_t *end)
{
    size_t i = seg_list_lower(l, lo);
    if (i > 0 && l->v[i - 1].addr + l->v[i - 1].size == lo)
        i--;
    size_t j = i;
    while (j < l->n && l->v[j].addr <= hi)
        j++;
    *first = i;
    *end = j;
}

static bool
seg_same(const struct analysis_segment *a, const struct analysis_segment *b)
{
    return a->addr == b->addr && a->size == b->size && a->stream == b->stream &&
           a->index == b->index && a->is_small == b->is_small &&
           a->is_expandable == b->is_expandable;
}

static bool
seg_in(const struct analysis_segment *s, const struct analysis_segment *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (seg_same(s, &v[i]))
            return true;
    return false;
}

struct span_list {
    struct analysis_span *v;
    size_t n, cap;
    struct span_map until; /* a range's address -> the first state without it (absent: the end) */
    size_t last;           /* count + 1 */
};

/* A range leaves the walk: it is in the states from `from` up to its recorded end. */
static int
span_close(struct span_list *s, const struct analysis_segment *seg, size_t from)
{
    struct span_map_item end;
    size_t to = s->last;
    if (seg->addr != 0 && span_map_remove(&s->until, seg->addr, &end))
        to = (size_t)end.size;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        struct analysis_span *v = realloc(s->v, cap * sizeof(*v));
        if (v == NULL)
            return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (struct analysis_span){*seg, from, to};
    return 0;
}

static int
cmp_span(const void *a, const void *b)
{
    const struct analysis_span *x = a, *y = b;
    if (x->from != y->from)
        return x->from < y->from ? -1 : 1;
    return (x->seg.addr > y->seg.addr) - (x->seg.addr < y->seg.addr);
}

/* Undoes segment entry i (at `e`), closing the ranges it changes and opening those it makes:
 * only the ranges touching the entry's own span can change. */
static int
span_step(struct span_list *s, struct seg_list *l, const struct snap_entry *e, size_t i,
          struct analysis_segment **before, size_t *cap)
{
    size_t a, b;
    uint64_t lo = e->addr, hi = e->addr + e->size;
    seg_window(l, lo, hi, &a, &b);
    size_t nb = b - a;
    if (nb > *cap) {
        struct analysis_segment *v = realloc(*before, nb * sizeof(*v));
        if (v == NULL)
            return -1;
        *before = v;
        *cap = nb;
    }
    if (nb > 0)
        memcpy(*before, &l->v[a], nb * sizeof(**before));
    if (undo_segment_entry(l, e) != 0)
        return -1;
    seg_window(l, lo, hi, &a, &b);
    /* Closed first: a changed range may keep its address. */
    for (size_t k = 0; k < nb; k++)
        if (!seg_in(&(*before)[k], &l->v[a], b - a) && span_close(s, &(*before)[k], i + 1) != 0)
            return -1;
    for (size_t k = a; k < b; k++)
        if (!seg_in(&l->v[k], *before, nb) && l->v[k].addr != 0 &&
            span_map_put(&s->until, l->v[k].addr, i + 1, 0) != 0)
            return -1;
    return 0;
}

int
analysis_segment_spans(const struct snapshot *snap, size_t device, struct analysis_span **out,
                       size_t *n)
{
    const struct snap_device_trace *t = trace_of(snap, device);
    struct seg_list l = {NULL, 0, 0};
    struct span_list s = {.last = t->count + 1};
    struct analysis_segment *before = NULL;
    size_t cap = 0;
    span_map_init(&s.until);
    int rc = final_segments(snap, device, &l);
    for (size_t i = t->count; rc == 0 && i-- > 0;) {
        unsigned action = t->entries[i].action;
        if (action == TRACE_SEGMENT_ALLOC || action == TRACE_SEGMENT_FREE ||
            action == TRACE_SEGMENT_MAP || action == TRACE_SEGMENT_UNMAP)
            rc = span_step(&s, &l, &t->entries[i], i, &before, &cap);
    }
    for (size_t k = 0; rc == 0 && k < l.n; k++)
        rc = span_close(&s, &l.v[k], 0);
    free(before);
    free(l.v);
    span_map_free(&s.until);
    if (rc != 0) {
        free(s.v);
        *out = NULL;
        *n = 0;
        return -1;
    }
    if (s.n > 1)
        qsort(s.v, s.n, sizeof(*s.v), cmp_span);
    *out = s.v;
    *n = s.n;
    return 0;
}

const char *
analysis_history_not_kept(const struct snapshot *snap)
{
    for (size_t i = 0; i < snap->cuprof.config_count; i++) {
        const struct snap_setting *c = &snap->cuprof.config[i];
        if (c->key != NULL && c->value != NULL && strcmp(c->key, "CUPROF_HISTORY") == 0)
            return strcmp(c->value, "state") == 0 ? "state"
                   : strcmp(c->value, "off") == 0 ? "off"
                                                  : NULL;
    }
    return NULL;
}

bool
analysis_pool_passed(uint8_t pool)
{
    return pool != TRACE_POOL_DEFAULT && pool != TRACE_POOL_TRACE && pool != TRACE_POOL_NVTX;
}

int
analysis_passthrough_at(const struct snapshot *snap, size_t device, size_t at, uint64_t *bytes)
{
    struct span_map live;
    span_map_init(&live);
    int rc = 0;
    for (size_t s = 0; s < snap->segment_count && rc == 0; s++) {
        const struct snap_segment *seg = &snap->segments[s];
        if ((size_t)seg->device == device && analysis_pool_passed(seg->cuprof_pool))
            rc = span_map_put(&live, seg->addr, seg->total_size, 0);
    }
    const struct snap_device_trace *t = trace_of(snap, device);
    for (size_t i = t->count; rc == 0 && i-- > 0;) {
        const struct snap_entry *e = &t->entries[i];
        if (!analysis_pool_passed(e->pool))
            continue;
        if (e->action == TRACE_ALLOC)
            (void)span_map_remove(&live, e->addr, NULL);
        else if (e->action == TRACE_FREE_REQUESTED)
            rc = span_map_put(&live, e->addr, e->size, 0);
    }
    for (size_t i = 0; rc == 0 && i < at && i < t->count; i++) {
        const struct snap_entry *e = &t->entries[i];
        if (!analysis_pool_passed(e->pool))
            continue;
        if (e->action == TRACE_ALLOC)
            rc = span_map_put(&live, e->addr, e->size, 0);
        else if (e->action == TRACE_FREE_REQUESTED)
            (void)span_map_remove(&live, e->addr, NULL);
    }
    *bytes = 0;
    for (size_t k = 0; rc == 0 && k < live.cap; k++)
        if (live.slots[k].addr != 0)
            *bytes += live.slots[k].size;
    span_map_free(&live);
    return rc;
}
