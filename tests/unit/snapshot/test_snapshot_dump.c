/* test_snapshot_dump.c: the live dump against a fake allocator (this file defines the
 * allocator_* functions the dump calls), with the real trace ring, stack interning and
 * symbolizer: copies happen under the device lock with buffers sized before locking (growth
 * between count and copy forces a retry), the model matches the tables, stacks are symbolized,
 * the `snapshot` event shows up in the next dump, and the written file reads back. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "allocator/allocator.h"
#include "allocator/cuprof_errors.h"
#include "snapshot/snapshot_dump.h"
#include "snapshot/snapshot_read.h"
#include "snapshot/stacks.h"
#include "snapshot/trace_ring.h"

#define BASE 0x7f0000000000ull
#define MIB  (1024ull * 1024ull)

/* ---- The fake allocator: device 0 has one small segment; device 1 one large segment. Right
 * after the dump's first count-then-unlock-without-copy, device 0's segment gets split into 30
 * blocks (another thread allocating), more than the buffers sized from the first count hold. */
#define GROWN_BLOCKS 30

static struct {
    bool locked[2];
    int lock_calls[2];
    bool grow_pending;
    bool counted, copied;
    size_t nseg[2], nblk[2];
    struct segment_info seg[2][4];
    struct block_info blk[2][GROWN_BLOCKS + 2];
    uint32_t stack_a;
} fake;

struct allocator {
    int unused;
};

int
allocator_device_count(const struct allocator *alloc)
{
    (void)alloc;
    return 2;
}

void
allocator_lock_device(struct allocator *alloc, int device)
{
    (void)alloc;
    assert_false(fake.locked[device]);
    fake.locked[device] = true;
    fake.lock_calls[device]++;
    fake.counted = fake.copied = false;
}

void
allocator_unlock_device(struct allocator *alloc, int device)
{
    (void)alloc;
    assert_true(fake.locked[device]);
    fake.locked[device] = false;
    if (fake.grow_pending && fake.counted && !fake.copied && device == 0) {
        fake.grow_pending = false;
        for (size_t i = 1; i < GROWN_BLOCKS; i++)
            fake.blk[0][i] = (struct block_info){BASE + 1024 * i, 1024, 0, 0, BLOCK_INACTIVE};
        fake.blk[0][GROWN_BLOCKS] = (struct block_info){
            BASE + 1024 * GROWN_BLOCKS, 2 * MIB - 1024 * GROWN_BLOCKS, 0, 0, BLOCK_INACTIVE};
        fake.nblk[0] = GROWN_BLOCKS + 1;
        fake.seg[0][0].block_count = GROWN_BLOCKS + 1;
    }
}

void
allocator_count_locked(struct allocator *alloc, int device, size_t *segments, size_t *blocks)
{
    (void)alloc;
    assert_true(fake.locked[device]);
    fake.counted = true;
    *segments = fake.nseg[device];
    *blocks = fake.nblk[device];
}

int
allocator_copy_locked(struct allocator *alloc, int device, struct segment_info *segments,
                      size_t segment_cap, struct block_info *blocks, size_t block_cap,
                      size_t *segment_count, size_t *block_count)
{
    (void)alloc;
    assert_true(fake.locked[device]);
    if (segment_cap < fake.nseg[device] || block_cap < fake.nblk[device])
        return -CUPROF_EINVAL;
    memcpy(segments, fake.seg[device], fake.nseg[device] * sizeof(*segments));
    memcpy(blocks, fake.blk[device], fake.nblk[device] * sizeof(*blocks));
    *segment_count = fake.nseg[device];
    *block_count = fake.nblk[device];
    fake.copied = true;
    return 0;
}

/* The dump copies the stats under the same lock as the block table. */
void
allocator_get_stats_locked(struct allocator *alloc, int device, struct memory_stats *out)
{
    (void)alloc;
    assert_true(fake.locked[device]);
    memory_stats_init(out, -1);
    out->num_ooms = 1 + device;
}

