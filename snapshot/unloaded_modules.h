/* unloaded_modules.h: the shared objects the program unloaded (dlclose), each with where it was
 *   mapped, so that a dump can still name frames captured in one, and the loader's counts, so
 *   that a symbolizer can tell that its view of the modules is out of date (and an object's code
 *   range as the loader reports it, for everyone who asks the loader).
 * Locking: one private mutex; the count is an atomic.
 * Hot path: no (dlclose and dumps). */
#ifndef CUPROF_UNLOADED_MODULES_H
#define CUPROF_UNLOADED_MODULES_H

#include <link.h>
#include <stdbool.h>
#include <stdint.h>

#define UNLOADED_MODULES_MAX 1024 /* the oldest is forgotten past this many */
#define UNLOADED_PATH_MAX    4096

struct unloaded_module {
    char path[UNLOADED_PATH_MAX]; /* the file it was loaded from */
    uintptr_t base;               /* its load bias (dlpi_addr) */
    uintptr_t lo, hi;             /* its executable segments' range */
};

/* Notes an object that is no longer mapped. The same path at the same base again counts as the
 * most recent. Out of host memory: not noted (its frames stay unnamed). */
void unloaded_modules_add(const char *path, uintptr_t base, uintptr_t lo, uintptr_t hi);

/* The most recently unloaded object whose executable range holds `addr`, when no object loaded
 * now overlaps that range (then `addr` may be the new object's, and is left to it). */
bool unloaded_modules_find(uintptr_t addr, struct unloaded_module *out);

/* How many unloads were noted since the process started. */
uint64_t unloaded_modules_count(void);

/* The range of an object's executable segments as dl_iterate_phdr reports it; lo >= hi when it
 * has none. */
void unloaded_modules_code_range(const struct dl_phdr_info *info, uintptr_t *lo, uintptr_t *hi);

/* How many objects the loader has mapped and unmapped so far (glibc's dlpi_adds, dlpi_subs). */
void unloaded_modules_loader_counts(unsigned long long *adds, unsigned long long *subs);

/* In a forked child: the mutex may have been held by a thread that is not there. */
void unloaded_modules_reset_after_fork(void);

#endif
