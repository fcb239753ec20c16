/* loader_gate.h: cuprof's dl_iterate_phdr calls (and libunwind's, rebound here by stacks.c),
 *   counted so that a fork waits for them. glibc 2.36 does not reset the loader's write lock in a
 *   forked child: a fork that catches another thread inside dl_iterate_phdr leaves the child a
 *   lock nobody will release, and its first dl_iterate_phdr, dlopen or exception waits forever.
 * Locking: one counter and one flag, both atomic; a fork waits at most LOADER_GATE_WAIT_MS for
 *   the calls under way, and a call that finds a fork under way waits at most as long.
 * Hot path: no (stacks take it on an unwinder's slow path only: an address seen for the first
 *   time). */
#ifndef CUPROF_LOADER_GATE_H
#define CUPROF_LOADER_GATE_H

#include <link.h>
#include <stddef.h>

#define LOADER_GATE_WAIT_MS 1000

typedef int (*loader_gate_callback)(struct dl_phdr_info *info, size_t size, void *data);
typedef int (*loader_gate_iterate_fn)(loader_gate_callback callback, void *data);

/* dl_iterate_phdr inside the gate. */
int loader_gate_iterate(loader_gate_callback callback, void *data);

/* Around a call that reaches dl_iterate_phdr through code cuprof cannot rebind. */
void loader_gate_enter(void);
void loader_gate_leave(void);

/* In fork's prepare handler: no new call goes in, and the calls under way (other than the
 * forking thread's own) have returned, or LOADER_GATE_WAIT_MS has passed. */
void loader_gate_close_for_fork(void);
/* In the parent after fork: calls go in again. */
void loader_gate_open_after_fork(void);
/* In the child after fork: only the forking thread's own calls are under way. */
void loader_gate_reset_after_fork(void);

#endif
