/* plot_history.c: the page's history tables (see plot_history.h). One forward walk of the trace
 * pairs each alloc with its free_requested and free_completed, starting from the allocations
 * live at the first entry as analysis rebuilds them, so the live bytes the page sums are
 * analysis_run's. */
#include "cli/plot_history.h"

#include <stdlib.h>
#include <string.h>

#include "allocator/alloc_config.h"
#include "allocator/alloc_policy.h"
#include "allocator/allocator.h"
#include "allocator/trace_sink.h"
#include "cli/analysis.h"

void
plot_streams_init(struct plot_streams *s)
{
    memset(s, 0, sizeof(*s));
    span_map_init(&s->index);
    s->max_stream = -1;
}

void
plot_streams_free(struct plot_streams *s)
{
    span_map_free(&s->index);
    free(s->values);
    memset(s, 0, sizeof(*s));
}

long
plot_streams_number(struct plot_streams *s, uint64_t raw)
{
    if (raw != UINT64_MAX) {
        struct span_map_item *it = span_map_get(&s->index, raw + 1);
        if (it != NULL)
            return (long)it->size;
    } else if (s->max_stream >= 0) {
        return s->max_stream;
    }
    if (s->count == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 8;
        uint64_t *v = realloc(s->values, cap * sizeof(*v));
        if (v == NULL)
            return -1;
        s->values = v;
        s->cap = cap;
    }
    if (raw == UINT64_MAX)
        s->max_stream = (long)s->count;
    else if (span_map_put(&s->index, raw + 1, s->count, 0) != 0)
        return -1;
    s->values[s->count] = raw;
    return (long)s->count++;
}

void
plot_history_free(struct plot_history *h)
{
    plot_blob_free(&h->allocs);
    plot_blob_free(&h->events);
    plot_blob_free(&h->segments);
    plot_blob_free(&h->times);
}

/* One allocation while the walk lasts. */
struct alloc_rec {
    uint64_t addr, size;
    uint64_t born, died, freed; /* freed: the free_requested entry + 1, or 0 */
    uint32_t stack, free_stack; /* free_stack: stack + 1 of the free, or 0 */
    uint32_t stream;
};

struct walk {
    const struct snapshot *snap;
    struct plot_streams *streams;
    struct plot_history *h;
    struct alloc_rec *recs;
    size_t n, cap;
    struct span_map open; /* address -> index of its live record (size field) */
    uint64_t last;        /* count + 1: the died of a record live at the end */
    uint64_t event_prev_entry, event_prev_addr;
};

static int
rec_add(struct walk *w, uint64_t addr, uint64_t size, uint64_t born, uint32_t stack,
        uint64_t stream)
{
    long number = plot_streams_number(w->streams, stream);
    if (number < 0)
        return -1;
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 1024;
        struct alloc_rec *v = realloc(w->recs, cap * sizeof(*v));
        if (v == NULL)
            return -1;
        w->recs = v;
        w->cap = cap;
    }
    w->recs[w->n] = (struct alloc_rec){addr, size, born, w->last, 0, stack, 0, (uint32_t)number};
    return span_map_put(&w->open, addr, w->n++, 0);
}

static int
event_add(struct walk *w, size_t i, const struct snap_entry *e)
{
    long number = plot_streams_number(w->streams, e->stream);
    if (number < 0)
        return -1;
    struct plot_blob *b = &w->h->events;
    plot_blob_uint(b, i - w->event_prev_entry);
    plot_blob_uint(b, e->action);
    plot_blob_uint(b, plot_blob_delta(e->addr, w->event_prev_addr));
    plot_blob_uint(b, e->size);
    plot_blob_uint(b, e->stack);
    plot_blob_uint(b, (uint64_t)number);
    w->event_prev_entry = i;
    w->event_prev_addr = e->addr;
    w->h->event_count++;
    return b->failed ? -1 : 0;
}

/* Entry i: an allocation's alloc, free_requested or free_completed, or an event of its own.
 * As analysis applies them: an alloc at a live address replaces that allocation. */
