/* test_trace_ring.c: the trace ring's contents, order, wrap, drops, modes and labels, and
 * annotations: merged in order with the allocator's entries, never under the entries' lock. */
#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
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

/* ---- Annotations beside the allocator's entries. */

/* The locks a thread takes while `watching` (the test links with --wrap=pthread_mutex_lock). */
int __real_pthread_mutex_lock(pthread_mutex_t *m);
static _Thread_local bool watching;
static _Thread_local pthread_mutex_t *taken[8];
static _Thread_local int taken_count;

int
__wrap_pthread_mutex_lock(pthread_mutex_t *m)
{
    if (watching && taken_count < 8)
        taken[taken_count++] = m;
    return __real_pthread_mutex_lock(m);
}

static void
watch(void)
{
    taken_count = 0;
    watching = true;
}

/* An annotation (addr 0, the label in stack_id) or an allocator entry of address `addr`. */
static void
assert_entry(const struct trace_record *r, uint64_t addr, uint32_t label)
{
    if (label != 0) {
        assert_int_equal(r->action, TRACE_ANNOTATE);
        assert_int_equal(r->stack_id, label);
        assert_int_equal(r->addr, 0);
        assert_int_equal(r->size, 0);
    } else {
        assert_int_equal(r->action, TRACE_ALLOC);
        assert_int_equal(r->addr, addr);
    }
}

/* The contract NVTX relies on: an annotation takes no lock that recording an entry takes. */
static void
test_annotation_takes_no_entry_lock(void **state)
{
    (void)state;
    struct trace_ring *ring = trace_ring_create(2, 8, HISTORY_ALL);
    assert_non_null(ring);
    uint32_t fwd = trace_ring_intern_label(ring, "forward");
    watch();
    record_n(ring, 0, 1, 1);
    record_n(ring, 1, 1, 1);
    watching = false;
    assert_int_equal(taken_count, 2); /* each device's entries lock, once */
    pthread_mutex_t *entries[2] = {taken[0], taken[1]};
    assert_ptr_not_equal(entries[0], entries[1]);
    watch();
    trace_ring_annotate(ring, fwd);
    watching = false;
    assert_int_equal(taken_count, 2); /* each device's annotation lock */
    for (int i = 0; i < taken_count; i++)
        assert_true(taken[i] != entries[0] && taken[i] != entries[1]);
    trace_ring_destroy(ring);
}

/* One thread's order is kept exactly; positions number the merged history. */
static void
test_annotations_merge_in_order(void **state)
{
    (void)state;
    struct trace_ring *ring = trace_ring_create(1, 16, HISTORY_ALL);
    assert_non_null(ring);
    uint32_t a = trace_ring_intern_label(ring, "a"), b = trace_ring_intern_label(ring, "b"),
             c = trace_ring_intern_label(ring, "c");
    trace_ring_annotate(ring, a); /* before any entry */
    record_n(ring, 0, 10, 1);
    trace_ring_annotate(ring, b);
    record_n(ring, 0, 11, 2);
    trace_ring_annotate(ring, c);
    trace_ring_annotate(ring, a);
    record_n(ring, 0, 13, 1);
    /* positions: a 0, e10 1, b 2, e11 3, e12 4, c 5, a 6, e13 7 */
    const uint64_t addrs[] = {0, 10, 0, 11, 12, 0, 0, 13};
    const uint32_t labels[] = {a, 0, b, 0, 0, c, a, 0};
    struct trace_record out[16];
    uint64_t dropped = 9, end = 0, first = 0;
    assert_int_equal(trace_ring_count_locked(ring, 0), 8);
    assert_int_equal(trace_ring_end(ring, 0), 8);
    assert_int_equal(trace_ring_copy_newest(ring, 0, out, 16, &dropped, &end), 8);
    assert_int_equal(dropped, 0);
    assert_int_equal(end, 8);
    for (int i = 0; i < 8; i++)
        assert_entry(&out[i], addrs[i], labels[i]);
    for (uint64_t from = 0; from <= 8; from++) {
        size_t n = trace_ring_copy_from(ring, 0, from, out, 3, &first);
        assert_int_equal(first, from);
        assert_int_equal(n, from + 3 <= 8 ? 3 : 8 - from);
        for (size_t i = 0; i < n; i++)
            assert_entry(&out[i], addrs[from + i], labels[from + i]);
    }
    assert_int_equal(trace_ring_copy_locked(ring, 0, out, 3, NULL), 3); /* the newest 3 */
    assert_entry(&out[0], 0, c);
    assert_entry(&out[2], 13, 0);
    trace_ring_destroy(ring);
}

