/* helper_thread.h: starts cuprof's own long-lived threads (the dumper, the control socket's):
 *   detached, named, with every signal blocked (no signal is ever delivered to them), and already
 *   running when the start returns. A fork soon after cuprof's start (a DataLoader's workers at
 *   the first CUDA call) thus never catches one of them half-started inside the C library's or a
 *   sanitizer's thread set-up, whose locks the child would inherit held.
 * Locking: none of its own; the starter waits for the new thread's first step.
 * Hot path: no (once per process, and once in a forked child that uses CUDA). */
#ifndef CUPROF_HELPER_THREAD_H
#define CUPROF_HELPER_THREAD_H

/* Starts run(arg) on a new thread named `name` and waits until it runs. Returns 0, or the error
 * number of the failed step (nothing started). */
int helper_thread_start(const char *name, void *(*run)(void *), void *arg);

#endif
