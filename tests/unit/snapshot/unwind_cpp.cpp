// unwind_cpp.cpp: captures in a catch block, in a destructor an exception runs (from the landing
// pad of the frame being unwound) and after a rethrow.
#include "unwind_chains.h"

#include <stdexcept>

#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

namespace
{

struct Shooter {
    unwind_shot *s;
    ~Shooter()
    {
        unwind_test_shoot(s);
    }
};

__attribute__((noinline)) void
thrower(int depth)
{
    if (depth == 0)
        throw std::runtime_error("unwind test");
    thrower(depth - 1);
    KEEP_FRAME();
}

__attribute__((noinline)) void
with_cleanup(unwind_shot *s)
{
    Shooter guard{s};
    thrower(3);
    KEEP_FRAME();
}

} // namespace

extern "C" __attribute__((noinline)) void
unwind_cpp_in_catch(unwind_shot *s)
{
    try {
        thrower(4);
    } catch (const std::exception &) {
        unwind_test_shoot(s);
    }
    KEEP_FRAME();
}

extern "C" __attribute__((noinline)) void
unwind_cpp_in_cleanup(unwind_shot *s)
{
    try {
        with_cleanup(s);
    } catch (...) {
    }
    KEEP_FRAME();
}

extern "C" __attribute__((noinline)) void
unwind_cpp_rethrown(unwind_shot *s)
{
    try {
        try {
            thrower(2);
        } catch (...) {
            throw;
        }
    } catch (const std::runtime_error &) {
        unwind_test_shoot(s);
    }
    KEEP_FRAME();
}
