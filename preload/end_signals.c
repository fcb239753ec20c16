/* end_signals.c: the snapshot of a program that SIGTERM, SIGINT or SIGHUP ends (end_signals.h). */
#include "preload/end_signals.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "preload/dumper.h"
#include "preload/real_dl.h"
#include "preload/runtime.h"
#include "snapshot/file_publish.h"

static const int end_signals_list[] = {SIGTERM, SIGINT, SIGHUP};

/* One request often arrives twice: a terminal's ^C and a job scheduler's SIGTERM reach every
 * process of the job, and a launcher (torchrun, srun, mpirun) passes on its own copy. A
 * second signal this soon after the first is the same request; a later one ends the program at
 * once, for a user who will not wait for the snapshot. */
#define END_SAME_REQUEST_NS 1000000000LL

/* Monotonic time of the first ending signal, 0 before it (the clock never reads 0 here). */
static _Atomic int64_t end_first_ns;

/* Set by end_signals_start: `term` is on and the dumper thread runs. */
static atomic_bool end_armed;

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
static _Atomic(sigaction_fn) end_next_sigaction;

REAL_DL_UNINSTRUMENTED static sigaction_fn
next_sigaction(void)
{
    sigaction_fn fn = atomic_load_explicit(&end_next_sigaction, memory_order_acquire);
    if (fn == NULL) {
        void *sym = real_dl_dlsym(RTLD_NEXT, "sigaction");
        memcpy(&fn, &sym, sizeof fn);
        /* Idempotent: racing threads store the same pointer. */
        atomic_store_explicit(&end_next_sigaction, fn, memory_order_release);
    }
    return fn;
}

static int64_t
monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec + 1;
}

const char *
end_signals_name(int sig)
{
    return sig == SIGTERM  ? "SIGTERM"
           : sig == SIGINT ? "SIGINT"
           : sig == SIGHUP ? "SIGHUP"
                           : "a signal";
}

void
end_signals_end_now(int sig)
{
    /* A snapshot being written now would leave its temporary file behind. */
    file_publish_remove_unfinished();
    sigaction_fn real = next_sigaction();
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    if (real != NULL)
        (void)real(sig, &dfl, NULL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, sig);
    pthread_sigmask(SIG_UNBLOCK, &only, NULL);
    raise(sig);
}

void
end_signals_take(int sig)
{
    int saved_errno = errno;
    if (!atomic_load(&end_armed)) {
        end_signals_end_now(sig);
        errno = saved_errno;
        return;
    }
    int64_t now = monotonic_ns(), first = 0;
    if (atomic_compare_exchange_strong(&end_first_ns, &first, now)) {
        if (dumper_wake_to_end(sig)) {
            errno = saved_errno;
            return; /* the dumper thread writes the snapshot, then ends the program */
        }
    } else if (now - first < END_SAME_REQUEST_NS) {
        errno = saved_errno;
        return;
    }
    end_signals_end_now(sig); /* nothing to wait for, or the user insists */
    errno = saved_errno;
}

static void
end_on_signal(int sig, siginfo_t *info, void *uctx)
{
    (void)info;
    (void)uctx;
    end_signals_take(sig);
}

static bool
is_default(const struct sigaction *a)
{
    return (a->sa_flags & SA_SIGINFO) == 0 && a->sa_handler == SIG_DFL;
}

void
end_signals_start(void)
{
    sigaction_fn real = next_sigaction();
    if (real == NULL)
        return;
    atomic_store(&end_armed, true);
    struct sigaction mine;
    memset(&mine, 0, sizeof mine);
    mine.sa_sigaction = end_on_signal;
    /* SA_RESTART: a program that never expected the signal sees no call interrupted by it. */
    mine.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&mine.sa_mask);
    for (size_t i = 0; i < sizeof end_signals_list / sizeof end_signals_list[0]; i++)
        sigaddset(&mine.sa_mask, end_signals_list[i]);
    for (size_t i = 0; i < sizeof end_signals_list / sizeof end_signals_list[0]; i++) {
        int sig = end_signals_list[i];
        struct sigaction old;
        if (real(sig, NULL, &old) != 0 || !is_default(&old))
            continue; /* the program's own handler, ignored (nohup), or the stand-in: it stays */
        if (real(sig, &mine, &old) != 0) {
            runtime_log("cuprof: cannot install the handler of %s: %s", end_signals_name(sig),
                        strerror(errno));
        } else if (!is_default(&old)) {
            (void)real(sig, &old, NULL); /* the program installed its own meanwhile: its own */
        }
    }
}

void
end_signals_fork_child(void)
{
    atomic_store(&end_first_ns, 0);
}

/* What the program is told of a disposition: cuprof's handler is the default it stands in for. */
REAL_DL_UNINSTRUMENTED static void
hide_mine(struct sigaction *old)
{
    if ((old->sa_flags & SA_SIGINFO) != 0 && old->sa_sigaction == end_on_signal) {
        memset(old, 0, sizeof *old);
        old->sa_handler = SIG_DFL;
        sigemptyset(&old->sa_mask);
    }
}

REAL_DL_UNINSTRUMENTED int
end_signals_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    sigaction_fn real = next_sigaction();
    if (real == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return real(sig, act, old);
}

REAL_DL_UNINSTRUMENTED int
end_signals_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    int rc = end_signals_real_sigaction(sig, act, old);
    if (rc == 0 && old != NULL)
        hide_mine(old);
    return rc;
}

REAL_DL_UNINSTRUMENTED end_signals_handler_fn
end_signals_set_handler(const char *name, end_signals_setter_fn *next, int sig,
                        end_signals_handler_fn handler)
{
    end_signals_setter_fn fn = __atomic_load_n(next, __ATOMIC_ACQUIRE);
    if (fn == NULL) {
        void *sym = real_dl_dlsym(RTLD_NEXT, name);
        memcpy(&fn, &sym, sizeof fn);
        if (fn == NULL) {
            errno = ENOSYS;
            return SIG_ERR;
        }
        __atomic_store_n(next, fn, __ATOMIC_RELEASE);
    }
    end_signals_handler_fn previous = fn(sig, handler);
    /* Our handler takes siginfo: as a plain handler its address is the same function's. */
    void (*mine)(int, siginfo_t *, void *) = end_on_signal;
    if (previous != SIG_ERR && memcmp(&previous, &mine, sizeof mine) == 0)
        return SIG_DFL;
    return previous;
}
