/* test_snapshot_io.c: pickle and JSON emitters byte by byte, write -> read -> write round trips,
 * and hostile input to the readers. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "allocator/allocator.h"
#include "allocator/cuprof_errors.h"
#include "allocator/trace_sink.h"
#include "fixture.h"
#include "snapshot/emitter.h"
#include "snapshot/snapshot_oom.h"
#include "snapshot/snapshot_read.h"
#include "snapshot/snapshot_write.h"

struct buf {
    unsigned char *data;
    size_t len;
};

static int
buf_write(void *ctx, const void *p, size_t n)
{
    struct buf *b = ctx;
    b->data = realloc(b->data, b->len + n);
    assert_non_null(b->data);
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

/* Emits one int inside a list and returns the bytes between "](" and "e." (the int alone). */
static void
expect_int(int64_t v, const unsigned char *want, size_t want_len)
{
    struct buf b = {0};
    struct emitter *e = pickle_emitter_create(buf_write, &b, 0, 0);
    emitter_begin_list(e);
    emitter_int(e, v);
    emitter_end(e);
    assert_int_equal(emitter_finish(e), 0);
    emitter_destroy(e);
    /* \x80\x04 ] ( <int> e . */
    assert_int_equal(b.len, 4 + want_len + 2);
    assert_memory_equal(b.data, "\x80\x04](", 4);
    assert_memory_equal(b.data + 4, want, want_len);
    assert_memory_equal(b.data + 4 + want_len, "e.", 2);
    free(b.data);
}

static void
test_pickle_ints(void **state)
{
    (void)state;
    /* Expected bytes follow CPython's save_long: BININT1/BININT2/BININT, else minimal LONG1. */
    expect_int(0, (const unsigned char *)"K\x00", 2);
    expect_int(255, (const unsigned char *)"K\xff", 2);
    expect_int(256, (const unsigned char *)"M\x00\x01", 3);
    expect_int(65535, (const unsigned char *)"M\xff\xff", 3);
    expect_int(65536, (const unsigned char *)"J\x00\x00\x01\x00", 5);
    expect_int(-1, (const unsigned char *)"J\xff\xff\xff\xff", 5);
    expect_int(INT32_MAX, (const unsigned char *)"J\xff\xff\xff\x7f", 5);
    expect_int(INT32_MIN, (const unsigned char *)"J\x00\x00\x00\x80", 5);
    expect_int((int64_t)1 << 31, (const unsigned char *)"\x8a\x05\x00\x00\x00\x80\x00", 7);
    expect_int(-((int64_t)1 << 31) - 1, (const unsigned char *)"\x8a\x05\xff\xff\xff\x7f\xff", 7);
    expect_int(0x7f1234000000, (const unsigned char *)"\x8a\x06\x00\x00\x00\x34\x12\x7f", 8);
    expect_int(INT64_MAX, (const unsigned char *)"\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f", 10);
    expect_int(INT64_MIN, (const unsigned char *)"\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80", 10);
    expect_int((int64_t)(uint64_t)SIZE_MAX, (const unsigned char *)"J\xff\xff\xff\xff", 5);
}

static void
test_pickle_batches_and_strings(void **state)
{
    (void)state;
    struct buf b = {0};
    struct emitter *e = pickle_emitter_create(buf_write, &b, 0, 0);
    emitter_begin_list(e);
    for (int i = 0; i < 2500; i++)
        emitter_int(e, 7);
    emitter_end(e);
    assert_int_equal(emitter_finish(e), 0);
    emitter_destroy(e);
    /* 2500 items: three MARK ... APPENDS batches of 1000, 1000 and 500. */
    assert_int_equal(b.len, 2 + 1 + 3 * 2 + 2500 * 2 + 1);
    size_t marks = 0, appends = 0;
    for (size_t i = 3; i + 1 < b.len; i++) {
        if (b.data[i] == 'K') {
            i++;
            continue;
        }
        marks += b.data[i] == '(';
        appends += b.data[i] == 'e';
    }
    assert_int_equal(marks, 3);
    assert_int_equal(appends, 3);
    assert_int_equal(b.data[3 + 1 + 2000], 'e'); /* after the first 1000 K pairs */
    free(b.data);

    b = (struct buf){0};
    e = pickle_emitter_create(buf_write, &b, 0, 0);
    char s255[256], s256[257];
    memset(s255, 'a', 255);
    s255[255] = 0;
    memset(s256, 'b', 256);
    s256[256] = 0;
    emitter_begin_tuple(e);
    emitter_string(e, s255);
    emitter_string(e, s256);
    emitter_end(e);
    assert_int_equal(emitter_finish(e), 0);
    emitter_destroy(e);
    assert_int_equal(b.len, 2 + 2 + 255 + 5 + 256 + 2);
    assert_memory_equal(b.data + 2, "\x8c\xff", 2);
    assert_memory_equal(b.data + 4 + 255, "X\x00\x01\x00\x00", 5);
    assert_memory_equal(b.data + b.len - 2, "\x86.", 2); /* TUPLE2, STOP */
    free(b.data);
}

