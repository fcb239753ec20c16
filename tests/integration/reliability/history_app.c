/* history_app: N cudaMalloc/cudaFree pairs of sizes 1 + (i * 7919) % 65536 (so the test can tell
 * which iterations the kept history entries came from).
 * Usage: history_app N. Output: history: n=N failures=F
 * Lock: none (one thread). Hot path: n/a (test program). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

int
main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    long failures = 0;
    for (long i = 0; i < n; i++) {
        void *p = NULL;
        if (cudaMalloc(&p, 1 + (size_t)((i * 7919) % 65536)) != cudaSuccess || cudaFree(p) != 0)
            failures++;
    }
    printf("history: n=%ld failures=%ld\n", n, failures);
    return failures != 0;
}
