/* control.h: the process's control socket (CUPROF_CONTROL): a thread that answers `cuprof ps`,
 *   `dump` and `top` (one request line, one reply line, CONTROL_PROTOCOL; up to 16 clients at
 *   once, each under its own deadline) and keeps each device's peak allocated and reserved bytes
 *   of every second for `top`'s history. It uses only descriptors still its own.
 * Locking: its own state belongs to the control thread; it takes a device lock only to copy the
 *   stats or the block table, and the dump lock through dumper_dump_named; never while talking.
 * Hot path: no. */
#ifndef CUPROF_CONTROL_H
#define CUPROF_CONTROL_H

struct cuprof_runtime;

/* Called by the runtime init (the first CUDA call): binds `<dir>/<pid>.sock` and starts the
 * thread. A failure is one log line; the program runs on without the socket. */
void control_start(struct cuprof_runtime *rt);

/* Fork child handler: forgets the parent's socket and clients (closes each inherited descriptor
 * that is still ours, leaves the parent's file alone). Async-signal-safe. */
void control_fork_child(void);

/* The forked child's first intercepted call: a socket of its own. */
void control_resume(struct cuprof_runtime *rt);

/* The program is ending (at exit, or by a signal once its snapshot is written): the socket's
 * file goes, so `cuprof ps` no longer lists the process; clients are no longer answered. */
void control_stop(void);

#endif
