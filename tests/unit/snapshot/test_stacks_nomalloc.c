/* test_stacks_nomalloc.c: once warm, capturing and interning stacks and appending to the trace
 * ring call malloc zero times. This binary replaces malloc & co. with counting wrappers over
 * glibc's __libc_* entry points, so it is not built under the sanitizers (they own malloc). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "chains.h"
#include "snapshot/stacks.h"
#include "snapshot/trace_ring.h"
#include "snapshot/unwind.h"

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void *__libc_memalign(size_t align, size_t size);
extern void __libc_free(void *p);

static _Atomic int g_counting;
static _Atomic long g_calls;

static void
count_call(void)
{
    if (atomic_load_explicit(&g_counting, memory_order_relaxed))
        atomic_fetch_add_explicit(&g_calls, 1, memory_order_relaxed);
}

void *
malloc(size_t size)
{
    count_call();
    return __libc_malloc(size);
}

void *
calloc(size_t n, size_t size)
{
    count_call();
    return __libc_calloc(n, size);
}

void *
realloc(void *p, size_t size)
{
    count_call();
    return __libc_realloc(p, size);
}

void *
aligned_alloc(size_t align, size_t size)
{
    count_call();
    return __libc_memalign(align, size);
}

int
posix_memalign(void **out, size_t align, size_t size)
{
    count_call();
    void *p = __libc_memalign(align, size);
    if (p == NULL)
        return 12; /* ENOMEM */
    *out = p;
    return 0;
}

void
free(void *p)
{
    __libc_free(p);
}

static long
calls_during_start(void)
{
    atomic_store(&g_calls, 0);
    atomic_store(&g_counting, 1);
    return 0;
}

static long
calls_during_stop(void)
{
    atomic_store(&g_counting, 0);
    return atomic_load(&g_calls);
}

/* Not unrollable: one call site, one stack. */
static volatile int g_reps = 1000, g_depths = 200, g_two = 2;

static void
test_wrapper_counts(void **state)
{
    (void)state;
    calls_during_start();
    void *volatile p = malloc(24);
    void *volatile q = calloc(2, 8);
    long n = calls_during_stop();
    free(p);
    free(q);
    assert_int_equal(n, 2); /* the wrapper is live, so a zero below means something */
}

/* Captures `reps` times from one call site: returns the id, *mismatch != 0 if any differed. */
__attribute__((noinline)) static uint32_t
capture_loop(int reps, uint32_t *mismatch)
{
    /* No branch on i: the compiler must not peel an iteration into a second call site. */
    uint32_t any = 0, all = UINT32_MAX;
    for (int i = 0; i < reps; i++) {
        uint32_t id = chain_c_outer();
        any |= id;
        all &= id;
    }
    *mismatch = any ^ all;
    return all;
}

static void
test_warm_capture_no_malloc(void **state)
{
    (void)state;
    stacks_configure(STACKS_ALL, 32);
    stacks_warm_up();
    uint32_t ids[2], mismatch[2];
    long n = 0;
    size_t count = 0;
    /* Round 0 interns the stack; round 1 (same call site) must only hit, without malloc. */
    for (int round = 0; round < g_two; round++) {
        if (round == 1) {
            count = stacks_count();
            calls_during_start();
        }
        ids[round] = capture_loop(g_reps, &mismatch[round]);
    }
    n = calls_during_stop();
    assert_int_not_equal(ids[0], 0);
    assert_int_equal(ids[1], ids[0]);
    assert_int_equal(mismatch[0] | mismatch[1], 0);
    assert_int_equal(stacks_count(), count);
    assert_int_equal(n, 0);
}

static void
test_new_stacks_no_malloc(void **state)
{
    (void)state;
    stacks_configure(STACKS_ALL, STACKS_MAX_DEPTH);
    size_t before = stacks_count();
    calls_during_start();
    for (int d = 0; d < g_depths; d++)
        (void)chain_c_recurse(d);
    long n = calls_during_stop();
    assert_int_equal(n, 0);
    assert_int_equal(stacks_count(), before + (size_t)g_depths);
}

/* cuprof's unwinder itself, whichever unwinder the captures above used: its first walk of
 * return addresses it has never seen (rules read from .eh_frame) and its cached walks. */
__attribute__((noinline)) static int
unwind_fresh(void **buf, int depth)
{
    int n = depth > 0 ? unwind_fresh(buf, depth - 1) : unwind_backtrace(buf, 64);
    __asm__ volatile("" ::: "memory");
    return n;
}

static void
test_cuprof_unwinder_no_malloc(void **state)
{
    (void)state;
    assert_true(unwind_init());
    void *buf[64];
    struct unwind_stats before, after;
    unwind_get_stats(&before);
    calls_during_start();
    int first = unwind_fresh(buf, 5);
    for (int i = 0; i < g_reps; i++)
        assert_int_equal(unwind_fresh(buf, 5), first);
    long n = calls_during_stop();
    unwind_get_stats(&after);
    assert_true(first >= 8);
    assert_true(after.rules > before.rules); /* the first walk read new rules */
    assert_int_equal(after.fallbacks, before.fallbacks);
    assert_int_equal(n, 0);
}

static void
test_ring_append_no_malloc(void **state)
{
    (void)state;
    struct trace_ring *ring = trace_ring_create(2, 64, HISTORY_ALL);
    assert_non_null(ring);
    struct trace_sink sink = trace_ring_sink(ring);
    calls_during_start();
    for (int i = 0; i < g_reps; i++) {
        struct trace_event e = {.action = TRACE_ALLOC, .device = (int16_t)(i & 1), .addr = 1};
        sink.record(sink.ctx, &e);
    }
    long n = calls_during_stop();
    assert_int_equal(n, 0);
    assert_int_equal(trace_ring_dropped(ring, 0), (uint64_t)(g_reps / 2 - 64));
    trace_ring_destroy(ring);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wrapper_counts),
        cmocka_unit_test(test_warm_capture_no_malloc),
        cmocka_unit_test(test_new_stacks_no_malloc),
        cmocka_unit_test(test_cuprof_unwinder_no_malloc),
        cmocka_unit_test(test_ring_append_no_malloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
