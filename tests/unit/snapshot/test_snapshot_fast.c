/* test_snapshot_fast.c: the readers' and writers' speed-ups must not change a byte or a fact:
 * JSON frame lists rendered once and copied, and the pickle reader's streamed history (Python's
 * own pickles and hand-made shapes: test_pickle_streaming.py). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <unistd.h>

#include "allocator/trace_sink.h"
#include "fixture.h"
#include "snapshot/emitter.h"
#include "snapshot/pickle_reader.h"
#include "snapshot/snapshot_arena.h"
#include "snapshot/snapshot_import.h"
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
    size_t cap = 1;
    while (cap < b->len + n) /* realloc to powers of two: no quadratic copying */
        cap *= 2;
    if (b->len == 0 || cap > b->len)
        b->data = realloc(b->data, cap);
    assert_non_null(b->data);
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

static struct buf
json_of(const struct snapshot *s, bool cached)
{
    struct buf b = {0};
    struct emitter *e = cached ? json_emitter_create_cached(buf_write, &b, s->stack_count)
                               : json_emitter_create(buf_write, &b);
    assert_non_null(e);
    assert_int_equal(snapshot_emit(s, e), 0);
    assert_int_equal(emitter_finish(e), 0);
    emitter_destroy(e);
    return b;
}

/* A stack of `depth` frames whose names need escaping and are `name_len` bytes long. */
static uint32_t
odd_stack(struct snapshot *s, size_t k, size_t depth, size_t name_len)
{
    uint32_t f[400];
    char *name = malloc(name_len + 1);
    assert_true(depth <= 400 && name != NULL);
    for (size_t d = 0; d < depth; d++) {
        for (size_t i = 0; i < name_len; i++)
            name[i] = (char)('a' + (i + d + k) % 26);
        name[0] = '"';
        name[name_len / 2] = '\\';
        name[name_len - 1] = (char)(1 + k % 31); /* a control character: \u00XX */
        name[name_len] = '\0';
        assert_int_equal(snapshot_add_frame(s, name, "dir/é.py", (int64_t)d, &f[d]), 0);
    }
    free(name);
    uint32_t id;
    assert_int_equal(snapshot_add_stack(s, f, depth, &id), 0);
    return id;
}

/* Frame lists copied from their first rendering give the same text as rendering them each time,
 * whatever the buffer boundaries: stacks small and larger than the writer's buffer
 * (EMITTER_BUFFER, 1 MiB). */
static void
test_json_cached_frames_same_text(void **state)
{
    (void)state;
    struct snapshot *s = fixture_model(300, 7);
    assert_non_null(s);
    uint32_t ids[4] = {odd_stack(s, 0, 3, 9), odd_stack(s, 1, 40, 200),
                       odd_stack(s, 2, 300, 4000), /* 1.2 MB of text: never kept */
                       odd_stack(s, 3, 1, 1)};
    for (size_t i = 0; i < 3000; i++) {
        struct snap_entry e = {.action = TRACE_ALLOC,
                               .addr = 0x7f0000000000ull + 512 * i,
                               .size = 512,
                               .stack = ids[i % 300 == 0       ? 2
                                            : (i * 7) % 3 == 2 ? 3
                                                               : (i * 7) % 3],
                               .has_time = true,
                               .time_us = (int64_t)i};
        assert_int_equal(snapshot_add_entry(s, 1, &e), 0);
    }
    struct buf plain = json_of(s, false), cached = json_of(s, true);
    assert_int_equal(plain.len, cached.len);
    assert_memory_equal(plain.data, cached.data, plain.len);
    unsigned char *mem;
    size_t len;
    assert_int_equal(snapshot_write_mem(s, SNAPSHOT_FORMAT_JSON, &mem, &len), 0);
    assert_int_equal(len, plain.len);
    assert_memory_equal(mem, plain.data, len);
    free(mem);
    free(plain.data);
    free(cached.data);
    snapshot_free(s);
}

/* A model as JSON text (compared as bytes), freed. */
static struct buf
json_and_free(struct snapshot *s)
{
    struct buf b = json_of(s, false);
    snapshot_free(s);
    return b;
}

/* cuprof's own pickle of every kind of entry (oom, annotate, pools, labels: the checked path),
 * 7500 entries in batches, two devices: streamed from memory and from a file (a window at a
 * time), it reads back as the plain value tree does, and as the model it came from. */
static void
test_streamed_same_as_tree(void **state)
{
    (void)state;
    struct snapshot *s = fixture_model(2500, 7);
    assert_non_null(s);
    unsigned char *data;
    size_t len;
    assert_int_equal(snapshot_write_mem(s, SNAPSHOT_FORMAT_PICKLE, &data, &len), 0);
    struct buf want = json_and_free(s);

    char err[512] = "";
    struct snapshot *r = NULL;
    assert_int_equal(snapshot_read_mem(data, len, "mem", &r, err, sizeof(err)), 0);
    struct buf streamed = json_and_free(r);

    r = snapshot_create(0);
    struct snapshot_arena *tree = snapshot_arena_create();
    struct sval root;
    assert_int_equal(pickle_read(data, len, tree, r, &root, err, sizeof(err)), 0);
    assert_int_equal(snapshot_import(r, &root, "mem", err, sizeof(err)), 0);
    snapshot_arena_destroy(tree);
    struct buf plain = json_and_free(r);

    char path[] = "/tmp/cuprof_test_fast_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
    assert_int_equal(snapshot_read_file(path, &r, err, sizeof(err)), 0);
    unlink(path);
    struct buf from_file = json_and_free(r);

    struct buf *all[] = {&streamed, &plain, &from_file};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(all[i]->len, want.len);
        assert_memory_equal(all[i]->data, want.data, want.len);
        free(all[i]->data);
    }
    free(want.data);
    free(data);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_cached_frames_same_text),
        cmocka_unit_test(test_streamed_same_as_tree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
