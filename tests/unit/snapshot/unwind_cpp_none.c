/* unwind_cpp_none.c: without a C++ compiler, the exception chains capture plain C calls. */
#include "unwind_chains.h"

void
unwind_cpp_in_catch(struct unwind_shot *s)
{
    unwind_test_shoot(s);
    __asm__ volatile("" ::: "memory");
}

void
unwind_cpp_in_cleanup(struct unwind_shot *s)
{
    unwind_test_shoot(s);
    __asm__ volatile("" ::: "memory");
}

void
unwind_cpp_rethrown(struct unwind_shot *s)
{
    unwind_test_shoot(s);
    __asm__ volatile("" ::: "memory");
}
