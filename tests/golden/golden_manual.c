/* golden_manual.c: writes a hand-built snapshot model (two devices, every action, shared stacks,
 * a pending free, an annotation, an OOM) as .pickle and .json for the golden checks.
 * Usage: golden_manual OUTDIR  →  OUTDIR/manual.pickle, OUTDIR/manual.json */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/allocator.h"
#include "allocator/trace_sink.h"
#include "snapshot/snapshot_model.h"
#include "snapshot/snapshot_write.h"
#include "stats/memory_stats.h"

#define BASE 0x7f0000000000ull
#define MIB  (1024ull * 1024ull)

static void
check(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "golden_manual: %s failed (%d)\n", what, rc);
        exit(1);
    }
}

static uint32_t
stack2(struct snapshot *s, const char *fn, int64_t line)
{
    uint32_t f[2], id;
    check(snapshot_add_frame(s, fn, "tests/golden/golden_manual.c", line, &f[0]), "frame");
    check(snapshot_add_frame(s, "main", "tests/golden/golden_manual.c", 90, &f[1]), "frame");
    check(snapshot_add_stack(s, f, 2, &id), "stack");
    return id;
}

static void
entry(struct snapshot *s, size_t dev, uint8_t action, uint64_t addr, uint64_t size, uint64_t stream,
      uint32_t stack, int64_t t)
{
    struct snap_entry e = {.action = action,
                           .addr = addr,
                           .size = size,
                           .stream = stream,
                           .stack = stack,
                           .has_time = true,
                           .time_us = t};
    check(snapshot_add_entry(s, dev, &e), "entry");
}

static void
segment(struct snapshot *s, int dev, uint64_t addr, uint64_t total, uint64_t stream, bool small,
        uint32_t stack)
{
    struct snap_segment g = {.device = dev,
                             .addr = addr,
                             .total_size = total,
                             .stream = stream,
                             .is_small = small,
                             .stack = stack};
    check(snapshot_add_segment(s, &g), "segment");
}

/* Adds a block to the last segment and keeps the segment's sums (PyTorch's definitions). */
static void
block(struct snapshot *s, uint64_t addr, uint64_t size, uint64_t req, uint8_t state, uint32_t stack)
{
    struct snap_block b = {
        .addr = addr, .size = size, .requested_size = req, .state = state, .stack = stack};
    check(snapshot_add_block(s, &b), "block");
    struct snap_segment *g = &s->segments[s->segment_count - 1];
    if (state == BLOCK_ACTIVE_ALLOCATED)
        g->allocated_size += size;
    if (state != BLOCK_INACTIVE) {
        g->active_size += size;
        g->requested_size += req;
    }
}

static void
set_stats(struct snapshot *s, size_t dev, const struct memory_stats *m)
{
    struct memory_stat_kv kv[MEMORY_STATS_KEY_COUNT];
    struct snap_stat st[MEMORY_STATS_KEY_COUNT];
    size_t n = memory_stats_flatten(m, kv, MEMORY_STATS_KEY_COUNT);
    for (size_t i = 0; i < n; i++)
        st[i] = (struct snap_stat){kv[i].key, kv[i].value};
    check(snapshot_set_stats(s, dev, st, n), "stats");
}

