/* golden_alloc.c: scripted sequences through the real allocator (on an in-process fake device),
 * the real trace ring and the live dump, written as NAME.pickle and NAME.json for the golden
 * checks. Usage: golden_alloc SCENARIO OUTDIR   (SCENARIO: basic | streams) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/allocator.h"
#include "allocator/cuprof_errors.h"
#include "snapshot/snapshot_dump.h"
#include "snapshot/snapshot_write.h"
#include "snapshot/stacks.h"
#include "snapshot/trace_ring.h"

#define BASE 0x7f0000000000ull
#define MIB  (1024ull * 1024ull)

/* ---- A fake device: bump-pointer segments aligned to 2 MiB, a capacity, events completed by
 * hand (golden_complete). */
struct gdev {
    uint64_t next[2];
    size_t used[2], capacity;
    int done[64]; /* event state: 0 idle, 1 pending, 2 complete */
    size_t events;
};

static int
g_alloc(void *ctx, int device, size_t size, uint64_t *addr)
{
    struct gdev *g = ctx;
    if (g->used[device] + size > g->capacity)
        return -CUPROF_ENOMEM;
    *addr = g->next[device];
    g->next[device] += (size + 2 * MIB - 1) / (2 * MIB) * (2 * MIB);
    g->used[device] += size;
    return 0;
}

static int
g_free(void *ctx, int device, uint64_t addr, size_t size)
{
    struct gdev *g = ctx;
    (void)addr;
    g->used[device] -= size;
    return 0;
}

static int
g_info(void *ctx, int device, size_t *free_bytes, size_t *total)
{
    struct gdev *g = ctx;
    *free_bytes = g->capacity - g->used[device];
    *total = g->capacity;
    return 0;
}

static int
g_ev_create(void *ctx, int device, void **ev)
{
    struct gdev *g = ctx;
    (void)device;
    if (g->events == 64)
        return 2;
    *ev = &g->done[g->events++];
    return 0;
}

static int
g_ev_record(void *ctx, void *ev, uint64_t stream)
{
    (void)ctx;
    (void)stream;
    *(int *)ev = 1;
    return 0;
}

static int
g_ev_query(__attribute__((unused)) void *ctx, void *ev, bool *complete)
{
    *complete = *(int *)ev != 1;
    return 0;
}

static int
g_ev_sync(void *ctx, void *ev)
{
    (void)ctx;
    *(int *)ev = 2;
    return 0;
}

static int
g_ev_destroy(void *ctx, void *ev)
{
    (void)ctx;
    (void)ev;
    return 0;
}

static int
g_sync(void *ctx, int device)
{
    (void)ctx;
    (void)device;
    return 0;
}

static void
golden_complete(struct gdev *g)
{
    for (size_t i = 0; i < g->events; i++)
        if (g->done[i] == 1)
            g->done[i] = 2;
}

/* Call sites with stable names: their entry addresses (+1, a "return address") make stacks. */
__attribute__((noinline)) void
golden_forward(void)
{
    __asm__ volatile("");
}

__attribute__((noinline)) void
golden_backward(void)
{
    __asm__ volatile("");
}

__attribute__((noinline)) void
golden_main(void)
{
    __asm__ volatile("");
}

static uint32_t
site(void (*fn)(void))
{
    uintptr_t ips[2] = {(uintptr_t)fn + 1, (uintptr_t)&golden_main + 1};
    return stacks_intern(ips, 2);
}

static void
ok(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "golden_alloc: %s failed (%d)\n", what, rc);
        exit(1);
    }
}

static uint64_t
get(struct allocator *a, int dev, size_t size, uint64_t stream, uint32_t stack)
{
    uint64_t addr = 0;
    ok(allocator_malloc(a, dev, size, stream, stack, &addr), "malloc");
    return addr;
}

/* Split, merge-free neighbours, a large-pool split, an unsplit oversize remainder, empty_cache
 * and a mid-run dump whose `snapshot` event shows in the final dump. */
static void
scenario_basic(struct allocator *a, struct trace_ring *ring, const struct dump_info *info)
{
    uint32_t fw = site(golden_forward), bw = site(golden_backward);
    uint64_t pa = get(a, 0, 500, 0, fw);      /* small segment, 512 B block */
    uint64_t pb = get(a, 0, 1000, 0, fw);     /* 1024 B block after it */
    uint64_t pc = get(a, 0, 3 * MIB, 0, bw);  /* 20 MiB large segment, split */
    ok(allocator_free(a, pa, 0), "free a");   /* no merge: b is live */
    uint64_t pd = get(a, 0, 12 * MIB, 0, bw); /* from c's remainder, split again */
    uint32_t label = trace_ring_intern_label(ring, "phase2");
    struct trace_event note = {.action = TRACE_ANNOTATE, .stack_id = label};
    trace_ring_record(ring, &note);
    ok(allocator_free(a, pc, bw), "free c");        /* free stack given: used for the events */
    ok(allocator_empty_cache(a, 0), "empty_cache"); /* nothing fully free yet */
    struct snapshot *mid = NULL;
    ok(snapshot_dump_build(a, ring, info, &mid), "mid dump"); /* records `snapshot` */
    snapshot_free(mid);
    uint64_t pe = get(a, 0, 25 * MIB, 0, fw); /* 26 MiB segment, 1 MiB stays attached */
    ok(allocator_free(a, pe, 0), "free e");
    ok(allocator_empty_cache(a, 0), "empty_cache"); /* releases e's segment */
    (void)pb;
    (void)pd;
}

