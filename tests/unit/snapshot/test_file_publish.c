/* test_file_publish.c: snapshot/file_publish.h: the exclusive temporary file (mode 0600, never an
 * existing name), a new name that never replaces anything (a file, a link, a dangling link, a
 * FIFO) through renameat2, then through link(2) and the last resort where the file system lacks
 * each (renameat2 and link wrapped to refuse), and the exact name that replaces only a regular
 * file or a link's entry. */
#include <errno.h>
#include <fcntl.h>
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

#include "allocator/cuprof_errors.h"
#include "snapshot/file_publish.h"

/* What the wrapped calls answer: 0 passes to the real call, else fail with that errno. */
static int renameat2_errno, link_errno;

int __real_renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath,
                     unsigned int flags);
int __real_link(const char *oldpath, const char *newpath);

int
__wrap_renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath,
                 unsigned int flags)
{
    if (renameat2_errno != 0) {
        errno = renameat2_errno;
        return -1;
    }
    return __real_renameat2(olddirfd, oldpath, newdirfd, newpath, flags);
}

int
__wrap_link(const char *oldpath, const char *newpath)
{
    if (link_errno != 0) {
        errno = link_errno;
        return -1;
    }
    return __real_link(oldpath, newpath);
}

static char dir[] = "/tmp/cuprof-publish-XXXXXX";

static void
path_in(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", dir, name);
}

static void
write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void
expect_content(const char *path, const char *text)
{
    char buf[256] = "";
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    assert_string_equal(buf, text);
}

/* A finished temporary file next to `final` holding `text`; its name goes into temp. */
static void
make_temp(const char *final, const char *text, char *temp, size_t len)
{
    int fd = file_publish_open_temp(final, temp, len);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static int
setup(void **state)
{
    (void)state;
    strcpy(dir, "/tmp/cuprof-publish-XXXXXX");
    return mkdtemp(dir) == NULL ? -1 : 0;
}

static int
teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    renameat2_errno = link_errno = 0;
    return system(cmd) == 0 ? 0 : -1;
}

static void
test_temp_is_exclusive_and_private(void **state)
{
    (void)state;
    char final[256], temp[300], temp2[300];
    path_in(final, sizeof(final), "snap.pickle");
    mode_t old = umask(0);
    int fd = file_publish_open_temp(final, temp, sizeof(temp));
    int fd2 = file_publish_open_temp(final, temp2, sizeof(temp2));
    umask(old);
    assert_true(fd >= 0 && fd2 >= 0);
    assert_string_not_equal(temp, temp2);
    char prefix[300];
    snprintf(prefix, sizeof(prefix), "%s/.cuprof-%ld-", dir, (long)getpid());
    assert_memory_equal(temp, prefix, strlen(prefix));
    assert_string_equal(temp + strlen(temp) - 4, ".tmp");
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0600); /* even under umask 0 */
    assert_true((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
    close(fd);
    close(fd2);
    char too_long[5000];
    memset(too_long, 'a', sizeof(too_long) - 1);
    too_long[sizeof(too_long) - 1] = '\0';
    too_long[sizeof(too_long) - 10] = '/'; /* a directory name longer than temp holds */
    errno = 0;
    assert_int_equal(file_publish_open_temp(too_long, temp, sizeof(temp)), -1);
    assert_int_equal(errno, ENAMETOOLONG);
}

/* A program ended while a snapshot is written: the temporary file in flight goes, a published or
 * discarded one is never touched again. */
static void
test_unfinished_removed(void **state)
{
    (void)state;
    char final[256], temp[300], chosen[300];
    path_in(final, sizeof(final), "snap.pickle");
    int fd = file_publish_open_temp(final, temp, sizeof(temp));
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "x", 1), 1);
    file_publish_remove_unfinished();
    assert_int_equal(access(temp, F_OK), -1);
    assert_int_equal(write(fd, "y", 1), 1); /* the descriptor stays valid */
    close(fd);
    file_publish_remove_unfinished(); /* nothing in flight: nothing happens */

    fd = file_publish_open_temp(final, temp, sizeof(temp));
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(file_publish(temp, final, FILE_PUBLISH_NEW_NAME, chosen, sizeof(chosen)), 0);
    file_publish_remove_unfinished();
    assert_int_equal(access(final, F_OK), 0);

    fd = file_publish_open_temp(final, temp, sizeof(temp));
    assert_true(fd >= 0);
    close(fd);
    file_publish_discard(temp);
    assert_int_equal(access(temp, F_OK), -1);
    /* Someone else's file at that name afterwards is not cuprof's to remove. */
    int other = open(temp, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(other >= 0);
    close(other);
    file_publish_remove_unfinished();
    assert_int_equal(access(temp, F_OK), 0);
    unlink(temp);
}

