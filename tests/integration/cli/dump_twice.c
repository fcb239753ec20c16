/* dump_twice: two snapshots of one run for `cuprof diff`. Four 3 MiB parameters, a dump through
 * cuprof_dump_snapshot(A); then one parameter freed and five activations (5 MiB + i x 4 KiB)
 * allocated, and a dump through SIGUSR1 (the shim writes CUPROF_SNAPSHOT's file B, waited for).
 * Usage: dump_twice A B. Output: dump_twice: params=N param_bytes=P freed_bytes=F grown=G */
#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

#include "preload/cuprof.h"

#define N_PARAMS 4
#define N_ACTS   5
#define PARAM    ((size_t)3 << 20)

static void
check(int ok, const char *what)
{
    if (!ok) {
        printf("dump_twice: FAIL %s\n", what);
        exit(1);
    }
}

static void
params(void **p)
{
    for (int i = 0; i < N_PARAMS; i++)
        check(cudaMalloc(&p[i], PARAM) == cudaSuccess, "cudaMalloc (parameter)");
}

static size_t
activations(void **a)
{
    size_t grown = 0;
    for (int i = 0; i < N_ACTS; i++) {
        size_t n = ((size_t)5 << 20) + (size_t)i * 4096;
        check(cudaMalloc(&a[i], n) == cudaSuccess, "cudaMalloc (activation)");
        grown += n;
    }
    return grown;
}

int
main(int argc, char **argv)
{
    check(argc == 3, "usage: dump_twice A B");
    void *p[N_PARAMS], *a[N_ACTS];
    params(p);
    check(cuprof_dump_snapshot(argv[1]) == CUPROF_SUCCESS, "cuprof_dump_snapshot");
    check(cudaFree(p[N_PARAMS - 1]) == cudaSuccess, "cudaFree");
    size_t grown = activations(a);
    check(raise(SIGUSR1) == 0, "raise(SIGUSR1)");
    /* The shim's dumper thread writes B; it appears whole (written aside, then linked). */
    struct stat st;
    struct timespec tick = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 6000 && stat(argv[2], &st) != 0; i++)
        nanosleep(&tick, NULL);
    check(stat(argv[2], &st) == 0, "no snapshot from SIGUSR1 within 60 s");
    printf("dump_twice: params=%d param_bytes=%zu freed_bytes=%zu grown=%zu\n", N_PARAMS,
           N_PARAMS * PARAM, PARAM, grown);
    return 0;
}
