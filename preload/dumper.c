/* dumper.c: snapshot triggers and the one function that writes a snapshot file. */
#include "preload/dumper.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "allocator/alloc_lock.h"
#include "allocator/cuprof_errors.h"
#include "preload/config.h"
#include "preload/control.h"
#include "preload/end_signals.h"
#include "preload/path_template.h"
#include "preload/snapshot_place.h"
#include "preload/runtime.h"
#include "preload/dump_signal.h"
#include "preload/helper_thread.h"
#include "preload/dumper_write.h"

static pthread_mutex_t dumper_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t dumper_seq; /* protected by dumper_lock: %n of the next template dump */

/* The signal handler wakes the dumper thread with sem_post (async-signal-safe): no descriptor a
 * program could close or reuse lies between them. Re-initialized in a forked child. */
static sem_t dumper_wake;
static atomic_bool dumper_armed; /* the semaphore is initialized and the thread was started */
/* The process the dumper thread runs in: a forked child has none until its first CUDA call, and
 * a signal can reach the child before its fork handler has run. */
static _Atomic pid_t dumper_thread_pid;
/* The signal that ends the program once its snapshot is written (end_signals.h), 0 if none. */
static atomic_int dumper_end_signal;
/* exit() called in a signal handler (dumper_exit_on_thread): 0 none, 1 the last dump without the
 * exit's own, 2 with it; the dumper thread posts dumper_exit_done once it is written. */
static atomic_int dumper_exit_request;
static sem_t dumper_exit_done;
/* Why that last dump is written ("" or "ended by abort"), a constant; set with the request. */
static _Atomic(const char *) dumper_exit_why;
/* True on the dumper thread: a dump there that ends the program (an abort inside it) must not
 * wait for itself. */
static _Thread_local bool dumper_on_dumper_thread __attribute__((tls_model("initial-exec")));
static struct cuprof_runtime *dumper_rt; /* written once by dumper_start */
/* Set at exit under dumper_lock: a signal dump started later could be cut off by _exit and leave
 * its temporary file behind. */
static bool dumper_exiting;
/* Under dumper_lock: the last snapshot (at exit, or of the ending signal) is written. */
static bool dumper_last_written;
/* Under dumper_lock, held across an exec: the cancellation state to give back if it fails. */
static int dumper_exec_cancel_state;

/* The dump lock, with this thread's cancellation off until dumper_unlock: a thread cancelled at a
 * write inside a dump would keep the lock forever, and every later dump, the exit's too, would
 * wait for it (the program would hang at exit). Counted in alloc_lock_depth, as cuprof's other
 * locks are, for an exit in a signal handler that interrupted a dump. Returns the state to give
 * back. */
static int
dumper_lock_uncancellable(void)
{
    int cancel_state = PTHREAD_CANCEL_ENABLE;
    (void)pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
    alloc_lock_depth++;
    pthread_mutex_lock(&dumper_lock);
    return cancel_state;
}

static void
dumper_unlock(int cancel_state)
{
    pthread_mutex_unlock(&dumper_lock);
    alloc_lock_depth--;
    (void)pthread_setcancelstate(cancel_state, NULL);
}

void
dumper_wake_to_dump(void)
{
    int saved_errno = errno;
    if (atomic_load_explicit(&dumper_armed, memory_order_relaxed))
        (void)sem_post(&dumper_wake); /* EOVERFLOW: plenty of dumps are pending already */
    errno = saved_errno;
}

bool
dumper_wake_to_end(int sig)
{
    if (atomic_load(&dumper_thread_pid) != getpid())
        return false;
    atomic_store(&dumper_end_signal, sig);
    int saved_errno = errno;
    bool woken = sem_post(&dumper_wake) == 0;
    errno = saved_errno;
    return woken;
}

static int dumper_dump_async(struct cuprof_runtime *rt);
static void dumper_end_program(struct cuprof_runtime *rt, int sig);
static void dumper_last_dump(struct cuprof_runtime *rt, bool exiting, const char *why);

