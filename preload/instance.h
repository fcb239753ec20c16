/* instance.h: whether this copy of libcuprof.so is the one in charge. Two copies in one process (an
 *   installed one already in LD_PRELOAD and a build tree's) would each hook dlsym and call the
 *   other's hook as "the next layer" for ever. The copy first in the global scope serves; any
 *   later copy is inert: configuration checked, then pure pass-through (off mode) with no
 *   runtime, no dumps, no control socket, no layers of its own, and one line saying so.
 * Locking: none (one atomic, computed once; racing threads compute the same answer).
 * Hot path: no (start-up and lookups; the shim's hot path never asks). */
#ifndef CUPROF_INSTANCE_H
#define CUPROF_INSTANCE_H

#include <stdbool.h>

/* True when another libcuprof (its cuprof_version export) comes first in the global scope. */
bool instance_inert(void);

/* True when this copy is in the program's own search list (LD_PRELOAD, or linked to it). A copy
 * that dlopen loaded later (NVTX_INJECTION64_PATH without LD_PRELOAD, ctypes) intercepts
 * nothing: the runtime treats it as off mode, so it rebinds nothing and records nothing. */
bool instance_preloaded(void);

/* Once per process, when an inert copy is first asked for a driver entry point (so a process
 * that never uses CUDA says nothing): one line naming both copies. */
void instance_log_inert(void);

#endif
