/* end_signals.h: a program ended by SIGTERM, SIGINT or SIGHUP still writes its snapshot (`term`
 *   in CUPROF_DUMP_ON). Where such a signal has its default action when cuprof starts, cuprof's
 *   handler takes it: the dumper thread writes the snapshot, then the default action is put back
 *   and the signal raised again, so the program ends as it would have, by that signal. The
 *   program never sees the handler: sigaction and signal report the default in its place, and
 *   whatever the program installs replaces it.
 * Locking: none; the handler is async-signal-safe (atomics, then a sem_post in dumper.c).
 * Hot path: no. */
#ifndef CUPROF_END_SIGNALS_H
#define CUPROF_END_SIGNALS_H

#include <signal.h>

/* Installs the handler on each of SIGTERM, SIGINT and SIGHUP still at its default. Call once the
 * dumper thread runs. */
void end_signals_start(void);

/* Ends the program by `sig` now: its default action back, the signal unblocked in this thread and
 * raised. Async-signal-safe. Returns only if the signal could not be delivered. */
void end_signals_end_now(int sig);

/* What the default action of sig becomes: with `term` on, the dumper thread writes the snapshot
 * and then ends the program (a second copy within a second is the same request; a later one ends
 * it at once); else it ends now. Async-signal-safe; errno is kept. */
void end_signals_take(int sig);

/* The next definition's sigaction(2), with nothing hidden. */
int end_signals_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old);

/* "SIGTERM", "SIGINT", "SIGHUP", else "a signal". */
const char *end_signals_name(int sig);

/* In a forked child: the first signal it gets is its own first. */
void end_signals_fork_child(void);

/* The program's sigaction(2) and signal(3) family: the next definition's, with cuprof's handler
 * reported as the default it stands in for. */
int end_signals_sigaction(int sig, const struct sigaction *act, struct sigaction *old);
typedef void (*end_signals_handler_fn)(int);
typedef end_signals_handler_fn (*end_signals_setter_fn)(int, end_signals_handler_fn);
end_signals_handler_fn end_signals_set_handler(const char *name, end_signals_setter_fn *next,
                                               int sig, end_signals_handler_fn handler);

#endif
