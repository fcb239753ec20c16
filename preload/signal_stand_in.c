/* signal_stand_in.c: one delivery per request of an ending signal in the program of `cuprof run`
 * (signal_stand_in.h). */
#include "preload/signal_stand_in.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preload/end_signals.h"
#include "preload/real_dl.h"
#include "snapshot/forwarded_signal.h"

static const int stand_in_signals[] = {SIGTERM, SIGINT, SIGHUP};
#define STAND_IN_COUNT      (sizeof stand_in_signals / sizeof stand_in_signals[0])
#define STAND_IN_MASK_WORDS (sizeof(sigset_t) / sizeof(unsigned long))

/* The program's disposition of one signal, read by the handler in any thread: a sequence count
 * (odd while written) around atomic fields. */
struct stand_in_disposition {
    atomic_uint seq;
    _Atomic uintptr_t handler; /* sa_handler, or sa_sigaction under SA_SIGINFO */
    atomic_int flags;
    _Atomic unsigned long mask[STAND_IN_MASK_WORDS];
};

static struct stand_in_disposition stand_in_table[STAND_IN_COUNT];
/* The last copy taken of each signal (forwarded_signal_copy); 0 when none waits for its twin. */
static _Atomic uint64_t stand_in_last[STAND_IN_COUNT];
static atomic_flag stand_in_writing = ATOMIC_FLAG_INIT;
static atomic_bool stand_in_on;
static pid_t stand_in_run_pid; /* written once at start, before the handler is installed */

static int
stand_in_index(int sig)
{
    for (size_t i = 0; i < STAND_IN_COUNT; i++)
        if (stand_in_signals[i] == sig)
            return (int)i;
    return -1;
}

static bool
stand_in_is(const struct sigaction *a, void (*handler)(int))
{
    return (a->sa_flags & SA_SIGINFO) == 0 && a->sa_handler == handler;
}

/* Writer lock held. */
static void
stand_in_store(struct stand_in_disposition *d, const struct sigaction *act)
{
    unsigned seq = atomic_load_explicit(&d->seq, memory_order_relaxed);
    atomic_store_explicit(&d->seq, seq + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    uintptr_t handler;
    memcpy(&handler, &act->sa_handler, sizeof handler);
    unsigned long words[STAND_IN_MASK_WORDS];
    memcpy(words, &act->sa_mask, sizeof words);
    atomic_store_explicit(&d->handler, handler, memory_order_relaxed);
    atomic_store_explicit(&d->flags, act->sa_flags, memory_order_relaxed);
    for (size_t w = 0; w < STAND_IN_MASK_WORDS; w++)
        atomic_store_explicit(&d->mask[w], words[w], memory_order_relaxed);
    atomic_store_explicit(&d->seq, seq + 2, memory_order_release);
}

/* Any thread, a handler too: a writer holds every signal blocked, so never this one mid-write. */
static void
stand_in_load(struct stand_in_disposition *d, struct sigaction *out)
{
    for (;;) {
        unsigned before = atomic_load_explicit(&d->seq, memory_order_acquire);
        if ((before & 1) != 0)
            continue;
        uintptr_t handler = atomic_load_explicit(&d->handler, memory_order_relaxed);
        int flags = atomic_load_explicit(&d->flags, memory_order_relaxed);
        unsigned long words[STAND_IN_MASK_WORDS];
        for (size_t w = 0; w < STAND_IN_MASK_WORDS; w++)
            words[w] = atomic_load_explicit(&d->mask[w], memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&d->seq, memory_order_relaxed) != before)
            continue;
        memset(out, 0, sizeof *out);
        memcpy(&out->sa_handler, &handler, sizeof handler);
        out->sa_flags = flags;
        memcpy(&out->sa_mask, words, sizeof words);
        return;
    }
}

static void
stand_in_lock(sigset_t *saved)
{
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, saved);
    while (atomic_flag_test_and_set_explicit(&stand_in_writing, memory_order_acquire))
        ;
}

static void
stand_in_unlock(const sigset_t *saved)
{
    atomic_flag_clear_explicit(&stand_in_writing, memory_order_release);
    pthread_sigmask(SIG_SETMASK, saved, NULL);
}

/* True when this copy is the twin of the last one taken (forwarded_signal_is_twin). The pair is
 * then spent, so the sender's next request is taken again. */
static bool
stand_in_is_copy(size_t i, pid_t origin, bool forwarded)
{
    uint64_t mine = forwarded_signal_copy(origin, forwarded);
    uint64_t last = atomic_load(&stand_in_last[i]);
    for (;;) {
        bool twin = forwarded_signal_is_twin(last, mine);
        if (atomic_compare_exchange_weak(&stand_in_last[i], &last, twin ? 0 : mine))
            return twin;
    }
}

static void stand_in_on_signal(int sig, siginfo_t *info, void *uctx);

/* What the kernel gets for the program's disposition `program`: cuprof's handler with the
 * program's flags and mask (SA_RESETHAND done by the handler, so a twin still finds it), or
 * ignored; for the default, the flags end_signals gives its own handler. */
static int
stand_in_install(int sig, const struct sigaction *program)
{
    if (stand_in_is(program, SIG_IGN))
        return end_signals_real_sigaction(sig, program, NULL);
    struct sigaction kernel;
    memset(&kernel, 0, sizeof kernel);
    kernel.sa_sigaction = stand_in_on_signal;
    if (stand_in_is(program, SIG_DFL)) {
        /* SA_RESTART: a program that never expected the signal sees no call interrupted. */
        kernel.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&kernel.sa_mask);
        for (size_t i = 0; i < STAND_IN_COUNT; i++)
            sigaddset(&kernel.sa_mask, stand_in_signals[i]);
    } else {
        kernel.sa_flags = (program->sa_flags | SA_SIGINFO) & ~SA_RESETHAND;
        kernel.sa_mask = program->sa_mask;
    }
    return end_signals_real_sigaction(sig, &kernel, NULL);
}

