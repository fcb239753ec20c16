/* chains.h: call chains with known functions, files and lines for the stack tests.
 * Locking: none (each chain writes the lines it passed through into globals).
 * Hot path: no (tests only). */
#ifndef CUPROF_TEST_CHAINS_H
#define CUPROF_TEST_CHAINS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The line of each call in a chain: the capture in the inlined leaf, the leaf's call site in
 * chain_c_inl (C only), the inlined function's call site in the noinline mid function, and the
 * mid function's call site in the outer one. */
struct chain_lines {
    int leaf, inl, mid, outer;
};
extern struct chain_lines chain_c_lines;
extern struct chain_lines chain_cpp_lines;

/* chain_c_outer -> chain_c_mid (noinline) -> chain_c_inl (always_inline)
 *   -> chain_c_leaf (always_inline) -> stacks_capture. */
uint32_t chain_c_outer(void);
/* A second call site of chain_c_mid: a different stack. */
uint32_t chain_c_other(void);
/* Captures with skip 1: the stack starts at chain_c_skip's caller. */
uint32_t chain_c_skip(void);
/* Recurses `depth` times through chain_c_recurse, then captures. */
uint32_t chain_c_recurse(int depth);

/* cpp_chain_entry -> cuprof_test::Widget::capture(int) (noinline)
 *   -> cuprof_test::Widget::inner(int) (always_inline) -> stacks_capture. */
uint32_t cpp_chain_entry(void);

#ifdef __cplusplus
}
#endif

#endif