/* What a full ring keeps: the newest entries of the merged history with no hole in it, whichever
 * of the two rings overwrote first. */
static void
test_annotations_wrap(void **state)
{
    (void)state;
    struct trace_ring *ring = trace_ring_create(1, 4, HISTORY_ALL);
    assert_non_null(ring);
    uint32_t l[6];
    for (int i = 1; i < 6; i++) {
        char name[8];
        snprintf(name, sizeof(name), "L%d", i);
        l[i] = trace_ring_intern_label(ring, name);
    }
    /* e0 L1 e1 L2 L3 L4 L5 e2: L1 overwritten by L5; the newest 4 are L3 L4 L5 e2. */
    record_n(ring, 0, 0, 1);
    trace_ring_annotate(ring, l[1]);
    record_n(ring, 0, 1, 1);
    for (int i = 2; i < 6; i++)
        trace_ring_annotate(ring, l[i]);
    record_n(ring, 0, 2, 1);
    struct trace_record out[8];
    uint64_t dropped = 0, first = 0;
    assert_int_equal(trace_ring_copy_locked(ring, 0, out, 8, &dropped), 4);
    assert_int_equal(dropped, 4);
    assert_entry(&out[0], 0, l[3]);
    assert_entry(&out[1], 0, l[4]);
    assert_entry(&out[2], 0, l[5]);
    assert_entry(&out[3], 2, 0);
    assert_int_equal(trace_ring_end(ring, 0), 8);
    assert_int_equal(trace_ring_copy_from(ring, 0, 0, out, 8, &first), 4);
    assert_int_equal(first, 4);
    trace_ring_clear(ring, 0);

    /* After a clear, L1 e3 e4 e5 e6 e7 (positions 8..13): e3 and e4 overwritten, so L1, held in
     * its own ring, is older than a hole and is not history either. */
    trace_ring_annotate(ring, l[1]);
    record_n(ring, 0, 3, 5);
    assert_int_equal(trace_ring_copy_locked(ring, 0, out, 8, &dropped), 4);
    assert_int_equal(dropped, 2);
    for (int i = 0; i < 4; i++)
        assert_entry(&out[i], 4 + (uint64_t)i, 0);
    assert_int_equal(trace_ring_end(ring, 0), 14);
    assert_int_equal(trace_ring_copy_from(ring, 0, 9, out, 8, &first), 4);
    assert_int_equal(first, 10);

    /* A hole from lost annotations: L2 L3 L4 L5 L1 (L2 lost, after e7) then e8: e5..e7 held but
     * older than the hole. */
    for (int i = 2; i < 6; i++)
        trace_ring_annotate(ring, l[i]);
    trace_ring_annotate(ring, l[1]);
    record_n(ring, 0, 8, 1);
    assert_int_equal(trace_ring_copy_locked(ring, 0, out, 8, &dropped), 4);
    assert_entry(&out[0], 0, l[4]);
    assert_entry(&out[1], 0, l[5]);
    assert_entry(&out[2], 0, l[1]);
    assert_entry(&out[3], 8, 0);
    assert_int_equal(trace_ring_end(ring, 0), 20);
    assert_int_equal(dropped, 20 - 8 - 4); /* 8 cleared */
    trace_ring_destroy(ring);
}

