/* test_allocator_threads.c: threads sharing one device contend for its lock (the futex slow
 * path), or one of them owns it (the biased path) and the others take it back now and then:
 * every counter must still add up exactly and live blocks must never overlap. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "alloc_test_util.h"
#include "allocator/allocator_state.h"
#include "allocator/cuprof_errors.h"

#define THREADS 3
#define ROUNDS  20000
#define LIVE    8

struct worker {
    struct allocator *alloc;
    long rounds;
    unsigned pause; /* spins between operations: an occasional visitor to the device */
    uint64_t seed;
    uint64_t live[LIVE];
    size_t size[LIVE];
    long mallocs;
    int failures;
};

static void *
work(void *arg)
{
    struct worker *w = arg;
    for (long i = 0; i < w->rounds; i++) {
        for (volatile unsigned k = 0; k < w->pause; k++) {
        }
        w->seed ^= w->seed << 13, w->seed ^= w->seed >> 7, w->seed ^= w->seed << 17;
        int slot = (int)(w->seed % LIVE);
        if (w->live[slot] != 0) {
            w->failures += allocator_free(w->alloc, w->live[slot], 0) != 0;
            w->live[slot] = 0;
        }
        /* 512 B to 3 MiB: both pools, splits and merges, new segments now and then. */
        size_t size = (size_t)512 << ((w->seed >> 8) % 13);
        w->failures += allocator_malloc(w->alloc, 0, size, 0, 0, &w->live[slot]) != 0;
        w->size[slot] = size;
        w->mallocs++;
    }
    return NULL;
}

/* Runs the workers on device 0 and checks what they left: live blocks distinct and found at
 * their size, the stats adding up, the invariants, then everything freed. */
static void
run_and_check(struct alloc_fixture *fx, struct worker *w, int count)
{
    pthread_t tid[THREADS];
    long total = 0;
    for (int t = 0; t < count; t++) {
        w[t].alloc = fx->alloc;
        w[t].seed = 0x9e3779b97f4a7c15ULL * (uint64_t)(t + 1);
        total += w[t].rounds;
        assert_int_equal(pthread_create(&tid[t], NULL, work, &w[t]), 0);
    }
    for (int t = 0; t < count; t++)
        assert_int_equal(pthread_join(tid[t], NULL), 0);
    int64_t live_bytes = 0, live_count = 0;
    for (int t = 0; t < count; t++) {
        assert_int_equal(w[t].failures, 0);
        assert_int_equal(w[t].mallocs, w[t].rounds);
        for (int s = 0; s < LIVE; s++) {
            int dev = -1;
            uint64_t base = 0;
            size_t size = 0;
            assert_true(allocator_lookup(fx->alloc, w[t].live[s], &dev, &base, &size));
            assert_true(dev == 0 && base == w[t].live[s] && size == w[t].size[s]);
            live_bytes += (int64_t)size;
            live_count++;
            for (int u = 0; u < count; u++)
                for (int r = 0; r < LIVE; r++)
                    assert_true((u == t && r == s) || w[u].live[r] != w[t].live[s]);
        }
    }
    struct memory_stats st;
    allocator_get_stats(fx->alloc, 0, &st);
    assert_int_equal(st.allocation[STAT_ALL].allocated, total);
    assert_int_equal(st.allocation[STAT_ALL].current, live_count);
    assert_int_equal(st.allocated_bytes[STAT_ALL].current, live_bytes);
    expect_invariants(fx->alloc);
    for (int t = 0; t < count; t++)
        for (int s = 0; s < LIVE; s++)
            must_free(fx->alloc, w[t].live[s]);
    allocator_get_stats(fx->alloc, 0, &st);
    assert_int_equal(st.allocation[STAT_ALL].freed, total);
    assert_int_equal(st.allocated_bytes[STAT_ALL].current, 0);
    assert_int_equal(st.active_bytes[STAT_ALL].current, 0);
    expect_invariants(fx->alloc);
}

static void
test_threads_one_device(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 34, 1);
    fx->fake.keep_trace = false;
    struct worker w[THREADS] = {{0}};
    for (int t = 0; t < THREADS; t++)
        w[t].rounds = ROUNDS;
    run_and_check(fx, w, THREADS);
    fixture_free(fx);
}

/* One thread does most of the work and owns the device lock; two visitors come by now and then,
 * each visit taking the bias back while the owner may be entering or inside. */
static void
test_threads_owner_and_visitors(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 34, 1);
    fx->fake.keep_trace = false;
    struct worker w[THREADS] = {{0}};
    w[0].rounds = 4 * ROUNDS;
    for (int t = 1; t < THREADS; t++) {
        w[t].rounds = 300;
        w[t].pause = 60000;
    }
    run_and_check(fx, w, THREADS);
    print_message("revocations: %u\n", fx->alloc->devices[0].lock.revocations);
    if (alloc_lock_can_bias())
        assert_true(fx->alloc->devices[0].lock.revocations > 0);
    fixture_free(fx);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_one_device),
        cmocka_unit_test(test_threads_owner_and_visitors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
