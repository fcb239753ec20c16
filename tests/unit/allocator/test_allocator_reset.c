/* test_allocator_reset.c: allocator_forget_device (a context reset) leaves a history that still
 * replays (exact free/segment_free events) and stats moved exactly as on the free and release
 * paths; allocator_reset_after_fork hands a forked child its device locks free. */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <pthread.h>

#include "alloc_test_util.h"
#include "allocator/allocator_state.h"
#include "allocator/cuprof_errors.h"

#define B FAKE_BASE
#define X (FAKE_BASE + 0x100000000ULL) /* an external (VMM) mapping of device 0 */
#define POOL4(name, pool, c, p, a, f)                                                              \
    " " name "." pool ".current=" #c " " name "." pool ".peak=" #p " " name "." pool               \
    ".allocated=" #a " " name "." pool ".freed=" #f
/* A stat array whose current is 0 after the reset: all, small and large peaks and totals. */
#define GONE(name, pa, aa, ps, as, pl, al)                                                         \
    POOL4(name, "all", 0, pa, aa, aa)                                                              \
    POOL4(name, "small_pool", 0, ps, as, as) POOL4(name, "large_pool", 0, pl, al, al)

static void
expect_event(const struct fake_device *f, size_t i, enum trace_action action, uint8_t pool,
             uint64_t addr, uint64_t size, uint32_t stack_id)
{
    expect_trace(f, i, action, addr, size, 0);
    assert_int_equal(f->trace[i].pool, pool);
    assert_int_equal(f->trace[i].stack_id, stack_id);
}

/* Live, pending-free (event on another stream), record_stream'd and external blocks, small and
 * large segments: the reset frees each the way the program would have. */
static void
test_forget_records_frees(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 30, 1);
    struct allocator *a = fx->alloc;
    uint64_t p1 = must_malloc(a, 0, 1000, 0); /* small segment at B, block 1024 */
    uint64_t p2 = must_malloc(a, 0, 3000, 0); /* B + 1024, block 3072 */
    assert_int_equal(allocator_free_on_stream(a, p2, 5, 11), 0); /* pending on stream 5 */
    uint64_t p3 = must_malloc(a, 0, 5 * MIB, 0); /* 20 MiB large segment at B + 2 MiB */
    assert_int_equal(allocator_record_stream(a, p3, 9), 0);
    assert_int_equal(allocator_track_external(a, 0, X, 4096, 0, TRACE_POOL_VMM, 3), 0);
    assert_true(p1 == B && p2 == B + 1024 && p3 == B + 2 * MIB);
    long frees = fx->fake.segment_frees, syncs = fx->fake.syncs;
    long records = fx->fake.event_records, queries = fx->fake.event_queries;
    size_t t0 = fx->fake.trace_count;

    allocator_forget_device(a, 0);

    /* No device call at all: the driver already freed the memory and destroyed the events. */
    assert_int_equal(fx->fake.segment_frees, frees);
    assert_int_equal(fx->fake.syncs, syncs);
    assert_int_equal(fx->fake.event_records, records);
    assert_int_equal(fx->fake.event_queries, queries);
    assert_int_equal(fx->fake.trace_count - t0, 10);
    const struct fake_device *f = &fx->fake;
    /* The pending free completes first (with its own free stack). */
    expect_event(f, t0 + 0, TRACE_FREE_COMPLETED, TRACE_POOL_DEFAULT, p2, 3000, 11);
    /* Then segment by segment in address order; the alloc stack (7) stands in for a free's. */
    expect_event(f, t0 + 1, TRACE_FREE_REQUESTED, TRACE_POOL_DEFAULT, p1, 1000, 7);
    expect_event(f, t0 + 2, TRACE_FREE_COMPLETED, TRACE_POOL_DEFAULT, p1, 1000, 7);
    expect_event(f, t0 + 3, TRACE_SEGMENT_FREE, TRACE_POOL_DEFAULT, B, 2 * MIB, 7);
    expect_event(f, t0 + 4, TRACE_FREE_REQUESTED, TRACE_POOL_DEFAULT, p3, 5 * MIB, 7);
    expect_event(f, t0 + 5, TRACE_FREE_COMPLETED, TRACE_POOL_DEFAULT, p3, 5 * MIB, 7);
    expect_event(f, t0 + 6, TRACE_SEGMENT_FREE, TRACE_POOL_DEFAULT, B + 2 * MIB, 20 * MIB, 7);
    expect_event(f, t0 + 7, TRACE_FREE_REQUESTED, TRACE_POOL_VMM, X, 4096, 3);
    expect_event(f, t0 + 8, TRACE_FREE_COMPLETED, TRACE_POOL_VMM, X, 4096, 3);
    expect_event(f, t0 + 9, TRACE_SEGMENT_FREE, TRACE_POOL_VMM, X, 4096, 3);
    /* Every counter as after frees and releases: current 0, freed == allocated. The peaks of
     * inactive_split_bytes include the merge of p2 into its free neighbour (+3072), as a free
     * would. num_device_free counts the two cached segments (not the external mapping). */
    expect_stats(a, 0,
                 GONE("allocation", 3, 4, 2, 3, 1, 1) GONE("allocated_bytes", 5248000, 5251072,
                                                           5120, 8192, 5242880,
                                                           5242880) GONE("active", 4, 4, 3, 3, 1, 1)
                     GONE("active_bytes", 5251072, 5251072, 8192, 8192, 5242880, 5242880)
                         GONE("requested_bytes", 5250976, 5250976, 8096, 8096, 5242880, 5242880)
                             GONE("segment", 3, 3, 2, 2, 1, 1)
                                 GONE("reserved_bytes", 23072768, 23072768, 2101248, 2101248,
                                      20971520, 20971520) GONE("inactive_split", 2, 2, 1, 1, 1, 1)
                                     GONE("inactive_split_bytes", 17824768, 17827840, 2096128,
                                          2099200, 15728640, 15728640) " num_device_alloc=2"
                                                                       " num_device_free=2");
    expect_invariants(a);
    /* The pointers are no longer ours: frees are refused, lookups fail. */
    int dev = -1;
    uint64_t base = 0;
    size_t size = 0;
    assert_false(allocator_lookup(a, p1, &dev, &base, &size));
    assert_false(allocator_lookup(a, X, &dev, &base, &size));
    assert_int_equal(allocator_free(a, p1, 0), -CUPROF_ENOTOWNED);
    assert_int_equal(allocator_free(a, p3, 0), -CUPROF_ENOTOWNED);
    assert_int_equal(allocator_untrack_external(a, X, 0), -CUPROF_ENOTOWNED);
    /* The device works again afterwards, from a fresh segment. */
    uint64_t q = must_malloc(a, 0, 1000, 0);
    assert_true(q == B + 22 * MIB);
    must_free(a, q);
    expect_invariants(a);
    fixture_free(fx);
}

