/* run_wait.h: `cuprof run` starts PROG and waits for it, passing on each ending signal it is sent
 *   itself (SIGTERM, SIGHUP, SIGINT), so that stopping `cuprof run` stops PROG as the signal would
 *   have stopped PROG alone, snapshot included: `docker stop` and Kubernetes (cuprof the
 *   container's first process), `kill` of cuprof's pid, a launcher's terminate(). A job-wide
 *   signal (a terminal's ^C, `timeout`, Slurm, systemd) reaches PROG directly too: PROG's cuprof
 *   takes the two copies as one (preload/signal_stand_in.h). SIGQUIT is left to the terminal, as a
 *   shell leaves it. The exit statuses of orphans left to cuprof are collected as they come.
 * Locking: none (single-threaded command).
 * Hot path: no. */
#ifndef CUPROF_CLI_RUN_WAIT_H
#define CUPROF_CLI_RUN_WAIT_H

#include <sys/types.h>

/* Whether prog can be started as execvp would find it: CLI_OK, or CLI_PROG_NOT_FOUND /
 * CLI_PROG_NOT_RUNNABLE after one line naming prog, what is wrong and what to do. */
__attribute__((warn_unused_result)) int run_wait_check(const char *prog);

/* Runs prog (prog[0] found on PATH) with CUPROF_RUN_PID set to this process, lib being the
 * libcuprof.so it is preloaded with, and waits for it: *pid gets its pid, *status its wait
 * status. 0, or -1 with one line when it could not be started (a program that cannot be run
 * exits 126 or 127). */
__attribute__((warn_unused_result)) int run_wait(char **prog, const char *lib, pid_t *pid,
                                                 int *status);

#endif
