/* dumper.c: snapshot triggers and the one function that writes a snapshot file. */
#include "preload/dumper.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "allocator/cuprof_errors.h"
#include "preload/config.h"
#include "preload/path_template.h"
#include "preload/runtime.h"
#include "preload/dumper_write.h"

static pthread_mutex_t dumper_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t dumper_seq; /* protected by dumper_lock: %n of the next template dump */

/* Self-pipe: the handler writes a byte to dumper_pipe_wr (non-blocking); the dumper thread reads
 * dumper_pipe_rd. Replaced in a forked child so parent and child never share a trigger. */
static atomic_int dumper_pipe_rd = -1;
static atomic_int dumper_pipe_wr = -1;
static struct sigaction dumper_old_action; /* written before our handler is installed */
static struct cuprof_runtime *dumper_rt;   /* written once by dumper_start */
/* Set at exit under dumper_lock: a signal dump started later could be cut off by _exit and leave
 * its temporary file behind. */
static bool dumper_exiting;

/* Async-signal-safe only: one write(2), then the program's own handler. */
static void
dumper_on_signal(int sig, siginfo_t *info, void *uctx)
{
    int saved_errno = errno;
    int fd = atomic_load_explicit(&dumper_pipe_wr, memory_order_relaxed);
    if (fd >= 0) {
        char byte = 1;
        ssize_t written = write(fd, &byte, 1); /* a full pipe already holds a pending dump */
        (void)written;
    }
    errno = saved_errno;
    if ((dumper_old_action.sa_flags & SA_SIGINFO) != 0) {
        if (dumper_old_action.sa_sigaction != NULL)
            dumper_old_action.sa_sigaction(sig, info, uctx);
    } else if (dumper_old_action.sa_handler != SIG_DFL && dumper_old_action.sa_handler != SIG_IGN &&
               dumper_old_action.sa_handler != NULL) {
        dumper_old_action.sa_handler(sig);
    }
    /* A default or ignored disposition is not chained: the default of SIGUSR1 would kill the
     * program whose snapshot was asked for. */
}

static int dumper_dump_async(struct cuprof_runtime *rt);

static void *
dumper_thread(void *arg)
{
    int fd = (int)(intptr_t)arg;
    for (;;) {
        char bytes[64];
        ssize_t n = read(fd, bytes, sizeof bytes); /* several pending signals: one dump */
        if (n > 0) {
            int rc = dumper_dump_async(dumper_rt); /* a failure was logged */
            (void)rc;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else {
            return NULL; /* the pipe was closed */
        }
    }
}

static bool
dumper_make_pipe(void)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return false;
    int flags = fcntl(fds[1], F_GETFL);
    if (flags < 0 || fcntl(fds[1], F_SETFL, flags | O_NONBLOCK) != 0) {
        close(fds[0]);
        close(fds[1]);
        return false;
    }
    atomic_store(&dumper_pipe_rd, fds[0]);
    atomic_store(&dumper_pipe_wr, fds[1]);
    return true;
}

/* Starts the reader with every signal blocked, so no signal is ever delivered to it. */
static bool
dumper_start_thread(void)
{
    sigset_t all, old;
    pthread_t thread;
    pthread_attr_t attr;
    int fd = atomic_load(&dumper_pipe_rd);
    if (fd < 0 || pthread_attr_init(&attr) != 0)
        return false;
    (void)pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&thread, &attr, dumper_thread, (void *)(intptr_t)fd);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc == 0)
        (void)pthread_setname_np(thread, "cuprof-dumper");
    return rc == 0;
}

