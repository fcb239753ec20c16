/* test_snapshot_values.c: integers of any size in both readers, and fields whose values cannot
 * be used (issue 12): each costs one warning line and at most its record, never the file. */
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
#include "snapshot/json_reader.h"
#include "snapshot/pickle_reader.h"
#include "snapshot/snapshot_field.h"
#include "snapshot/snapshot_arena.h"
#include "snapshot/snapshot_model.h"
#include "snapshot/snapshot_read.h"
#include "snapshot/snapshot_write.h"

#define BIG158 "365375409332725729550921208179070754913983148089" /* 2^158 + 12345 */

struct tree {
    struct snapshot *strings;
    struct snapshot_arena *arena;
    struct sval root;
};

static void
read_tree(bool pickle, const void *data, size_t len, struct tree *t)
{
    char err[256] = "";
    t->strings = snapshot_create(0);
    t->arena = snapshot_arena_create();
    int rc = pickle ? pickle_read(data, len, t->arena, t->strings, &t->root, err, sizeof(err))
                    : json_read(data, len, t->arena, t->strings, &t->root, err, sizeof(err));
    if (rc != 0)
        fail_msg("read failed: %s", err);
}

static void
free_tree(struct tree *t)
{
    snapshot_arena_destroy(t->arena);
    snapshot_free(t->strings);
}

/* The values Python's int list below holds, in order, as the readers must type them. */
static void
check_ints(const struct sval *list)
{
    assert_int_equal(sval_len(list), 10);
    const struct sval *v = list->u.seq->items;
    assert_int_equal(v[0].type, SVAL_INT);
    assert_int_equal(v[0].u.i, 0);
    assert_int_equal(v[1].type, SVAL_INT);
    assert_int_equal(v[1].u.i, -1);
    assert_int_equal(v[2].type, SVAL_INT);
    assert_true(v[2].u.i == INT64_MAX);
    assert_int_equal(v[3].type, SVAL_INT);
    assert_true(v[3].u.i == INT64_MIN);
    assert_int_equal(v[4].type, SVAL_UINT);
    assert_true(v[4].u.u == (uint64_t)1 << 63);
    assert_int_equal(v[5].type, SVAL_UINT);
    assert_true(v[5].u.u == UINT64_MAX);
    assert_int_equal(v[6].type, SVAL_BIGINT);
    assert_string_equal(v[6].u.s, "18446744073709551616");
    assert_int_equal(v[7].type, SVAL_BIGINT);
    assert_string_equal(v[7].u.s, "-9223372036854775809");
    assert_int_equal(v[8].type, SVAL_BIGINT);
    assert_string_equal(v[8].u.s, BIG158);
    assert_int_equal(v[9].type, SVAL_BIGINT);
    assert_string_equal(v[9].u.s, "-365375409332725729550921208179070754913983135744");
}

/* pickle.dumps([0, -1, 2**63-1, -2**63, 2**63, 2**64-1, 2**64, -2**63-1, 2**158+12345,
 * -2**158], protocol=2): CPython's own LONG1 encodings. */
static const char python_ints[] =
    "\x80\x02\x5d\x71\x00\x28\x4b\x00\x4a\xff\xff\xff\xff\x8a\x08\xff\xff\xff\xff\xff\xff\xff"
    "\x7f\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00"
    "\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01"
    "\x8a\x09\xff\xff\xff\xff\xff\xff\xff\x7f\xff\x8a\x14\x39\x30\x00\x00\x00\x00\x00\x00\x00"
    "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x40\x8a\x14\x00\x00\x00\x00\x00\x00\x00\x00\x00"
    "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xc0\x65\x2e";