static int
walk_entry(struct walk *w, size_t i, const struct snap_entry *e)
{
    struct span_map_item *open = span_map_get(&w->open, e->addr);
    struct alloc_rec *r = open != NULL ? &w->recs[open->size] : NULL;
    switch (e->action) {
    case TRACE_ALLOC:
        if (r != NULL)
            r->died = i + 1;
        return rec_add(w, e->addr, e->size, i + 1, e->stack, e->stream);
    case TRACE_FREE_REQUESTED:
        if (r == NULL || r->freed != 0)
            break;
        r->freed = i + 1;
        if (e->stack != 0 && e->stack != r->stack)
            r->free_stack = e->stack + 1;
        return 0;
    case TRACE_FREE_COMPLETED:
        if (r == NULL)
            break;
        r->died = i + 1;
        if (r->free_stack == 0 && e->stack != 0 && e->stack != r->stack)
            r->free_stack = e->stack + 1;
        (void)span_map_remove(&w->open, e->addr, NULL);
        return 0;
    default:
        break;
    }
    return event_add(w, i, e);
}

/* Each entry's time as the change from the entry before (an entry without one repeats it). */
static void
walk_times(const struct snap_device_trace *t, struct plot_history *h)
{
    for (size_t i = 0; i < t->count && !h->has_time; i++)
        if (t->entries[i].has_time) {
            h->has_time = true;
            h->t0_us = t->entries[i].time_us;
        }
    if (!h->has_time)
        return;
    uint64_t prev = (uint64_t)h->t0_us;
    for (size_t i = 0; i < t->count; i++) {
        uint64_t now = t->entries[i].has_time ? (uint64_t)t->entries[i].time_us : prev;
        plot_blob_uint(&h->times, plot_blob_delta(now, prev));
        prev = now;
    }
}

/* The block sizes of the snapshot's table (addr -> size), for allocations live at the end. */
static int
final_blocks(const struct snapshot *snap, size_t device, struct span_map *blocks)
{
    span_map_init(blocks);
    for (size_t s = 0; s < snap->segment_count; s++) {
        const struct snap_segment *seg = &snap->segments[s];
        if ((size_t)seg->device != device)
            continue;
        for (uint32_t k = 0; k < seg->block_count; k++) {
            const struct snap_block *b = &snap->blocks[seg->first_block + k];
            if ((b->state == BLOCK_ACTIVE_ALLOCATED || b->state == BLOCK_ACTIVE_PENDING_FREE) &&
                span_map_put(blocks, b->addr, b->size, 0) != 0)
                return -1;
        }
    }
    return 0;
}

/* The records as rows: born ascending (the walk's order). `extra` is the block's bytes past the
 * request: the table's block for what is live at the end, else PyTorch's rounding under the
 * snapshot's roundup_power2_divisions. */
static int
write_allocs(struct walk *w, size_t device)
{
    struct alloc_config config;
    alloc_config_defaults(&config);
    if (w->snap->has_allocator_settings)
        for (size_t k = 0; k < ALLOC_CONFIG_ROUNDUP_INTERVALS; k++)
            config.roundup_power2_divisions[k] =
                w->snap->allocator_settings.roundup_power2_divisions[k];
    struct span_map blocks;
    if (final_blocks(w->snap, device, &blocks) != 0) {
        span_map_free(&blocks);
        return -1;
    }
    struct plot_blob *b = &w->h->allocs;
    uint64_t prev_born = 0, prev_addr = 0;
    for (size_t k = 0; k < w->n; k++) {
        const struct alloc_rec *r = &w->recs[k];
        uint64_t block = 0;
        struct span_map_item *it = r->died == w->last ? span_map_get(&blocks, r->addr) : NULL;
        if (it != NULL)
            block = it->size;
        else if (r->size <= SNAP_MAX_BYTES)
            block = alloc_policy_round_size(&config, (size_t)r->size);
        plot_blob_uint(b, r->born - prev_born);
        plot_blob_uint(b, r->died - r->born);
        plot_blob_uint(b, r->freed != 0 ? r->died - r->freed + 1 : 0);
        plot_blob_uint(b, plot_blob_delta(r->addr, prev_addr));
        plot_blob_uint(b, r->size);
        plot_blob_uint(b, block > r->size ? block - r->size : 0);
        plot_blob_uint(b, r->stack);
        plot_blob_uint(b, r->free_stack);
        plot_blob_uint(b, r->stream);
        prev_born = r->born;
        prev_addr = r->addr;
    }
    w->h->alloc_count = w->n;
    span_map_free(&blocks);
    return b->failed ? -1 : 0;
}