/* Modes: shrinking keeps the newest of the merged history; off clears annotations too. */
static void
test_annotations_modes(void **state)
{
    (void)state;
    struct trace_ring *ring = trace_ring_create(1, 8, HISTORY_ALL);
    assert_non_null(ring);
    uint32_t x = trace_ring_intern_label(ring, "x"), y = trace_ring_intern_label(ring, "y");
    record_n(ring, 0, 1, 2);
    trace_ring_annotate(ring, x);
    record_n(ring, 0, 3, 1);
    trace_ring_annotate(ring, y); /* e1 e2 x e3 y */
    assert_int_equal(trace_ring_set_mode(ring, HISTORY_ALL, 3), 0);
    struct trace_record out[8];
    uint64_t dropped = 0;
    assert_int_equal(trace_ring_copy_locked(ring, 0, out, 8, &dropped), 3);
    assert_int_equal(dropped, 2);
    assert_entry(&out[0], 0, x);
    assert_entry(&out[1], 3, 0);
    assert_entry(&out[2], 0, y);
    assert_int_equal(trace_ring_set_mode(ring, HISTORY_STATE, 0), 0);
    assert_int_equal(trace_ring_copy_locked(ring, 0, out, 8, NULL), 1);
    assert_entry(&out[0], 0, y);
    assert_int_equal(trace_ring_set_mode(ring, HISTORY_OFF, 0), 0);
    trace_ring_annotate(ring, x); /* not recorded */
    assert_int_equal(trace_ring_count_locked(ring, 0), 0);
    assert_int_equal(trace_ring_end(ring, 0), 5);
    assert_int_equal(trace_ring_set_mode(ring, HISTORY_ALL, 4), 0);
    trace_ring_annotate(ring, x);
    record_n(ring, 0, 9, 1);
    assert_int_equal(trace_ring_copy_locked(ring, 0, out, 8, &dropped), 2);
    assert_int_equal(dropped, 0);
    assert_entry(&out[0], 0, x);
    assert_entry(&out[1], 9, 0);
    assert_int_equal(trace_ring_end(ring, 0), 7);
    trace_ring_destroy(ring);
}

/* Threads: each keeps its own order (entry i, then its label, then entry i + 1) while others
 * annotate and record at once; nothing is lost. */
enum { THREADS = 4, ROUNDS = 2000 };

struct worker {
    struct trace_ring *ring;
    int index;
    uint32_t label;
};

static void *
work(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < ROUNDS; i++) {
        if (w->index % 2 == 0)
            record_n(w->ring, 0, ((uint64_t)w->index << 32) | (uint64_t)i, 1);
        trace_ring_annotate(w->ring, w->label);
    }
    return NULL;
}

static void
test_annotations_threads(void **state)
{
    (void)state;
    struct trace_ring *ring = trace_ring_create(1, 4 * THREADS * ROUNDS, HISTORY_ALL);
    assert_non_null(ring);
    struct worker w[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        char name[16];
        snprintf(name, sizeof(name), "thread %d", i);
        w[i] = (struct worker){ring, i, trace_ring_intern_label(ring, name)};
        assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    size_t total = (size_t)THREADS * ROUNDS + (size_t)THREADS / 2 * ROUNDS;
    struct trace_record *out = calloc(total + 1, sizeof(*out));
    assert_non_null(out);
    uint64_t dropped = 1, end = 0;
    assert_int_equal(trace_ring_copy_newest(ring, 0, out, total + 1, &dropped, &end), total);
    assert_int_equal(dropped, 0);
    assert_int_equal(end, total);
    int64_t next[THREADS] = {0}, labels[THREADS] = {0};
    for (size_t k = 0; k < total; k++) {
        if (out[k].action == TRACE_ALLOC) {
            int t = (int)(out[k].addr >> 32);
            /* an entry comes after the label of the round before it */
            assert_int_equal((int64_t)(out[k].addr & 0xffffffffu), next[t]);
            assert_int_equal(labels[t], next[t]);
            next[t]++;
        } else {
            int t = (int)out[k].stack_id - (int)w[0].label;
            assert_true(t >= 0 && t < THREADS);
            if (t % 2 == 0)
                assert_int_equal(labels[t] + 1, next[t]); /* after its own entry */
            labels[t]++;
        }
    }
    for (int t = 0; t < THREADS; t++)
        assert_int_equal(labels[t], ROUNDS);
    free(out);
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
        cmocka_unit_test(test_annotation_takes_no_entry_lock),
        cmocka_unit_test(test_annotations_merge_in_order),
        cmocka_unit_test(test_annotations_wrap),
        cmocka_unit_test(test_annotations_modes),
        cmocka_unit_test(test_annotations_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
