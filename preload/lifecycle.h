/* lifecycle.h: the process events around the runtime: the constructor (config before any
 *   interception), fork (locks, dumper thread, per-child names) and the program's end (the exit
 *   dump at exit, _exit, quick_exit and before exec).
 * Locking: the fork handlers take the dump lock, every allocator device lock, then the side
 *   tables' locks (owned segments, VMM handles), in that order.
 * Hot path: lifecycle_resume_after_fork() is (one relaxed load while no fork happened). */
#ifndef CUPROF_LIFECYCLE_H
#define CUPROF_LIFECYCLE_H

#include <stdatomic.h>
#include <stdbool.h>

struct cuprof_runtime;

/* Set by the child's fork handler, cleared by the first runtime_get() in the child. */
extern atomic_bool lifecycle_forked __attribute__((visibility("hidden")));

/* Called once by the runtime init: registers the fork handlers and the exit dump. */
void lifecycle_register(struct cuprof_runtime *rt);

/* In a forked child, the first intercepted call restarts the dumper thread (a thread cannot be
 * created inside the fork handler) and marks the child as a CUDA user, whose exit dump is then
 * written under its own pid. */
void lifecycle_resume_after_fork_slow(struct cuprof_runtime *rt);

static inline void
lifecycle_resume_after_fork(struct cuprof_runtime *rt)
{
    if (atomic_load_explicit(&lifecycle_forked, memory_order_relaxed))
        lifecycle_resume_after_fork_slow(rt);
}

/* _exit and _Exit, as libcuprof exports them: Python's os._exit (which ends multiprocessing's
 * fork and forkserver children) and C's _exit skip the atexit handlers that write the exit
 * snapshot. In the process cuprof started or a forked child that used CUDA, with `exit` in
 * CUPROF_DUMP_ON, the exit snapshot is written first; in a signal handler (unwind_caller_context)
 * by the dumper thread, unless the interrupted code holds one of cuprof's locks; where the stack
 * cannot be walked, not at all; one line says when there is none. Then the next _exit. As for
 * exit() in a signal handler and quick_exit. */
enum lifecycle_exit_kind { LIFECYCLE_EXIT_POSIX, LIFECYCLE_EXIT_C99 };
__attribute__((noreturn)) void lifecycle_immediate_exit(int status, enum lifecycle_exit_kind kind);

/* True when the end of this image has something to do: this is the process whose allocations
 * cuprof holds (not a vfork child, not a forked child that made no CUDA call) and CUPROF_DUMP_ON
 * has `exit`, `signal` or `term`. Async-signal-safe. */
bool lifecycle_image_end_due(void);

/* Before an exec that will replace this image (exec_dump.h), once lifecycle_image_end_due, outside
 * a signal handler (else one line, as at _exit, and false): waits for a dump in flight, writes the
 * image's snapshot with `exit` in CUPROF_DUMP_ON
 * ("before exec"), and returns true with no later dump let start (the exec would cut it off): then
 * call lifecycle_exec_failed() if the exec returns. */
bool lifecycle_before_exec(void);
void lifecycle_exec_failed(void);

/* abort, as libcuprof exports it: uncaught C++ exceptions (std::terminate), failed checks that
 * abort, Python's os.abort and fatal errors end the program without exit's handlers. With `exit`
 * in CUPROF_DUMP_ON, in the process cuprof holds, the dumper thread writes the exit snapshot
 * ("ended by abort") while this thread waits (the failing program's heap and locks are not to be
 * trusted here), unless this thread holds one of cuprof's locks; then glibc's abort. */
__attribute__((noreturn)) void lifecycle_abort(void);

/* True exactly once per process (and once again in each forked child): the first OOM dumps. */
bool lifecycle_claim_oom_dump(void);

#endif
