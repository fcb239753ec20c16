/* signal_stand_in.h: in the program `cuprof run` started (CUPROF_RUN_PID is its parent), cuprof's
 *   handler stands in for the program's own disposition of SIGTERM, SIGINT and SIGHUP, so that
 *   the copy `cuprof run` passes on (forwarded_signal.h) and the copy the sender sent the program
 *   itself are taken once: the first of the two within a second runs the program's handler (or
 *   the default action, with the snapshot of `term`), the other is dropped. The program is told
 *   its own dispositions, and its handlers see the sender's pid and uid, as without cuprof.
 *   Ignored signals stay ignored in the kernel.
 * Locking: the dispositions' (signal_disposition.h). Async-signal-safe.
 * Hot path: no. */
#ifndef CUPROF_SIGNAL_STAND_IN_H
#define CUPROF_SIGNAL_STAND_IN_H

#include <signal.h>
#include <stdbool.h>

/* First thing at start: stands in when CUPROF_RUN_PID names this process's parent, taking over
 * the dispositions the three signals have now (a library's constructor may have set one). */
void signal_stand_in_start(void);

/* True when cuprof's handler stands in for sig's disposition. */
bool signal_stand_in_covers(int sig);

/* sigaction(2) for a covered signal: act becomes the program's disposition, old gets the one it
 * had (the kernel's, when something installed a handler around this function). */
int signal_stand_in_sigaction(int sig, const struct sigaction *act, struct sigaction *old);

/* signal(3) and bsd_signal(3) (restarting calls, sig blocked in its handler) or, with
 * `sysv`, sysv_signal(3) (reset to the default on entry, not blocked), for a covered signal. */
void (*signal_stand_in_set_handler(int sig, void (*handler)(int), bool sysv))(int);

#endif
