/* test_allocator_fit.c: fit_segment_on_oom, the shim's last try before an OOM (not PyTorch's):
 * when the segment PyTorch's rules ask for (2 MiB, 20 MiB, 20 MiB pages) cannot be had even after
 * the release and retry, one segment of just the rounded request. Exact addresses, trace entries
 * and every stats key, worked out by hand; PyTorch's own behaviour (the flag off, as in replays)
 * side by side. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "alloc_test_util.h"
#include "allocator/cuprof_errors.h"

#define B FAKE_BASE
#define V FAKE_VMM_BASE
#define POOL4(name, pool, c, p, a, f)                                                              \
    " " name "." pool ".current=" #c " " name "." pool ".peak=" #p " " name "." pool               \
    ".allocated=" #a " " name "." pool ".freed=" #f
#define LARGE(name, c, p, a, f) POOL4(name, "all", c, p, a, f) POOL4(name, "large_pool", c, p, a, f)

/* The fixture with the shim's setting on (allocator_create copies the config). */
static struct alloc_fixture *
fit_fixture(const char *conf, size_t capacity)
{
    struct alloc_fixture *fx = fixture_new(conf, capacity, 1);
    assert_false(fx->config.fit_segment_on_oom); /* PyTorch's default, what replays keep */
    allocator_destroy(fx->alloc);
    fx->config.fit_segment_on_oom = true;
    fx->alloc = allocator_create(&fx->config, &fx->ops, &fx->sink, 1);
    assert_non_null(fx->alloc);
    return fx;
}

/* 14 MiB free: PyTorch's 20 MiB segment for 3 MiB fails, so 3 MiB is asked; 1.5 MiB likewise.
 * The fitted segments are cached like any other. A request whose own size does not fit either
 * is an OOM as before, with PyTorch's message (the segment PyTorch asked for). */
static void
test_fit_large(void **state)
{
    (void)state;
    /* PyTorch (and every replay): out of memory at the 3 MiB request. */
    struct alloc_fixture *fx = fixture_new("", 64 * MIB, 1);
    uint64_t x = 0;
    (void)must_malloc(fx->alloc, 0, 50 * MIB, 0);
    assert_int_equal(allocator_malloc(fx->alloc, 0, 3 * MIB, 0, 0, &x), -CUPROF_ENOMEM);
    assert_int_equal(fx->fake.segment_allocs, 1);
    char msg[1024];
    allocator_last_oom_message(fx->alloc, 0, msg, sizeof(msg));
    assert_non_null(strstr(msg, "Tried to allocate 20.00 MiB. GPU 0 has a total capacity of "
                                "64.00 MiB of which 14.00 MiB is free."));
    fixture_free(fx);

    fx = fit_fixture("", 64 * MIB);
    struct allocator *a = fx->alloc;
    uint64_t p = must_malloc(a, 0, 50 * MIB, 0);
    uint64_t q = must_malloc(a, 0, 3 * MIB, 0);
    uint64_t r = must_malloc(a, 0, 3 * MIB / 2, 0);
    assert_true(p == B);
    assert_true(q == B + 50 * MIB);
    assert_true(r == B + 54 * MIB); /* the fake device starts segments on 2 MiB */
    assert_int_equal(fx->fake.trace_count, 6);
    expect_trace(&fx->fake, 2, TRACE_SEGMENT_ALLOC, B + 50 * MIB, 3 * MIB, 0);
    expect_trace(&fx->fake, 3, TRACE_ALLOC, B + 50 * MIB, 3 * MIB, 0);
    expect_trace(&fx->fake, 4, TRACE_SEGMENT_ALLOC, B + 54 * MIB, 3 * MIB / 2, 0);
    expect_trace(&fx->fake, 5, TRACE_ALLOC, B + 54 * MIB, 3 * MIB / 2, 0);
    /* The 3 MiB block serves 2 MiB from the cache, whole (a 1 MiB rest stays attached). */
    must_free(a, q);
    uint64_t s = must_malloc(a, 0, 2 * MIB, 0);
    assert_true(s == B + 50 * MIB);
    assert_int_equal(fx->fake.segment_allocs, 3);
    expect_invariants(a);
    /* 10 MiB + 512 B: PyTorch asks 12 MiB, the fit 10 MiB + 512 B; 9.5 MiB are free. */
    assert_int_equal(allocator_malloc(a, 0, 10 * MIB + 512, 0, 9, &x), -CUPROF_ENOMEM);
    assert_int_equal(fx->fake.segment_allocs, 3);
    allocator_last_oom_message(a, 0, msg, sizeof(msg));
    assert_non_null(strstr(msg, "Tried to allocate 12.00 MiB. GPU 0 has a total capacity of "
                                "64.00 MiB of which 9.50 MiB is free. Of the allocated memory "
                                "54.50 MiB is allocated by cuprof, and 0 bytes is reserved"));
    const struct trace_event *oom = &fx->fake.trace[fx->fake.trace_count - 1];
    assert_int_equal(oom->action, TRACE_OOM);
    assert_int_equal(oom->size, 10 * MIB + 512);
    assert_int_equal(oom->device_free, 19 * MIB / 2);
    expect_invariants(a);
    /* One retry per request that reached it (3 MiB, 1.5 MiB, the OOM), the fit not counted
     * again; the OOM counted once. */
    expect_stats(a, 0,
                 LARGE("allocation", 3, 3, 4, 1) LARGE("active", 3, 3, 4, 1)
                     LARGE("allocated_bytes", 57147392, 57147392, 60293120, 3145728)
                         LARGE("active_bytes", 57147392, 57147392, 60293120, 3145728)
                             LARGE("requested_bytes", 56098816, 57147392, 59244544, 3145728)
                                 LARGE("segment", 3, 3, 3, 0)
                                     LARGE("reserved_bytes", 57147392, 57147392, 57147392,
                                           0) " num_device_alloc=3 num_alloc_retries=3 num_ooms=1"
                                              " num_sync_all_streams=3");
    fixture_free(fx);
}

