/* forwarded_signal.h: how `cuprof run` passes an ending signal it was sent (SIGTERM, SIGINT,
 *   SIGHUP) on to its program, so that the program's cuprof can tell that copy from the one the
 *   sender may have sent the program itself: sigqueue(3) from the parent, whose value carries the
 *   sender's pid and uid under a mark.
 * Locking: none (pure functions and a clock read). Hot path: no; async-signal-safe. */
#ifndef CUPROF_FORWARDED_SIGNAL_H
#define CUPROF_FORWARDED_SIGNAL_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Set by `cuprof run` for its program: its own pid, in decimal. */
#define FORWARDED_SIGNAL_ENV "CUPROF_RUN_PID"

/* The sigqueue value of a copy of a signal sent by origin_pid (0: by the kernel) as origin_uid. */
union sigval forwarded_signal_value(pid_t origin_pid, uid_t origin_uid);

/* True when value is one forwarded_signal_value made; then *origin_pid and *origin_uid. */
bool forwarded_signal_origin(union sigval value, pid_t *origin_pid, uid_t *origin_uid);

/* One request often arrives twice: passed on by `cuprof run` and sent directly by the sender (a
 * terminal's ^C, Slurm, `timeout` signal the whole job). A copy is recorded as a nonzero word: the
 * sender, whether it was passed on, and when it came (CLOCK_MONOTONIC, in ms). */
uint64_t forwarded_signal_copy(pid_t origin_pid, bool forwarded);

/* True when `copy` is the twin of `last` (0: none): the same sender, one copy passed on and the
 * other direct, less than a second apart. A later copy, or two direct ones, are two requests. */
bool forwarded_signal_is_twin(uint64_t last, uint64_t copy);

#endif