static bool
stand_in_is_mine(const struct sigaction *kernel)
{
    return (kernel->sa_flags & SA_SIGINFO) != 0 && kernel->sa_sigaction == stand_in_on_signal;
}

REAL_DL_UNINSTRUMENTED int
signal_stand_in_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    int i = stand_in_index(sig);
    if (i < 0)
        return end_signals_real_sigaction(sig, act, old);
    struct stand_in_disposition *d = &stand_in_table[i];
    sigset_t saved;
    stand_in_lock(&saved);
    struct sigaction kernel, before;
    int rc = end_signals_real_sigaction(sig, NULL, &kernel);
    int err = errno;
    if (rc == 0) {
        /* Something set it around sigaction(2) (a raw system call, sigset): that one holds. */
        if (stand_in_is_mine(&kernel))
            stand_in_load(d, &before);
        else
            before = kernel;
        if (act != NULL) {
            stand_in_store(d, act);
            rc = stand_in_install(sig, act);
            err = errno;
            if (rc != 0)
                stand_in_store(d, &before);
        }
    }
    stand_in_unlock(&saved);
    if (rc == 0 && old != NULL)
        *old = before;
    errno = err;
    return rc;
}

REAL_DL_UNINSTRUMENTED void (*signal_stand_in_set_handler(int sig, void (*handler)(int),
                                                          bool sysv))(int)
{
    if (handler == SIG_ERR) {
        errno = EINVAL;
        return SIG_ERR;
    }
    /* glibc's signal(3) and sysv_signal(3), as sigaction(2) calls. */
    struct sigaction act, old;
    memset(&act, 0, sizeof act);
    act.sa_handler = handler;
    sigemptyset(&act.sa_mask);
    if (sysv) {
        act.sa_flags = SA_RESETHAND | SA_NODEFER;
    } else {
        sigaddset(&act.sa_mask, sig);
        act.sa_flags = SA_RESTART;
    }
    if (signal_stand_in_sigaction(sig, &act, &old) != 0)
        return SIG_ERR;
    return old.sa_handler;
}

/* Async-signal-safe: a clock read, atomics, then the program's handler or the default action. */
static void
stand_in_on_signal(int sig, siginfo_t *info, void *uctx)
{
    int saved_errno = errno;
    int i = stand_in_index(sig);
    pid_t origin = info != NULL ? info->si_pid : 0;
    uid_t origin_uid = info != NULL ? info->si_uid : 0;
    bool forwarded = info != NULL && info->si_code == SI_QUEUE &&
                     info->si_pid == stand_in_run_pid &&
                     forwarded_signal_origin(info->si_value, &origin, &origin_uid);
    if (i < 0 || stand_in_is_copy((size_t)i, origin, forwarded)) {
        errno = saved_errno;
        return;
    }
    struct sigaction act;
    stand_in_load(&stand_in_table[i], &act);
    if (stand_in_is(&act, SIG_IGN)) {
        errno = saved_errno;
        return;
    }
    if (stand_in_is(&act, SIG_DFL)) {
        errno = saved_errno;
        end_signals_take(sig); /* the snapshot of `term`, then the default action */
        return;
    }
    if ((act.sa_flags & SA_RESETHAND) != 0) {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        (void)signal_stand_in_sigaction(sig, &dfl, NULL); /* as the kernel does on entry */
    }
    /* The program's handler sees the sender, as the sender's own copy would have shown it. */
    siginfo_t seen;
    memset(&seen, 0, sizeof seen);
    if (forwarded) {
        seen.si_signo = sig;
        seen.si_code = origin != 0 ? SI_USER : SI_KERNEL;
        seen.si_pid = origin;
        seen.si_uid = origin_uid;
    } else if (info != NULL) {
        seen = *info;
    }
    errno = saved_errno;
    if ((act.sa_flags & SA_SIGINFO) != 0)
        act.sa_sigaction(sig, &seen, uctx);
    else
        act.sa_handler(sig);
}

bool
signal_stand_in_covers(int sig)
{
    return atomic_load_explicit(&stand_in_on, memory_order_acquire) && stand_in_index(sig) >= 0;
}

/* A fork while another thread held the flag: the child has no such thread. */
static void
stand_in_fork_child(void)
{
    atomic_flag_clear(&stand_in_writing);
}

void
signal_stand_in_start(void)
{
    const char *text = getenv(FORWARDED_SIGNAL_ENV);
    if (text == NULL || text[0] == '\0')
        return;
    char *end = NULL;
    long parent = strtol(text, &end, 10);
    if (*end != '\0' || parent <= 0 || (pid_t)parent != getppid())
        return; /* a grandchild, or a program started some other way */
    stand_in_run_pid = (pid_t)parent;
    atomic_store_explicit(&stand_in_on, true, memory_order_release);
    (void)pthread_atfork(NULL, NULL, stand_in_fork_child);
    /* A library's constructor may have set a handler already: it is the program's. */
    for (size_t i = 0; i < STAND_IN_COUNT; i++) {
        struct sigaction current;
        if (end_signals_real_sigaction(stand_in_signals[i], NULL, &current) == 0)
            (void)signal_stand_in_sigaction(stand_in_signals[i], &current, NULL);
    }
}
