/* test_label_table.c: annotation labels: ids, stages (a range's end is its start + 1), growth
 * past the first table, lookups racing inserts on several threads, and trace_ring_annotate. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "snapshot/label_table.h"
#include "snapshot/trace_ring.h"

static void
test_stages(void **state)
{
    (void)state;
    struct label_table *t = label_table_create();
    assert_non_null(t);
    uint32_t mark = label_table_intern(t, "forward", SNAP_STAGE_MARK);
    uint32_t start = label_table_intern(t, "forward", SNAP_STAGE_START);
    uint32_t end = label_table_intern(t, "forward", SNAP_STAGE_END);
    assert_int_equal(mark, 1);
    assert_int_equal(start, 2);
    assert_int_equal(end, 3); /* interned with its start */
    assert_int_equal(label_table_intern(t, "forward", SNAP_STAGE_START), start);
    assert_int_equal(label_table_intern(t, "forward", SNAP_STAGE_MARK), mark);
    /* An end asked for first brings its start along. */
    uint32_t bwd_end = label_table_intern(t, "backward", SNAP_STAGE_END);
    assert_int_equal(bwd_end, 5);
    assert_int_equal(label_table_intern(t, "backward", SNAP_STAGE_START), 4);
    enum snap_stage st = SNAP_STAGE_MARK;
    assert_string_equal(label_table_text(t, start, &st), "forward");
    assert_int_equal(st, SNAP_STAGE_START);
    assert_string_equal(label_table_text(t, end, &st), "forward");
    assert_int_equal(st, SNAP_STAGE_END);
    assert_string_equal(label_table_text(t, mark, &st), "forward");
    assert_int_equal(st, SNAP_STAGE_MARK);
    assert_null(label_table_text(t, 0, &st));
    assert_null(label_table_text(t, 6, &st));
    assert_int_equal(label_table_intern(t, NULL, SNAP_STAGE_MARK), 0);
    /* The empty text is a label like any other. */
    assert_int_equal(label_table_intern(t, "", SNAP_STAGE_MARK), 6);
    label_table_destroy(t);
}

static void
test_growth(void **state)
{
    (void)state;
    struct label_table *t = label_table_create();
    char text[32];
    for (uint32_t i = 0; i < 5000; i++) {
        snprintf(text, sizeof text, "layer %u", i);
        assert_int_equal(label_table_intern(t, text, SNAP_STAGE_START), 1 + 2 * i);
    }
    for (uint32_t i = 0; i < 5000; i += 7) {
        snprintf(text, sizeof text, "layer %u", i);
        assert_int_equal(label_table_intern(t, text, SNAP_STAGE_END), 2 + 2 * i);
        assert_string_equal(label_table_text(t, 2 + 2 * i, NULL), text);
    }
    label_table_destroy(t);
}

struct racer {
    struct label_table *t;
    int seed;
    uint32_t ids[64];
};

static void *
race(void *arg)
{
    struct racer *r = arg;
    char text[32];
    for (int round = 0; round < 200; round++)
        for (int i = 0; i < 64; i++) {
            snprintf(text, sizeof text, "phase %d", (i * 7 + r->seed) % 64);
            uint32_t id = label_table_intern(r->t, text, SNAP_STAGE_START);
            int k = (i * 7 + r->seed) % 64;
            if (round == 0)
                r->ids[k] = id;
            else if (r->ids[k] != id)
                r->ids[k] = 0; /* an id that changed: the check below fails */
        }
    return NULL;
}

/* Every thread sees one id per text, whichever inserted it, while the table grows. */
static void
test_threads(void **state)
{
    (void)state;
    struct label_table *t = label_table_create();
    struct racer r[4];
    pthread_t th[4];
    for (int k = 0; k < 4; k++) {
        r[k] = (struct racer){.t = t, .seed = k * 13};
        assert_int_equal(pthread_create(&th[k], NULL, race, &r[k]), 0);
    }
    for (int k = 0; k < 4; k++)
        pthread_join(th[k], NULL);
    for (int i = 0; i < 64; i++) {
        assert_true(r[0].ids[i] != 0);
        for (int k = 1; k < 4; k++)
            assert_int_equal(r[k].ids[i], r[0].ids[i]);
        char text[32];
        snprintf(text, sizeof text, "phase %d", i);
        assert_string_equal(label_table_text(t, r[0].ids[i], NULL), text);
    }
    label_table_destroy(t);
}

/* trace_ring_annotate: one entry per device, same time, the label id in stack_id. */
static void
test_annotate_every_device(void **state)
{
    (void)state;
    struct trace_ring *ring = trace_ring_create(3, 8, HISTORY_ALL);
    uint32_t id = trace_ring_intern_stage(ring, "step", SNAP_STAGE_START);
    trace_ring_annotate(ring, id);
    trace_ring_annotate(ring, id + 1);
    int64_t t0 = 0;
    for (int d = 0; d < 3; d++) {
        struct trace_record r[4];
        assert_int_equal(trace_ring_copy_locked(ring, d, r, 4, NULL), 2);
        assert_int_equal(r[0].action, TRACE_ANNOTATE);
        assert_int_equal(r[0].addr, 0);
        assert_int_equal(r[0].stack_id, id);
        assert_int_equal(r[1].stack_id, id + 1);
        if (d == 0)
            t0 = r[0].time_us;
        assert_true(r[0].time_us == t0);
        enum snap_stage st;
        assert_string_equal(trace_ring_label_stage(ring, r[1].stack_id, &st), "step");
        assert_int_equal(st, SNAP_STAGE_END);
    }
    /* History off: nothing is recorded. */
    assert_int_equal(trace_ring_set_mode(ring, HISTORY_OFF, 0), 0);
    trace_ring_annotate(ring, id);
    assert_int_equal(trace_ring_count_locked(ring, 0), 0);
    trace_ring_destroy(ring);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stages),
        cmocka_unit_test(test_growth),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_annotate_every_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