static void *
dumper_thread(void *arg)
{
    (void)arg;
    dumper_on_dumper_thread = true;
    for (;;) {
        if (sem_wait(&dumper_wake) != 0)
            continue; /* EINTR: every signal is blocked here, but be safe */
        while (sem_trywait(&dumper_wake) == 0) {
            /* several signals pending: one dump has the newest state for all of them */
        }
        int exit_request = atomic_exchange(&dumper_exit_request, 0);
        if (exit_request != 0) {
            /* An ending signal that came first gets this snapshot (as at dumper_exit). */
            bool write = exit_request == 2 || atomic_load(&dumper_end_signal) != 0;
            dumper_write_without_device_calls(); /* the handler may have interrupted one */
            dumper_last_dump(dumper_rt, true, write ? atomic_load(&dumper_exit_why) : NULL);
            (void)sem_post(&dumper_exit_done);
            continue;
        }
        int end = atomic_load(&dumper_end_signal);
        if (end != 0)
            dumper_end_program(dumper_rt, end); /* does not return */
        int rc = dumper_dump_async(dumper_rt);  /* a failure was logged */
        (void)rc;
    }
    return NULL;
}

/* Starts the waiting thread (helper_thread.h: every signal blocked, running on return). */
static bool
dumper_start_thread(void)
{
    int rc = helper_thread_start("cuprof-dumper", dumper_thread, NULL);
    if (rc == 0)
        atomic_store(&dumper_thread_pid, getpid());
    errno = rc;
    return rc == 0;
}

void
dumper_start(struct cuprof_runtime *rt)
{
    dumper_rt = rt;
    unsigned dump_on = rt->config->dump_on;
    if ((dump_on & (CONFIG_DUMP_ON_EXIT | CONFIG_DUMP_ON_SIGNAL | CONFIG_DUMP_ON_OOM |
                    CONFIG_DUMP_ON_TERM)) != 0)
        snapshot_place_start(rt->config->snapshot);
    if ((dump_on & (CONFIG_DUMP_ON_SIGNAL | CONFIG_DUMP_ON_TERM)) == 0)
        return;
    if (sem_init(&dumper_wake, 0, 0) != 0 || sem_init(&dumper_exit_done, 0, 0) != 0 ||
        !dumper_start_thread()) {
        runtime_log("cuprof: cannot start the dumper thread (%s): neither CUPROF_SIGNAL nor "
                    "SIGTERM, SIGINT and SIGHUP write a snapshot",
                    strerror(errno));
        return;
    }
    atomic_store(&dumper_armed, true);
    if ((dump_on & CONFIG_DUMP_ON_TERM) != 0)
        end_signals_start();
    if ((dump_on & CONFIG_DUMP_ON_SIGNAL) != 0 && !dump_signal_start(rt->config->signal))
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
    /* The child has one thread: the parent's dumper thread and its pending wake-ups stay there. */
    if (atomic_load(&dumper_armed)) {
        (void)sem_init(&dumper_wake, 0, 0);
        (void)sem_init(&dumper_exit_done, 0, 0);
    }
    atomic_store(&dumper_exit_request, 0);
    atomic_store(&dumper_thread_pid, 0);
    atomic_store(&dumper_end_signal, 0);
    dumper_seq = 0;
    dumper_exiting = false;
    dumper_last_written = false;
    pthread_mutex_unlock(&dumper_lock);
}

void
dumper_resume(struct cuprof_runtime *rt)
{
    (void)rt;
    if (atomic_load(&dumper_armed) && !dumper_start_thread())
        runtime_log("cuprof: cannot restart the dumper thread in the forked child");
}

/* Why a write failed, from its result and errno. */
static const char *
dumper_failure_reason(int rc)
{
    return rc == -CUPROF_EHOSTMEM ? "out of host memory"
           : errno == EEXIST      ? "a file that is not a regular file holds that name"
           : errno != 0           ? strerror(errno)
                                  : "write error";
}

static void
dumper_log_failure(const char *path, int rc)
{
    runtime_log("cuprof: snapshot to %s failed: %s", path, dumper_failure_reason(rc));
}

/* "written to" with the name the file got (and why it was written), copied to `written`. */
static int
dumper_write_logged_ok(const char *chosen, char *written, size_t written_len, const char *why)
{
    if (runtime_log_info())
        runtime_log("cuprof: snapshot written to %s%s%s%s", chosen, why != NULL ? " (" : "",
                    why != NULL ? why : "", why != NULL ? ")" : "");
    if (written != NULL)
        snprintf(written, written_len, "%s", chosen);
    return 0;
}

/* One file, logged: "written to" with the name it got, or one line saying why not. */
static int
dumper_write_logged(struct cuprof_runtime *rt, const char *path, enum file_publish_mode mode,
                    char *written, size_t written_len, char *chosen, size_t chosen_len,
                    const char *why)
{
    errno = 0;
    int rc = dumper_write_snapshot(rt, path, mode, chosen, chosen_len);
    if (rc != 0) {
        dumper_log_failure(path, rc);
        return rc;
    }
    return dumper_write_logged_ok(chosen, written, written_len, why);
}