/* 1 MiB free: PyTorch's 2 MiB small segment fails; the fit asks 512 B, then 1 KiB, as the
 * program's own cudaMalloc would (the driver packs such requests into its pages). */
static void
test_fit_small(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fit_fixture("", 51 * MIB);
    struct allocator *a = fx->alloc;
    uint64_t p = must_malloc(a, 0, 50 * MIB, 0);
    uint64_t s1 = must_malloc(a, 0, 512, 0);
    uint64_t s2 = must_malloc(a, 0, 1000, 0);
    assert_true(p == B);
    assert_true(s1 == B + 50 * MIB);
    assert_true(s2 == B + 52 * MIB);
    expect_trace(&fx->fake, 2, TRACE_SEGMENT_ALLOC, B + 50 * MIB, 512, 0);
    expect_trace(&fx->fake, 4, TRACE_SEGMENT_ALLOC, B + 52 * MIB, 1024, 0);
    /* A freed fitted block is reused from the cache. */
    must_free(a, s1);
    uint64_t s3 = must_malloc(a, 0, 100, 0);
    assert_true(s3 == B + 50 * MIB);
    assert_int_equal(fx->fake.segment_allocs, 3);
    /* The last 1047040 bytes, then nothing: an OOM reporting PyTorch's 2 MiB. */
    uint64_t s4 = must_malloc(a, 0, MIB - 1536, 0);
    assert_true(s4 == B + 54 * MIB);
    uint64_t x = 0;
    assert_int_equal(allocator_malloc(a, 0, 1, 0, 0, &x), -CUPROF_ENOMEM);
    char msg[1024];
    allocator_last_oom_message(a, 0, msg, sizeof(msg));
    assert_non_null(strstr(msg, "Tried to allocate 2.00 MiB. GPU 0 has a total capacity of "
                                "51.00 MiB of which 0 bytes is free."));
    expect_invariants(a);
    /* Small pool: 512 + 1024 + 512 (reused) + 1047040 allocated, 100 B asked for the reuse. */
    static const char *const spec[] = {
        POOL4("allocation", "all", 4, 4, 5, 1),
        POOL4("allocation", "large_pool", 1, 1, 1, 0),
        POOL4("allocation", "small_pool", 3, 3, 4, 1),
        POOL4("active", "all", 4, 4, 5, 1),
        POOL4("active", "large_pool", 1, 1, 1, 0),
        POOL4("active", "small_pool", 3, 3, 4, 1),
        POOL4("allocated_bytes", "all", 53477376, 53477376, 53477888, 512),
        POOL4("allocated_bytes", "large_pool", 52428800, 52428800, 52428800, 0),
        POOL4("allocated_bytes", "small_pool", 1048576, 1048576, 1049088, 512),
        POOL4("active_bytes", "all", 53477376, 53477376, 53477888, 512),
        POOL4("active_bytes", "large_pool", 52428800, 52428800, 52428800, 0),
        POOL4("active_bytes", "small_pool", 1048576, 1048576, 1049088, 512),
        POOL4("requested_bytes", "all", 53476940, 53476940, 53477452, 512),
        POOL4("requested_bytes", "large_pool", 52428800, 52428800, 52428800, 0),
        POOL4("requested_bytes", "small_pool", 1048140, 1048140, 1048652, 512),
        POOL4("segment", "all", 4, 4, 4, 0),
        POOL4("segment", "large_pool", 1, 1, 1, 0),
        POOL4("segment", "small_pool", 3, 3, 3, 0),
        POOL4("reserved_bytes", "all", 53477376, 53477376, 53477376, 0),
        POOL4("reserved_bytes", "large_pool", 52428800, 52428800, 52428800, 0),
        POOL4("reserved_bytes", "small_pool", 1048576, 1048576, 1048576, 0),
        " num_device_alloc=4 num_alloc_retries=4 num_ooms=1 num_sync_all_streams=4",
    };
    char text[4096] = "";
    for (size_t i = 0; i < sizeof(spec) / sizeof(spec[0]); i++)
        strcat(text, spec[i]);
    expect_stats(a, 0, text);
    fixture_free(fx);
}