static void
test_pickle_ints(void **state)
{
    (void)state;
    struct tree t;
    read_tree(true, python_ints, sizeof(python_ints) - 1, &t);
    check_ints(&t.root);
    free_tree(&t);

    /* Encodings CPython would not write (redundant sign bytes) mean the same numbers. */
    static const char padded[] = "\x80\x02(\x8a\x0a\xff\xff\xff\xff\xff\xff\xff\xff\x00\x00"
                                 "\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\xff\x8a\x00l.";
    read_tree(true, padded, sizeof(padded) - 1, &t);
    assert_int_equal(sval_len(&t.root), 3);
    assert_int_equal(t.root.u.seq->items[0].type, SVAL_UINT);
    assert_true(t.root.u.seq->items[0].u.u == UINT64_MAX);
    assert_int_equal(t.root.u.seq->items[1].type, SVAL_INT);
    assert_int_equal(t.root.u.seq->items[1].u.i, -1);
    assert_int_equal(t.root.u.seq->items[2].u.i, 0);
    free_tree(&t);

    /* LONG4 (what CPython writes past 255 bytes): 2^2400, named by its size. */
    size_t n = 301;
    unsigned char *big = calloc(1, n + 9);
    memcpy(big, "\x80\x02\x8b\x2d\x01\x00\x00", 7);
    big[7 + n - 1] = 0x01;
    big[7 + n] = '.';
    read_tree(true, big, n + 8, &t);
    assert_int_equal(t.root.type, SVAL_BIGINT);
    assert_string_equal(t.root.u.s, "a positive integer of 301 bytes");
    free_tree(&t);
    free(big);
}

static void
test_json_numbers(void **state)
{
    (void)state;
    static const char text[] =
        "[0, -1, 9223372036854775807, -9223372036854775808, 9223372036854775808,"
        " 18446744073709551615, 18446744073709551616, -9223372036854775809, " BIG158
        ", -365375409332725729550921208179070754913983135744]";
    struct tree t;
    read_tree(false, text, sizeof(text) - 1, &t);
    check_ints(&t.root);
    free_tree(&t);

    /* A fraction or an exponent makes a float, as in Python; NaN and the infinities too. */
    static const char reals[] = "[1e3, 1.5, -0.0, 2.5E-3, NaN, Infinity, -Infinity]";
    read_tree(false, reals, sizeof(reals) - 1, &t);
    assert_int_equal(sval_len(&t.root), 7);
    for (size_t i = 0; i < 7; i++)
        assert_int_equal(t.root.u.seq->items[i].type, SVAL_FLOAT);
    assert_true(t.root.u.seq->items[0].u.f == 1000.0);
    free_tree(&t);
}

/* Reads `data` as a snapshot that must load; returns it. */
static struct snapshot *
load(const char *data, size_t len)
{
    struct snapshot *s = NULL;
    char err[256] = "";
    if (snapshot_read_mem(data, len, "odd.json", &s, err, sizeof(err)) != 0)
        fail_msg("refused: %s", err);
    for (size_t i = 0; i < s->warning_count; i++) {
        assert_non_null(strstr(s->warnings[i], "odd.json: "));
        assert_null(strchr(s->warnings[i], '\n'));
        assert_null(strchr(s->warnings[i], '\x1b'));
    }
    return s;
}

static bool
warned(const struct snapshot *s, const char *needle)
{
    for (size_t i = 0; i < s->warning_count; i++)
        if (strstr(s->warnings[i], needle) != NULL)
            return true;
    return false;
}

#define LOAD(text) load(text, strlen(text))

