/* unload.h: dlclose as the program sees it: glibc's, then, when it unmapped a shared object, the
 *   unwinders told (stacks.h), since code loaded later may be mapped where the old code was, and
 *   the object noted with its place (unloaded_modules.h) so that dumps still name its frames.
 * Locking: none of its own (the loader's, inside dl_iterate_phdr and dlclose).
 * Hot path: no (a program closes libraries rarely); never called with a cuprof lock held. */
#ifndef CUPROF_UNLOAD_H
#define CUPROF_UNLOAD_H

/* dlclose(3)'s contract and result; errno and dlerror() as glibc left them. */
int unload_dlclose(void *handle);

#endif