static void
test_float_and_json_text(void **state)
{
    (void)state;
    struct buf b = {0};
    struct emitter *e = pickle_emitter_create(buf_write, &b, 0, 0);
    emitter_float(e, 0.5);
    assert_int_equal(emitter_finish(e), 0);
    emitter_destroy(e);
    assert_int_equal(b.len, 12);
    assert_memory_equal(b.data + 2, "G\x3f\xe0\x00\x00\x00\x00\x00\x00", 9);
    free(b.data);

    b = (struct buf){0};
    e = json_emitter_create(buf_write, &b);
    emitter_begin_dict(e);
    emitter_key(e, "f");
    emitter_begin_list(e);
    emitter_float(e, 0.1);
    emitter_float(e, 1.0);
    emitter_float(e, 1e300);
    emitter_float(e, 0.0);
    emitter_end(e);
    emitter_key(e, "s");
    emitter_string(e, "a\"b\\c\n\x01é");
    emitter_key(e, "t");
    emitter_begin_tuple(e);
    emitter_int(e, -42);
    emitter_bool(e, true);
    emitter_none(e);
    emitter_end(e);
    emitter_end(e);
    assert_int_equal(emitter_finish(e), 0);
    emitter_destroy(e);
    const char *want = "{\"f\":[0.1,1.0,1e+300,0.0],\"s\":\"a\\\"b\\\\c\\n\\u0001é\","
                       "\"t\":[-42,true,null]}\n";
    assert_int_equal(b.len, strlen(want));
    assert_memory_equal(b.data, want, b.len);
    free(b.data);
}

/* emitter_u64: JSON writes the value in full; pickle writes it as emitter_uint does (int64). '<'
 * is escaped in JSON strings, in the 8-byte scan and in the byte loop alike. */
static void
test_unsigned_and_lt(void **state)
{
    (void)state;
    struct buf b = {0};
    struct emitter *e = json_emitter_create(buf_write, &b);
    emitter_begin_list(e);
    emitter_u64(e, UINT64_MAX);
    emitter_u64(e, ((uint64_t)1 << 63) + 5);
    emitter_u64(e, 7);
    emitter_uint(e, UINT64_MAX);
    emitter_string(e, "<");
    emitter_string(e, "0123456789</script>");
    emitter_end(e);
    assert_int_equal(emitter_finish(e), 0);
    emitter_destroy(e);
    const char *want = "[18446744073709551615,9223372036854775813,7,-1,\"\\u003c\","
                       "\"0123456789\\u003c/script>\"]\n";
    assert_int_equal(b.len, strlen(want));
    assert_memory_equal(b.data, want, b.len);
    free(b.data);

    struct buf u = {0}, i = {0};
    e = pickle_emitter_create(buf_write, &u, 0, 0);
    emitter_u64(e, UINT64_MAX);
    assert_int_equal(emitter_finish(e), 0);
    emitter_destroy(e);
    e = pickle_emitter_create(buf_write, &i, 0, 0);
    emitter_int(e, -1);
    assert_int_equal(emitter_finish(e), 0);
    emitter_destroy(e);
    assert_int_equal(u.len, i.len);
    assert_memory_equal(u.data, i.data, u.len);
    free(u.data);
    free(i.data);
}

static void
test_unbalanced_is_an_error(void **state)
{
    (void)state;
    struct buf b = {0};
    struct emitter *e = json_emitter_create(buf_write, &b);
    emitter_begin_list(e);
    assert_int_equal(emitter_finish(e), -CUPROF_EINVAL);
    emitter_destroy(e);
    free(b.data);
}

