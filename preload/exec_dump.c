/* exec_dump.c: the exec family as libcuprof exports it: the image's snapshot before an exec that
 *   will run (exec_dump.h). */
#include "preload/exec_dump.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload/lifecycle.h"
#include "preload/real_dl.h"

enum exec_dump_fn { EXEC_VE, EXEC_V, EXEC_VP, EXEC_VPE, EXEC_FEXECVE, EXEC_VEAT, EXEC_FNS };
static const char *const exec_dump_names[EXEC_FNS] = {"execve",  "execv",   "execvp",
                                                      "execvpe", "fexecve", "execveat"};
static _Atomic(void *) exec_dump_next[EXEC_FNS];

void
exec_dump_start(void)
{
    for (int i = 0; i < EXEC_FNS; i++)
        atomic_store(&exec_dump_next[i], real_dl_dlsym(RTLD_NEXT, exec_dump_names[i]));
}

/* The next definition; looked up here only when an exec comes before the constructor. */
static void *
exec_dump_next_fn(enum exec_dump_fn which)
{
    void *fn = atomic_load(&exec_dump_next[which]);
    if (fn == NULL) {
        fn = real_dl_dlsym(RTLD_NEXT, exec_dump_names[which]);
        atomic_store(&exec_dump_next[which], fn);
    }
    return fn;
}

/* A regular file that exec may run: `path` relative to `dirfd` (fstatat's `at_flags`), or with
 * AT_EMPTY_PATH and "" the file open at `dirfd`, whose mode bits alone are asked. */
static bool
exec_dump_file_runs(int dirfd, const char *path, int at_flags)
{
    struct stat st;
    if (path == NULL || fstatat(dirfd, path, &st, at_flags) != 0 || !S_ISREG(st.st_mode))
        return false;
    if (path[0] == '\0')
        return (st.st_mode & (S_IXUSR | S_IXGRP | S_IXOTH)) != 0;
    return faccessat(dirfd, path, X_OK, AT_EACCESS) == 0;
}

/* What the p forms run: `file` itself when it names a folder, else the first entry of PATH (glibc's
 * default when unset; an empty entry is the working folder) that holds a file exec may run. */
static bool
exec_dump_found_on_path(const char *file)
{
    if (file == NULL || file[0] == '\0')
        return false;
    if (strchr(file, '/') != NULL)
        return exec_dump_file_runs(AT_FDCWD, file, 0);
    const char *search = getenv("PATH");
    if (search == NULL)
        search = "/bin:/usr/bin";
    size_t file_len = strlen(file);
    char candidate[PATH_MAX];
    for (const char *dir = search;;) {
        const char *end = strchr(dir, ':');
        size_t dir_len = end != NULL ? (size_t)(end - dir) : strlen(dir);
        if (dir_len + 1 + file_len < sizeof candidate) {
            size_t at = 0;
            if (dir_len > 0) {
                memcpy(candidate, dir, dir_len);
                candidate[dir_len] = '/';
                at = dir_len + 1;
            }
            memcpy(candidate + at, file, file_len + 1);
            if (exec_dump_file_runs(AT_FDCWD, candidate, 0))
                return true;
        }
        if (end == NULL)
            return false;
        dir = end + 1;
    }
}

/* After an exec returned (it failed): the dumps go on; errno stays the exec's. */
static int
exec_dump_failed(bool held, int rc)
{
    if (held) {
        int saved_errno = errno;
        lifecycle_exec_failed();
        errno = saved_errno;
    }
    return rc;
}

/* Casts a looked-up pointer to its function type (ISO C has no direct conversion). */
#define EXEC_DUMP_NEXT(type, which, var)                                                           \
    type var;                                                                                      \
    do {                                                                                           \
        void *sym_ = exec_dump_next_fn(which);                                                     \
        memcpy(&var, &sym_, sizeof var);                                                           \
    } while (0)

typedef int (*exec_dump_ve_fn)(const char *, char *const[], char *const[]);
typedef int (*exec_dump_v_fn)(const char *, char *const[]);
typedef int (*exec_dump_fexecve_fn)(int, char *const[], char *const[]);
typedef int (*exec_dump_veat_fn)(int, const char *, char *const[], char *const[], int);

int
exec_dump_execve(const char *path, char *const argv[], char *const envp[])
{
    bool held = lifecycle_image_end_due() && exec_dump_file_runs(AT_FDCWD, path, 0) &&
                lifecycle_before_exec();
    EXEC_DUMP_NEXT(exec_dump_ve_fn, EXEC_VE, next);
    int rc = next != NULL ? next(path, argv, envp) : (int)syscall(SYS_execve, path, argv, envp);
    return exec_dump_failed(held, rc);
}

int
exec_dump_execv(const char *path, char *const argv[])
{
    bool held = lifecycle_image_end_due() && exec_dump_file_runs(AT_FDCWD, path, 0) &&
                lifecycle_before_exec();
    EXEC_DUMP_NEXT(exec_dump_v_fn, EXEC_V, next);
    int rc = next != NULL ? next(path, argv) : (errno = ENOSYS, -1);
    return exec_dump_failed(held, rc);
}

int
exec_dump_execvp(const char *file, char *const argv[])
{
    bool held =
        lifecycle_image_end_due() && exec_dump_found_on_path(file) && lifecycle_before_exec();
    EXEC_DUMP_NEXT(exec_dump_v_fn, EXEC_VP, next);
    int rc = next != NULL ? next(file, argv) : (errno = ENOSYS, -1);
    return exec_dump_failed(held, rc);
}

int
exec_dump_execvpe(const char *file, char *const argv[], char *const envp[])
{
    bool held =
        lifecycle_image_end_due() && exec_dump_found_on_path(file) && lifecycle_before_exec();
    EXEC_DUMP_NEXT(exec_dump_ve_fn, EXEC_VPE, next);
    int rc = next != NULL ? next(file, argv, envp) : (errno = ENOSYS, -1);
    return exec_dump_failed(held, rc);
}

int
exec_dump_fexecve(int fd, char *const argv[], char *const envp[])
{
    bool held = lifecycle_image_end_due() && exec_dump_file_runs(fd, "", AT_EMPTY_PATH) &&
                lifecycle_before_exec();
    EXEC_DUMP_NEXT(exec_dump_fexecve_fn, EXEC_FEXECVE, next);
    int rc = next != NULL ? next(fd, argv, envp) : (errno = ENOSYS, -1);
    return exec_dump_failed(held, rc);
}

int
exec_dump_execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
    bool held = lifecycle_image_end_due() &&
                exec_dump_file_runs(dirfd, path, flags & (AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW)) &&
                lifecycle_before_exec();
    EXEC_DUMP_NEXT(exec_dump_veat_fn, EXEC_VEAT, next);
    /* glibc before 2.34 has no execveat: the system call itself. */
    int rc = next != NULL ? next(dirfd, path, argv, envp, flags)
                          : (int)syscall(SYS_execveat, dirfd, path, argv, envp, flags);
    return exec_dump_failed(held, rc);
}
