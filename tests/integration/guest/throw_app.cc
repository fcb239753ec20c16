// throw_app: a C++ program whose exception leaves main after a 1 MiB cudaMalloc (never freed):
// std::terminate, then abort, as NVIDIA's libraries' and thrust's errors end many C++ programs.
// Run by tests/integration/guest/test_guest.py (abort).
#include <cuda_runtime_api.h>

#include <stdexcept>

int
main()
{
    void *p = nullptr;
    if (cudaMalloc(&p, 1 << 20) != cudaSuccess)
        return 1;
    throw std::runtime_error("throw_app: nobody catches this");
}