/* Live blocks with free gaps between them: each free absorbs the gap after it, and the walk
 * still reaches every later live block. */
static void
test_forget_live_blocks_between_gaps(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 30, 1);
    struct allocator *a = fx->alloc;
    uint64_t p[5];
    for (int i = 0; i < 5; i++)
        p[i] = must_malloc(a, 0, 512, 0);
    must_free(a, p[1]);
    must_free(a, p[3]);
    size_t t0 = fx->fake.trace_count;
    allocator_forget_device(a, 0);
    assert_int_equal(fx->fake.trace_count - t0, 7);
    const uint64_t live[3] = {p[0], p[2], p[4]};
    for (int i = 0; i < 3; i++) {
        assert_true(live[i] == B + (uint64_t)(2 * i) * 512);
        expect_event(&fx->fake, t0 + 2 * (size_t)i, TRACE_FREE_REQUESTED, TRACE_POOL_DEFAULT,
                     live[i], 512, 7);
        expect_event(&fx->fake, t0 + 2 * (size_t)i + 1, TRACE_FREE_COMPLETED, TRACE_POOL_DEFAULT,
                     live[i], 512, 7);
    }
    expect_event(&fx->fake, t0 + 6, TRACE_SEGMENT_FREE, TRACE_POOL_DEFAULT, B, 2 * MIB, 7);
    struct memory_stats st;
    allocator_get_stats(a, 0, &st);
    assert_int_equal(st.allocation[STAT_ALL].current, 0);
    assert_int_equal(st.inactive_split[STAT_ALL].current, 0);
    assert_int_equal(st.inactive_split_bytes[STAT_ALL].current, 0);
    assert_int_equal(st.segment[STAT_ALL].current, 0);
    expect_invariants(a);
    /* The block structs went back to the spares intact: the device serves again. */
    for (int i = 0; i < 5; i++)
        assert_true(must_malloc(a, 0, 512, 0) == B + 2 * MIB + (uint64_t)i * 512);
    expect_invariants(a);
    fixture_free(fx);
}

/* Before a reset the shim empties the cache (which completes outstanding events) and destroys
 * the idle events while the context still exists; the forget then has none left to drop. */
