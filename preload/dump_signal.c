/* dump_signal.c: a snapshot per CUPROF_SIGNAL, the program's own disposition kept
 * (dump_signal.h). */
#include "preload/dump_signal.h"

#include <errno.h>
#include <stdatomic.h>

#include "preload/dumper.h"
#include "preload/end_signals.h"
#include "preload/real_dl.h"
#include "preload/signal_disposition.h"

static struct signal_disposition dump_signal_program;
static atomic_int dump_signal_number; /* 0 until started */

static void dump_signal_on_signal(int sig, siginfo_t *info, void *uctx);

/* The flags our handler is installed with. A program's own handler keeps its flags (without
 * SA_RESTART its blocking read must still return EINTR) and its mask; SA_RESETHAND is done by the
 * handler, which stays. With no handler of the program's, SA_RESTART: a program that never
 * expected this signal never sees a call interrupted by it. */
static int
dump_signal_install(int sig, const struct sigaction *program)
{
    sigset_t none;
    sigemptyset(&none);
    struct sigaction kernel;
    signal_disposition_kernel_action(program, dump_signal_on_signal,
                                     SA_SIGINFO | SA_RESTART | (program->sa_flags & SA_ONSTACK),
                                     &none, &kernel);
    return end_signals_real_sigaction(sig, &kernel, NULL);
}

static const struct signal_disposition_owner dump_signal_owner = {dump_signal_on_signal,
                                                                  dump_signal_install};

/* Async-signal-safe: one sem_post, then the program's own handler. */
static void
dump_signal_on_signal(int sig, siginfo_t *info, void *uctx)
{
    int saved_errno = errno;
    dumper_wake_to_dump();
    struct sigaction act;
    signal_disposition_load(&dump_signal_program, &act);
    errno = saved_errno;
    if (signal_disposition_is(&act, SIG_DFL) || signal_disposition_is(&act, SIG_IGN) ||
        act.sa_handler == NULL)
        return;
    signal_disposition_run(sig, &act, info, uctx, dump_signal_sigaction);
}

bool
dump_signal_covers(int sig)
{
    return sig != 0 && atomic_load_explicit(&dump_signal_number, memory_order_acquire) == sig;
}

REAL_DL_UNINSTRUMENTED int
dump_signal_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    if (!dump_signal_covers(sig))
        return end_signals_real_sigaction(sig, act, old);
    return signal_disposition_sigaction(&dump_signal_program, &dump_signal_owner, sig, act, old);
}

REAL_DL_UNINSTRUMENTED void (*dump_signal_set_handler(int sig, void (*handler)(int),
                                                      bool sysv))(int)
{
    return signal_disposition_set_handler(sig, handler, sysv, dump_signal_sigaction);
}

bool
dump_signal_start(int sig)
{
    /* Covered first: a sigaction of the program's meanwhile waits for the take-over. */
    atomic_store_explicit(&dump_signal_number, sig, memory_order_release);
    /* The program's disposition now (a handler of its own, or a library's) is what it keeps. */
    if (signal_disposition_take_over(&dump_signal_program, &dump_signal_owner, sig) == 0)
        return true;
    int err = errno;
    atomic_store_explicit(&dump_signal_number, 0, memory_order_release);
    errno = err;
    return false;
}