void
dumper_start(struct cuprof_runtime *rt)
{
    dumper_rt = rt;
    if ((rt->config->dump_on & CONFIG_DUMP_ON_SIGNAL) == 0)
        return;
    if (!dumper_make_pipe() || !dumper_start_thread()) {
        runtime_log("cuprof: cannot start the dumper thread (%s): CUPROF_SIGNAL is not handled",
                    strerror(errno));
        return;
    }
    struct sigaction action;
    memset(&action, 0, sizeof action);
    if (sigaction(rt->config->signal, NULL, &dumper_old_action) != 0)
        return;
    action.sa_sigaction = dumper_on_signal;
    action.sa_mask = dumper_old_action.sa_mask;
    action.sa_flags = SA_SIGINFO | SA_RESTART | (dumper_old_action.sa_flags & SA_ONSTACK);
    if (sigaction(rt->config->signal, &action, NULL) != 0)
        runtime_log("cuprof: cannot install the handler of signal %d: %s", rt->config->signal,
                    strerror(errno));
}

void
dumper_fork_prepare(void)
{
    pthread_mutex_lock(&dumper_lock);
}

void
dumper_fork_parent(void)
{
    pthread_mutex_unlock(&dumper_lock);
}

void
dumper_fork_child(void)
{
    /* Only async-signal-safe calls: the child of a threaded parent may not do more yet. */
    int rd = atomic_exchange(&dumper_pipe_rd, -1);
    int wr = atomic_exchange(&dumper_pipe_wr, -1);
    if (rd >= 0) {
        close(rd);
        close(wr);
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) == 0) {
            (void)fcntl(fds[1], F_SETFL, O_NONBLOCK);
            atomic_store(&dumper_pipe_rd, fds[0]);
            atomic_store(&dumper_pipe_wr, fds[1]);
        }
    }
    dumper_seq = 0;
    dumper_exiting = false;
    pthread_mutex_unlock(&dumper_lock);
}

void
dumper_resume(struct cuprof_runtime *rt)
{
    (void)rt;
    if (atomic_load(&dumper_pipe_rd) >= 0 && !dumper_start_thread())
        runtime_log("cuprof: cannot restart the dumper thread in the forked child");
}

static void
dumper_log_failure(const char *path, int rc)
{
    runtime_log("cuprof: snapshot to %s failed: %s", path,
                rc == -CUPROF_EHOSTMEM ? "out of host memory"
                : errno != 0           ? strerror(errno)
                                       : "write error");
}

/* The hidden temporary name next to `final`, with the same extension (it picks the format). */
static int
dumper_temp_name(const char *final, uint64_t seq, char *out, size_t out_len)
{
    const char *slash = strrchr(final, '/');
    const char *base = slash == NULL ? final : slash + 1;
    const char *dot = strrchr(base, '.');
    int n = snprintf(out, out_len, "%.*s.cuprof-tmp-%ld-%llu%s", (int)(base - final), final,
                     (long)getpid(), (unsigned long long)seq, dot == NULL ? "" : dot);
    return n < 0 || (size_t)n >= out_len ? -CUPROF_EINVAL : 0;
}

/* Gives the finished temporary file the first free name: link(2) fails with EEXIST instead of
 * replacing, so two processes (or dumps) never overwrite each other's snapshot. */
static int
dumper_publish(const char *temp, const char *final, char *chosen, size_t chosen_len)
{
    for (unsigned n = 0; n < 100000; n++) {
        if (path_template_variant(final, n, chosen, chosen_len) != 0)
            return -CUPROF_EINVAL;
        if (link(temp, chosen) == 0) {
            unlink(temp);
            return 0;
        }
        if (errno == EEXIST)
            continue;
        if (errno != EPERM && errno != ENOTSUP && errno != EOPNOTSUPP)
            return -CUPROF_EIO;
        /* A file system without hard links: check, then rename (racy only between processes). */
        if (access(chosen, F_OK) == 0)
            continue;
        return rename(temp, chosen) == 0 ? 0 : -CUPROF_EIO;
    }
    errno = EEXIST;
    return -CUPROF_EIO;
}