static void
test_destroy_idle_events(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 30, 1);
    struct allocator *a = fx->alloc;
    uint64_t p = must_malloc(a, 0, 4096, 1);
    uint64_t q = must_malloc(a, 0, 4096, 1);
    assert_int_equal(allocator_free_on_stream(a, p, 2, 0), 0);
    assert_int_equal(allocator_free_on_stream(a, q, 3, 0), 0);
    assert_int_equal(fx->fake.event_creates, 2);
    allocator_destroy_idle_events(a, 0); /* both still outstanding: not idle */
    assert_int_equal(fx->fake.event_destroys, 0);
    assert_int_equal(allocator_empty_cache(a, 0), 0);
    allocator_destroy_idle_events(a, 0);
    assert_int_equal(fx->fake.event_destroys, 2);
    allocator_destroy_idle_events(a, 0);
    assert_int_equal(fx->fake.event_destroys, 2);
    allocator_forget_device(a, 0);
    assert_int_equal(fx->fake.event_destroys, 2);
    expect_invariants(a);
    /* A later stream-ordered free creates a fresh event. */
    uint64_t r = must_malloc(a, 0, 4096, 1);
    assert_int_equal(allocator_free_on_stream(a, r, 2, 0), 0);
    assert_int_equal(fx->fake.event_creates, 3);
    fixture_free(fx);
}

/* Trace mode (caching off): one-block segments; a forget leaves the other device alone. */
static void
test_forget_trace_mode_one_device(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 30, 2);
    allocator_destroy(fx->alloc);
    fx->config.caching = false;
    struct allocator *a = fx->alloc = allocator_create(&fx->config, &fx->ops, &fx->sink, 2);
    assert_non_null(a);
    uint64_t p = must_malloc(a, 0, 1000, 0);
    uint64_t o = must_malloc(a, 1, 1000, 0);
    assert_true(p == B && o == B + (1ULL << 40));
    size_t t0 = fx->fake.trace_count;
    long frees = fx->fake.segment_frees;
    allocator_forget_device(a, 0);
    assert_int_equal(fx->fake.segment_frees, frees);
    assert_int_equal(fx->fake.trace_count - t0, 3);
    expect_event(&fx->fake, t0 + 0, TRACE_FREE_REQUESTED, TRACE_POOL_TRACE, p, 1000, 7);
    expect_event(&fx->fake, t0 + 1, TRACE_FREE_COMPLETED, TRACE_POOL_TRACE, p, 1000, 7);
    expect_event(&fx->fake, t0 + 2, TRACE_SEGMENT_FREE, TRACE_POOL_TRACE, p, 1000, 7);
    assert_int_equal(fx->fake.trace[t0].device, 0);
    struct memory_stats st;
    allocator_get_stats(a, 0, &st);
    assert_int_equal(st.segment[STAT_ALL].current, 0);
    assert_int_equal(st.num_device_free, 1);
    allocator_get_stats(a, 1, &st);
    assert_int_equal(st.segment[STAT_ALL].current, 1);
    assert_int_equal(st.allocated_bytes[STAT_ALL].current, 1000);
    must_free(a, o);
    assert_int_equal(fx->fake.segment_frees, frees + 1);
    expect_invariants(a);
    fixture_free(fx);
}

/* A second thread waits on device 0's lock (futex state 2) while the "prepare handler" holds
 * every device lock across fork(): the child must find the locks free and use the allocator. */
static struct allocator *fork_alloc;

static void *
contender(void *arg)
{
    (void)arg;
    uint64_t p = must_malloc(fork_alloc, 0, 4096, 0);
    must_free(fork_alloc, p);
    return NULL;
}

/* One context's end: its tagged external memory goes; the cache and untagged external memory go
 * only with the cache's own context; another context's tagged memory stays live. */