/* The template's folder could not take a snapshot (errno `err`): the same name in the fallback
 * folder, said always (even under CUPROF_LOG=quiet), since nobody looks there. */
static int
dumper_write_moved(struct cuprof_runtime *rt, const char *final, int err, const char *fallback,
                   char *written, size_t written_len, const char *why)
{
    char chosen[PATH_MAX + 16];
    errno = 0;
    int rc = dumper_write_snapshot(rt, fallback, FILE_PUBLISH_NEW_NAME, chosen, sizeof chosen);
    if (rc != 0) {
        runtime_log("cuprof: snapshot to %s failed: %s; to %s too: %s", final, strerror(err),
                    fallback, dumper_failure_reason(rc));
        return rc;
    }
    runtime_log("cuprof: snapshot to %s failed: %s; written to %s instead%s%s%s", final,
                strerror(err), chosen, why != NULL ? " (" : "", why != NULL ? why : "",
                why != NULL ? ")" : "");
    if (written != NULL)
        snprintf(written, written_len, "%s", chosen);
    return 0;
}

/* How a dump may go: DUMP_ASYNC, the dumper thread's or the control socket's, is skipped once the
 * program is exiting; DUMP_MAY_MOVE, one nobody asked for by name (not the program's own
 * cuprof_dump_snapshot, whose caller gets the error), goes to the fallback folder when the
 * template's cannot take it. */
enum dump_flags { DUMP_ASYNC = 1, DUMP_MAY_MOVE = 2 };

