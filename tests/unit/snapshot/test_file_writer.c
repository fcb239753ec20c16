/* test_file_writer.c: the file writer's hand-over of buffers (inline for a file's first two, on
 * its thread after), byte-exact files from snapshot_write_file against snapshot_write_mem in both
 * formats, a string larger than a buffer, a process that cannot start a thread, and a write
 * that fails on the writing thread: errno, no temporary file, and no SIGXFSZ left for the
 * program. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdbool.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "allocator/cuprof_errors.h"
#include "allocator/trace_sink.h"
#include "fixture.h"
#include "snapshot/emitter.h"
#include "snapshot/file_writer.h"
#include "snapshot/snapshot_write.h"

static char dir[] = "/tmp/cuprof-fwriter-XXXXXX";

/* Linked with --wrap=pthread_create: while set, no thread can be started (RLIMIT_NPROC, a
 * process at its thread limit). */
static bool refuse_threads;
int __real_pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
                          void *arg);
int __wrap_pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
                          void *arg);

int
__wrap_pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
                      void *arg)
{
    if (refuse_threads)
        return EAGAIN;
    return __real_pthread_create(thread, attr, start, arg);
}

static int
make_dir(void **state)
{
    (void)state;
    return mkdtemp(dir) == NULL ? -1 : 0;
}

static int
remove_dir(void **state)
{
    (void)state;
    return rmdir(dir);
}

/* The whole file at `path` (NULL when it cannot be read); *len its size. */
static unsigned char *
slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    struct stat st;
    unsigned char *data = NULL;
    if (fstat(fileno(f), &st) == 0 && (data = malloc((size_t)st.st_size + 1)) != NULL &&
        fread(data, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
        free(data);
        data = NULL;
    }
    fclose(f);
    *len = (size_t)st.st_size;
    return data;
}

static unsigned char
pattern_byte(size_t offset)
{
    return (unsigned char)((offset * 131u) ^ (offset >> 13));
}

/* A fresh file `name` in the test folder (its path in `path`), with a writer on it. */
static int
open_writer(const char *name, char *path, size_t len, struct file_writer *w)
{
    snprintf(path, len, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    file_writer_init(w, fd);
    return fd;
}

/* The file holds exactly the first `want` bytes of the pattern; it is removed after. */
static void
assert_pattern_file(const char *path, size_t want)
{
    size_t len;
    unsigned char *data = slurp(path, &len);
    assert_non_null(data);
    assert_int_equal(len, want);
    for (size_t k = 0; k < len; k++)
        if (data[k] != pattern_byte(k))
            fail_msg("byte %zu is %u, expected %u", k, data[k], pattern_byte(k));
    free(data);
    unlink(path);
}

/* Fills and hands over `n` buffers of lengths that vary, as an emitter would. */
static void
hand_over(struct file_writer *w, unsigned char **buf, size_t *offset, int n)
{
    for (int i = 0; i < n; i++) {
        size_t len = EMITTER_BUFFER - (size_t)(i * 7919) % 4096;
        for (size_t k = 0; k < len; k++)
            (*buf)[k] = pattern_byte(*offset + k);
        assert_int_equal(file_writer_exchange(w, buf, len), 0);
        *offset += len;
    }
}

static void
test_buffers_in_order(void **state)
{
    (void)state;
    char path[512];
    struct file_writer w;
    int fd = open_writer("raw", path, sizeof(path), &w);
    static unsigned char own[EMITTER_BUFFER];
    unsigned char *buf = own;
    size_t offset = 0;

    /* The first buffer is written inline and handed back: a small file starts no thread. */
    hand_over(&w, &buf, &offset, 1);
    assert_false(w.threaded);
    assert_ptr_equal(buf, own);
    /* The second starts the thread; from then on the pool's buffers come back, never ours. */
    hand_over(&w, &buf, &offset, 1);
    assert_true(w.threaded);
    assert_ptr_not_equal(buf, own);
    hand_over(&w, &buf, &offset, 9);
    assert_int_equal(file_writer_exchange(&w, &buf, 0), 0); /* nothing to write */
    for (size_t k = 0; k < 4; k++)
        buf[k] = pattern_byte(offset + k);
    assert_int_equal(file_writer_exchange(&w, &buf, 4), 0);
    offset += 4;
    assert_int_equal(file_writer_close(&w), 0);
    assert_false(w.threaded);
    assert_int_equal(close(fd), 0);
    assert_pattern_file(path, offset);
}

/* A model whose JSON spans several buffers, with a label longer than a buffer (written through
 * the pool piece by piece). */
static struct snapshot *
big_model(void)
{
    struct snapshot *s = fixture_model(12000, 100);
    assert_non_null(s);
    size_t label_len = 3 * EMITTER_BUFFER + 12345;
    char *label = malloc(label_len + 1);
    assert_non_null(label);
    for (size_t k = 0; k < label_len; k++)
        label[k] = k % 97 == 0 ? '"' : (char)('a' + k % 26); /* quotes: escaped */
    label[label_len] = '\0';
    struct snap_entry annotate = {.action = TRACE_ANNOTATE, .has_label = true};
    assert_int_equal(snapshot_add_labeled_entry(s, 0, &annotate, label), 0);
    free(label);
    return s;
}

/* snapshot_write_file of `s` to `name` (its extension picks the format) holds byte for byte
 * what snapshot_write_mem gives; returns the size. */
static size_t
assert_file_equals_memory(const struct snapshot *s, const char *name)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    unsigned char *mem;
    size_t mem_len, len;
    assert_int_equal(snapshot_write_mem(s, snapshot_format_for_path(path), &mem, &mem_len), 0);
    assert_int_equal(
        snapshot_write_file(path, s, SNAPSHOT_FORMAT_AUTO, FILE_PUBLISH_REPLACE, NULL, 0), 0);
    unsigned char *data = slurp(path, &len);
    assert_non_null(data);
    assert_int_equal(len, mem_len);
    assert_memory_equal(data, mem, len);
    free(data);
    free(mem);
    unlink(path);
    return len;
}