static void
test_unusable_fields(void **state)
{
    (void)state;
    /* Lines: size_t -1 and -1 silently unknown; 2^40 and a 20-byte int unknown with a warning. */
    struct snapshot *s = LOAD(
        "{\"segments\": [{\"address\": 4096, \"total_size\": 512, \"blocks\": [{\"size\": 512, "
        "\"state\": \"active_allocated\", \"frames\": [{\"name\": \"a\", \"filename\": \"a.py\", "
        "\"line\": 18446744073709551615}, {\"name\": \"b\", \"filename\": \"b.py\", \"line\": -1}, "
        "{\"name\": \"c\", \"filename\": \"c.py\", \"line\": 1099511627776}, {\"name\": \"d\", "
        "\"filename\": \"d.py\", \"line\": " BIG158 "}, {\"name\": \"e\", \"filename\": \"e.py\", "
        "\"line\": 7}]}]}]}");
    assert_int_equal(s->segment_count, 1);
    assert_int_equal(s->frame_count, 5);
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(s->frames[i].line, SNAP_LINE_UNKNOWN);
    assert_int_equal(s->frames[4].line, 7);
    assert_int_equal(s->warning_count, 1);
    assert_true(warned(s, "field \"line\" is 1099511627776: not a line number; read as unknown "
                          "(and in 1 more records)"));
    snapshot_free(s);

    /* A block size past 2^57 (or negative, or a string) drops its segment, not the file. */
    s = LOAD(
        "{\"segments\": [{\"address\": 4096, \"blocks\": [{\"size\": 9223372036854775813, "
        "\"state\": \"inactive\"}]}, {\"address\": 8192, \"blocks\": [{\"size\": -5}]}, "
        "{\"address\": 16384, \"blocks\": [{\"size\": \"x\"}]}, {\"address\": 32768, "
        "\"total_size\": 1024, \"blocks\": [{\"size\": 1024, \"state\": \"a\\nb\\u001b[2J\"}]}]"
        ", \"mystery\": " BIG158 "}");
    assert_int_equal(s->segment_count, 1);
    assert_true(s->segments[0].addr == 32768);
    assert_int_equal(s->blocks[0].state, BLOCK_INACTIVE); /* an unknown state */
    assert_true(warned(s, "segments[0].blocks[0]: field \"size\" is 9223372036854775813: larger "
                          "than any memory (2^57 bytes); segment skipped (and in 2 more records)"));
    assert_true(warned(s, "field \"state\" is \"a?b?[2J\": not a block state"));
    assert_int_equal(s->warning_count, 2);
    snapshot_free(s);

    /* A live block's request cannot exceed its size; a device's segments fit 2^57 bytes. */
    s = LOAD("{\"segments\": [{\"address\": 4096, \"blocks\": [{\"size\": 512, \"requested_size\": "
             "4096, \"state\": \"active_allocated\"}]}, {\"address\": 0, \"total_size\": "
             "144115188075855872}, {\"address\": 1, \"total_size\": 1}]}");
    assert_int_equal(s->segment_count, 2);
    assert_int_equal(s->blocks[0].requested_size, 512);
    assert_true(warned(s, "field \"requested_size\" is 4096: larger than the block"));
    assert_true(warned(s, "segments[1]: field \"total_size\" is 144115188075855872: the device's "
                          "segments sum past 2^57 bytes; segment skipped"));
    snapshot_free(s);

    /* Trace entries: a negative size or an address past 64 bits skips the entry; an odd time or
     * stream is ignored; an OOM request may be any size_t. */
    s = LOAD("{\"segments\": [], \"device_traces\": [[{\"action\": \"alloc\", \"addr\": 1, "
             "\"size\": -5}, {\"action\": \"alloc\", \"addr\": " BIG158 ", \"size\": 8}, "
             "{\"action\": \"alloc\", \"addr\": 2, \"size\": 8, \"time_us\": -1e300, \"stream\": "
             "1.5}, {\"action\": \"oom\", \"size\": 18446744073709551615, \"device_free\": 0}, "
             "{\"action\": \"alloc\", \"addr\": 3, \"size\": 1e3}]]}");
    assert_int_equal(s->device_traces[0].count, 3);
    const struct snap_entry *e = s->device_traces[0].entries;
    assert_false(e[0].has_time);
    assert_int_equal(e[0].stream, 0);
    assert_true(e[1].size == UINT64_MAX);
    assert_int_equal(e[2].size, 1000);
    assert_true(warned(s, "device_traces[0][0]: field \"size\" is -5: negative; entry skipped"));
    assert_true(warned(s, "field \"addr\" is " BIG158 ": wider than 64 bits; entry skipped"));
    assert_true(warned(s, "device_traces[0][2]: field \"time_us\" is -1"));
    assert_true(warned(s, "field \"stream\" is 1.5: not a whole number; read as 0"));
    snapshot_free(s);

    /* Counters: negative ones ignored (max_split_size's -1 and 2^64-1 mean "no limit"). */
    s = LOAD("{\"segments\": [], \"allocator_settings\": {\"max_split_size\": "
             "18446744073709551615}, \"cuprof\": {\"stats\": [{\"num_ooms\": -2, \"num_sync_all_"
             "streams\": 4, \"max_split_size\": -1}], \"dropped_entries\": [-3], \"pid\": " BIG158
             "}}");
    assert_int_equal(s->allocator_settings.max_split_size, -1);
    assert_int_equal(s->cuprof.stats_count[0], 2);
    assert_string_equal(s->cuprof.stats[0][0].key, "num_sync_all_streams");
    assert_int_equal(s->cuprof.stats[0][1].value, -1);
    assert_int_equal(s->device_traces[0].dropped, 0);
    assert_true(warned(s, "cuprof.stats[0]: field \"num_ooms\" is -2: negative; ignored"));
    assert_true(warned(s, "field \"dropped_entries\" is -3: negative; read as 0"));
    assert_true(warned(s, "field \"pid\" is " BIG158 ": wider than 64 bits; ignored"));
    snapshot_free(s);
}

