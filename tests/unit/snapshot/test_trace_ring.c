/* test_trace_ring.c: the trace ring's contents, order, wrap, drops, modes and labels. */
#include <assert.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cmocka.h>

#include "snapshot/trace_ring.h"

static_assert(sizeof(struct trace_record) <= 48, "issue 5: <= 48 bytes per entry");
static_assert(sizeof(struct trace_record) == 40, "the header claims 40 bytes");

static struct trace_event
ev(int device, uint8_t action, uint64_t addr)
{
    return (struct trace_event){.action = action,
                                .pool = TRACE_POOL_DEFAULT,
                                .device = (int16_t)device,
                                .stack_id = (uint32_t)(addr & 0xffff),
                                .addr = addr,
                                .size = addr * 2,
                                .stream = 7};
}

static void
record_n(struct trace_ring *ring, int device, uint64_t first, size_t n)
{
    struct trace_sink sink = trace_ring_sink(ring);
    for (size_t i = 0; i < n; i++) {
        struct trace_event e = ev(device, TRACE_ALLOC, first + i);
        sink.record(sink.ctx, &e);
    }
}

static void
assert_addrs(const struct trace_record *r, size_t n, uint64_t first)
{
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(r[i].addr, first + i);
        assert_int_equal(r[i].size, (first + i) * 2);
        assert_int_equal(r[i].stack_id, (first + i) & 0xffff);
        assert_int_equal(r[i].stream, 7);
        assert_int_equal(r[i].action, TRACE_ALLOC);
    }
}

static void
test_fill_without_wrap(void **state)
{
    (void)state;
    struct trace_ring *ring = trace_ring_create(1, 8, HISTORY_ALL);
    assert_non_null(ring);
    assert_int_equal(trace_ring_capacity(ring), 8);
    record_n(ring, 0, 100, 5);
    assert_int_equal(trace_ring_count_locked(ring, 0), 5);
    struct trace_record out[8];
    uint64_t dropped = 99;
    assert_int_equal(trace_ring_copy_locked(ring, 0, out, 8, &dropped), 5);
    assert_int_equal(dropped, 0);
    assert_addrs(out, 5, 100);
    trace_ring_destroy(ring);
}

static void
test_wrap_keeps_newest_oldest_first(void **state)
{
    (void)state;
    struct trace_ring *ring = trace_ring_create(1, 8, HISTORY_ALL);
    assert_non_null(ring);
    record_n(ring, 0, 1, 21); /* 1..21: 13 overwritten, 14..21 kept */
    struct trace_record out[8];
    uint64_t dropped = 0;
    assert_int_equal(trace_ring_count_locked(ring, 0), 8);
    assert_int_equal(trace_ring_copy_locked(ring, 0, out, 8, &dropped), 8);
    assert_int_equal(dropped, 13);
    assert_int_equal(trace_ring_dropped(ring, 0), 13);
    assert_addrs(out, 8, 14);
    /* A short buffer receives the newest entries, still oldest first. */
    assert_int_equal(trace_ring_copy_locked(ring, 0, out, 3, NULL), 3);
    assert_addrs(out, 3, 19);
    trace_ring_destroy(ring);
}

static void
test_devices_are_separate(void **state)
{
    (void)state;
    struct trace_ring *ring = trace_ring_create(3, 4, HISTORY_ALL);
    assert_non_null(ring);
    record_n(ring, 2, 50, 6);
    record_n(ring, 0, 10, 2);
    record_n(ring, 3, 1, 2);  /* out of range: ignored */
    record_n(ring, -1, 1, 2); /* out of range: ignored */
    struct trace_record out[4];
    uint64_t dropped = 0;
    assert_int_equal(trace_ring_copy_locked(ring, 0, out, 4, &dropped), 2);
    assert_int_equal(dropped, 0);
    assert_addrs(out, 2, 10);
    assert_int_equal(trace_ring_count_locked(ring, 1), 0);
    assert_int_equal(trace_ring_copy_locked(ring, 2, out, 4, &dropped), 4);
    assert_int_equal(dropped, 2);
    assert_addrs(out, 4, 52);
    assert_int_equal(trace_ring_count_locked(ring, 3), 0);
    trace_ring_clear(ring, 2);
    assert_int_equal(trace_ring_count_locked(ring, 2), 0);
    assert_int_equal(trace_ring_dropped(ring, 2), 0);
    assert_int_equal(trace_ring_count_locked(ring, 0), 2);
    trace_ring_clear(ring, -1);
    assert_int_equal(trace_ring_count_locked(ring, 0), 0);
    record_n(ring, 2, 70, 1);
    assert_int_equal(trace_ring_copy_locked(ring, 2, out, 4, NULL), 1);
    assert_addrs(out, 1, 70);
    trace_ring_destroy(ring);
}