int
main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: golden_manual OUTDIR\n");
        return 2;
    }
    struct snapshot *s = snapshot_create(2);
    if (s == NULL)
        return 1;
    uint32_t s1 = stack2(s, "alloc_small", 10), s2 = stack2(s, "alloc_other", 20);
    uint32_t s3 = stack2(s, "alloc_large", 30);

    /* Device 0: one small segment; 500 B freed, 1000 B live, the rest never used. */
    segment(s, 0, BASE, 2 * MIB, 0, true, s1);
    block(s, BASE, 512, 500, BLOCK_INACTIVE, 0);
    block(s, BASE + 512, 1024, 1000, BLOCK_ACTIVE_ALLOCATED, s2);
    block(s, BASE + 1536, 2 * MIB - 1536, 0, BLOCK_INACTIVE, 0);
    entry(s, 0, TRACE_SEGMENT_ALLOC, BASE, 2 * MIB, 0, s1, 1000);
    entry(s, 0, TRACE_ALLOC, BASE, 500, 0, s1, 1001);
    entry(s, 0, TRACE_ALLOC, BASE + 512, 1000, 0, s2, 1002);
    entry(s, 0, TRACE_FREE_REQUESTED, BASE, 500, 0, s1, 1003);
    entry(s, 0, TRACE_FREE_COMPLETED, BASE, 500, 0, s1, 1003);
    struct snap_entry note = {.action = TRACE_ANNOTATE, .has_time = true, .time_us = 1004};
    check(snapshot_add_labeled_entry(s, 0, &note, "forward"), "annotate");
    struct snap_entry oom = {.action = TRACE_OOM,
                             .size = 40 * MIB,
                             .device_free = 12345,
                             .stack = s3,
                             .has_time = true,
                             .time_us = 1005};
    check(snapshot_add_entry(s, 0, &oom), "oom");
    entry(s, 0, TRACE_SNAPSHOT, 0, 1024, 0, 0, 1006);

    /* Device 1, stream 7: a pending free (recordStream) in a small segment, and a 15 MiB request
     * whose 16 MiB segment is not split (a 1 MiB remainder stays attached). */
    segment(s, 1, BASE + 2 * MIB, 2 * MIB, 7, true, s1);
    block(s, BASE + 2 * MIB, 4096, 4000, BLOCK_ACTIVE_PENDING_FREE, s1);
    block(s, BASE + 2 * MIB + 4096, 2 * MIB - 4096, 0, BLOCK_INACTIVE, 0);
    segment(s, 1, BASE + 4 * MIB, 16 * MIB, 7, false, s3);
    block(s, BASE + 4 * MIB, 16 * MIB, 15 * MIB, BLOCK_ACTIVE_ALLOCATED, s3);
    entry(s, 1, TRACE_SEGMENT_ALLOC, BASE + 2 * MIB, 2 * MIB, 7, s1, 2000);
    entry(s, 1, TRACE_ALLOC, BASE + 2 * MIB, 4000, 7, s1, 2001);
    entry(s, 1, TRACE_SEGMENT_ALLOC, BASE + 4 * MIB, 16 * MIB, 7, s3, 2002);
    entry(s, 1, TRACE_ALLOC, BASE + 4 * MIB, 15 * MIB, 7, s3, 2003);
    entry(s, 1, TRACE_FREE_REQUESTED, BASE + 2 * MIB, 4000, 7, s1, 2004);
    s->device_traces[1].dropped = 0;

    s->has_allocator_settings = true;
    s->allocator_settings.alloc_conf = snapshot_intern(s, "roundup_power2_divisions:[256:1,>:8]");
    s->allocator_settings.garbage_collection_threshold = 0.8;
    for (int i = 0; i < 16; i++)
        s->allocator_settings.roundup_power2_divisions[i] = i <= 8 ? 1 : 8;

    s->cuprof.version = snapshot_intern(s, "test");
    s->cuprof.mode = snapshot_intern(s, "cache");
    s->cuprof.host = snapshot_intern(s, "golden-host");
    s->cuprof.pid = 4242;
    s->cuprof.rank = 3;
    const char *args[] = {"./app", "--flag", "ünïcode"};
    check(snapshot_set_argv(s, args, 3), "argv");
    check(snapshot_add_config(s, "CUPROF_MODE", "cache"), "config");
    check(snapshot_add_config(s, "CUPROF_HISTORY", "all"), "config");

    struct memory_stats m0, m1;
    memory_stats_init(&m0, -1);
    memory_stats_init(&m1, -1);
    memory_stats_increase_pool(m0.segment, STAT_SMALL_POOL, 1);
    memory_stats_increase_pool(m0.reserved_bytes, STAT_SMALL_POOL, (int64_t)(2 * MIB));
    memory_stats_increase_pool(m0.allocation, STAT_SMALL_POOL, 1);
    memory_stats_increase_pool(m0.allocated_bytes, STAT_SMALL_POOL, 1024);
    memory_stats_increase_pool(m0.active, STAT_SMALL_POOL, 1);
    memory_stats_increase_pool(m0.active_bytes, STAT_SMALL_POOL, 1024);
    memory_stats_increase_pool(m0.requested_bytes, STAT_SMALL_POOL, 1000);
    memory_stats_increase_pool(m0.inactive_split, STAT_SMALL_POOL, 2);
    memory_stats_increase_pool(m0.inactive_split_bytes, STAT_SMALL_POOL, (int64_t)(2 * MIB) - 1024);
    memory_stats_increase_pool(m1.segment, STAT_SMALL_POOL, 1);
    memory_stats_increase_pool(m1.segment, STAT_LARGE_POOL, 1);
    memory_stats_increase_pool(m1.reserved_bytes, STAT_SMALL_POOL, (int64_t)(2 * MIB));
    memory_stats_increase_pool(m1.reserved_bytes, STAT_LARGE_POOL, (int64_t)(16 * MIB));
    memory_stats_increase_pool(m1.allocation, STAT_LARGE_POOL, 1);
    memory_stats_increase_pool(m1.allocated_bytes, STAT_LARGE_POOL, (int64_t)(16 * MIB));
    memory_stats_increase_pool(m1.active, STAT_SMALL_POOL, 1);
    memory_stats_increase_pool(m1.active, STAT_LARGE_POOL, 1);
    memory_stats_increase_pool(m1.active_bytes, STAT_SMALL_POOL, 4096);
    memory_stats_increase_pool(m1.active_bytes, STAT_LARGE_POOL, (int64_t)(16 * MIB));
    memory_stats_increase_pool(m1.requested_bytes, STAT_SMALL_POOL, 4000);
    memory_stats_increase_pool(m1.requested_bytes, STAT_LARGE_POOL, (int64_t)(15 * MIB));
    memory_stats_increase_pool(m1.inactive_split, STAT_SMALL_POOL, 1);
    memory_stats_increase_pool(m1.inactive_split_bytes, STAT_SMALL_POOL, (int64_t)(2 * MIB) - 4096);
    set_stats(s, 0, &m0);
    set_stats(s, 1, &m1);

    char path[4096];
    snprintf(path, sizeof(path), "%s/manual.pickle", argv[1]);
    check(snapshot_write_file(path, s, SNAPSHOT_FORMAT_AUTO, FILE_PUBLISH_REPLACE, NULL, 0),
          "write pickle");
    snprintf(path, sizeof(path), "%s/manual.json", argv[1]);
    check(snapshot_write_file(path, s, SNAPSHOT_FORMAT_AUTO, FILE_PUBLISH_REPLACE, NULL, 0),
          "write json");
    snapshot_free(s);
    return 0;
}