static void
roundtrip(enum snapshot_format format, size_t entries, size_t stacks)
{
    struct snapshot *s = fixture_model(entries, stacks);
    assert_non_null(s);
    unsigned char *a, *b;
    size_t alen, blen;
    assert_int_equal(snapshot_write_mem(s, format, &a, &alen), 0);
    struct snapshot *r = NULL;
    char err[256] = "";
    assert_int_equal(snapshot_read_mem(a, alen, "mem", &r, err, sizeof(err)), 0);
    assert_int_equal(snapshot_write_mem(r, format, &b, &blen), 0);
    assert_int_equal(alen, blen);
    assert_memory_equal(a, b, alen);

    /* The model read back holds the same facts. */
    assert_int_equal(r->device_count, 2);
    assert_int_equal(r->segment_count, 2);
    assert_int_equal(r->block_count, 3);
    assert_int_equal(r->segments[1].stream, 0x55aa00112233ull);
    assert_int_equal(r->segments[1].pool_id[1], 2);
    assert_int_equal(r->segments[1].cuprof_pool, TRACE_POOL_MANAGED);
    assert_int_equal(r->blocks[2].state, BLOCK_ACTIVE_PENDING_FREE);
    assert_int_equal(r->blocks[2].requested_size, 20 * 1024 * 1024 - 5);
    assert_int_equal(r->device_traces[0].count, 5 + 3 * entries);
    assert_int_equal(r->device_traces[1].dropped, 7);
    const struct snap_entry *t = r->device_traces[0].entries;
    assert_true(t[1].has_time);
    assert_int_equal(t[1].time_us, 1700000000123456);
    assert_false(t[0].has_time);
    assert_string_equal(snapshot_entry_label(&r->device_traces[0], 2), "phase \"forward\"\n\t\\ é");
    assert_null(snapshot_entry_label(&r->device_traces[0], 1));
    assert_int_equal(r->device_traces[0].label_count, 1);
    assert_int_equal(t[3].action, TRACE_OOM);
    assert_int_equal(t[3].device_free, 123);
    assert_int_equal(t[3].size, 1ull << 40);
    const struct snap_stack *st = &r->stacks[t[1].stack];
    assert_int_equal(st->count, 3);
    assert_string_equal(r->frames[r->stack_frames[st->first]].name, "fn_0");
    assert_int_equal(r->frames[r->stack_frames[st->first]].line, 10);
    assert_int_equal(r->stack_count, s->stack_count);
    assert_int_equal(r->frame_count, s->frame_count);
    assert_true(r->has_allocator_settings);
    assert_int_equal(r->allocator_settings.max_split_size, 64 * 1024 * 1024);
    assert_true(r->allocator_settings.garbage_collection_threshold == 0.6);
    assert_true(r->allocator_settings.expandable_segments);
    assert_int_equal(r->allocator_settings.roundup_power2_divisions[3], 4);
    assert_string_equal(r->allocator_settings.alloc_conf, "max_split_size_mb:64");
    assert_true(r->cuprof.present);
    assert_int_equal(r->cuprof.rank, -1);
    assert_int_equal(r->cuprof.argc, 3);
    assert_string_equal(r->cuprof.argv[2], "--lr=0.1");
    assert_int_equal(r->cuprof.stats_count[0], 3);
    assert_int_equal(r->cuprof.stats[0][1].value, -1);
    assert_int_equal(r->cuprof.stats_count[1], 0);

    /* pickle -> model -> JSON gives the JSON written directly. */
    unsigned char *j1, *j2;
    size_t j1len, j2len;
    assert_int_equal(snapshot_write_mem(s, SNAPSHOT_FORMAT_JSON, &j1, &j1len), 0);
    assert_int_equal(snapshot_write_mem(r, SNAPSHOT_FORMAT_JSON, &j2, &j2len), 0);
    assert_int_equal(j1len, j2len);
    assert_memory_equal(j1, j2, j1len);
    free(j1);
    free(j2);
    free(a);
    free(b);
    snapshot_free(r);
    snapshot_free(s);
}

static void
test_roundtrip_pickle(void **state)
{
    (void)state;
    roundtrip(SNAPSHOT_FORMAT_PICKLE, 0, 0);
    roundtrip(SNAPSHOT_FORMAT_PICKLE, 3000, 300); /* > 256 memo entries: LONG_BINGET */
}

static void
test_roundtrip_json(void **state)
{
    (void)state;
    roundtrip(SNAPSHOT_FORMAT_JSON, 0, 0);
    roundtrip(SNAPSHOT_FORMAT_JSON, 1500, 10);
}