static void
test_record_fields(void **state)
{
    (void)state;
    struct trace_ring *ring = trace_ring_create(1, 4, HISTORY_ALL);
    assert_non_null(ring);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t before = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    struct trace_event oom = {.action = TRACE_OOM,
                              .pool = TRACE_POOL_MANAGED,
                              .device = 0,
                              .stack_id = 42,
                              .addr = 0xdead,
                              .size = 1 << 20,
                              .stream = 3,
                              .device_free = 12345};
    trace_ring_record(ring, &oom);
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t after = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    struct trace_record r;
    assert_int_equal(trace_ring_copy_locked(ring, 0, &r, 1, NULL), 1);
    assert_int_equal(r.addr, 12345); /* oom stores device_free in addr */
    assert_int_equal(r.size, 1 << 20);
    assert_int_equal(r.stream, 3);
    assert_int_equal(r.stack_id, 42);
    assert_int_equal(r.action, TRACE_OOM);
    assert_int_equal(r.pool, TRACE_POOL_MANAGED);
    assert_true(r.time_us >= before && r.time_us <= after);
    trace_ring_destroy(ring);
}

static void
test_modes(void **state)
{
    (void)state;
    struct trace_ring *ring = trace_ring_create(2, 0, HISTORY_STATE);
    assert_non_null(ring);
    assert_int_equal(trace_ring_mode(ring), HISTORY_STATE);
    assert_int_equal(trace_ring_capacity(ring), 1); /* PyTorch: "state" keeps 1 entry */
    record_n(ring, 0, 5, 3);
    struct trace_record out[16];
    uint64_t dropped = 0;
    assert_int_equal(trace_ring_copy_locked(ring, 0, out, 16, &dropped), 1);
    assert_int_equal(dropped, 2);
    assert_addrs(out, 1, 7);

    /* Growing to "all" keeps what is there. */
    assert_int_equal(trace_ring_set_mode(ring, HISTORY_ALL, 4), 0);
    assert_int_equal(trace_ring_capacity(ring), 4);
    record_n(ring, 0, 8, 2);
    assert_int_equal(trace_ring_copy_locked(ring, 0, out, 16, &dropped), 3);
    assert_int_equal(dropped, 2);
    assert_addrs(out, 3, 7);
    record_n(ring, 0, 10, 3); /* 7..12 through a 4-ring: 7 and 8 dropped */
    assert_int_equal(trace_ring_copy_locked(ring, 0, out, 16, &dropped), 4);
    assert_int_equal(dropped, 4);
    assert_addrs(out, 4, 9);

    /* Shrinking keeps the newest, and the rest count as dropped. */
    assert_int_equal(trace_ring_set_mode(ring, HISTORY_ALL, 2), 0);
    assert_int_equal(trace_ring_copy_locked(ring, 0, out, 16, &dropped), 2);
    assert_int_equal(dropped, 6);
    assert_addrs(out, 2, 11);
    record_n(ring, 0, 13, 1);
    assert_int_equal(trace_ring_copy_locked(ring, 0, out, 16, NULL), 2);
    assert_addrs(out, 2, 12);

    /* "off" clears and stops recording; turning it back on starts empty. */
    assert_int_equal(trace_ring_set_mode(ring, HISTORY_OFF, 0), 0);
    assert_int_equal(trace_ring_mode(ring), HISTORY_OFF);
    assert_int_equal(trace_ring_capacity(ring), 0);
    assert_int_equal(trace_ring_count_locked(ring, 0), 0);
    assert_int_equal(trace_ring_dropped(ring, 0), 0);
    record_n(ring, 0, 20, 5);
    assert_int_equal(trace_ring_count_locked(ring, 0), 0);
    assert_int_equal(trace_ring_set_mode(ring, HISTORY_ALL, 0), 0);
    assert_int_equal(trace_ring_capacity(ring), TRACE_RING_DEFAULT_ENTRIES);
    assert_int_equal(trace_ring_count_locked(ring, 0), 0);
    record_n(ring, 1, 30, 2);
    assert_int_equal(trace_ring_copy_locked(ring, 1, out, 16, &dropped), 2);
    assert_int_equal(dropped, 0);
    assert_addrs(out, 2, 30);
    trace_ring_destroy(ring);
}

static void
test_off_at_create(void **state)
{
    (void)state;
    struct trace_ring *ring = trace_ring_create(1, 100, HISTORY_OFF);
    assert_non_null(ring);
    record_n(ring, 0, 1, 3);
    assert_int_equal(trace_ring_count_locked(ring, 0), 0);
    trace_ring_destroy(ring);
    assert_null(trace_ring_create(-1, 10, HISTORY_ALL));
}