static int
dumper_dump_template(struct cuprof_runtime *rt, char *written, size_t written_len)
{
    char final[PATH_MAX], temp[PATH_MAX + 64], chosen[PATH_MAX + 16];
    uint64_t seq = dumper_seq++;
    if (path_template_expand(rt->config->snapshot, seq, (int64_t)time(NULL), final, sizeof final) !=
            0 ||
        dumper_temp_name(final, seq, temp, sizeof temp) != 0) {
        runtime_log("cuprof: snapshot path from CUPROF_SNAPSHOT is too long");
        return -CUPROF_EINVAL;
    }
    errno = 0;
    int rc = dumper_write_snapshot(rt, temp);
    if (rc != 0) {
        dumper_log_failure(final, rc);
        return rc;
    }
    errno = 0;
    rc = dumper_publish(temp, final, chosen, sizeof chosen);
    if (rc != 0) {
        dumper_log_failure(final, rc);
        unlink(temp);
        return rc;
    }
    if (runtime_log_info())
        runtime_log("cuprof: snapshot written to %s", chosen);
    if (written != NULL)
        snprintf(written, written_len, "%s", chosen);
    return 0;
}

/* A write past RLIMIT_FSIZE raises SIGXFSZ, whose default action kills the program on whose
 * thread the dump runs (exit, OOM, cuprof_dump_snapshot). Blocked around the dump, the signal
 * stays pending and write(2) fails with EFBIG, which the dump reports as one line. */
static bool
dumper_block_xfsz(sigset_t *old)
{
    sigset_t xfsz, pending;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    pthread_sigmask(SIG_BLOCK, &xfsz, old);
    return sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ) == 1;
}

/* Takes back a SIGXFSZ that our own write raised (one that was pending before is the program's
 * and stays), then restores the thread's mask. */
static void
dumper_restore_xfsz(const sigset_t *old, bool was_pending)
{
    int saved_errno = errno;
    sigset_t xfsz, pending;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    if (!was_pending && sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ) == 1) {
        const struct timespec now = {0, 0};
        while (sigtimedwait(&xfsz, NULL, &now) < 0 && errno == EINTR)
            ;
    }
    pthread_sigmask(SIG_SETMASK, old, NULL);
    errno = saved_errno;
}

/* One dump under the dump lock, with SIGXFSZ blocked; `async`: the dumper thread's, which is
 * skipped once the program is exiting. */
static int
dumper_dump_locked(struct cuprof_runtime *rt, const char *path, bool async, char *written,
                   size_t written_len)
{
    int rc = 0;
    if (rt == NULL)
        return -CUPROF_EINVAL;
    sigset_t old_mask;
    bool xfsz_was_pending = dumper_block_xfsz(&old_mask);
    pthread_mutex_lock(&dumper_lock);
    if (async && dumper_exiting) {
        /* the program is exiting: the exit dump (if any) has the newest state */
        rc = -CUPROF_EINVAL;
    } else if (path == NULL) {
        rc = dumper_dump_template(rt, written, written_len);
    } else {
        errno = 0;
        rc = dumper_write_snapshot(rt, path);
        if (rc != 0)
            dumper_log_failure(path, rc);
        else if (runtime_log_info())
            runtime_log("cuprof: snapshot written to %s", path);
        if (rc == 0 && written != NULL)
            snprintf(written, written_len, "%s", path);
    }
    pthread_mutex_unlock(&dumper_lock);
    dumper_restore_xfsz(&old_mask, xfsz_was_pending);
    return rc;
}

int
dumper_dump(struct cuprof_runtime *rt, const char *path)
{
    return dumper_dump_locked(rt, path, false, NULL, 0);
}

int
dumper_dump_named(struct cuprof_runtime *rt, const char *path, char *written, size_t written_len)
{
    return dumper_dump_locked(rt, path, true, written, written_len);
}

static int
dumper_dump_async(struct cuprof_runtime *rt)
{
    return dumper_dump_locked(rt, NULL, true, NULL, 0);
}

void
dumper_stop_async(void)
{
    pthread_mutex_lock(&dumper_lock); /* waits for a signal dump in flight */
    dumper_exiting = true;
    pthread_mutex_unlock(&dumper_lock);
}
