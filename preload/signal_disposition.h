/* signal_disposition.h: the program's own disposition of a signal for which cuprof's handler stays
 *   installed in the kernel (signal_stand_in.h, dump_signal.h): the program sets it and reads it
 *   back with sigaction and signal(3) as if cuprof's handler were not there, and cuprof's handler
 *   reads it in any thread to run it.
 * Locking: writers take one spin flag with every signal blocked (so a handler never interrupts a
 *   write in its own thread); readers go by a sequence count. Async-signal-safe.
 * Hot path: no. */
#ifndef CUPROF_SIGNAL_DISPOSITION_H
#define CUPROF_SIGNAL_DISPOSITION_H

#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define SIGNAL_DISPOSITION_MASK_WORDS (sizeof(sigset_t) / sizeof(unsigned long))

/* One signal's disposition as the program set it: a sequence count (odd while written) around
 * atomic fields. Zeroed: SIG_DFL. */
struct signal_disposition {
    atomic_uint seq;
    _Atomic uintptr_t handler; /* sa_handler, or sa_sigaction under SA_SIGINFO */
    atomic_int flags;
    _Atomic unsigned long mask[SIGNAL_DISPOSITION_MASK_WORDS];
};

/* What the kernel gets for the program's disposition `program` of `sig`: cuprof's handler (or,
 * for an ignored signal where the caller wants it, SIG_IGN). 0 or -1 with errno. */
typedef int (*signal_disposition_install_fn)(int sig, const struct sigaction *program);

/* The handler that marks `sig` as stood in for, and how to install it. */
struct signal_disposition_owner {
    void (*handler)(int, siginfo_t *, void *);
    signal_disposition_install_fn install;
};

/* The kernel's action when cuprof's `handler` stands in for the program's disposition `program`:
 * for a handler of the program's, its flags (SA_RESETHAND left to the stand-in, which must stay)
 * and mask; for the default or ignore, `flags` and `mask`, the stand-in's own. */
void signal_disposition_kernel_action(const struct sigaction *program,
                                      void (*handler)(int, siginfo_t *, void *), int flags,
                                      const sigset_t *mask, struct sigaction *kernel);

/* sigaction(2) for a signal cuprof stands in for: `act` becomes the program's disposition (the
 * kernel gets owner->install's), `old` the one it had: the kernel's own when something set it
 * around sigaction(2) (a raw system call, sigset), so that one holds. */
int signal_disposition_sigaction(struct signal_disposition *d,
                                 const struct signal_disposition_owner *owner, int sig,
                                 const struct sigaction *act, struct sigaction *old);

/* glibc's signal(3) and bsd_signal(3) (restarting calls, sig blocked in its handler) or, with
 * `sysv`, sysv_signal(3) (reset to the default on entry, not blocked), as a sigaction call on
 * `sig` through `set`; returns the previous handler or SIG_ERR. */
void (*signal_disposition_set_handler(int sig, void (*handler)(int), bool sysv,
                                      int (*set)(int, const struct sigaction *,
                                                 struct sigaction *)))(int);

/* The program's disposition, from any thread or handler. */
void signal_disposition_load(struct signal_disposition *d, struct sigaction *out);

/* True when `a` is the plain disposition `handler` (SIG_DFL, SIG_IGN). */
bool signal_disposition_is(const struct sigaction *a, void (*handler)(int));

/* Runs the program's handler `act` (not SIG_DFL or SIG_IGN) as the kernel would: its
 * SA_RESETHAND first through `set` (a twin or the next delivery then finds the default), then
 * the handler with `info` (SA_SIGINFO) or the signal number alone. */
void signal_disposition_run(int sig, const struct sigaction *act, siginfo_t *info, void *uctx,
                            int (*set)(int, const struct sigaction *, struct sigaction *));

/* Takes the program's current disposition of `sig` over (a library's constructor may have set
 * one), registering the fork handler once. 0, or -1 with errno when the kernel refused. */
int signal_disposition_take_over(struct signal_disposition *d,
                                 const struct signal_disposition_owner *owner, int sig);

#endif