/* per_process_memory_fraction: the fit must fit under the cap too (no device call otherwise). */
static void
test_fit_fraction(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fit_fixture("per_process_memory_fraction:0.5", 64 * MIB);
    struct allocator *a = fx->alloc;
    uint64_t p = must_malloc(a, 0, 30 * MIB, 0);
    uint64_t q = must_malloc(a, 0, 3 * MIB / 2, 0); /* 20 MiB: over 32 MiB; 1.5 MiB is not */
    assert_true(p == B);
    assert_true(q == B + 30 * MIB);
    assert_int_equal(fx->fake.segment_allocs, 2);
    uint64_t x = 0;
    assert_int_equal(allocator_malloc(a, 0, MIB, 0, 0, &x), -CUPROF_ENOMEM); /* 32.5 > 32 MiB */
    assert_int_equal(fx->fake.segment_allocs, 2);
    char msg[1024];
    allocator_last_oom_message(a, 0, msg, sizeof(msg));
    assert_non_null(strstr(msg, "Tried to allocate 2.00 MiB. GPU 0 has a total capacity of "
                                "64.00 MiB of which 32.50 MiB is free. 32.00 MiB allowed; "));
    expect_invariants(a);
    fixture_free(fx);
}

/* expandable_segments:True: a 20 MiB page that cannot be mapped; the fit is an ordinary segment,
 * which the cache then serves from like any other beside the expandable one. */
static void
test_fit_expandable(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fit_fixture("expandable_segments:True", 30 * MIB);
    struct allocator *a = fx->alloc;
    uint64_t p = must_malloc(a, 0, 12 * MIB, 0);
    uint64_t q = must_malloc(a, 0, 8 * MIB, 0); /* the rest of the first page */
    assert_true(p == V);
    assert_true(q == V + 12 * MIB);
    uint64_t r = must_malloc(a, 0, 3 * MIB, 0); /* a second page: 40 MiB > 30 MiB */
    assert_true(r == B);
    expect_trace(&fx->fake, fx->fake.trace_count - 2, TRACE_SEGMENT_ALLOC, B, 3 * MIB, 0);
    expect_trace(&fx->fake, fx->fake.trace_count - 1, TRACE_ALLOC, B, 3 * MIB, 0);
    struct segment_info segs[4];
    struct block_info blocks[8];
    size_t got_s = 0, got_b = 0;
    allocator_lock_device(a, 0);
    int rc = allocator_copy_locked(a, 0, segs, 4, blocks, 8, &got_s, &got_b);
    allocator_unlock_device(a, 0);
    assert_int_equal(rc, 0);
    assert_int_equal(got_s, 2);
    assert_true(segs[0].addr == B && segs[0].total_size == 3 * MIB && !segs[0].expandable);
    assert_true(segs[1].addr == V && segs[1].total_size == 20 * MIB && segs[1].expandable);
    /* Reused and split (expandable_segments:True splits every block with 512 B to spare). */
    must_free(a, r);
    assert_true(must_malloc(a, 0, 2 * MIB, 0) == B);
    /* A small-pool reservation whose first 2 MiB page fails: 512 B in an ordinary segment. */
    uint64_t s = must_malloc(a, 0, 6 * MIB, 0); /* 3 + 6 + 20 = 29 MiB */
    assert_true(s == B + 4 * MIB);
    uint64_t t = must_malloc(a, 0, 512, 0);
    assert_true(t == B + 10 * MIB);
    expect_invariants(a);
    assert_int_equal(fx->fake.pages_mapped, 1);
    fixture_free(fx);
}