static void
test_forget_context(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 30, 1);
    struct allocator *a = fx->alloc;
    const uint64_t ctx_a = 0xa0, ctx_b = 0xb0;
    uint64_t p1 = must_malloc(a, 0, 1000, 0); /* the cache: small segment at B */
    assert_int_equal(allocator_track_external_in(a, 0, X, 4096, 0, TRACE_POOL_TRACE, 3, ctx_b), 0);
    assert_int_equal(
        allocator_track_external_in(a, 0, X + 2 * MIB, 8192, 0, TRACE_POOL_TRACE, 4, ctx_b), 0);
    assert_int_equal(allocator_track_external(a, 0, X + 4 * MIB, 512, 0, TRACE_POOL_MANAGED, 5), 0);
    assert_int_equal(
        allocator_track_external_in(a, 0, X + 6 * MIB, 1024, 0, TRACE_POOL_TRACE, 6, ctx_a), 0);
    /* B's virtual-memory and stream-ordered memory outlive B and A (cuda.h, cuCtxDestroy). */
    assert_int_equal(
        allocator_track_external_in(a, 0, X + 8 * MIB, 2 * MIB, 0, TRACE_POOL_VMM, 10, ctx_b), 0);
    assert_int_equal(
        allocator_track_external_in(a, 0, X + 10 * MIB, 4096, 0, TRACE_POOL_ASYNC, 11, ctx_b), 0);
    const struct fake_device *f = &fx->fake;
    size_t t0 = f->trace_count;
    long frees = fx->fake.segment_frees;

    /* B ends without the cache: exactly its two allocations, nothing else, no device call. */
    allocator_forget_context(a, 0, ctx_b, false);
    assert_int_equal(f->trace_count - t0, 6);
    expect_event(f, t0 + 0, TRACE_FREE_REQUESTED, TRACE_POOL_TRACE, X, 4096, 3);
    expect_event(f, t0 + 2, TRACE_SEGMENT_FREE, TRACE_POOL_TRACE, X, 4096, 3);
    expect_event(f, t0 + 3, TRACE_FREE_REQUESTED, TRACE_POOL_TRACE, X + 2 * MIB, 8192, 4);
    expect_event(f, t0 + 5, TRACE_SEGMENT_FREE, TRACE_POOL_TRACE, X + 2 * MIB, 8192, 4);
    assert_int_equal(fx->fake.segment_frees, frees);
    struct live_block lb;
    int d = allocator_lock_live_block(a, p1, &lb);
    assert_int_equal(d, 0);
    allocator_unlock_device(a, d);
    assert_int_equal(allocator_untrack_external(a, X, 9), -CUPROF_ENOTOWNED);

    /* A ends and owned the cache: the cache's segment, the untagged external memory and A's. */
    t0 = f->trace_count;
    allocator_forget_context(a, 0, ctx_a, true);
    assert_int_equal(f->trace_count - t0, 9);
    expect_event(f, t0 + 0, TRACE_FREE_REQUESTED, TRACE_POOL_DEFAULT, p1, 1000, 7);
    expect_event(f, t0 + 2, TRACE_SEGMENT_FREE, TRACE_POOL_DEFAULT, B, 2 * MIB, 7);
    expect_event(f, t0 + 5, TRACE_SEGMENT_FREE, TRACE_POOL_MANAGED, X + 4 * MIB, 512, 5);
    expect_event(f, t0 + 8, TRACE_SEGMENT_FREE, TRACE_POOL_TRACE, X + 6 * MIB, 1024, 6);
    assert_int_equal(fx->fake.segment_frees, frees);
    assert_int_equal(allocator_lock_live_block(a, p1, &lb), -1);
    /* The program frees them later, as its own. */
    assert_int_equal(allocator_untrack_external(a, X + 8 * MIB, 12), 0);
    assert_int_equal(allocator_untrack_external(a, X + 10 * MIB, 13), 0);
    struct memory_stats st;
    allocator_get_stats(a, 0, &st);
    assert_int_equal(st.reserved_bytes[STAT_ALL].current, 0);
    assert_int_equal(st.allocated_bytes[STAT_ALL].current, 0);
    fixture_free(fx);
}

static void
test_reset_after_fork(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 30, 2);
    fork_alloc = fx->alloc;
    uint64_t live = must_malloc(fx->alloc, 0, 1000, 0);
    allocator_lock_device(fx->alloc, 0);
    allocator_lock_device(fx->alloc, 1);
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, contender, NULL), 0);
    while (atomic_load(&fx->alloc->devices[0].lock.state) != 2)
        sched_yield();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        allocator_reset_after_fork(fx->alloc);
        int bad = 0;
        for (int d = 0; d < 2; d++)
            bad |= atomic_load(&fx->alloc->devices[d].lock.state) != 0;
        uint64_t p = 0;
        bad |= allocator_malloc(fx->alloc, 1, 512, 0, 0, &p) != 0 || p != B + (1ULL << 40);
        bad |= allocator_free(fx->alloc, live, 0) != 0; /* the inherited block is the child's */
        bad |= allocator_free(fx->alloc, p, 0) != 0;
        char msg[256];
        bad |= allocator_check_invariants(fx->alloc, msg, sizeof(msg)) != 0;
        _exit(bad ? 1 : 0);
    }
    allocator_unlock_device(fx->alloc, 1);
    allocator_unlock_device(fx->alloc, 0);
    assert_int_equal(pthread_join(thread, NULL), 0);
    int status = -1;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    must_free(fx->alloc, live); /* the parent's copy is untouched by the child's free */
    expect_invariants(fx->alloc);
    fixture_free(fx);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forget_records_frees),
        cmocka_unit_test(test_forget_live_blocks_between_gaps),
        cmocka_unit_test(test_destroy_idle_events),
        cmocka_unit_test(test_forget_trace_mode_one_device),
        cmocka_unit_test(test_forget_context),
        cmocka_unit_test(test_reset_after_fork),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
