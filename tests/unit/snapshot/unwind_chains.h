/* unwind_chains.h: the call chains test_unwind.c captures from: C++ code in a catch block and in
 *   a destructor run by an exception, and C built with frame pointers (alloca, a large frame).
 * Locking: none.
 * Hot path: no (tests). */
#ifndef CUPROF_UNWIND_CHAINS_H
#define CUPROF_UNWIND_CHAINS_H

#ifdef __cplusplus
extern "C" {
#endif

#define UNWIND_SHOT_FRAMES 256

/* One capture of each unwinder at one call site: n[k] is -1 for an unwinder not installed. */
struct unwind_shot {
    int n[3];
    void *f[3][UNWIND_SHOT_FRAMES];
};

/* Captures with every unwinder (test_unwind.c). */
void unwind_test_shoot(struct unwind_shot *s);

/* unwind_cpp.cpp */
void unwind_cpp_in_catch(struct unwind_shot *s);
void unwind_cpp_in_cleanup(struct unwind_shot *s);
void unwind_cpp_rethrown(struct unwind_shot *s);

/* unwind_fp.c: rbp-based CFAs */
void unwind_fp_alloca(struct unwind_shot *s, int bytes);
void unwind_fp_large_frame(struct unwind_shot *s);
unsigned
unwind_fp_busy(unsigned n); /* calls of small functions, for signals to interrupt anywhere */

#ifdef __cplusplus
}
#endif

#endif