/* The fallback folder is $TMPDIR only when that is an absolute path to a folder; the name is the
 * path's last component there. */
static void
test_fallback_folder(void **state)
{
    (void)state;
    char out[300], afile[256], joined[300];
    const char *saved = getenv("TMPDIR");
    char kept[4096] = "";
    if (saved != NULL)
        snprintf(kept, sizeof(kept), "%s", saved);
    setenv("TMPDIR", dir, 1);
    file_publish_fallback_folder(out, sizeof(out));
    assert_string_equal(out, dir);
    path_in(afile, sizeof(afile), "afile");
    int fd = open(afile, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    close(fd);
    const char *refused[] = {afile, "relative/dir", "", "/nonexistent-cuprof-folder"};
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        setenv("TMPDIR", refused[i], 1);
        file_publish_fallback_folder(out, sizeof(out));
        assert_string_equal(out, "/tmp");
    }
    unsetenv("TMPDIR");
    file_publish_fallback_folder(out, sizeof(out));
    assert_string_equal(out, "/tmp");
    if (saved != NULL)
        setenv("TMPDIR", kept, 1);
    assert_true(file_publish_in_folder("/tmp", "a/b/snap-3.pickle", joined, sizeof(joined)));
    assert_string_equal(joined, "/tmp/snap-3.pickle");
    assert_true(file_publish_in_folder("/x/", "snap.json", joined, sizeof(joined)));
    assert_string_equal(joined, "/x/snap.json");
    assert_false(file_publish_in_folder("/tmp", "a/b/", joined, sizeof(joined)));
    assert_false(file_publish_in_folder("/tmp", "a/long-name.pickle", joined, 8));
}

