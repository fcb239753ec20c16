/* layers.h: other CUDA interposers in the process (layers that export dlsym and driver entry
 *   points and hand out their own wrappers, as HAMi-core's libvgpu.so does): the dlsym of the
 *   next layer, through which cuprof reaches the driver, and, when such a layer is preloaded
 *   before libcuprof, binding the other objects' imports of cuprof's names to cuprof.
 * Locking: detection is pthread_once; rebinding holds a mutex (it writes other objects' GOTs).
 * Hot path: no (start-up, and dlsym calls while a layer precedes cuprof). */
#ifndef CUPROF_LAYERS_H
#define CUPROF_LAYERS_H

#include <stdbool.h>

/* dlsym as the next layer answers it: the first definition of `dlsym` in the global scope other
 * than cuprof's (glibc's own when no other layer exports one). Used for every lookup of the
 * driver, so cuprof's device calls go through a layer, never around it. */
void *layers_dlsym(void *handle, const char *name);

/* At start-up (the constructor; not in off mode): when a layer that exports dlsym comes before
 * libcuprof in the global scope, binds the imports of cuprof's exported names in the program and
 * in every library loaded after libcuprof to cuprof's definitions, as if libcuprof had been
 * preloaded first. Silent: a process that never uses CUDA says nothing. */
void layers_start(void);

/* When cuprof starts serving a process (its first CUDA call): one line saying that a layer
 * precedes cuprof and what was done about it, or why it could not be (CUPROF_LOG=info). */
void layers_log_start(void);

/* Binds the imports of objects loaded since the last call (dlopen'ed libraries); cheap when none
 * was. Does nothing unless layers_start found a layer ahead of cuprof. */
void layers_rebind_new_objects(void);

/* True when layers_start found a layer ahead of cuprof (for tests and the debug line). */
bool layers_ahead(void);

#endif