/* PyTorch's words for an OOM, as the shim writes them (the fit step on). */
#define OOM_HEAD(tried, total, free, used, cached)                                                 \
    "CUDA out of memory. Tried to allocate " tried ". GPU 0 has a total capacity of " total        \
    " of which " free " is free. Of the allocated memory " used                                    \
    " is allocated by cuprof, and " cached                                                         \
    " is reserved by cuprof but unallocated. If reserved but unallocated memory is large "         \
    "try setting CUPROF_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "         \
    "documentation for Memory Management  "                                                        \
    "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"

/* tests/apps/fragment's history: five 8 MiB blocks (two to a 20 MiB segment), every second one
 * freed, leaves 36 MiB free in three 12 MiB pieces of segments that also hold live blocks; a
 * 16 MiB request finds no piece, no segment to release and no room for its own segment. Without
 * the cache the driver would hold the 24 MiB live only, so the message says the cache caused it.
 * In trace mode (no cache) an OOM is the program's own: no such sentence, and no cache setting
 * to suggest. */
static void
test_cache_caused_oom(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fit_fixture("", 60 * MIB);
    struct allocator *a = fx->alloc;
    uint64_t p[5], x = 0;
    for (int i = 0; i < 5; i++)
        p[i] = must_malloc(a, 0, 8 * MIB, 0);
    assert_true(p[1] == p[0] + 8 * MIB && p[3] == p[2] + 8 * MIB);
    must_free(a, p[1]);
    must_free(a, p[3]);
    assert_int_equal(allocator_malloc(a, 0, 16 * MIB, 0, 0, &x), -CUPROF_ENOMEM);
    char msg[1024];
    allocator_last_oom_message(a, 0, msg, sizeof(msg));
    assert_string_equal(
        msg,
        OOM_HEAD("16.00 MiB", "60.00 MiB", "0 bytes", "24.00 MiB",
                 "36.00 MiB") " Without cuprof's cache this request could "
                              "have fit: 24.00 MiB live + 16.00 MiB requested = 40.00 MiB of the "
                              "60.00 MiB that cuprof's segments and the driver's free memory "
                              "hold; CUPROF_MODE=trace records the program without a cache.");
    /* One byte more than the cache and the driver hold together: the program's own OOM. */
    assert_int_equal(allocator_malloc(a, 0, 36 * MIB + 512, 0, 0, &x), -CUPROF_ENOMEM);
    allocator_last_oom_message(a, 0, msg, sizeof(msg));
    assert_string_equal(msg, OOM_HEAD("38.00 MiB", "60.00 MiB", "0 bytes", "24.00 MiB",
                                      "36.00 MiB")); /* the 38 MiB segment it asked for */
    assert_int_equal(allocator_malloc(a, 0, 36 * MIB, 0, 0, &x), -CUPROF_ENOMEM);
    allocator_last_oom_message(a, 0, msg, sizeof(msg));
    assert_non_null(strstr(msg, "24.00 MiB live + 36.00 MiB requested = 60.00 MiB of the "
                                "60.00 MiB"));
    fixture_free(fx);

    fx = fixture_new("", 60 * MIB, 1);
    allocator_destroy(fx->alloc);
    fx->config.caching = false;
    a = fx->alloc = allocator_create(&fx->config, &fx->ops, &fx->sink, 1);
    assert_non_null(a);
    for (int i = 0; i < 3; i++)
        (void)must_malloc(a, 0, 16 * MIB, 0);
    assert_int_equal(allocator_malloc(a, 0, 16 * MIB, 0, 0, &x), -CUPROF_ENOMEM);
    allocator_last_oom_message(a, 0, msg, sizeof(msg));
    assert_string_equal(
        msg, "CUDA out of memory. Tried to allocate 16.00 MiB. GPU 0 has a total capacity of "
             "60.00 MiB of which 12.00 MiB is free. Of the allocated memory 48.00 MiB is allocated "
             "by cuprof, and 0 bytes is reserved by cuprof but unallocated. The driver refused "
             "this request itself (cuMemAlloc_v2 in trace mode, which cuprof passes through "
             "without caching).");
    fixture_free(fx);
}

