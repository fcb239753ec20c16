/* Shared helpers for the simulated-driver unit tests: group selection by argv[1] and a
 * context-on-device-0 setup. Lock: none. Hot path: no. */
#ifndef SIM_TEST_H
#define SIM_TEST_H

#include <cuda.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#define MiB ((size_t)1 << 20)

static inline CUcontext
sim_test_primary(CUdevice dev)
{
    CUcontext ctx = NULL;
    assert_int_equal(cuInit(0), CUDA_SUCCESS);
    assert_int_equal(cuDevicePrimaryCtxRetain(&ctx, dev), CUDA_SUCCESS);
    assert_int_equal(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    return ctx;
}

static inline int
sim_test_setup(void **state)
{
    (void)state;
    sim_test_primary(0);
    return 0;
}

/* Runs the group named argv[1] out of NULL-terminated (name, tests, count) triples. */
struct sim_test_group {
    const char *name;
    const struct CMUnitTest *tests;
    size_t count;
};

static inline int
sim_test_main(int argc, char **argv, const struct sim_test_group *groups, size_t ngroups)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s GROUP\n", argv[0]);
        return 2;
    }
    for (size_t i = 0; i < ngroups; i++)
        if (strcmp(groups[i].name, argv[1]) == 0)
            return _cmocka_run_group_tests(groups[i].name, groups[i].tests, groups[i].count, NULL,
                                           NULL);
    fprintf(stderr, "unknown group %s\n", argv[1]);
    return 2;
}

#endif
