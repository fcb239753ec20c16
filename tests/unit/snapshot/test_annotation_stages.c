/* test_annotation_stages.c: ranges' annotations (NVTX ranges) in a snapshot: each annotate entry
 * of a range carries "stage": "START"/"END" beside its user_metadata, the snapshot lists them
 * again in PyTorch's external_annotations layout ({"name", "stage", "device", "time_us"}), marks
 * stay as they were, and both readers give the stages back; a PyTorch snapshot's
 * external_annotations (its record_function ranges) are read into its traces by time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "allocator/trace_sink.h"
#include "snapshot/snapshot_model.h"
#include "snapshot/snapshot_read.h"
#include "snapshot/snapshot_write.h"

static struct snapshot *
build(void)
{
    struct snapshot *s = snapshot_create(2);
    assert_non_null(s);
    struct snap_entry a = {.action = TRACE_ANNOTATE, .has_time = true, .time_us = 100};
    struct snap_entry alloc = {
        .action = TRACE_ALLOC, .addr = 4096, .size = 512, .has_time = true, .time_us = 101};
    assert_int_equal(snapshot_add_annotation(s, 0, &a, "forward", SNAP_STAGE_START), 0);
    assert_int_equal(snapshot_add_entry(s, 0, &alloc), 0);
    a.time_us = 102;
    assert_int_equal(snapshot_add_labeled_entry(s, 0, &a, "checkpoint"), 0);
    a.time_us = 103;
    assert_int_equal(snapshot_add_annotation(s, 0, &a, "forward", SNAP_STAGE_END), 0);
    a.time_us = 104;
    assert_int_equal(snapshot_add_annotation(s, 1, &a, "step", SNAP_STAGE_START), 0);
    return s;
}

static void
check(const struct snapshot *s)
{
    const struct snap_device_trace *t = &s->device_traces[0];
    assert_int_equal(t->count, 4);
    assert_string_equal(snapshot_entry_label(t, 0), "forward");
    assert_int_equal(snapshot_entry_stage(t, 0), SNAP_STAGE_START);
    assert_null(snapshot_entry_label(t, 1));
    assert_int_equal(snapshot_entry_stage(t, 1), SNAP_STAGE_MARK);
    assert_string_equal(snapshot_entry_label(t, 2), "checkpoint");
    assert_int_equal(snapshot_entry_stage(t, 2), SNAP_STAGE_MARK);
    assert_int_equal(snapshot_entry_stage(t, 3), SNAP_STAGE_END);
    assert_int_equal(t->entries[3].time_us, 103);
    assert_int_equal(snapshot_entry_stage(&s->device_traces[1], 0), SNAP_STAGE_START);
}

static char *
as_json(const struct snapshot *s)
{
    unsigned char *out = NULL;
    size_t len = 0;
    assert_int_equal(snapshot_write_mem(s, SNAPSHOT_FORMAT_JSON, &out, &len), 0);
    char *text = malloc(len + 1);
    memcpy(text, out, len);
    text[len] = '\0';
    free(out);
    return text;
}

static void
test_json_layout(void **state)
{
    (void)state;
    struct snapshot *s = build();
    char *text = as_json(s);
    assert_non_null(strstr(text, "\"user_metadata\":\"forward\",\"stage\":\"START\"}"));
    assert_non_null(strstr(text, "\"user_metadata\":\"forward\",\"stage\":\"END\"}"));
    assert_non_null(strstr(text, "\"user_metadata\":\"checkpoint\"}"));
    assert_non_null(strstr(text, "\"external_annotations\":[{\"name\":\"forward\",\"stage\":"
                                 "\"START\",\"device\":0,\"time_us\":100},{\"name\":"
                                 "\"forward\",\"stage\":\"END\",\"device\":0,\"time_us\":103},"
                                 "{\"name\":\"step\",\"stage\":\"START\",\"device\":1,"
                                 "\"time_us\":104}]"));
    free(text);
    snapshot_free(s);
}

/* No range: no external_annotations key (a snapshot without NVTX is written as before). */
static void
test_no_ranges_no_key(void **state)
{
    (void)state;
    struct snapshot *s = snapshot_create(1);
    struct snap_entry a = {.action = TRACE_ANNOTATE};
    assert_int_equal(snapshot_add_labeled_entry(s, 0, &a, "mark"), 0);
    char *text = as_json(s);
    assert_null(strstr(text, "external_annotations"));
    assert_null(strstr(text, "\"stage\""));
    free(text);
    snapshot_free(s);
}

