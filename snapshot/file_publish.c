/* file_publish.c: exclusive temporary files and publication that never replaces by surprise. */
#include "snapshot/file_publish.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "allocator/cuprof_errors.h"

#define FILE_PUBLISH_MAX_VARIANTS 100000

/* The newest temporary file that is neither published nor removed yet: a program ended while a
 * snapshot is written takes it away (file_publish_remove_unfinished). One slot: a process writes
 * one snapshot at a time. */
static char unfinished_name[PATH_MAX + 64];
static atomic_bool unfinished;

int
file_publish_variant(const char *path, unsigned n, char *out, size_t out_len)
{
    if (n == 0) {
        size_t len = strlen(path);
        if (len >= out_len)
            return -CUPROF_EINVAL;
        memcpy(out, path, len + 1);
        return 0;
    }
    /* The extension starts at the last '.' of the last path component. */
    const char *base = strrchr(path, '/');
    base = base == NULL ? path : base + 1;
    const char *dot = strrchr(base, '.');
    if (dot == NULL)
        dot = path + strlen(path);
    int written = snprintf(out, out_len, "%.*s.%u%s", (int)(dot - path), path, n, dot);
    if (written < 0 || (size_t)written >= out_len)
        return -CUPROF_EINVAL;
    return 0;
}

int
file_publish_open_temp(const char *final, char *temp, size_t temp_len)
{
    const char *slash = strrchr(final, '/');
    int dir_len = slash == NULL ? 0 : (int)(slash - final) + 1;
    static const char suffix[] = ".tmp";
    int n = snprintf(temp, temp_len, "%.*s.cuprof-%ld-XXXXXX%s", dir_len, final, (long)getpid(),
                     suffix);
    if (n < 0 || (size_t)n >= temp_len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    /* glibc: O_RDWR|O_CREAT|O_EXCL, mode 0600, a name from getrandom; retried on a collision. */
    int fd = mkostemps(temp, (int)sizeof(suffix) - 1, O_CLOEXEC);
    if (fd >= 0 && (size_t)n < sizeof unfinished_name) {
        atomic_store(&unfinished, false);
        memcpy(unfinished_name, temp, (size_t)n + 1);
        atomic_store_explicit(&unfinished, true, memory_order_release);
    }
    return fd;
}

void
file_publish_fallback_folder(char *out, size_t out_len)
{
    const char *tmpdir = secure_getenv("TMPDIR");
    struct stat st;
    if (tmpdir == NULL || tmpdir[0] != '/' || strlen(tmpdir) >= out_len || stat(tmpdir, &st) != 0 ||
        !S_ISDIR(st.st_mode))
        tmpdir = "/tmp";
    snprintf(out, out_len, "%s", tmpdir);
}

bool
file_publish_in_folder(const char *folder, const char *path, char *out, size_t out_len)
{
    const char *slash = strrchr(path, '/');
    const char *name = slash == NULL ? path : slash + 1;
    size_t len = strlen(folder);
    int n = snprintf(out, out_len, "%s%s%s", folder, len > 0 && folder[len - 1] == '/' ? "" : "/",
                     name);
    return name[0] != '\0' && n > 0 && (size_t)n < out_len;
}

void
file_publish_discard(const char *temp)
{
    atomic_store(&unfinished, false);
    unlink(temp);
}

void
file_publish_remove_unfinished(void)
{
    if (atomic_exchange(&unfinished, false))
        unlink(unfinished_name);
}

/* One new name that nothing holds: the kernel refuses to replace (EEXIST) in one atomic step. */
static int
publish_no_replace(const char *temp, const char *name)
{
    if (renameat2(AT_FDCWD, temp, AT_FDCWD, name, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
        return -1;
    /* A file system without RENAME_NOREPLACE: link(2) refuses an existing name as well. */
    if (link(temp, name) == 0) {
        unlink(temp);
        return 0;
    }
    if (errno != EPERM && errno != ENOTSUP && errno != EOPNOTSUPP)
        return -1;
    /* Neither (vfat, some FUSE file systems): look, then rename; racy only against another
     * writer that appears between the two calls. */
    struct stat st;
    if (lstat(name, &st) == 0) {
        errno = EEXIST;
        return -1;
    }
    return rename(temp, name);
}

int
file_publish(const char *temp, const char *final, enum file_publish_mode mode, char *chosen,
             size_t chosen_len)
{
    if (mode == FILE_PUBLISH_REPLACE) {
        struct stat st;
        if (lstat(final, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
            errno = EEXIST; /* a device node, FIFO, socket or directory is never replaced */
            return -CUPROF_EIO;
        }
        if (rename(temp, final) != 0) /* replaces a link's entry, never follows it */
            return -CUPROF_EIO;
        atomic_store(&unfinished, false);
        if (chosen != NULL)
            snprintf(chosen, chosen_len, "%s", final);
        return 0;
    }
    char name[4096];
    for (unsigned n = 0; n < FILE_PUBLISH_MAX_VARIANTS; n++) {
        if (file_publish_variant(final, n, name, sizeof(name)) != 0) {
            errno = ENAMETOOLONG;
            return -CUPROF_EIO;
        }
        if (publish_no_replace(temp, name) == 0) {
            atomic_store(&unfinished, false);
            if (chosen != NULL)
                snprintf(chosen, chosen_len, "%s", name);
            return 0;
        }
        if (errno != EEXIST)
            return -CUPROF_EIO;
    }
    errno = EEXIST;
    return -CUPROF_EIO;
}
