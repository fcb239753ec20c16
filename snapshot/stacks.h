/* stacks.h: captures the calling thread's stack (libunwind where installed, local-only) and
 *   interns it: each distinct instruction-pointer array gets one 32-bit id for the process
 *   lifetime.
 * Locking: lookups of a known stack are lock-free; inserting a new one takes a private mutex.
 *   Never call it with an allocator lock held (unwinding may be slow on a cold path).
 * Hot path: stacks_capture is (no malloc once warm: storage grows in mmap'd chunks). */
#ifndef CUPROF_STACKS_H
#define CUPROF_STACKS_H

#ifndef __cplusplus
#include <stdatomic.h>
#endif
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* CUPROF_STACKS: on alloc and free, on alloc only, never. */
enum stack_mode { STACKS_ALL, STACKS_ALLOC, STACKS_NONE };

#define STACKS_DEFAULT_DEPTH 32u  /* CUPROF_STACK_DEPTH default */
#define STACKS_MAX_DEPTH     256u /* larger depths are clamped to this */

/* Process-wide settings; depth 0 means the default. Safe to call at any time (atomics). */
void stacks_configure(enum stack_mode mode, unsigned depth);
/* PyTorch's stacks="python": where the thread has Python frames, keep only those (a thread
 * without any keeps its native frames). Off by default; any time (atomic). */
void stacks_set_python_only(bool python_only);
#ifndef __cplusplus /* (a C++ test includes this header) */
/* Inline: every intercepted call asks. */
extern _Atomic int stacks_mode_setting __attribute__((visibility("hidden")));
static inline enum stack_mode
stacks_mode(void)
{
    return (enum stack_mode)atomic_load_explicit(&stacks_mode_setting, memory_order_relaxed);
}
#endif
unsigned stacks_depth(void);

/* The unwinders, in the order they are tried: libunwind.so.8 (dlopen'ed privately), cuprof's own
 * (unwind.h: rules cached per return address, libgcc's unwinder for frames it does not follow),
 * then libgcc's unwinder through glibc's backtrace() for every stack. */
enum stacks_unwinder { STACKS_UNWINDER_LIBUNWIND, STACKS_UNWINDER_CUPROF, STACKS_UNWINDER_LIBGCC };

/* The unwinder every capture uses, chosen once (at the first capture or stacks_warm_up), and
 * changed only by stacks_forget_code. */
enum stacks_unwinder stacks_unwinder(void);
/* Code was unloaded (dlclose unmapped a shared object): no stack may be walked with what an
 * unwinder learnt of the code that was there. cuprof's unwinder forgets its rules; libunwind's
 * cache cannot be told, so stacks move from it to cuprof's unwinder (libgcc's without one).
 * True when the unwinder changed. Not on the hot path; any thread. */
bool stacks_forget_code(void);

/* Test hook: start the choice at `first`, as if the unwinders before it were not installed
 * (STACKS_UNWINDER_CUPROF: libunwind.so.8 is not loaded, as on a machine without it). Effective
 * only before the choice is made; returns -1 if it already was. */
__attribute__((warn_unused_result)) int stacks_set_first_unwinder(enum stacks_unwinder first);

/* Captures the calling thread's stack, innermost first, starting at the caller of
 * stacks_capture; drops `skip` more innermost frames, then any innermost frames that lie inside
 * the shared object containing cuprof (when cuprof is not linked into the main program); keeps at
 * most stacks_depth() frames; interns them and returns the id (0 = no stack: STACKS_NONE, an
 * empty stack, or the intern table is full). */
uint32_t stacks_capture(unsigned skip);

/* For error reports: the same frames as stacks_capture (cuprof's own dropped), up to `cap` and
 * at most STACKS_MAX_DEPTH, whatever CUPROF_STACKS and CUPROF_STACK_DEPTH say, written to ips
 * and not interned. Returns how many. Not for the hot path's use (unbounded depth of unwind). */
size_t stacks_backtrace(unsigned skip, uintptr_t *ips, size_t cap);

/* The same frames again, but unwinding only as far as needed for `depth` of them: cheap enough
 * for the hot path when CUPROF_STACKS=none still needs the caller (device memory by library). */
size_t stacks_callers(unsigned skip, uintptr_t *ips, size_t depth);

/* Interns an instruction-pointer array (innermost first) without unwinding; count is clamped
 * to STACKS_MAX_DEPTH. Returns the id, or 0 for count 0 or a full table. Used by captures and
 * by tests and replays that build stacks by hand. */
uint32_t stacks_intern(const uintptr_t *ips, size_t count);

/* The instruction pointers of an interned stack, innermost first; valid for the process
 * lifetime. False (and nothing written) for id 0 or an unknown id. */
bool stacks_get(uint32_t id, const uintptr_t **ips, size_t *count);

/* Number of interned stacks; valid ids are 1..stacks_count(). */
size_t stacks_count(void);

/* The first backtrace of a process (and of each thread) may dlopen, malloc or mmap:
 * call once at init, and the first capture on each new thread pays the per-thread part. It also
 * times a few captures of the calling thread's stack (stacks_frame_ns). */
void stacks_warm_up(void);

/* Nanoseconds a frame took the unwinder in stacks_warm_up's captures (the fastest of a few, whole
 * stacks of up to 64 frames); 0 before it ran. For the log line that names a slow unwinder. */
double stacks_frame_ns(void);

/* In the child after fork(): re-initialises the insert mutex another thread may have held, and
 * leaves libunwind (whose mutexes a parent thread may have held) for cuprof's unwinder. */
void stacks_reset_after_fork(void);

#endif
