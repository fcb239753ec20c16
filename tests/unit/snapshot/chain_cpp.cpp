// chain_cpp.cpp: a C++ call chain (namespaced class, noinline and always_inline members), -g.
#include "chains.h"

#include <cstdint>

extern "C" {
#include "snapshot/stacks.h"
}

struct chain_lines chain_cpp_lines;

#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

namespace cuprof_test
{

class Widget
{
  public:
    __attribute__((noinline)) std::uint32_t capture(int depth);

  private:
    inline __attribute__((always_inline)) std::uint32_t inner(int depth);
    int calls_ = 0;
};

std::uint32_t
Widget::inner(int depth)
{
    calls_ += depth;
    chain_cpp_lines.leaf = __LINE__ + 1;
    std::uint32_t id = stacks_capture(0);
    KEEP_FRAME();
    return id;
}

std::uint32_t
Widget::capture(int depth)
{
    chain_cpp_lines.mid = __LINE__ + 1;
    std::uint32_t id = inner(depth);
    KEEP_FRAME();
    return id;
}

} // namespace cuprof_test

extern "C" __attribute__((noinline)) std::uint32_t
cpp_chain_entry(void)
{
    cuprof_test::Widget w;
    chain_cpp_lines.outer = __LINE__ + 1;
    std::uint32_t id = w.capture(3);
    KEEP_FRAME();
    return id;
}
