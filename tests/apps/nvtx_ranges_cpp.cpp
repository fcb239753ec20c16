// nvtx_ranges_cpp: the same phases written with NVTX's C++ wrapper (nvtx3.hpp), as C++ training
// code does: scoped ranges (nested, and on a second thread), a domain of its own with a registered
// string, a mark, unique (start/end) ranges, one of them left open at exit.
// Output: `nvtx_ranges_cpp: ok`.
#include <cuda_runtime_api.h>
#include <nvtx3/nvtx3.hpp>

#include <cstdio>
#include <cstdlib>
#include <thread>

namespace
{

struct mylib {
    static constexpr char const *name{"cxxlib"};
};

struct op_message {
    static constexpr char const *message{"op"};
};

void *
alloc(size_t size)
{
    void *p = nullptr;
    if (cudaMalloc(&p, size) != cudaSuccess) {
        std::printf("nvtx_ranges_cpp: FAIL cudaMalloc\n");
        std::exit(1);
    }
    return p;
}

void
step()
{
    nvtx3::scoped_range outer{"epoch"};
    void *kept = nullptr;
    {
        nvtx3::scoped_range inner{"forward"};
        kept = alloc(3 << 20);
    }
    {
        auto &message = nvtx3::registered_string_in<mylib>::get<op_message>();
        nvtx3::scoped_range_in<mylib> op{message};
        cudaFree(alloc(1 << 20));
    }
    nvtx3::mark("checkpoint");
    cudaFree(kept);
}

} // namespace

int
main()
{
    step();
    std::thread t([] {
        nvtx3::scoped_range r{"loader"};
        cudaFree(alloc(1 << 20));
    });
    t.join();
    {
        nvtx3::unique_range io{"io"};
    }
    new nvtx3::unique_range{"teardown"}; // never destroyed: open at exit
    std::printf("nvtx_ranges_cpp: ok\n");
    return 0;
}