/* cuprof.oom_messages: written only when there are some, read back field by field. */
static void
test_roundtrip_oom_messages(void **state)
{
    (void)state;
    for (int f = 0; f < 2; f++) {
        enum snapshot_format format = f == 0 ? SNAPSHOT_FORMAT_PICKLE : SNAPSHOT_FORMAT_JSON;
        struct snapshot *s = fixture_model(0, 0);
        assert_non_null(s);
        unsigned char *a;
        size_t alen;
        assert_int_equal(snapshot_write_mem(s, format, &a, &alen), 0);
        assert_null(memmem(a, alen, "oom_messages", 12));
        free(a);
        /* The third: a driver's own call refused after 3 entries (before the oom entry). */
        const struct snap_oom_message rows[] = {
            {0, 3, 1700000000000042, "CUDA out of memory. Tried to allocate 1.00 TiB.", NULL},
            {1, -1, 1700000000000043, "CUDA out of memory. Tried to allocate more than 1EB memory.",
             NULL},
            {0, 3, 1700000000000041, "cuModuleGetFunction: the driver found no device memory",
             "cuModuleGetFunction"},
        };
        assert_int_equal(snapshot_set_oom_messages(s, rows, 3), 0);
        assert_int_equal(snapshot_write_mem(s, format, &a, &alen), 0);
        struct snapshot *r = NULL;
        char err[256] = "";
        assert_int_equal(snapshot_read_mem(a, alen, "mem", &r, err, sizeof(err)), 0);
        assert_int_equal(r->cuprof.oom_message_count, 3);
        for (size_t i = 0; i < 3; i++) {
            assert_int_equal(r->cuprof.oom_messages[i].device, rows[i].device);
            assert_int_equal(r->cuprof.oom_messages[i].trace_index, rows[i].trace_index);
            assert_int_equal(r->cuprof.oom_messages[i].time_us, rows[i].time_us);
            assert_string_equal(r->cuprof.oom_messages[i].message, rows[i].message);
            if (rows[i].api == NULL)
                assert_null(r->cuprof.oom_messages[i].api);
            else
                assert_string_equal(r->cuprof.oom_messages[i].api, rows[i].api);
        }
        /* Entry 3 of device 0 is the fixture's oom entry: its message by index, never the
         * driver's row of the same index. */
        assert_string_equal(snapshot_oom_message_of(r, 0, 3), rows[0].message);
        assert_null(snapshot_oom_message_of(r, 0, 2));
        assert_ptr_equal(snapshot_driver_oom_first(r, 0), &r->cuprof.oom_messages[2]);
        assert_null(snapshot_driver_oom_first(r, 1));
        assert_int_equal(snapshot_driver_oom_count(r, 0), 1);
        assert_int_equal(snapshot_driver_oom_count(r, 1), 0);
        free(a);
        snapshot_free(r);
        snapshot_free(s);
    }
}

static void
expect_reject(const void *data, size_t len, const char *needle)
{
    struct snapshot *r = NULL;
    char err[256] = "";
    int rc = snapshot_read_mem(data, len, "bad.pickle", &r, err, sizeof(err));
    if (rc == 0)
        fail_msg("accepted hostile input (expected \"%s\")", needle);
    assert_null(r);
    assert_non_null(strstr(err, "bad.pickle: "));
    if (needle != NULL && strstr(err, needle) == NULL)
        fail_msg("error \"%s\" does not mention \"%s\"", err, needle);
    assert_null(strchr(err, '\n'));
}

static void
test_hostile_pickles(void **state)
{
    (void)state;
    expect_reject("", 0, "not a snapshot");
    expect_reject("\x80", 1, "truncated");
    expect_reject("\x80\x01N.", 4, "protocol 1");
    expect_reject("\x80\x06N.", 4, "protocol 6");
    expect_reject("\x80\x04N", 3, "no STOP");
    expect_reject("\x80\x04.", 3, "empty stack");
    expect_reject("\x80\x04\x63os\nsystem\n.", 14, "opcode 0x63");
    expect_reject("\x80\x04X\xff\xff\xff\x7f", 8, "truncated");
    expect_reject("\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\xff", 11, "truncated");
    /* 2^64 reads (as an out-of-range int): only its place makes it unusable. */
    expect_reject("\x80\x04\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01.", 14, "'segments' is int");
    expect_reject("\x80\x04h\x05.", 5, "never stored");
    expect_reject("\x80\x04Nr\xff\xff\xff\x7f.", 9, "out of range");
    expect_reject("\x80\x04Ne.", 5, "MARK");
    expect_reject("\x80\x04K\x01K\x02s.", 8, "stack underflow");
    expect_reject("\x80\x04K\x01K\x02K\x03s.", 10, "SETITEMS on a int");
    expect_reject("\x80\x04}(K\x01u.", 7, "odd");
    expect_reject("\x80\x04K\x01.", 5, "not a memory snapshot");
    expect_reject("\x80\x04}.", 4, "no 'segments'");
    char deep[80];
    memcpy(deep, "\x80\x04", 2);
    memset(deep + 2, '(', 70);
    expect_reject(deep, 72, "nesting deeper than 64");
    expect_reject("{\"segments\": 5}", 15, "'segments' is int");
    expect_reject("{\"segments\": [}", 15, "JSON error at line 1");
    expect_reject("hello", 5, "neither a pickle nor JSON");
}