static int
dumper_dump_template(struct cuprof_runtime *rt, char *written, size_t written_len, const char *why,
                     unsigned flags)
{
    char final[PATH_MAX], chosen[PATH_MAX + 16];
    uint64_t seq = dumper_seq++;
    if (path_template_expand(rt->config->snapshot, seq, (int64_t)time(NULL), final, sizeof final) !=
        0) {
        runtime_log("cuprof: snapshot path from CUPROF_SNAPSHOT is too long");
        return -CUPROF_EINVAL;
    }
    errno = 0;
    int rc = dumper_write_snapshot(rt, final, FILE_PUBLISH_NEW_NAME, chosen, sizeof chosen);
    if (rc == 0)
        return dumper_write_logged_ok(chosen, written, written_len, why);
    int err = errno;
    char fallback[PATH_MAX];
    if (rc != -CUPROF_EHOSTMEM && (flags & DUMP_MAY_MOVE) != 0 &&
        snapshot_place_folder_error(err) &&
        snapshot_place_fallback(final, fallback, sizeof fallback))
        return dumper_write_moved(rt, final, err, fallback, written, written_len, why);
    errno = err;
    dumper_log_failure(final, rc);
    return rc;
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

/* One dump under the dump lock, with SIGXFSZ blocked; `flags`: enum dump_flags. */
static int
dumper_dump_locked(struct cuprof_runtime *rt, const char *path, enum file_publish_mode mode,
                   unsigned flags, char *written, size_t written_len, const char *why)
{
    int rc = 0;
    if (rt == NULL)
        return -CUPROF_EINVAL;
    sigset_t old_mask;
    bool xfsz_was_pending = dumper_block_xfsz(&old_mask);
    int cancel_state = dumper_lock_uncancellable();
    if ((flags & DUMP_ASYNC) != 0 && dumper_exiting) {
        /* the program is exiting: the exit dump (if any) has the newest state */
        rc = -CUPROF_EINVAL;
    } else if (path == NULL) {
        rc = dumper_dump_template(rt, written, written_len, why, flags);
    } else {
        char chosen[PATH_MAX + 16];
        rc = dumper_write_logged(rt, path, mode, written, written_len, chosen, sizeof chosen, why);
    }
    dumper_unlock(cancel_state);
    dumper_restore_xfsz(&old_mask, xfsz_was_pending);
    return rc;
}

int
dumper_snapshot_pickle(struct cuprof_runtime *rt, unsigned char **out, size_t *len)
{
    int cancel_state = dumper_lock_uncancellable();
    int rc = dumper_write_memory(rt, out, len);
    dumper_unlock(cancel_state);
    return rc;
}

int
dumper_dump(struct cuprof_runtime *rt, const char *path)
{
    return dumper_dump_locked(rt, path, FILE_PUBLISH_REPLACE, 0, NULL, 0, NULL);
}

int
dumper_dump_because(struct cuprof_runtime *rt, const char *why)
{
    return dumper_dump_locked(rt, NULL, FILE_PUBLISH_REPLACE, DUMP_MAY_MOVE, NULL, 0, why);
}

/* The extensions CUPROF_SNAPSHOT accepts: the one that picks the format. */
static bool
dumper_snapshot_extension(const char *path)
{
    static const char *const accepted[] = {".pickle", ".pkl", ".json"};
    size_t len = strlen(path);
    for (size_t i = 0; i < sizeof accepted / sizeof accepted[0]; i++) {
        size_t n = strlen(accepted[i]);
        if (len > n && strcmp(path + len - n, accepted[i]) == 0 && path[len - n - 1] != '/')
            return true;
    }
    return false;
}

int
dumper_dump_named(struct cuprof_runtime *rt, const char *path, char *written, size_t written_len)
{
    if (path != NULL && !dumper_snapshot_extension(path))
        return -CUPROF_EINVAL;
    return dumper_dump_locked(rt, path, FILE_PUBLISH_NEW_NAME, DUMP_ASYNC | DUMP_MAY_MOVE, written,
                              written_len, NULL);
}

static int
dumper_dump_async(struct cuprof_runtime *rt)
{
    return dumper_dump_locked(rt, NULL, FILE_PUBLISH_NEW_NAME, DUMP_ASYNC | DUMP_MAY_MOVE, NULL, 0,
                              NULL);
}

/* The one last snapshot, under the dump lock: at exit, or of the signal that ends the program,
 * whichever comes first (the other finds it written). */
static void
dumper_last_dump(struct cuprof_runtime *rt, bool exiting, const char *why)
{
    sigset_t old_mask;
    bool xfsz_was_pending = dumper_block_xfsz(&old_mask);
    int cancel_state = dumper_lock_uncancellable(); /* waits for a signal dump in flight */
    /* Once the program exits, only the exit's own dump runs: _exit could cut off another. */
    bool may_write = why != NULL && !dumper_last_written && (exiting || !dumper_exiting);
    if (exiting)
        dumper_exiting = true;
    if (may_write) {
        int rc = dumper_dump_template(rt, NULL, 0, why[0] != '\0' ? why : NULL, DUMP_MAY_MOVE);
        (void)rc; /* a failure was logged */
        dumper_last_written = true;
    }
    dumper_unlock(cancel_state);
    dumper_restore_xfsz(&old_mask, xfsz_was_pending);
}

/* On the dumper thread: the snapshot of the signal that ends the program, then its end. */
static void
dumper_end_program(struct cuprof_runtime *rt, int sig)
{
    char why[32];
    snprintf(why, sizeof why, "ended by %s", end_signals_name(sig));
    dumper_last_dump(rt, false, why);
    control_stop(); /* as at exit: `cuprof ps` lists no process that is gone */
    end_signals_end_now(sig);
}

void
dumper_before_exec(struct cuprof_runtime *rt, bool write)
{
    sigset_t old_mask;
    bool xfsz_was_pending = dumper_block_xfsz(&old_mask);
    dumper_exec_cancel_state = dumper_lock_uncancellable(); /* waits for a dump in flight */
    if (write) {
        int rc = dumper_dump_template(rt, NULL, 0, "before exec", DUMP_MAY_MOVE);
        (void)rc; /* a failure was logged */
    }
    dumper_restore_xfsz(&old_mask, xfsz_was_pending); /* exec keeps the signal mask */
}

void
dumper_exec_failed(void)
{
    dumper_unlock(dumper_exec_cancel_state);
}

bool
dumper_exit_on_thread(bool exit_dump, const char *why, unsigned timeout_s)
{
    if (atomic_load(&dumper_thread_pid) != getpid() || dumper_on_dumper_thread)
        return false;
    atomic_store(&dumper_exit_why, why);
    atomic_store(&dumper_exit_request, exit_dump ? 2 : 1);
    if (sem_post(&dumper_wake) != 0)
        return false;
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += (time_t)timeout_s;
    while (sem_timedwait(&dumper_exit_done, &deadline) != 0)
        if (errno != EINTR)
            return false;
    int end = atomic_load(&dumper_end_signal);
    if (end != 0)
        end_signals_end_now(end); /* the program ends as the signal would have ended it */
    return true;
}

void
dumper_exit(struct cuprof_runtime *rt, bool exit_dump)
{
    /* An ending signal that came first, or comes during the exit dump, gets this snapshot. */
    dumper_last_dump(rt, true, exit_dump || atomic_load(&dumper_end_signal) != 0 ? "" : NULL);
    int end = atomic_load(&dumper_end_signal);
    if (end != 0)
        end_signals_end_now(end); /* the program ends as the signal would have ended it */
}
