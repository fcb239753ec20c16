/* guard.h: the thread-local "inside cuprof" depth guard (heaptrack's recursion guard): while it is
 *   raised, every wrapper forwards straight to the real function, untraced.
 * Locking: none (thread-local state only).
 * Hot path: yes: every wrapper tests it first; async-signal-safe (initial-exec TLS, no calls). */
#ifndef CUPROF_GUARD_H
#define CUPROF_GUARD_H

#include <stdbool.h>

/* initial-exec: a preloaded library gets static TLS, so no __tls_get_addr (which may malloc) runs
 * on the first access from inside dlsym or a signal handler. */
extern _Thread_local unsigned guard_depth __attribute__((tls_model("initial-exec")));

static inline bool
guard_active(void)
{
    return guard_depth != 0;
}

static inline void
guard_enter(void)
{
    guard_depth++;
}

static inline void
guard_leave(void)
{
    guard_depth--;
}

#endif
