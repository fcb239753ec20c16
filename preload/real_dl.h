/* real_dl.h: glibc's real dlsym (reached with dlvsym, never through our own export) and
 *   RTLD_NEXT emulated relative to the real caller, not relative to libcuprof.
 * Locking: none: the real pointer is published with an atomic store, lookups hold no lock.
 * Hot path: no (dlsym lookups happen at library start-up), but it runs before any cuprof init and
 *   re-entrantly, so it allocates nothing itself and logs nothing. */
#ifndef CUPROF_REAL_DL_H
#define CUPROF_REAL_DL_H

#include <stdbool.h>

/* For the dlsym path: sanitizer runtimes call dlsym(RTLD_NEXT, ...) while they initialise, before
 * their shadow memory exists, so this code must not be instrumented. */
#define REAL_DL_UNINSTRUMENTED __attribute__((no_sanitize("address", "undefined")))

/* glibc's dlsym (dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"), then newer versions). */
void *real_dl_dlsym(void *handle, const char *name);

/* glibc's dlclose (the next definition after libcuprof's own export); -1 if there is none. */
int real_dl_close(void *handle);
/* What dlsym(RTLD_NEXT, name) returns when called from code at `caller`: the first definition in
 * an object loaded after the caller's object. */
void *real_dl_next(const void *caller, const char *name);

/* libcuprof's own exported definition of `name` (read from its dynamic symbol table: no dlopen,
 * no allocation), or NULL. */
void *real_dl_own_symbol(const char *name);

/* True when addr lies inside libcuprof.so itself. */
bool real_dl_is_self(const void *addr);

#endif