/* A request the shim passed through (trace mode's stream-ordered calls, managed memory, a pool
 * of the program's own) that the driver refused: an oom event with its pool, stream, stack and
 * the driver's free bytes, num_ooms, and a message that names the call instead of advising a
 * cache setting. Nothing else changes. */
static void
test_external_oom(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 64 * MIB, 1);
    struct allocator *a = fx->alloc;
    uint64_t p = must_malloc(a, 0, 30 * MIB, 0); /* a 30 MiB segment */
    assert_int_equal(allocator_track_external(a, 0, V, 20 * MIB, 5, TRACE_POOL_ASYNC, 0), 0);
    /* The fake device charges its own segments only: take the driver's 20 MiB off by hand, so
     * that it reports 14 MiB free (of 44). */
    fx->fake.capacity[0] = 44 * MIB;
    size_t before = fx->fake.trace_count;
    assert_int_equal(
        allocator_note_external_oom(a, 0, 40 * MIB, 7, TRACE_POOL_ASYNC, 9, "cuMemAllocAsync"), 0);
    assert_int_equal(fx->fake.trace_count, before + 1);
    const struct trace_event *oom = &fx->fake.trace[before];
    assert_int_equal(oom->action, TRACE_OOM);
    assert_int_equal(oom->pool, TRACE_POOL_ASYNC);
    assert_true(oom->size == 40 * MIB && oom->stream == 7 && oom->stack_id == 9);
    assert_true(oom->device_free == 14 * MIB);
    char msg[1024];
    allocator_last_oom_message(a, 0, msg, sizeof(msg));
    assert_string_equal(
        msg, "CUDA out of memory. Tried to allocate 40.00 MiB. GPU 0 has a total capacity of "
             "44.00 MiB of which 14.00 MiB is free. Of the allocated memory 50.00 MiB is "
             "allocated by cuprof, and 0 bytes is reserved by cuprof but unallocated. The driver "
             "refused this request itself (cuMemAllocAsync, which cuprof passes through without "
             "caching).");
    struct memory_stats st;
    allocator_get_stats(a, 0, &st);
    assert_int_equal(st.num_ooms, 1);
    assert_int_equal(st.allocated_bytes[STAT_ALL].current, 50 * MIB);
    assert_int_equal(allocator_note_external_oom(a, 1, 1, 0, TRACE_POOL_ASYNC, 0, "x"),
                     -CUPROF_EINVAL);
    /* An impossible size (a pitched request of 2^64 - 11 bytes) is no OOM: nothing recorded. */
    before = fx->fake.trace_count;
    assert_int_equal(allocator_note_external_oom(a, 0, SIZE_MAX - 10, 0, TRACE_POOL_TRACE, 0, "x"),
                     -CUPROF_EINVAL);
    assert_int_equal(fx->fake.trace_count, before);
    allocator_get_stats(a, 0, &st);
    assert_int_equal(st.num_ooms, 1);
    /* Freed, the 30 MiB segment stays cached: with the driver's 14 MiB it would have held the
     * 40 MiB, so the cache caused this one (cache mode; never in trace mode). */
    must_free(a, p);
    assert_int_equal(
        allocator_note_external_oom(a, 0, 40 * MIB, 7, TRACE_POOL_ASYNC, 9, "cuMemAllocAsync"), 0);
    allocator_last_oom_message(a, 0, msg, sizeof(msg));
    assert_non_null(strstr(msg, "(cuMemAllocAsync, which cuprof passes through without caching). "
                                "Without cuprof's cache this request could have fit: 20.00 MiB "
                                "live + 40.00 MiB requested = 60.00 MiB of the 64.00 MiB that"));
    expect_invariants(a);
    fixture_free(fx);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fit_large),        cmocka_unit_test(test_fit_small),
        cmocka_unit_test(test_fit_fraction),     cmocka_unit_test(test_fit_expandable),
        cmocka_unit_test(test_cache_caused_oom), cmocka_unit_test(test_external_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