/* recordStream -> active_pending_free until the event completes; another stream gets its own
 * segment; an OOM; a managed allocation tracked outside the cache; device 1. */
static void
scenario_streams(struct allocator *a, struct gdev *g, const struct dump_info *info)
{
    (void)info;
    uint32_t fw = site(golden_forward), bw = site(golden_backward);
    uint64_t pa = get(a, 0, 4000, 0, fw);
    ok(allocator_record_stream(a, pa, 7), "record_stream");
    ok(allocator_free(a, pa, 0), "free a"); /* free_requested only: pending on stream 7 */
    golden_complete(g);
    uint64_t pb = get(a, 0, 100, 0, bw); /* events polled first: free_completed(a) */
    ok(allocator_record_stream(a, pb, 7), "record_stream");
    ok(allocator_free(a, pb, bw), "free b"); /* stays pending in the snapshot */
    uint64_t pc = get(a, 0, 2048, 9, fw);    /* stream 9: its own small segment */
    uint64_t addr = 0;
    if (allocator_malloc(a, 0, 200 * MIB, 0, bw, &addr) != -CUPROF_ENOMEM) /* capacity 64 MiB */
        ok(1, "expected OOM");
    ok(allocator_track_external(a, 0, BASE + 0x100000000ull, 3 * MIB, 0, TRACE_POOL_MANAGED, fw),
       "track_external");
    uint64_t pd = get(a, 1, 1 * MIB, 0, fw); /* device 1, small pool: 1 MiB fits a 2 MiB seg */
    (void)pc;
    (void)pd;
}

int
main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: golden_alloc basic|streams OUTDIR\n");
        return 2;
    }
    struct gdev g = {.next = {BASE, BASE + (1ull << 40)}, .capacity = 64 * MIB};
    struct device_ops ops = {.ctx = &g,
                             .segment_alloc = g_alloc,
                             .segment_free = g_free,
                             .mem_info = g_info,
                             .event_create = g_ev_create,
                             .event_record = g_ev_record,
                             .event_query = g_ev_query,
                             .event_synchronize = g_ev_sync,
                             .event_destroy = g_ev_destroy,
                             .synchronize = g_sync};
    struct alloc_config cfg;
    alloc_config_defaults(&cfg);
    struct trace_ring *ring = trace_ring_create(2, 1000, HISTORY_ALL);
    struct trace_sink sink = trace_ring_sink(ring);
    struct allocator *a = allocator_create(&cfg, &ops, &sink, 2);
    if (ring == NULL || a == NULL)
        return 1;
    const char *args[] = {"golden_alloc", argv[1]};
    struct dump_setting settings[] = {{"CUPROF_MODE", "cache"}, {"CUPROF_HISTORY", "all"}};
    struct dump_info info = {.mode = "cache",
                             .config = settings,
                             .config_count = 2,
                             .pid = 1,
                             .rank = 0,
                             .host = "golden",
                             .argv = args,
                             .argc = 2,
                             .alloc_config = &cfg};
    if (strcmp(argv[1], "basic") == 0) {
        scenario_basic(a, ring, &info);
    } else if (strcmp(argv[1], "streams") == 0) {
        scenario_streams(a, &g, &info);
    } else {
        fprintf(stderr, "golden_alloc: unknown scenario %s\n", argv[1]);
        return 2;
    }
    char msg[256];
    ok(allocator_check_invariants(a, msg, sizeof(msg)), msg);
    /* One dump written in both formats (a second dump would add the first one's `snapshot`). */
    struct snapshot *s = NULL;
    ok(snapshot_dump_build(a, ring, &info, &s), "dump");
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s.pickle", argv[2], argv[1]);
    ok(snapshot_write_file(path, s, SNAPSHOT_FORMAT_AUTO, FILE_PUBLISH_REPLACE, NULL, 0),
       "write pickle");
    snprintf(path, sizeof(path), "%s/%s.json", argv[2], argv[1]);
    ok(snapshot_write_file(path, s, SNAPSHOT_FORMAT_AUTO, FILE_PUBLISH_REPLACE, NULL, 0),
       "write json");
    snapshot_free(s);
    allocator_destroy(a);
    trace_ring_destroy(ring);
    return 0;
}
