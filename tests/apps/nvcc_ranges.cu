// nvcc_ranges: cuMemGetAddressRange and the pointer range attributes inside and just past
// allocations of six sizes, each beside a neighbour: an allocation answers for the bytes asked
// for, and nothing answers past them. Compared with tests/integration/nvcc/real/nvcc_ranges.out.
#include <cstdio>
#include <cuda.h>
#include <cuda_runtime.h>
static const char *
cu(CUresult r)
{
    const char *s = nullptr;
    cuGetErrorName(r, &s);
    return s ? s : "?";
}
int
main()
{
    cudaFree(0);
    const size_t sizes[] = {1, 3000, 4096, 1048577, 5000000, 20971521};
    for (size_t n : sizes) {
        void *keep = nullptr, *a = nullptr;
        cudaMalloc(&keep, n); // a neighbour, so the block under test is not alone in its segment
        if (cudaMalloc(&a, n) != cudaSuccess) {
            printf("malloc %zu failed\n", n);
            continue;
        }
        size_t r512 = (n + 511) / 512 * 512, r2m = (n + (2u << 20) - 1) / (2u << 20) * (2u << 20);
        const size_t offs[] = {0, n - 1, n, r512 - 1, r512, r2m - 1};
        for (size_t off : offs) {
            CUdeviceptr base = 0;
            size_t sz = 0;
            CUresult r = cuMemGetAddressRange(&base, &sz, (CUdeviceptr)a + off);
            size_t asz = 0;
            CUdeviceptr astart = 0;
            CUresult r2 =
                cuPointerGetAttribute(&asz, CU_POINTER_ATTRIBUTE_RANGE_SIZE, (CUdeviceptr)a + off);
            CUresult r3 = cuPointerGetAttribute(&astart, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                                (CUdeviceptr)a + off);
            printf("n=%zu off=%zu getrange=%s base_off=%lld size=%zu attr=%s/%s start_off=%lld "
                   "size=%zu\n",
                   n, off, cu(r), r == CUDA_SUCCESS ? (long long)((CUdeviceptr)a - base) : -1,
                   r == CUDA_SUCCESS ? sz : 0, cu(r2), cu(r3),
                   r3 == CUDA_SUCCESS ? (long long)((CUdeviceptr)a - astart) : -1,
                   r2 == CUDA_SUCCESS ? asz : 0);
        }
        CUpointer_attribute at[2] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                     CU_POINTER_ATTRIBUTE_RANGE_SIZE};
        CUdeviceptr st = 0;
        size_t ss = 0;
        void *data[2] = {&st, &ss};
        CUresult r4 = cuPointerGetAttributes(2, at, data, (CUdeviceptr)a + 1);
        printf("n=%zu attrs=%s start_off=%lld size=%zu\n", n, cu(r4),
               st == 0 ? -1LL : (long long)((CUdeviceptr)a - st), ss);
        cudaFree(a);
        cudaFree(keep);
    }
    return 0;
}
