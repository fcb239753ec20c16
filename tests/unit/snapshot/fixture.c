/* fixture.c: builds the test model described in fixture.h. */
#include "fixture.h"

#include <stdio.h>

#include "allocator/allocator.h"
#include "allocator/trace_sink.h"

#define BASE 0x7f0000000000ull
#define MIB  (1024ull * 1024ull)

static int
stack_of(struct snapshot *s, size_t k, uint32_t *id)
{
    char name[32];
    snprintf(name, sizeof(name), "fn_%zu", k);
    uint32_t f[3];
    if (snapshot_add_frame(s, name, "model.c", (int64_t)(10 + k), &f[0]) != 0 ||
        snapshot_add_frame(s, "caller", "model.c", 5, &f[1]) != 0 ||
        snapshot_add_frame(s, "main", "main.c", 1, &f[2]) != 0)
        return -1;
    return snapshot_add_stack(s, f, 3, id);
}

struct snapshot *
fixture_model(size_t entries, size_t stacks)
{
    struct snapshot *s = snapshot_create(2);
    uint32_t st0, st1;
    if (s == NULL || stack_of(s, 0, &st0) != 0 || stack_of(s, 1, &st1) != 0)
        goto fail;
    struct snap_segment g0 = {.device = 0,
                              .addr = BASE,
                              .total_size = 2 * MIB,
                              .allocated_size = 512,
                              .active_size = 512,
                              .requested_size = 100,
                              .is_small = true,
                              .stack = st0};
    struct snap_segment g1 = {.device = 1,
                              .addr = BASE + 64 * MIB,
                              .total_size = 20 * MIB,
                              .allocated_size = 0,
                              .active_size = 20 * MIB,
                              .requested_size = 20 * MIB - 5,
                              .stream = 0x55aa00112233ull,
                              .pool_id = {1, 2},
                              .cuprof_pool = TRACE_POOL_MANAGED,
                              .stack = st1};
    struct snap_block b0 = {.addr = BASE,
                            .size = 512,
                            .requested_size = 100,
                            .stack = st0,
                            .state = BLOCK_ACTIVE_ALLOCATED};
    struct snap_block b1 = {.addr = BASE + 512, .size = 2 * MIB - 512, .state = BLOCK_INACTIVE};
    struct snap_block b2 = {.addr = BASE + 64 * MIB,
                            .size = 20 * MIB,
                            .requested_size = 20 * MIB - 5,
                            .stack = st1,
                            .state = BLOCK_ACTIVE_PENDING_FREE};
    if (snapshot_add_segment(s, &g0) != 0 || snapshot_add_block(s, &b0) != 0 ||
        snapshot_add_block(s, &b1) != 0 || snapshot_add_segment(s, &g1) != 0 ||
        snapshot_add_block(s, &b2) != 0)
        goto fail;
    struct snap_entry e0[] = {
        {.action = TRACE_SEGMENT_ALLOC, .addr = BASE, .size = 2 * MIB, .stack = st0},
        {.action = TRACE_ALLOC,
         .addr = BASE,
         .size = 100,
         .stack = st0,
         .has_time = true,
         .time_us = 1700000000123456},
        {.action = TRACE_ANNOTATE, .has_label = true, .has_time = true, .time_us = -5},
        {.action = TRACE_OOM, .size = 1ull << 40, .device_free = 123, .stack = st1},
        {.action = TRACE_SNAPSHOT, .size = 512},
    };
    for (size_t i = 0; i < sizeof(e0) / sizeof(e0[0]); i++)
        if ((e0[i].has_label ? snapshot_add_labeled_entry(s, 0, &e0[i], "phase \"forward\"\n\t\\ é")
                             : snapshot_add_entry(s, 0, &e0[i])) != 0)
            goto fail;
    for (size_t i = 0; i < entries; i++) {
        uint32_t id;
        if (stack_of(s, 2 + i % (stacks ? stacks : 1), &id) != 0)
            goto fail;
        uint64_t a = BASE + 1024 + 512 * (i % 4);
        struct snap_entry al = {.action = TRACE_ALLOC,
                                .addr = a,
                                .size = 300 + i % 200,
                                .stack = id,
                                .has_time = true,
                                .time_us = (int64_t)i};
        struct snap_entry fr = al;
        fr.action = TRACE_FREE_REQUESTED;
        struct snap_entry fc = al;
        fc.action = TRACE_FREE_COMPLETED;
        if (snapshot_add_entry(s, 0, &al) != 0 || snapshot_add_entry(s, 0, &fr) != 0 ||
            snapshot_add_entry(s, 0, &fc) != 0)
            goto fail;
    }
    struct snap_entry e1[] = {
        {.action = TRACE_SEGMENT_ALLOC,
         .addr = BASE + 64 * MIB,
         .size = 20 * MIB,
         .pool = TRACE_POOL_MANAGED,
         .stream = 0x55aa00112233ull},
        {.action = TRACE_ALLOC,
         .addr = BASE + 64 * MIB,
         .size = 20 * MIB - 5,
         .stack = st1,
         .pool = TRACE_POOL_MANAGED,
         .stream = 0x55aa00112233ull},
        {.action = TRACE_FREE_REQUESTED,
         .addr = BASE + 64 * MIB,
         .size = 20 * MIB - 5,
         .stack = st1,
         .pool = TRACE_POOL_MANAGED,
         .stream = 0x55aa00112233ull},
    };
    for (size_t i = 0; i < sizeof(e1) / sizeof(e1[0]); i++)
        if (snapshot_add_entry(s, 1, &e1[i]) != 0)
            goto fail;
    s->device_traces[1].dropped = 7;
    s->has_allocator_settings = true;
    s->allocator_settings.alloc_conf = snapshot_intern(s, "max_split_size_mb:64");
    s->allocator_settings.max_split_size = 64 * (int64_t)MIB;
    s->allocator_settings.garbage_collection_threshold = 0.6;
    s->allocator_settings.expandable_segments = true;
    s->allocator_settings.roundup_power2_divisions[3] = 4;
    s->cuprof.version = snapshot_intern(s, "0.1.0");
    s->cuprof.mode = snapshot_intern(s, "cache");
    s->cuprof.host = snapshot_intern(s, "node-1");
    s->cuprof.pid = 99999;
    s->cuprof.rank = -1;
    const char *argv[] = {"python", "train.py", "--lr=0.1"};
    struct snap_stat st[] = {
        {"allocated_bytes.all.current", 512}, {"max_split_size", -1}, {"num_ooms", 1}};
    if (snapshot_set_argv(s, argv, 3) != 0 || snapshot_add_config(s, "CUPROF_MODE", "cache") != 0 ||
        snapshot_set_stats(s, 0, st, 3) != 0)
        goto fail;
    return s;
fail:
    snapshot_free(s);
    return NULL;
}