/* Positions go on across wraps, clears and mode switches; a reader finds what it missed. */
static void
test_positions(void **state)
{
    (void)state;
    struct trace_ring *ring = trace_ring_create(1, 8, HISTORY_ALL);
    struct trace_record out[8];
    uint64_t first = 0;
    assert_non_null(ring);
    assert_int_equal(trace_ring_end(ring, 0), 0);
    assert_int_equal(trace_ring_copy_from(ring, 0, 0, out, 8, &first), 0);
    assert_int_equal(first, 0);
    record_n(ring, 0, 100, 5); /* positions 0..4 */
    assert_int_equal(trace_ring_end(ring, 0), 5);
    assert_int_equal(trace_ring_copy_from(ring, 0, 2, out, 8, &first), 3);
    assert_int_equal(first, 2);
    assert_addrs(out, 3, 102);
    assert_int_equal(trace_ring_copy_from(ring, 0, 1, out, 2, &first), 2);
    assert_addrs(out, 2, 101);
    record_n(ring, 0, 105, 7); /* positions 5..11: 0..3 overwritten */
    assert_int_equal(trace_ring_end(ring, 0), 12);
    assert_int_equal(trace_ring_copy_from(ring, 0, 1, out, 8, &first), 8);
    assert_int_equal(first, 4); /* what was left from position 1 on */
    assert_addrs(out, 8, 104);
    assert_int_equal(trace_ring_copy_from(ring, 0, 9, out, 8, &first), 3);
    assert_int_equal(first, 9);
    assert_addrs(out, 3, 109);
    assert_int_equal(trace_ring_copy_from(ring, 0, 12, out, 8, &first), 0);
    assert_int_equal(first, 12);
    trace_ring_clear(ring, 0);
    assert_int_equal(trace_ring_end(ring, 0), 12);
    record_n(ring, 0, 200, 2); /* positions 12, 13 */
    assert_int_equal(trace_ring_copy_from(ring, 0, 10, out, 8, &first), 2);
    assert_int_equal(first, 12);
    assert_addrs(out, 2, 200);
    assert_int_equal(trace_ring_set_mode(ring, HISTORY_OFF, 0), 0);
    assert_int_equal(trace_ring_end(ring, 0), 14);
    assert_int_equal(trace_ring_set_mode(ring, HISTORY_ALL, 4), 0);
    record_n(ring, 0, 300, 6); /* positions 14..19; 4 kept */
    assert_int_equal(trace_ring_end(ring, 0), 20);
    assert_int_equal(trace_ring_copy_from(ring, 0, 14, out, 8, &first), 4);
    assert_int_equal(first, 16);
    assert_addrs(out, 4, 302);
    assert_int_equal(trace_ring_set_mode(ring, HISTORY_ALL, 2), 0); /* shrink: the newest kept */
    assert_int_equal(trace_ring_end(ring, 0), 20);
    assert_int_equal(trace_ring_copy_from(ring, 0, 0, out, 8, &first), 2);
    assert_int_equal(first, 18);
    assert_addrs(out, 2, 304);
    trace_ring_destroy(ring);
}

static void
test_labels(void **state)
{
    (void)state;
    struct trace_ring *ring = trace_ring_create(1, 4, HISTORY_ALL);
    assert_non_null(ring);
    uint32_t fwd = trace_ring_intern_label(ring, "forward");
    uint32_t bwd = trace_ring_intern_label(ring, "backward");
    assert_int_equal(fwd, 1);
    assert_int_equal(bwd, 2);
    assert_int_equal(trace_ring_intern_label(ring, "forward"), fwd);
    assert_string_equal(trace_ring_label(ring, fwd), "forward");
    assert_string_equal(trace_ring_label(ring, bwd), "backward");
    assert_null(trace_ring_label(ring, 0));
    assert_null(trace_ring_label(ring, 3));
    assert_int_equal(trace_ring_intern_label(ring, NULL), 0);
    char many[32];
    for (int i = 0; i < 100; i++) {
        snprintf(many, sizeof(many), "step %d", i);
        assert_int_equal(trace_ring_intern_label(ring, many), (uint32_t)(3 + i));
    }
    assert_string_equal(trace_ring_label(ring, 3 + 57), "step 57");
    assert_string_equal(trace_ring_label(ring, fwd), "forward");
    struct trace_event a = {.action = TRACE_ANNOTATE, .device = 0, .stack_id = bwd};
    trace_ring_record(ring, &a);
    struct trace_record r;
    assert_int_equal(trace_ring_copy_locked(ring, 0, &r, 1, NULL), 1);
    assert_int_equal(r.action, TRACE_ANNOTATE);
    assert_string_equal(trace_ring_label(ring, r.stack_id), "backward");
    trace_ring_destroy(ring);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fill_without_wrap),
        cmocka_unit_test(test_wrap_keeps_newest_oldest_first),
        cmocka_unit_test(test_devices_are_separate),
        cmocka_unit_test(test_record_fields),
        cmocka_unit_test(test_modes),
        cmocka_unit_test(test_off_at_create),
        cmocka_unit_test(test_positions),
        cmocka_unit_test(test_labels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