/* Field names come from the file: past 32 of them, warnings are only counted. */
static void
test_warnings_are_bounded(void **state)
{
    (void)state;
    char text[4096];
    size_t n =
        (size_t)snprintf(text, sizeof(text), "{\"segments\": [], \"cuprof\": {\"stats\": [{");
    for (int i = 0; i < 40; i++)
        n += (size_t)snprintf(text + n, sizeof(text) - n, "%s\"k%d\": -1", i ? ", " : "", i);
    snprintf(text + n, sizeof(text) - n, "}]}}");
    struct snapshot *s = LOAD(text);
    assert_int_equal(s->warning_count, SNAPSHOT_FIELD_MAX_WARNINGS + 1);
    assert_non_null(strstr(s->warnings[SNAPSHOT_FIELD_MAX_WARNINGS],
                           "odd.json: 8 more values in other fields could not be used"));
    assert_int_equal(s->cuprof.stats_count[0], 0);
    snapshot_free(s);
}

/* PyTorch puts user_metadata on every entry recorded while it is set; cuprof keeps each entry's
 * text beside the entries (a labelled entry costs no more room than any other) and writes it
 * back where it was. An oom entry's device_free takes the place of its address. */
static void
check_labels(const struct snapshot *s)
{
    const struct snap_device_trace *t = &s->device_traces[0];
    assert_int_equal(t->count, 6);
    assert_int_equal(t->label_count, 3);
    assert_string_equal(snapshot_entry_label(t, 0), "step 1");
    assert_null(snapshot_entry_label(t, 1)); /* "" on an alloc: no label */
    assert_string_equal(snapshot_entry_label(t, 2), "");
    assert_int_equal(t->entries[2].action, TRACE_ANNOTATE);
    assert_string_equal(snapshot_entry_label(t, 3), "step 2");
    assert_null(snapshot_entry_label(t, 4));
    assert_null(snapshot_entry_label(t, 5));
    assert_null(snapshot_entry_label(t, 6)); /* past the end */
    assert_int_equal(t->entries[3].addr, 4096);
    assert_int_equal(t->entries[4].action, TRACE_OOM);
    assert_int_equal(t->entries[4].device_free, 77);
    assert_int_equal(t->entries[5].addr, 8192);
}

static void
test_labels_beside_entries(void **state)
{
    (void)state;
    struct snapshot *s =
        LOAD("{\"segments\": [], \"device_traces\": [[{\"action\": \"alloc\", \"addr\": 4096, "
             "\"size\": 8, \"user_metadata\": \"step 1\"}, {\"action\": \"alloc\", \"addr\": 8192, "
             "\"size\": 8, \"user_metadata\": \"\"}, {\"action\": \"annotate\", \"addr\": 0, "
             "\"size\": 0, \"label\": \"\"}, "
             "{\"action\": \"free_requested\", \"addr\": 4096, \"size\": 8, \"user_metadata\": "
             "\"step 2\"}, {\"action\": \"oom\", \"addr\": 5, \"size\": 1, \"device_free\": 77}, "
             "{\"action\": \"free_completed\", \"addr\": 8192, \"size\": 8}]]}");
    check_labels(s);
    char path[] = "/tmp/cuprof-labels-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    for (int format = 0; format < 2; format++) {
        assert_int_equal(snapshot_write_file(path, s,
                                             format ? SNAPSHOT_FORMAT_JSON : SNAPSHOT_FORMAT_PICKLE,
                                             FILE_PUBLISH_REPLACE, NULL, 0),
                         0);
        struct snapshot *back = NULL;
        char err[256] = "";
        if (snapshot_read_file(path, &back, err, sizeof(err)) != 0)
            fail_msg("read back: %s", err);
        check_labels(back);
        snapshot_free(back);
    }
    unlink(path);
    snapshot_free(s);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pickle_ints),           cmocka_unit_test(test_json_numbers),
        cmocka_unit_test(test_unusable_fields),       cmocka_unit_test(test_warnings_are_bounded),
        cmocka_unit_test(test_labels_beside_entries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
