/* signal_stand_in.c: one delivery per request of an ending signal in the program of `cuprof run`
 * (signal_stand_in.h). */
#include "preload/signal_stand_in.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preload/end_signals.h"
#include "preload/real_dl.h"
#include "preload/signal_disposition.h"
#include "snapshot/forwarded_signal.h"

static const int stand_in_signals[] = {SIGTERM, SIGINT, SIGHUP};
#define STAND_IN_COUNT (sizeof stand_in_signals / sizeof stand_in_signals[0])

static struct signal_disposition stand_in_table[STAND_IN_COUNT];
/* The last copy taken of each signal (forwarded_signal_copy); 0 when none waits for its twin. */
static _Atomic uint64_t stand_in_last[STAND_IN_COUNT];
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
    if (signal_disposition_is(program, SIG_IGN))
        return end_signals_real_sigaction(sig, program, NULL);
    /* At the default, SA_RESTART: a program that never expected the signal sees no call
     * interrupted. */
    sigset_t mask;
    sigemptyset(&mask);
    for (size_t i = 0; i < STAND_IN_COUNT; i++)
        sigaddset(&mask, stand_in_signals[i]);
    struct sigaction kernel;
    signal_disposition_kernel_action(program, stand_in_on_signal, SA_SIGINFO | SA_RESTART, &mask,
                                     &kernel);
    return end_signals_real_sigaction(sig, &kernel, NULL);
}

static const struct signal_disposition_owner stand_in_owner = {stand_in_on_signal,
                                                               stand_in_install};

REAL_DL_UNINSTRUMENTED int
signal_stand_in_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    int i = stand_in_index(sig);
    if (i < 0)
        return end_signals_real_sigaction(sig, act, old);
    return signal_disposition_sigaction(&stand_in_table[i], &stand_in_owner, sig, act, old);
}

REAL_DL_UNINSTRUMENTED void (*signal_stand_in_set_handler(int sig, void (*handler)(int),
                                                          bool sysv))(int)
{
    return signal_disposition_set_handler(sig, handler, sysv, signal_stand_in_sigaction);
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
    signal_disposition_load(&stand_in_table[i], &act);
    if (signal_disposition_is(&act, SIG_IGN)) {
        errno = saved_errno;
        return;
    }
    if (signal_disposition_is(&act, SIG_DFL)) {
        errno = saved_errno;
        end_signals_take(sig); /* the snapshot of `term`, then the default action */
        return;
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
    signal_disposition_run(sig, &act, &seen, uctx, signal_stand_in_sigaction);
}

bool
signal_stand_in_covers(int sig)
{
    return atomic_load_explicit(&stand_in_on, memory_order_acquire) && stand_in_index(sig) >= 0;
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
    /* A library's constructor may have set a handler already: it is the program's. */
    for (size_t i = 0; i < STAND_IN_COUNT; i++)
        (void)signal_disposition_take_over(&stand_in_table[i], &stand_in_owner,
                                           stand_in_signals[i]);
}