static void
test_read_back(void **state)
{
    (void)state;
    struct snapshot *s = build();
    check(s);
    for (int format = 0; format < 2; format++) {
        unsigned char *out = NULL;
        size_t len = 0;
        assert_int_equal(snapshot_write_mem(
                             s, format ? SNAPSHOT_FORMAT_JSON : SNAPSHOT_FORMAT_PICKLE, &out, &len),
                         0);
        struct snapshot *back = NULL;
        char err[256] = "";
        if (snapshot_read_mem(out, len, format ? "s.json" : "s.pickle", &back, err, sizeof err) !=
            0)
            fail_msg("read back: %s", err);
        check(back);
        assert_int_equal(back->warning_count, 0);
        snapshot_free(back);
        free(out);
    }
    snapshot_free(s);
}

/* A PyTorch snapshot's external_annotations become range annotations where their times fall:
 * a start before the entries of its microsecond, an end after them. */
static void
test_pytorch_external_annotations(void **state)
{
    (void)state;
    const char *text =
        "{\"segments\": [], \"device_traces\": [[{\"action\": \"alloc\", \"addr\": 4096, "
        "\"size\": 512, \"stream\": 0, \"time_us\": 10}, {\"action\": \"alloc\", "
        "\"addr\": 8192, \"size\": 512, \"stream\": 0, \"time_us\": 20}, {\"action\": "
        "\"free_completed\", \"addr\": 4096, \"size\": 512, \"stream\": 0, \"time_us\": 30}]], "
        "\"external_annotations\": [{\"name\": \"bwd\", \"stage\": \"START\", \"device\": 0, "
        "\"time_us\": 25}, {\"name\": \"fwd\", \"stage\": \"END\", \"device\": 0, "
        "\"time_us\": 20}, {\"name\": \"fwd\", \"stage\": \"START\", \"device\": 0, "
        "\"time_us\": 10}, {\"name\": \"x\", \"stage\": \"OTHER\", \"device\": 0, "
        "\"time_us\": 1}, {\"stage\": \"START\", \"device\": 0, \"time_us\": 1}]}";
    struct snapshot *s = NULL;
    char err[256] = "";
    if (snapshot_read_mem(text, strlen(text), "torch.json", &s, err, sizeof err) != 0)
        fail_msg("read: %s", err);
    const struct snap_device_trace *t = &s->device_traces[0];
    assert_int_equal(t->count, 6);
    static const struct {
        uint8_t action;
        const char *label;
        enum snap_stage stage;
    } want[] = {{TRACE_ANNOTATE, "fwd", SNAP_STAGE_START}, {TRACE_ALLOC, NULL, SNAP_STAGE_MARK},
                {TRACE_ALLOC, NULL, SNAP_STAGE_MARK},      {TRACE_ANNOTATE, "fwd", SNAP_STAGE_END},
                {TRACE_ANNOTATE, "bwd", SNAP_STAGE_START}, {TRACE_FREE_COMPLETED, NULL, 0}};
    for (size_t i = 0; i < 6; i++) {
        assert_int_equal(t->entries[i].action, want[i].action);
        if (want[i].label != NULL)
            assert_string_equal(snapshot_entry_label(t, i), want[i].label);
        else
            assert_null(snapshot_entry_label(t, i));
        assert_int_equal(snapshot_entry_stage(t, i), want[i].stage);
    }
    assert_int_equal(t->entries[0].time_us, 10);
    snapshot_free(s);
}

/* A snapshot cuprof wrote has them in its traces already: read once, not twice. */
static void
test_own_annotations_once(void **state)
{
    (void)state;
    struct snapshot *s = build();
    unsigned char *out = NULL;
    size_t len = 0;
    assert_int_equal(snapshot_write_mem(s, SNAPSHOT_FORMAT_PICKLE, &out, &len), 0);
    struct snapshot *back = NULL;
    char err[256] = "";
    assert_int_equal(snapshot_read_mem(out, len, "s.pickle", &back, err, sizeof err), 0);
    assert_int_equal(back->device_traces[0].count, s->device_traces[0].count);
    assert_int_equal(back->device_traces[1].count, 1);
    free(out);
    snapshot_free(back);
    snapshot_free(s);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_layout),
        cmocka_unit_test(test_no_ranges_no_key),
        cmocka_unit_test(test_read_back),
        cmocka_unit_test(test_pytorch_external_annotations),
        cmocka_unit_test(test_own_annotations_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
