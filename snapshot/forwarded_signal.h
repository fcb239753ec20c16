/* forwarded_signal.h: how `cuprof run` passes an ending signal it was sent (SIGTERM, SIGINT,
 *   SIGHUP) on to its program, so that the program's cuprof can tell that copy from the one the
 *   sender may have sent the program itself: sigqueue(3) from the parent, whose value carries the
 *   sender's pid and uid under a mark.
 * Locking: none (pure functions). Hot path: no; async-signal-safe. */
#ifndef CUPROF_FORWARDED_SIGNAL_H
#define CUPROF_FORWARDED_SIGNAL_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

/* Set by `cuprof run` for its program: its own pid, in decimal. */
#define FORWARDED_SIGNAL_ENV "CUPROF_RUN_PID"

/* The sigqueue value of a copy of a signal sent by origin_pid (0: by the kernel) as origin_uid. */
union sigval forwarded_signal_value(pid_t origin_pid, uid_t origin_uid);

/* True when value is one forwarded_signal_value made; then *origin_pid and *origin_uid. */
bool forwarded_signal_origin(union sigval value, pid_t *origin_pid, uid_t *origin_uid);

#endif
