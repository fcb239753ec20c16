/* run_side.c: one run's figures, from analysis.h's walk, the trace and the block table. */
#include "cli/run_side.h"

#include <stdlib.h>
#include <string.h>

#include "allocator/allocator.h"
#include "allocator/trace_sink.h"
#include "cli/analysis.h"
#include "snapshot/snapshot_oom.h"

static const struct snap_device_trace *
trace_of(const struct snapshot *snap, size_t device)
{
    static const struct snap_device_trace empty = {0};
    return device < snap->device_count ? &snap->device_traces[device] : &empty;
}

static struct run_peak
peak_at(const struct snapshot *snap, size_t device, uint64_t bytes, size_t at)
{
    const struct snap_device_trace *t = trace_of(snap, device);
    struct run_peak p = {.bytes = bytes, .at = at};
    if (at == 0 || at > t->count)
        return p;
    const struct snap_entry *e = &t->entries[at - 1];
    p.stack = e->stack;
    if (e->has_time) {
        p.has_time = true;
        p.time_us = e->time_us;
        p.since_us = t->entries[0].has_time ? e->time_us - t->entries[0].time_us : 0;
    }
    return p;
}

/* cuprof's own counter `key` of the device, or -1. */
static int64_t
counter(const struct snapshot *snap, size_t device, const char *key)
{
    const struct snap_cuprof *c = &snap->cuprof;
    if (!c->present || c->stats == NULL || c->stats_count == NULL || device >= snap->device_count)
        return -1;
    for (size_t i = 0; i < c->stats_count[device]; i++)
        if (strcmp(c->stats[device][i].key, key) == 0)
            return c->stats[device][i].value;
    return -1;
}

static void
count_entries(const struct snapshot *snap, size_t device, struct run_side *s)
{
    const struct snap_device_trace *t = trace_of(snap, device);
    s->first_oom = SIZE_MAX;
    for (size_t i = 0; i < t->count; i++) {
        const struct snap_entry *e = &t->entries[i];
        switch (e->action) {
        case TRACE_SEGMENT_ALLOC:
            s->segment_allocs++;
            break;
        case TRACE_SEGMENT_FREE:
            s->segment_frees++;
            break;
        case TRACE_SEGMENT_MAP:
            s->segment_maps++;
            break;
        case TRACE_SEGMENT_UNMAP:
            s->segment_unmaps++;
            break;
        case TRACE_OOM:
            if (s->first_oom == SIZE_MAX) {
                s->first_oom = i;
                s->oom_size = e->size;
                s->oom_stack = e->stack;
            }
            break;
        default:
            break;
        }
    }
}

struct leak {
    uint32_t stack;
    uint64_t bytes;
};

static int
leak_by_stack(const void *x, const void *y)
{
    const struct leak *p = x, *q = y;
    return (p->stack > q->stack) - (p->stack < q->stack);
}

/* Blocks still allocated at the end, and the call site holding the most of their bytes (ties:
 * the lower stack). */
static int
count_leaks(const struct snapshot *snap, size_t device, struct run_side *s)
{
    size_t blocks = 0;
    for (size_t i = 0; i < snap->segment_count; i++)
        if ((size_t)snap->segments[i].device == device)
            blocks += snap->segments[i].block_count;
    struct leak *v = malloc((blocks + 1) * sizeof(*v));
    if (v == NULL)
        return -1;
    for (size_t i = 0; i < snap->segment_count; i++) {
        const struct snap_segment *seg = &snap->segments[i];
        if ((size_t)seg->device != device)
            continue;
        s->segments++;
        for (uint32_t k = 0; k < seg->block_count; k++) {
            const struct snap_block *b = &snap->blocks[seg->first_block + k];
            if (b->state == BLOCK_ACTIVE_ALLOCATED) {
                v[s->leaked_blocks++] = (struct leak){b->stack, b->requested_size};
                s->leaked_bytes += b->requested_size;
            }
        }
    }
    if (s->leaked_blocks > 1)
        qsort(v, s->leaked_blocks, sizeof(*v), leak_by_stack);
    for (size_t i = 0; i < s->leaked_blocks;) {
        uint64_t bytes = 0;
        size_t j = i;
        for (; j < s->leaked_blocks && v[j].stack == v[i].stack; j++)
            bytes += v[j].bytes;
        if (i == 0 || bytes > s->leak_stack_bytes) {
            s->leak_stack = v[i].stack;
            s->leak_stack_bytes = bytes;
        }
        i = j;
    }
    free(v);
    return 0;
}

int
run_side_make(const struct snapshot *snap, size_t device, struct run_side *out)
{
    memset(out, 0, sizeof(*out));
    out->counted_allocs = out->counted_frees = -1;
    if (snap == NULL || !analysis_device_present(snap, device))
        return 0;
    struct device_analysis a;
    if (analysis_run(snap, device, false, &a) != 0)
        return -1;
    out->present = true;
    out->entries = a.count;
    out->dropped = a.dropped;
    out->mid_run = a.mid_run;
    out->allocated = peak_at(snap, device, a.peak_live, a.peak_live_at);
    out->reserved = peak_at(snap, device, a.peak_reserved, a.peak_reserved_at);
    out->end_allocated = a.end_live;
    out->end_reserved = a.table_reserved;
    out->ooms = a.oom_count;
    count_entries(snap, device, out);
    out->driver_ooms = snapshot_driver_oom_count(snap, device);
    const struct snap_oom_message *own = snapshot_driver_oom_first(snap, device);
    if (own != NULL) {
        out->driver_call = own->api;
        out->driver_at = (size_t)own->trace_index;
    }
    if (count_leaks(snap, device, out) != 0) {
        analysis_free(&a);
        return -1;
    }
    out->counted_allocs = counter(snap, device, "num_device_alloc");
    out->counted_frees = counter(snap, device, "num_device_free");
    analysis_free(&a);
    return 0;
}
