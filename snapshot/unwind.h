/* unwind.h: cuprof's unwinder, for machines without libunwind: walks the calling thread's stack
 *   with one rule per return address (cfi.h), cached in a lock-free table filled the first time
 *   an address is seen (its FDE found by libgcc's _Unwind_Find_FDE), and hands any stack it
 *   cannot walk (a frame without an FDE, or one whose rule it does not keep) to libgcc's unwinder
 *   through glibc's backtrace(), so its frames are libgcc's frames either way.
 * Locking: none: a table slot is claimed by compare-and-swap, and claimed again only once its
 *   generation has passed (unwind_forget_rules); the table is never freed.
 * Hot path: unwind_backtrace is: no malloc, no lock of its own, callable from a signal handler
 *   as glibc's backtrace is once warm (a new return address asks libgcc for its FDE). */
#ifndef CUPROF_UNWIND_H
#define CUPROF_UNWIND_H

#include <stdbool.h>
#include <stdint.h>

/* Finds libgcc's FDE lookup, maps the rule table and warms glibc's backtrace (which dlopens
 * libgcc_s.so.1 on its first call). False when libgcc_s.so.1 or its _Unwind_Find_FDE is
 * missing: unwind_backtrace must then not be called. Call before any unwind_backtrace (the work is
 * done once). */
bool unwind_init(void);

/* backtrace(3)'s contract: up to `max` return addresses of the calling thread's stack, the first
 * one in unwind_backtrace's caller; returns how many. */
int unwind_backtrace(void **buf, int max);

/* Whether the calling thread runs a signal handler, told by walking its whole stack without
 * keeping a frame: SIGNAL_HANDLER when the walk crosses a signal frame (the handler interrupted
 * code that may hold any lock); PLAIN when it reaches the thread's outermost frame without one;
 * UNKNOWN otherwise (a frame cuprof's rules cannot step, another architecture, unwind_init not
 * done or failed). Async-signal-safe once unwind_init has run; needs no buffer. */
enum unwind_context {
    UNWIND_CONTEXT_UNKNOWN,
    UNWIND_CONTEXT_PLAIN,
    UNWIND_CONTEXT_SIGNAL_HANDLER,
};
enum unwind_context unwind_caller_context(void);

/* glibc's own backtrace (libgcc's unwinder), never an interceptor's of the same name (a
 * sanitizer's adds a frame of its own): what a stack falls back on. Any time. */
typedef int (*unwind_backtrace_fn)(void **buf, int max);
unwind_backtrace_fn unwind_libc_backtrace(void);

/* What the unwinder has done in this process (relaxed counters). */
struct unwind_stats {
    uint64_t rules;      /* return addresses whose rule was read from their FDE */
    uint64_t fallbacks;  /* stacks handed to libgcc's unwinder */
    uint32_t generation; /* how many times the rules were forgotten */
};
void unwind_get_stats(struct unwind_stats *out);
/* Code was unloaded (dlclose): every cached rule is forgotten, since other code may be mapped at
 * the same addresses next; walks already under way finish with the rules they had. Not on the
 * hot path; any thread, any time. Past 131071 times, libgcc's unwinder takes every stack. */
void unwind_forget_rules(void);

#endif
