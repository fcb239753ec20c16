/* signal_disposition.c: the program's own dispositions of the signals cuprof's handlers stand in
 * for (signal_disposition.h). */
#include "preload/signal_disposition.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "preload/end_signals.h"
#include "preload/real_dl.h"

static atomic_flag disposition_writing = ATOMIC_FLAG_INIT;
static atomic_bool disposition_fork_registered;

/* Writer lock held. */
static void
disposition_store(struct signal_disposition *d, const struct sigaction *act)
{
    unsigned seq = atomic_load_explicit(&d->seq, memory_order_relaxed);
    atomic_store_explicit(&d->seq, seq + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    uintptr_t handler;
    memcpy(&handler, &act->sa_handler, sizeof handler);
    unsigned long words[SIGNAL_DISPOSITION_MASK_WORDS];
    memcpy(words, &act->sa_mask, sizeof words);
    atomic_store_explicit(&d->handler, handler, memory_order_relaxed);
    atomic_store_explicit(&d->flags, act->sa_flags, memory_order_relaxed);
    for (size_t w = 0; w < SIGNAL_DISPOSITION_MASK_WORDS; w++)
        atomic_store_explicit(&d->mask[w], words[w], memory_order_relaxed);
    atomic_store_explicit(&d->seq, seq + 2, memory_order_release);
}

/* Any thread, a handler too: a writer holds every signal blocked, so never this one mid-write. */
void
signal_disposition_load(struct signal_disposition *d, struct sigaction *out)
{
    for (;;) {
        unsigned before = atomic_load_explicit(&d->seq, memory_order_acquire);
        if ((before & 1) != 0)
            continue;
        uintptr_t handler = atomic_load_explicit(&d->handler, memory_order_relaxed);
        int flags = atomic_load_explicit(&d->flags, memory_order_relaxed);
        unsigned long words[SIGNAL_DISPOSITION_MASK_WORDS];
        for (size_t w = 0; w < SIGNAL_DISPOSITION_MASK_WORDS; w++)
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
disposition_lock(sigset_t *saved)
{
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, saved);
    while (atomic_flag_test_and_set_explicit(&disposition_writing, memory_order_acquire))
        ;
}

static void
disposition_unlock(const sigset_t *saved)
{
    atomic_flag_clear_explicit(&disposition_writing, memory_order_release);
    pthread_sigmask(SIG_SETMASK, saved, NULL);
}

bool
signal_disposition_is(const struct sigaction *a, void (*handler)(int))
{
    return (a->sa_flags & SA_SIGINFO) == 0 && a->sa_handler == handler;
}

void
signal_disposition_kernel_action(const struct sigaction *program,
                                 void (*handler)(int, siginfo_t *, void *), int flags,
                                 const sigset_t *mask, struct sigaction *kernel)
{
    memset(kernel, 0, sizeof *kernel);
    kernel->sa_sigaction = handler;
    if (signal_disposition_is(program, SIG_DFL) || signal_disposition_is(program, SIG_IGN)) {
        kernel->sa_flags = flags;
        kernel->sa_mask = *mask;
    } else {
        kernel->sa_flags = (program->sa_flags | SA_SIGINFO) & ~SA_RESETHAND;
        kernel->sa_mask = program->sa_mask;
    }
}

static bool
disposition_is_owners(const struct sigaction *kernel, const struct signal_disposition_owner *owner)
{
    return (kernel->sa_flags & SA_SIGINFO) != 0 && kernel->sa_sigaction == owner->handler;
}

REAL_DL_UNINSTRUMENTED int
signal_disposition_sigaction(struct signal_disposition *d,
                             const struct signal_disposition_owner *owner, int sig,
                             const struct sigaction *act, struct sigaction *old)
{
    sigset_t saved;
    disposition_lock(&saved);
    struct sigaction kernel, before;
    int rc = end_signals_real_sigaction(sig, NULL, &kernel);
    int err = errno;
    if (rc == 0) {
        if (disposition_is_owners(&kernel, owner))
            signal_disposition_load(d, &before);
        else
            before = kernel;
        if (act != NULL) {
            disposition_store(d, act);
            rc = owner->install(sig, act);
            err = errno;
            if (rc != 0)
                disposition_store(d, &before);
        }
    }
    disposition_unlock(&saved);
    if (rc == 0 && old != NULL)
        *old = before;
    errno = err;
    return rc;
}

REAL_DL_UNINSTRUMENTED void (*signal_disposition_set_handler(
    int sig, void (*handler)(int), bool sysv,
    int (*set)(int, const struct sigaction *, struct sigaction *)))(int)
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
    if (set(sig, &act, &old) != 0)
        return SIG_ERR;
    return old.sa_handler;
}

void
signal_disposition_run(int sig, const struct sigaction *act, siginfo_t *info, void *uctx,
                       int (*set)(int, const struct sigaction *, struct sigaction *))
{
    if ((act->sa_flags & SA_RESETHAND) != 0) {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        (void)set(sig, &dfl, NULL); /* as the kernel does on entry */
    }
    if ((act->sa_flags & SA_SIGINFO) != 0)
        act->sa_sigaction(sig, info, uctx);
    else
        act->sa_handler(sig);
}

/* A fork while another thread held the flag: the child has no such thread. */
static void
disposition_fork_child(void)
{
    atomic_flag_clear(&disposition_writing);
}

int
signal_disposition_take_over(struct signal_disposition *d,
                             const struct signal_disposition_owner *owner, int sig)
{
    if (!atomic_exchange(&disposition_fork_registered, true))
        (void)pthread_atfork(NULL, NULL, disposition_fork_child);
    struct sigaction current;
    if (end_signals_real_sigaction(sig, NULL, &current) != 0)
        return -1;
    return signal_disposition_sigaction(d, owner, sig, &current, NULL);
}