static void
test_files_equal_memory(void **state)
{
    (void)state;
    struct snapshot *s = big_model();
    /* JSON: the thread wrote most of it. */
    assert_true(assert_file_equals_memory(s, "big.json") > 8 * (size_t)EMITTER_BUFFER);
    assert_file_equals_memory(s, "big.pickle");
    snapshot_free(s);
}

/* Without a thread, every buffer is written inline, the caller's own handed back each time. */
static void
test_no_thread_to_be_had(void **state)
{
    (void)state;
    refuse_threads = true;
    char path[512];
    struct file_writer w;
    int fd = open_writer("inline", path, sizeof(path), &w);
    static unsigned char own[EMITTER_BUFFER];
    unsigned char *buf = own;
    size_t offset = 0;
    hand_over(&w, &buf, &offset, 5);
    assert_false(w.threaded);
    assert_ptr_equal(buf, own);
    assert_int_equal(file_writer_close(&w), 0);
    assert_int_equal(close(fd), 0);
    assert_pattern_file(path, offset);

    /* And a whole snapshot, byte for byte what memory gets. */
    struct snapshot *s = big_model();
    assert_file_equals_memory(s, "inline.json");
    snapshot_free(s);
    refuse_threads = false;
}

/* RLIMIT_FSIZE past the inline buffers: the writing thread's write fails with EFBIG (its
 * SIGXFSZ, blocked there, dies with it), the file is removed and the program lives on. */
static void
test_failure_on_the_writing_thread(void **state)
{
    (void)state;
    struct snapshot *s = big_model();
    struct rlimit old, small;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    small = old;
    small.rlim_cur = 3 * (rlim_t)EMITTER_BUFFER + 4096;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    char path[512], tmp[600];
    snprintf(path, sizeof(path), "%s/limited.json", dir);
    errno = 0;
    int rc = snapshot_write_file(path, s, SNAPSHOT_FORMAT_AUTO, FILE_PUBLISH_REPLACE, NULL, 0);
    int err = errno;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    assert_int_equal(rc, -CUPROF_EIO);
    assert_int_equal(err, EFBIG);
    assert_int_not_equal(access(path, F_OK), 0);
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    assert_int_not_equal(access(tmp, F_OK), 0);
    sigset_t pending;
    assert_int_equal(sigpending(&pending), 0);
    assert_int_equal(sigismember(&pending, SIGXFSZ), 0);

    /* The same writer afterwards: nothing kept from the failure. */
    assert_int_equal(
        snapshot_write_file(path, s, SNAPSHOT_FORMAT_AUTO, FILE_PUBLISH_REPLACE, NULL, 0), 0);
    unlink(path);
    snapshot_free(s);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buffers_in_order),
        cmocka_unit_test(test_files_equal_memory),
        cmocka_unit_test(test_no_thread_to_be_had),
        cmocka_unit_test(test_failure_on_the_writing_thread),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}
