/* nvcc_thrust: built by nvcc -cudart shared (the only app that compiles thrust: it is slow).
 * A thrust::device_vector is built from host data, resized (its elements move with a device copy,
 * the new ones are filled by a kernel), filled (a kernel) and copied back. Kernels run no code on
 * the simulated device, so only bytes that went through copies are printed. Every statement that
 * makes thrust allocate carries an "alloc:NAME" comment that tests/integration/nvcc finds.
 * Output: "alloc NAME SIZE" per device allocation thrust makes, sizes and a checksum, then
 *   nvcc_thrust: allocs=A frees=F live_bytes=0 */
#include <cstdio>
#include <thrust/copy.h>
#include <thrust/device_vector.h>
#include <thrust/fill.h>
#include <thrust/host_vector.h>

static void
run()
{
    thrust::host_vector<int> h(1000);
    for (int i = 0; i < 1000; i++)
        h[i] = 3 * i + 1;
    printf("alloc ctor %zu\n", 1000 * sizeof(int));
    thrust::device_vector<int> v(h.begin(), h.end()); // alloc:ctor
    printf("alloc resize %zu\n", 5000 * sizeof(int));
    v.resize(5000); // alloc:resize
    thrust::host_vector<int> back(v.size());
    thrust::copy(v.begin(), v.begin() + 1000, back.begin());
    long long sum = 0;
    for (int i = 0; i < 1000; i++)
        sum += back[i];
    printf("size=%zu head_sum=%lld\n", (size_t)v.size(), sum);
    thrust::fill(v.begin(), v.end(), 7);
    cudaError_t e = cudaDeviceSynchronize();
    printf("fill=%s\n", cudaGetErrorName(e));
}

int
main()
{
    run();
    printf("nvcc_thrust: allocs=2 frees=2 live_bytes=0\n");
    return 0;
}
