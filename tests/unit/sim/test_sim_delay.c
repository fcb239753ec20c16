/* test_sim_delay.c: SIMCUDA_MALLOC_US / SIMCUDA_FREE_US really delay each device allocation and
 *   each cuMemFree (lower bounds only: a loaded machine can only make the calls slower).
 * Lock: none (one thread). Hot path: no. */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "sim_test.h"

#define ALLOCS 20

static uint64_t
now_us(void)
{
    struct timespec ts;
    assert_int_equal(clock_gettime(CLOCK_MONOTONIC, &ts), 0);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* The delay a variable asks for (the test's environment sets both, non-zero). */
static uint64_t
env_us(const char *name)
{
    const char *v = getenv(name);
    assert_non_null(v);
    uint64_t us = strtoull(v, NULL, 10);
    assert_true(us > 0);
    return us;
}

static void
test_alloc_and_free_delay(void **state)
{
    (void)state;
    uint64_t malloc_us = env_us("SIMCUDA_MALLOC_US");
    uint64_t free_us = env_us("SIMCUDA_FREE_US");
    CUdeviceptr ptrs[ALLOCS];

    uint64_t t0 = now_us();
    for (int i = 0; i < ALLOCS; i++)
        assert_int_equal(cuMemAlloc(&ptrs[i], 4096), CUDA_SUCCESS);
    uint64_t t1 = now_us();
    for (int i = 0; i < ALLOCS; i++)
        assert_int_equal(cuMemFree(ptrs[i]), CUDA_SUCCESS);
    uint64_t t2 = now_us();

    print_message("%d cuMemAlloc: %llu us (>= %llu), %d cuMemFree: %llu us (>= %llu)\n", ALLOCS,
                  (unsigned long long)(t1 - t0), (unsigned long long)(ALLOCS * malloc_us), ALLOCS,
                  (unsigned long long)(t2 - t1), (unsigned long long)(ALLOCS * free_us));
    assert_true(t1 - t0 >= ALLOCS * malloc_us);
    assert_true(t2 - t1 >= ALLOCS * free_us);
}

int
main(int argc, char **argv)
{
    static const struct CMUnitTest delay[] = {
        cmocka_unit_test_setup(test_alloc_and_free_delay, sim_test_setup),
    };
    static const struct sim_test_group groups[] = {
        {"delay", delay, sizeof(delay) / sizeof(delay[0])},
    };
    return sim_test_main(argc, argv, groups, sizeof(groups) / sizeof(groups[0]));
}