static int
write_segments(const struct snapshot *snap, size_t device, struct plot_streams *streams,
               struct plot_history *h)
{
    struct analysis_span *spans;
    size_t n;
    if (analysis_segment_spans(snap, device, &spans, &n) != 0)
        return -1;
    uint64_t prev_from = 0, prev_addr = 0;
    int rc = 0;
    for (size_t k = 0; k < n && rc == 0; k++) {
        const struct analysis_span *s = &spans[k];
        long number = plot_streams_number(streams, s->seg.stream);
        if (number < 0) {
            rc = -1;
            break;
        }
        bool in_table = s->seg.index != UINT32_MAX;
        unsigned flags = (s->seg.is_small ? PLOT_SEGMENT_SMALL : 0) |
                         (s->seg.is_expandable ? PLOT_SEGMENT_EXPANDABLE : 0) |
                         (in_table ? PLOT_SEGMENT_IN_TABLE : 0);
        plot_blob_uint(&h->segments, s->from - prev_from);
        plot_blob_uint(&h->segments, s->to - s->from);
        plot_blob_uint(&h->segments, plot_blob_delta(s->seg.addr, prev_addr));
        plot_blob_uint(&h->segments, s->seg.size);
        plot_blob_uint(&h->segments, (uint64_t)number);
        plot_blob_uint(&h->segments, flags);
        prev_from = s->from;
        prev_addr = s->seg.addr;
    }
    h->segment_count = n;
    free(spans);
    return rc != 0 || h->segments.failed ? -1 : 0;
}

/* The stream of the table's segment holding addr (0 when none does: a block the trace freed). */
static uint64_t
table_stream(const struct snapshot *snap, size_t device, uint64_t addr)
{
    size_t lo = 0, hi = snap->segment_count;
    while (lo < hi) { /* the first segment past (device, addr) */
        size_t mid = lo + (hi - lo) / 2;
        const struct snap_segment *s = &snap->segments[mid];
        if ((size_t)s->device < device || ((size_t)s->device == device && s->addr <= addr))
            lo = mid + 1;
        else
            hi = mid;
    }
    const struct snap_segment *s = lo > 0 ? &snap->segments[lo - 1] : NULL;
    if (s != NULL && (size_t)s->device == device && addr - s->addr < s->total_size)
        return s->stream;
    return 0;
}

/* The allocations live at the first entry (born 0), in address order, then the walk. */
static int
walk_trace(struct walk *w, size_t device)
{
    struct span_map_item *start;
    size_t nstart;
    if (analysis_live_at(w->snap, device, 0, &start, &nstart) != 0)
        return -1;
    int rc = 0;
    for (size_t k = 0; k < nstart && rc == 0; k++)
        rc = rec_add(w, start[k].addr, start[k].size, 0, start[k].stack,
                     table_stream(w->snap, device, start[k].addr));
    free(start);
    if (device >= w->snap->device_count)
        return rc;
    const struct snap_device_trace *t = &w->snap->device_traces[device];
    for (size_t i = 0; i < t->count && rc == 0; i++)
        rc = walk_entry(w, i, &t->entries[i]);
    return rc;
}

int
plot_history_build(const struct snapshot *snap, size_t device, struct plot_streams *streams,
                   struct plot_history *h)
{
    memset(h, 0, sizeof(*h));
    struct walk w = {.snap = snap, .streams = streams, .h = h};
    size_t count = device < snap->device_count ? snap->device_traces[device].count : 0;
    w.last = count + 1;
    span_map_init(&w.open);
    int rc = walk_trace(&w, device);
    if (rc == 0)
        rc = write_allocs(&w, device);
    span_map_free(&w.open);
    free(w.recs);
    if (rc == 0 && device < snap->device_count)
        walk_times(&snap->device_traces[device], h);
    if (rc == 0)
        rc = write_segments(snap, device, streams, h);
    if (rc != 0 || h->times.failed) {
        plot_history_free(h);
        return -1;
    }
    return 0;
}
