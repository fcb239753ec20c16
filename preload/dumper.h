/* dumper.h: writes snapshots: the CUPROF_SIGNAL trigger (handler -> self-pipe -> dumper thread),
 *   and synchronous dumps for OOM, exit and cuprof_dump_snapshot().
 * Locking: one dump lock serializes dumps (and the sequence number); taken before any allocator
 *   lock. The signal handler takes no lock at all.
 * Hot path: no. */
#ifndef CUPROF_DUMPER_H
#define CUPROF_DUMPER_H

#include <stdbool.h>
#include <stddef.h>

struct cuprof_runtime;

/* With `signal` or `term` in CUPROF_DUMP_ON: starts the dumper thread (every signal blocked in
 * it), woken by a semaphore; `signal` installs the CUPROF_SIGNAL handler (dump_signal.h), which
 * runs the program's own handler too; `term` the handlers of end_signals.h. Failures are logged;
 * the program runs on without the trigger. */
void dumper_start(struct cuprof_runtime *rt);

/* Writes one snapshot now. path NULL: the CUPROF_SNAPSHOT template, expanded, under a name that
 * no earlier file has; otherwise exactly `path` (replaced atomically, like PyTorch's
 * _dump_snapshot). Logs where it went (unless CUPROF_LOG=quiet) or one line on failure. Returns
 * 0 or a negative -CUPROF_E* code. Makes no device call; call it outside every cuprof lock. */
__attribute__((warn_unused_result)) int dumper_dump(struct cuprof_runtime *rt, const char *path);

/* dumper_dump with the template's next name, its "snapshot written to" line ending with `why` in
 * parentheses, e.g. `(out of memory on device 0)`. */
__attribute__((warn_unused_result)) int dumper_dump_because(struct cuprof_runtime *rt,
                                                            const char *why);
/* cuprof_snapshot_pickle (PyTorch's _snapshot): the snapshot as pickle bytes in a malloc'd
 * buffer, under the dump lock like every dump (it records its `snapshot` event too). 0 or a
 * negative -CUPROF_E* code. */
__attribute__((warn_unused_result)) int dumper_snapshot_pickle(struct cuprof_runtime *rt,
                                                               unsigned char **out, size_t *len);

/* For the control socket: like dumper_dump, but skipped (-CUPROF_EINVAL) once the program is
 * exiting, as a signal dump is, and the file's final name is copied to `written`. */
__attribute__((warn_unused_result)) int
dumper_dump_named(struct cuprof_runtime *rt, const char *path, char *written, size_t written_len);

/* At exit: waits for a signal dump in flight and lets no later one start (_exit would cut it off
 * and leave its temporary file behind); then writes the exit dump when `exit_dump` is true or a
 * signal that ends the program came (unless that signal's snapshot is written already), and
 * ends the program by that signal if one came. Dumps asked for by the program still run. */
void dumper_exit(struct cuprof_runtime *rt, bool exit_dump);

/* Before exec replaces the program: waits for a dump in flight, writes the image's snapshot with
 * the template's next name when `write` ("before exec"), and keeps the dump lock, so that no dump
 * starts that the exec would cut off; dumper_exec_failed() releases it. */
void dumper_before_exec(struct cuprof_runtime *rt, bool write);
void dumper_exec_failed(void);

/* From the CUPROF_SIGNAL handler (dump_signal.h; async-signal-safe, errno kept): asks the dumper
 * thread for a snapshot, when it runs. */
void dumper_wake_to_dump(void);

/* dumper_exit for exit() called in a signal handler, which may have interrupted this thread
 * holding a lock the dump takes (malloc's, the loader's), or for abort: the dumper thread writes it
 * (its log line ending with `why` in parentheses unless "", a constant) while this one waits, at
 * most `timeout_s` seconds. False when no dumper thread runs in this process, this is it, or it did
 * not finish in time (the program then ends without it). */
bool dumper_exit_on_thread(bool exit_dump, const char *why, unsigned timeout_s);

/* From end_signals' handler (async-signal-safe): asks the dumper thread for the snapshot of the
 * signal `sig` that ends the program, after which the thread ends it by `sig`. False when no
 * dumper thread runs in this process (the caller ends the program itself). */
bool dumper_wake_to_end(int sig);

/* Fork handlers (lifecycle.c): prepare takes the dump lock, parent releases it; child releases
 * it, replaces the self-pipe, forgets the dumper thread and restarts the sequence at 0. */
void dumper_fork_prepare(void);
void dumper_fork_parent(void);
void dumper_fork_child(void);

/* In a forked child's first intercepted call: starts the dumper thread again. */
void dumper_resume(struct cuprof_runtime *rt);

#endif
