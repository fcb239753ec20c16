/* unwind_fp.c: functions built with frame pointers (meson gives this file
 * -fno-omit-frame-pointer), so their CFA is rbp plus a constant: alloca, a large frame, and small
 * calls that a profiling signal interrupts anywhere (prologues and epilogues included). */
#include <alloca.h>
#include <string.h>

#include "unwind_chains.h"

#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

__attribute__((noinline)) static void
fp_inner(struct unwind_shot *s, char *buf)
{
    buf[0]++;
    unwind_test_shoot(s);
    KEEP_FRAME();
}

__attribute__((noinline)) void
unwind_fp_alloca(struct unwind_shot *s, int bytes)
{
    char *buf = alloca((size_t)bytes);
    memset(buf, 1, (size_t)bytes);
    fp_inner(s, buf);
    KEEP_FRAME();
}

__attribute__((noinline)) void
unwind_fp_large_frame(struct unwind_shot *s)
{
    volatile char big[300000];
    big[0] = 1;
    big[sizeof(big) - 1] = 2;
    fp_inner(s, (char *)big);
    KEEP_FRAME();
}

__attribute__((noinline)) static unsigned
fp_leaf(unsigned x)
{
    volatile unsigned a[8];
    for (unsigned i = 0; i < 8; i++)
        a[i] = x + i;
    return a[x & 7];
}

__attribute__((noinline)) static unsigned
fp_mid(unsigned x)
{
    unsigned r = fp_leaf(x) + fp_leaf(x + 1);
    KEEP_FRAME();
    return r;
}

unsigned
unwind_fp_busy(unsigned n)
{
    unsigned r = 0;
    for (unsigned i = 0; i < n; i++)
        r += fp_mid(i);
    return r;
}