/* Each existing kind of entry at the name is kept; the file takes the first free variant. */
static void
check_new_name_keeps_everything(void)
{
    char final[256], v1[256], v2[256], v3[256], v4[256], victim[256], temp[300], chosen[300];
    path_in(final, sizeof(final), "snap.pickle");
    path_in(v1, sizeof(v1), "snap.1.pickle");
    path_in(v2, sizeof(v2), "snap.2.pickle");
    path_in(v3, sizeof(v3), "snap.3.pickle");
    path_in(v4, sizeof(v4), "snap.4.pickle");
    path_in(victim, sizeof(victim), "victim");
    write_file(victim, "victim");
    write_file(final, "older");
    assert_int_equal(symlink(victim, v1), 0);
    assert_int_equal(symlink("/nonexistent/target", v2), 0);
    assert_int_equal(mkfifo(v3, 0600), 0);
    make_temp(final, "new", temp, sizeof(temp));
    assert_int_equal(file_publish(temp, final, FILE_PUBLISH_NEW_NAME, chosen, sizeof(chosen)), 0);
    assert_string_equal(chosen, v4);
    expect_content(v4, "new");
    expect_content(final, "older");
    expect_content(victim, "victim");
    struct stat st;
    assert_int_equal(lstat(v1, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(lstat(v2, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(lstat(v3, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    assert_int_equal(access(temp, F_OK), -1); /* the temporary name is gone */
}

static void
test_new_name_renameat2(void **state)
{
    (void)state;
    check_new_name_keeps_everything();
}

static void
test_new_name_link_fallback(void **state)
{
    (void)state;
    renameat2_errno = EINVAL; /* a file system without RENAME_NOREPLACE */
    check_new_name_keeps_everything();
}

static void
test_new_name_last_resort(void **state)
{
    (void)state;
    renameat2_errno = EINVAL;
    link_errno = EPERM; /* and without hard links (vfat) */
    check_new_name_keeps_everything();
}

static void
test_new_name_other_errors(void **state)
{
    (void)state;
    char final[256], temp[300];
    path_in(final, sizeof(final), "x.json");
    make_temp(final, "x", temp, sizeof(temp));
    renameat2_errno = EACCES;
    errno = 0;
    assert_int_equal(file_publish(temp, final, FILE_PUBLISH_NEW_NAME, NULL, 0), -CUPROF_EIO);
    assert_int_equal(errno, EACCES);
    assert_int_equal(access(temp, F_OK), 0); /* left for the caller to remove */
    assert_int_equal(access(final, F_OK), -1);
}

static void
test_replace(void **state)
{
    (void)state;
    char final[256], fifo[256], victim[256], link_path[256], temp[300], chosen[300];
    path_in(final, sizeof(final), "exact.pickle");
    path_in(fifo, sizeof(fifo), "fifo.pickle");
    path_in(victim, sizeof(victim), "victim");
    path_in(link_path, sizeof(link_path), "link.pickle");
    write_file(final, "older");
    write_file(victim, "victim");
    assert_int_equal(symlink(victim, link_path), 0);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    /* A regular file is replaced, as PyTorch's _dump_snapshot replaces it. */
    make_temp(final, "new", temp, sizeof(temp));
    assert_int_equal(file_publish(temp, final, FILE_PUBLISH_REPLACE, chosen, sizeof(chosen)), 0);
    assert_string_equal(chosen, final);
    expect_content(final, "new");
    /* A link's entry is replaced; what it points at is not written. */
    make_temp(link_path, "via link", temp, sizeof(temp));
    assert_int_equal(file_publish(temp, link_path, FILE_PUBLISH_REPLACE, NULL, 0), 0);
    struct stat st;
    assert_int_equal(lstat(link_path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    expect_content(victim, "victim");
    /* A FIFO is never replaced. */
    make_temp(fifo, "x", temp, sizeof(temp));
    errno = 0;
    assert_int_equal(file_publish(temp, fifo, FILE_PUBLISH_REPLACE, NULL, 0), -CUPROF_EIO);
    assert_int_equal(errno, EEXIST);
    assert_int_equal(lstat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    unlink(temp);
}

static void
test_variants(void **state)
{
    (void)state;
    char out[64];
    assert_int_equal(file_publish_variant("a/b.pickle", 0, out, sizeof(out)), 0);
    assert_string_equal(out, "a/b.pickle");
    assert_int_equal(file_publish_variant("a/b.pickle", 2, out, sizeof(out)), 0);
    assert_string_equal(out, "a/b.2.pickle");
    assert_int_equal(file_publish_variant("a.d/b", 1, out, sizeof(out)), 0);
    assert_string_equal(out, "a.d/b.1");
    assert_int_equal(file_publish_variant("x.tar.json", 12, out, sizeof(out)), 0);
    assert_string_equal(out, "x.tar.12.json");
    assert_int_equal(file_publish_variant("abcdef.pickle", 1, out, 10), -CUPROF_EINVAL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_temp_is_exclusive_and_private, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unfinished_removed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fallback_folder, setup, teardown),
        cmocka_unit_test_setup_teardown(test_new_name_renameat2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_new_name_link_fallback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_new_name_last_resort, setup, teardown),
        cmocka_unit_test_setup_teardown(test_new_name_other_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replace, setup, teardown),
        cmocka_unit_test(test_variants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