void
alloc_config_defaults(struct alloc_config *config)
{
    memset(config, 0, sizeof(*config));
    config->max_split_size = SIZE_MAX;
}

/* Functions whose addresses serve as return addresses in interned stacks. */
__attribute__((noinline)) void
dump_test_leaf(void)
{
    __asm__ volatile("");
}

__attribute__((noinline)) void
dump_test_caller(void)
{
    __asm__ volatile("");
}

static void
record(struct trace_ring *ring, int device, uint8_t action, uint64_t addr, uint64_t size,
       uint32_t stack)
{
    struct trace_event ev = {
        .action = action, .device = (int16_t)device, .addr = addr, .size = size, .stack_id = stack};
    if (action == TRACE_OOM) { /* the sink's oom event carries device_free, not addr */
        ev.device_free = addr;
        ev.addr = 0;
    }
    trace_ring_record(ring, &ev);
}

static void
test_dump(void **state)
{
    (void)state;
    uintptr_t ips[2] = {(uintptr_t)&dump_test_leaf + 4, (uintptr_t)&dump_test_caller + 4};
    fake.stack_a = stacks_intern(ips, 2);
    assert_int_not_equal(fake.stack_a, 0);
    fake.seg[0][0] = (struct segment_info){.addr = BASE,
                                           .total_size = 2 * MIB,
                                           .stack_id = fake.stack_a,
                                           .block_count = 2,
                                           .is_small = 1};
    fake.blk[0][0] = (struct block_info){BASE, 1024, 1000, fake.stack_a, BLOCK_ACTIVE_ALLOCATED};
    fake.blk[0][1] = (struct block_info){BASE + 1024, 2 * MIB - 1024, 0, 0, BLOCK_INACTIVE};
    fake.nseg[0] = 1;
    fake.nblk[0] = 2;
    fake.seg[1][0] = (struct segment_info){
        .addr = BASE + 64 * MIB, .total_size = 20 * MIB, .stream = 3, .block_count = 1};
    fake.blk[1][0] = (struct block_info){BASE + 64 * MIB, 20 * MIB, 15 * MIB, fake.stack_a,
                                         BLOCK_ACTIVE_ALLOCATED};
    fake.nseg[1] = 1;
    fake.nblk[1] = 1;
    fake.grow_pending = true;

    struct trace_ring *ring = trace_ring_create(2, 100, HISTORY_ALL);
    assert_non_null(ring);
    record(ring, 0, TRACE_SEGMENT_ALLOC, BASE, 2 * MIB, fake.stack_a);
    record(ring, 0, TRACE_ALLOC, BASE, 1000, fake.stack_a);
    uint32_t label = trace_ring_intern_label(ring, "forward");
    record(ring, 0, TRACE_ANNOTATE, 0, 0, label);
    record(ring, 0, TRACE_OOM, 4096 /* device_free */, 40 * MIB, fake.stack_a);

    struct alloc_config cfg;
    alloc_config_defaults(&cfg);
    cfg.garbage_collection_threshold = 0.5;
    snprintf(cfg.raw, sizeof(cfg.raw), "garbage_collection_threshold:0.5");
    const char *argv[] = {"./app", "x"};
    struct dump_setting settings[] = {{"CUPROF_MODE", "cache"}};
    struct dump_info info = {.mode = "cache",
                             .config = settings,
                             .config_count = 1,
                             .pid = 77,
                             .rank = 2,
                             .host = "h",
                             .argv = argv,
                             .argc = 2,
                             .alloc_config = &cfg};
    struct allocator alloc = {0};
    struct snapshot *s = NULL;
    assert_int_equal(snapshot_dump_build(&alloc, ring, &info, &s), 0);
    assert_false(fake.locked[0] || fake.locked[1]);
    /* Empty buffers at first, then too small after device 0 grew: locked three times. */
    assert_int_equal(fake.lock_calls[0], 3);
    assert_int_equal(fake.lock_calls[1], 1);
    assert_int_equal(s->device_count, 2);
    assert_int_equal(s->segment_count, 2);
    assert_int_equal(s->segments[0].allocated_size, 1024);
    assert_int_equal(s->segments[0].requested_size, 1000);
    assert_true(s->segments[0].is_small);
    assert_int_equal(s->segments[1].device, 1);
    assert_int_equal(s->segments[1].stream, 3);
    assert_int_equal(s->segments[1].active_size, 20 * MIB);
    assert_int_equal(s->block_count, GROWN_BLOCKS + 2);
    assert_int_equal(s->segments[0].block_count, GROWN_BLOCKS + 1);
    assert_int_equal(s->blocks[0].stack, s->segments[0].stack);
    assert_int_equal(s->blocks[1].stack, 0);
    /* The stack is symbolized: the innermost frame names the function the ip points into. */
    const struct snap_stack *st = &s->stacks[s->blocks[0].stack];
    assert_true(st->count >= 2);
    assert_string_equal(s->frames[s->stack_frames[st->first]].name, "dump_test_leaf");
    assert_non_null(strstr(s->frames[s->stack_frames[st->first]].filename, "test_snapshot_dump.c"));
    const struct snap_device_trace *t0 = &s->device_traces[0];
    assert_int_equal(t0->count, 4);
    assert_int_equal(t0->entries[1].action, TRACE_ALLOC);
    assert_int_equal(t0->entries[1].stack, s->blocks[0].stack);
    assert_true(t0->entries[1].has_time);
    assert_string_equal(snapshot_entry_label(t0, 2), "forward");
    assert_null(snapshot_entry_label(t0, 3));
    assert_int_equal(t0->entries[3].device_free, 4096);
    assert_int_equal(t0->entries[3].size, 40 * MIB);
    assert_int_equal(s->device_traces[1].count, 0);
    assert_int_equal(s->allocator_settings.max_split_size, -1);
    assert_string_equal(s->allocator_settings.alloc_conf, "garbage_collection_threshold:0.5");
    assert_int_equal(s->cuprof.rank, 2);
    assert_int_equal(s->cuprof.stats_count[1], MEMORY_STATS_KEY_COUNT);
    bool found = false;
    for (size_t i = 0; i < s->cuprof.stats_count[1]; i++)
        if (strcmp(s->cuprof.stats[1][i].key, "num_ooms") == 0)
            found = s->cuprof.stats[1][i].value == 2;
    assert_true(found);
    snapshot_free(s);

    /* The first dump's `snapshot` events (size = active bytes) are in the second dump. */
    char path[] = "/tmp/cuprof-dump-XXXXXX.pickle";
    int fd = mkstemps(path, 7);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(snapshot_dump_live(&alloc, ring, &info, path, FILE_PUBLISH_REPLACE, NULL, 0),
                     0);
    char err[256];
    assert_int_equal(snapshot_read_file(path, &s, err, sizeof(err)), 0);
    unlink(path);
    assert_int_equal(s->device_traces[0].count, 5);
    assert_int_equal(s->device_traces[0].entries[4].action, TRACE_SNAPSHOT);
    assert_int_equal(s->device_traces[0].entries[4].size, 1024);
    assert_int_equal(s->device_traces[1].count, 1);
    assert_int_equal(s->device_traces[1].entries[0].size, 20 * MIB);
    assert_string_equal(s->cuprof.host, "h");
    snapshot_free(s);

    /* A failed write reports the reason and leaves no file behind. */
    errno = 0;
    assert_int_equal(snapshot_dump_live(&alloc, ring, &info, "/nonexistent-dir/x.pickle",
                                        FILE_PUBLISH_NEW_NAME, NULL, 0),
                     -CUPROF_EIO);
    assert_int_equal(errno, ENOENT);
    trace_ring_destroy(ring);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dump),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
