/* near_oom_app.c: requests that fit in what the device has left, made after a fill leaves
 * argv[1] MiB free: 3 MiB and 1.5 MiB (PyTorch's rules would ask 20 MiB segments for them), a
 * second 1.5 MiB that takes the last page, then 512 B and 4 KiB that the driver packs into the
 * page the first 1.5 MiB left partly free (PyTorch would ask 2 MiB), then 64 MiB, which fails
 * for everyone. Prints one line per call with the error and the free MiB after it; the test
 * runs it without cuprof and under it and compares. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

static void
ask(const char *what, size_t bytes)
{
    void *p = NULL;
    size_t free_b = 0, total = 0;
    cudaError_t e = cudaMalloc(&p, bytes);
    (void)cudaGetLastError();
    (void)cudaMemGetInfo(&free_b, &total);
    printf("%s=%s free_mib=%zu\n", what, cudaGetErrorName(e), free_b >> 20);
}

int
main(int argc, char **argv)
{
    size_t free_b = 0, total = 0;
    size_t leave = (size_t)atoi(argc > 1 ? argv[1] : "8") << 20;
    void *fill = NULL;
    if (cudaMemGetInfo(&free_b, &total) != cudaSuccess || free_b <= leave)
        return 2;
    printf("fill=%s\n", cudaGetErrorName(cudaMalloc(&fill, free_b - leave)));
    ask("3MiB", 3 << 20);
    ask("1.5MiB", 3 << 19);
    ask("1.5MiB_again", 3 << 19);
    ask("512B", 512);
    ask("4KiB", 4096);
    ask("64MiB", 64 << 20);
    return 0;
}
