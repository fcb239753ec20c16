/* chain_c.c: C call chains with noinline and always_inline functions, built with -g. */
#include "chains.h"

#include "snapshot/stacks.h"

struct chain_lines chain_c_lines;

/* An empty asm after each call keeps the caller's frame (no tail call). */
#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

static inline __attribute__((always_inline)) uint32_t
chain_c_leaf(void)
{
    chain_c_lines.leaf = __LINE__ + 1;
    uint32_t id = stacks_capture(0);
    KEEP_FRAME();
    return id;
}

/* A second inlining level: chain_c_leaf is inlined into this, and this into chain_c_mid. */
static inline __attribute__((always_inline)) uint32_t
chain_c_inl(void)
{
    chain_c_lines.inl = __LINE__ + 1;
    uint32_t id = chain_c_leaf();
    KEEP_FRAME();
    return id;
}

__attribute__((noinline)) static uint32_t
chain_c_mid(void)
{
    chain_c_lines.mid = __LINE__ + 1;
    uint32_t id = chain_c_inl();
    KEEP_FRAME();
    return id;
}

__attribute__((noinline)) uint32_t
chain_c_outer(void)
{
    chain_c_lines.outer = __LINE__ + 1;
    uint32_t id = chain_c_mid();
    KEEP_FRAME();
    return id;
}

__attribute__((noinline)) uint32_t
chain_c_other(void)
{
    uint32_t id = chain_c_mid();
    KEEP_FRAME();
    return id;
}

__attribute__((noinline)) uint32_t
chain_c_skip(void)
{
    uint32_t id = stacks_capture(1);
    KEEP_FRAME();
    return id;
}

__attribute__((noinline)) uint32_t
chain_c_recurse(int depth)
{
    uint32_t id = depth <= 0 ? stacks_capture(0) : chain_c_recurse(depth - 1);
    KEEP_FRAME();
    return id;
}
