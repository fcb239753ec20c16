/* dump_signal.h: the CUPROF_SIGNAL handler (`signal` in CUPROF_DUMP_ON): each delivery asks the
 *   dumper thread for a snapshot, then runs the program's own disposition of the signal. cuprof's
 *   handler stays installed whatever the program sets later (Python's faulthandler.register,
 *   Lightning's SLURM requeue handler, gunicorn's log reopening all take SIGUSR1): the program
 *   sets and reads its disposition as if cuprof's handler were not there, and its handler runs
 *   with its own flags and mask. Its default and ignore are not run: SIGUSR1's default would end
 *   the program whose snapshot was asked for.
 * Locking: the dispositions' (signal_disposition.h). The handler is async-signal-safe.
 * Hot path: no. */
#ifndef CUPROF_DUMP_SIGNAL_H
#define CUPROF_DUMP_SIGNAL_H

#include <signal.h>
#include <stdbool.h>

/* Installs the handler on `sig`, taking the program's disposition of it over; false (errno set)
 * when the kernel refused it. Called once the dumper thread runs. */
bool dump_signal_start(int sig);

/* True when cuprof's handler stands in for sig's disposition. */
bool dump_signal_covers(int sig);

/* sigaction(2) and signal(3)'s family for the covered signal (signal_disposition.h). */
int dump_signal_sigaction(int sig, const struct sigaction *act, struct sigaction *old);
void (*dump_signal_set_handler(int sig, void (*handler)(int), bool sysv))(int);

#endif