static void
test_truncations_and_corruption(void **state)
{
    (void)state;
    struct snapshot *s = fixture_model(20, 3);
    assert_non_null(s);
    unsigned char *a;
    size_t alen;
    assert_int_equal(snapshot_write_mem(s, SNAPSHOT_FORMAT_PICKLE, &a, &alen), 0);
    snapshot_free(s);
    /* Every proper prefix is rejected with a message. */
    for (size_t n = 0; n < alen; n++) {
        struct snapshot *r = NULL;
        char err[256] = "";
        assert_int_not_equal(snapshot_read_mem(a, n, "cut.pickle", &r, err, sizeof(err)), 0);
        assert_null(r);
        assert_true(strncmp(err, "cut.pickle: ", 12) == 0);
    }
    /* Flipped bytes: accepted or rejected, never a crash (ASan runs this too). */
    unsigned char *c = malloc(alen);
    assert_non_null(c);
    uint64_t x = 88172645463325252ull;
    for (int round = 0; round < 3000; round++) {
        memcpy(c, a, alen);
        for (int k = 0; k < 1 + round % 4; k++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            c[x % alen] = (unsigned char)(x >> 32);
        }
        struct snapshot *r = NULL;
        char err[256];
        if (snapshot_read_mem(c, alen, "flip.pickle", &r, err, sizeof(err)) == 0)
            snapshot_free(r);
    }
    free(c);
    free(a);
}

static void
test_files(void **state)
{
    (void)state;
    char dir[] = "/tmp/cuprof-snapio-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[512], tmp[600];
    snprintf(path, sizeof(path), "%s/out.json", dir);
    struct snapshot *s = fixture_model(2, 1);
    assert_non_null(s);
    assert_int_equal(snapshot_format_for_path(path), SNAPSHOT_FORMAT_JSON);
    assert_int_equal(snapshot_format_for_path("a.pkl"), SNAPSHOT_FORMAT_PICKLE);
    assert_int_equal(
        snapshot_write_file(path, s, SNAPSHOT_FORMAT_AUTO, FILE_PUBLISH_REPLACE, NULL, 0), 0);
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    assert_int_not_equal(access(tmp, F_OK), 0);
    struct snapshot *r = NULL;
    char err[512] = "";
    assert_int_equal(snapshot_read_file(path, &r, err, sizeof(err)), 0);
    assert_int_equal(r->device_traces[0].count, 5 + 6);
    snapshot_free(r);

    /* A failed write leaves no temporary file and sets errno. */
    snprintf(path, sizeof(path), "%s/missing-dir/out.pickle", dir);
    errno = 0;
    assert_int_equal(
        snapshot_write_file(path, s, SNAPSHOT_FORMAT_AUTO, FILE_PUBLISH_REPLACE, NULL, 0),
        -CUPROF_EIO);
    assert_int_equal(errno, ENOENT);
    assert_int_equal(snapshot_read_file(path, &r, err, sizeof(err)), -CUPROF_EIO);
    assert_non_null(strstr(err, "missing-dir/out.pickle: No such file or directory"));
    snapshot_free(s);
    snprintf(path, sizeof(path), "%s/out.json", dir);
    unlink(path);
    rmdir(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pickle_ints),
        cmocka_unit_test(test_pickle_batches_and_strings),
        cmocka_unit_test(test_float_and_json_text),
        cmocka_unit_test(test_unsigned_and_lt),
        cmocka_unit_test(test_unbalanced_is_an_error),
        cmocka_unit_test(test_roundtrip_pickle),
        cmocka_unit_test(test_roundtrip_json),
        cmocka_unit_test(test_roundtrip_oom_messages),
        cmocka_unit_test(test_hostile_pickles),
        cmocka_unit_test(test_truncations_and_corruption),
        cmocka_unit_test(test_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
