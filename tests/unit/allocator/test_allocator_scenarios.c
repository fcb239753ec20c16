/* test_allocator_scenarios.c: multi-step sequences with exact addresses, segment counts, trace
 * entries and every stats key, each worked out by hand from PyTorch's rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "alloc_test_util.h"
#include "allocator/cuprof_errors.h"

#define B FAKE_BASE
#define POOL4(name, pool, c, p, a, f)                                                              \
    " " name "." pool ".current=" #c " " name "." pool ".peak=" #p " " name "." pool               \
    ".allocated=" #a " " name "." pool ".freed=" #f
#define SMALL(name, c, p, a, f) POOL4(name, "all", c, p, a, f) POOL4(name, "small_pool", c, p, a, f)
#define LARGE(name, c, p, a, f) POOL4(name, "all", c, p, a, f) POOL4(name, "large_pool", c, p, a, f)
#define SINGLE(name, c, p, a, f)                                                                   \
    " " name ".current=" #c " " name ".peak=" #p " " name ".allocated=" #a " " name ".freed=" #f

/* Small pool: split, best-fit reuse of a freed 512 B block, merge back, empty_cache. */
static void
test_small_split_reuse_merge(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 30, 1);
    struct allocator *a = fx->alloc;
    uint64_t p1 = must_malloc(a, 0, 1, 0);
    uint64_t p2 = must_malloc(a, 0, 1000, 0);
    assert_true(p1 == B);
    assert_true(p2 == B + 512);
    must_free(a, p1);
    uint64_t p3 = must_malloc(a, 0, 200, 0); /* smallest fitting block: the freed 512 B */
    assert_true(p3 == B);
    expect_invariants(a);
    expect_stats(a, 0,
                 SMALL("allocation", 2, 2, 3, 1) SMALL("allocated_bytes", 1536, 1536, 2048, 512)
                     SMALL("active", 2, 2, 3, 1) SMALL("active_bytes", 1536, 1536, 2048, 512)
                         SMALL("requested_bytes", 1200, 1200, 1201, 1) SMALL("segment", 1, 1, 1, 0)
                             SMALL("reserved_bytes", 2097152, 2097152, 2097152, 0)
                                 SMALL("inactive_split", 1, 2, 2, 1)
                                     SMALL("inactive_split_bytes", 2095616, 2096640, 2097152,
                                           1536) " num_device_alloc=1");
    must_free(a, p2);
    must_free(a, p3);
    expect_invariants(a);
    expect_stats(a, 0,
                 SMALL("allocation", 0, 2, 3, 3) SMALL("allocated_bytes", 0, 1536, 2048, 2048)
                     SMALL("active", 0, 2, 3, 3) SMALL("active_bytes", 0, 1536, 2048, 2048)
                         SMALL("requested_bytes", 0, 1200, 1201, 1201) SMALL("segment", 1, 1, 1, 0)
                             SMALL("reserved_bytes", 2097152, 2097152, 2097152, 0)
                                 SMALL("inactive_split", 0, 2, 2, 2)
                                     SMALL("inactive_split_bytes", 0, 2096640, 2098176,
                                           2098176) " num_device_alloc=1");
    assert_int_equal(allocator_empty_cache(a, 0), 0);
    expect_stats(a, 0,
                 SMALL("allocation", 0, 2, 3, 3) SMALL("allocated_bytes", 0, 1536, 2048, 2048)
                     SMALL("active", 0, 2, 3, 3) SMALL("active_bytes", 0, 1536, 2048, 2048)
                         SMALL("requested_bytes", 0, 1200, 1201, 1201) SMALL("segment", 0, 1, 1, 1)
                             SMALL("reserved_bytes", 0, 2097152, 2097152, 2097152)
                                 SMALL("inactive_split", 0, 2, 2, 2)
                                     SMALL("inactive_split_bytes", 0, 2096640, 2098176,
                                           2098176) " num_device_alloc=1 num_device_free=1"
                                                    " num_sync_all_streams=1");
    const struct fake_device *f = &fx->fake;
    assert_int_equal(f->trace_count, 11);
    expect_trace(f, 0, TRACE_SEGMENT_ALLOC, B, 2 * MIB, 0);
    expect_trace(f, 1, TRACE_ALLOC, B, 1, 0);
    expect_trace(f, 2, TRACE_ALLOC, B + 512, 1000, 0);
    expect_trace(f, 3, TRACE_FREE_REQUESTED, B, 1, 0);
    expect_trace(f, 4, TRACE_FREE_COMPLETED, B, 1, 0);
    expect_trace(f, 5, TRACE_ALLOC, B, 200, 0);
    expect_trace(f, 6, TRACE_FREE_REQUESTED, B + 512, 1000, 0);
    expect_trace(f, 7, TRACE_FREE_COMPLETED, B + 512, 1000, 0);
    expect_trace(f, 8, TRACE_FREE_REQUESTED, B, 200, 0);
    expect_trace(f, 9, TRACE_FREE_COMPLETED, B, 200, 0);
    expect_trace(f, 10, TRACE_SEGMENT_FREE, B, 2 * MIB, 0);
    assert_int_equal(f->trace[1].stack_id, 7);
    assert_int_equal(f->trace[3].stack_id, 7); /* free falls back to the malloc stack */
    assert_int_equal(f->segment_allocs, 1);
    assert_int_equal(f->segment_frees, 1);
    fixture_free(fx);
}

/* Large pool: 20 MiB segment for 1-10 MiB, own 2 MiB-rounded segments from 10 MiB, a remainder
 * of exactly 1 MiB stays attached. */
static void
test_large_segments_and_split(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 30, 1);
    struct allocator *a = fx->alloc;
    uint64_t x = must_malloc(a, 0, MIB + 1, 0);        /* 1049088 in a 20 MiB segment */
    uint64_t y = must_malloc(a, 0, 10 * MIB + 512, 0); /* from the remainder, split */
    uint64_t z = must_malloc(a, 0, 12 * MIB, 0);       /* 9 MiB left: own 12 MiB segment */
    assert_true(x == B);
    assert_true(y == B + 1049088);
    assert_true(z == B + 20 * MIB);
    expect_invariants(a);
    expect_stats(
        a, 0,
        LARGE("allocation", 3, 3, 3, 0) LARGE("allocated_bytes", 24118272, 24118272, 24118272, 0)
            LARGE("active", 3, 3, 3, 0) LARGE("active_bytes", 24118272, 24118272, 24118272, 0)
                LARGE("requested_bytes", 24117761, 24117761, 24117761, 0)
                    LARGE("segment", 2, 2, 2, 0)
                        LARGE("reserved_bytes", 33554432, 33554432, 33554432, 0)
                            LARGE("inactive_split", 1, 1, 1, 0)
                                LARGE("inactive_split_bytes", 9436160, 19922432, 19922432,
                                      10486272) " num_device_alloc=2");
    must_free(a, y); /* merges with the 9 MiB remainder */
    uint64_t w = must_malloc(a, 0, 19 * MIB, 0);
    assert_true(w == B + 32 * MIB); /* 19922432 B free is too small: new 20 MiB segment */
    size_t ns = 0, nb = 0;
    allocator_lock_device(a, 0);
    allocator_count_locked(a, 0, &ns, &nb);
    struct segment_info segs[8];
    struct block_info blocks[16];
    size_t sc = 0, bc = 0;
    assert_int_equal(allocator_copy_locked(a, 0, segs, 8, blocks, 16, &sc, &bc), 0);
    allocator_unlock_device(a, 0);
    assert_int_equal(ns, 3);
    assert_int_equal(nb, 4); /* w keeps its 1 MiB remainder: one block */
    assert_int_equal(sc, 3);
    assert_true(segs[2].addr == B + 32 * MIB && segs[2].total_size == 20 * MIB);
    assert_int_equal(segs[2].block_count, 1);
    assert_int_equal(blocks[3].size, 20 * MIB);
    assert_int_equal(blocks[3].requested_size, 19 * MIB);
    assert_int_equal(blocks[1].state, BLOCK_INACTIVE);
    assert_int_equal(blocks[1].size, 19922432);
    expect_invariants(a);
    expect_stats(a, 0,
                 LARGE("allocation", 3, 3, 4, 1)
                     LARGE("allocated_bytes", 34603520, 34603520, 45089792, 10486272)
                         LARGE("active", 3, 3, 4, 1)
                             LARGE("active_bytes", 34603520, 34603520, 45089792, 10486272)
                                 LARGE("requested_bytes", 33554433, 33554433, 44040705, 10486272)
                                     LARGE("segment", 3, 3, 3, 0)
                                         LARGE("reserved_bytes", 54525952, 54525952, 54525952, 0)
                                             LARGE("inactive_split", 1, 1, 1, 0)
                                                 LARGE("inactive_split_bytes", 19922432, 19922432,
                                                       30408704, 10486272) " num_device_alloc=3");
    fixture_free(fx);
}

/* Splits and merges that change a free block's rank among the free blocks (the pools keep a
 * block's tree node only while its rank holds): best fit must still pick by (size, addr). */
static void
test_free_set_rank_changes(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 30, 1);
    struct allocator *a = fx->alloc;
    uint64_t x = must_malloc(a, 0, 4 * MIB, 0);  /* 20 MiB segment: x, then 16 MiB free */
    uint64_t y = must_malloc(a, 0, 2 * MIB, 0);  /* 14 MiB free at +6 MiB */
    uint64_t z = must_malloc(a, 0, 12 * MIB, 0); /* from those 14 MiB: 2 MiB free at +18 */
    assert_true(x == B && y == B + 4 * MIB && z == B + 6 * MIB);
    must_free(a, x); /* free: 2 MiB at +18, 4 MiB at +0 */
    expect_invariants(a);
    must_free(a, z); /* absorbs the 2 MiB: 14 MiB at +6 now ranks after the 4 MiB block */
    expect_invariants(a);
    uint64_t w = must_malloc(a, 0, 11 * MIB, 0); /* split: its 3 MiB rest ranks first */
    assert_true(w == B + 6 * MIB);
    expect_invariants(a);
    uint64_t v = must_malloc(a, 0, 3 * MIB + 512, 0); /* best fit: the 4 MiB block, unsplit */
    uint64_t u = must_malloc(a, 0, 3 * MIB, 0);       /* exactly the 3 MiB rest */
    assert_true(v == B);
    assert_true(u == B + 17 * MIB);
    expect_invariants(a);
    /* v holds the whole 4 MiB block (allocated_bytes counts it); the splits and frees move
     * inactive_split_bytes: +16 -2 -12 (x, y, z), +4 (x freed), +12 (z freed and merged),
     * -11 (w), -4 (v), -3 (u) MiB. */
    expect_stats(a, 0,
                 LARGE("allocation", 4, 4, 6, 2)
                     LARGE("allocated_bytes", 20971520, 20971520, 37748736, 16777216)
                         LARGE("active", 4, 4, 6, 2)
                             LARGE("active_bytes", 20971520, 20971520, 37748736, 16777216)
                                 LARGE("requested_bytes", 19923456, 19923456, 36700672, 16777216)
                                     LARGE("segment", 1, 1, 1, 0)
                                         LARGE("reserved_bytes", 20971520, 20971520, 20971520, 0)
                                             LARGE("inactive_split", 0, 2, 2, 2)
                                                 LARGE("inactive_split_bytes", 0, 18874368,
                                                       33554432, 33554432) " num_device_alloc=1");
    fixture_free(fx);
}

/* The last block put in a pool waits outside its tree (alloc_pool.recent): best fit must still
 * weigh it against the tree by (size, addr) both ways, merges must reach it, and the walks of
 * empty_cache must see it. */
static void
test_recent_free_block(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 30, 1);
    struct allocator *a = fx->alloc;
    /* One 2 MiB small segment: a(1024) s1 b s2 c(1536) s3 d s4 (512 each), then the rest. */
    uint64_t pa = must_malloc(a, 0, 1024, 0), s1 = must_malloc(a, 0, 512, 0);
    uint64_t pb = must_malloc(a, 0, 512, 0), s2 = must_malloc(a, 0, 512, 0);
    uint64_t pc = must_malloc(a, 0, 1536, 0), s3 = must_malloc(a, 0, 512, 0);
    uint64_t pd = must_malloc(a, 0, 512, 0), s4 = must_malloc(a, 0, 512, 0);
    assert_true(pa == B && pb == B + 1536 && pc == B + 2560 && pd == B + 4608 && s4 == B + 5120);

    must_free(a, pb); /* b is the recent block */
    must_free(a, pa); /* a (1024) is; b goes to the tree */
    expect_invariants(a);
    assert_true(must_malloc(a, 0, 512, 0) == pb); /* a smaller block in the tree wins */

    must_free(a, pd); /* d recent */
    must_free(a, pb); /* b recent, d in the tree: same size, b's lower address wins */
    expect_invariants(a);
    assert_true(must_malloc(a, 0, 512, 0) == pb);
    assert_true(must_malloc(a, 0, 512, 0) == pd); /* then d from the tree */

    must_free(a, pb);
    must_free(a, pd); /* d recent, b in the tree: b's lower address still wins */
    assert_true(must_malloc(a, 0, 512, 0) == pb);
    expect_invariants(a);

    must_free(a, s3); /* absorbs d, the recent block: a free 1024 B block at s3 */
    expect_invariants(a);
    assert_true(must_malloc(a, 0, 1024, 0) == pa);      /* same size, a's lower address wins */
    assert_true(must_malloc(a, 0, 1024, 0) == s3);      /* then the merged block */
    assert_true(must_malloc(a, 0, 512, 0) == B + 5632); /* the segment's rest */
    expect_invariants(a);

    /* Everything freed, the last block recent: empty_cache must release the segment. */
    const uint64_t live[] = {pa, s1, pb, s2, pc, s3, s4, B + 5632};
    for (size_t i = 0; i < sizeof(live) / sizeof(live[0]); i++)
        must_free(a, live[i]);
    expect_invariants(a);
    assert_int_equal(allocator_empty_cache(a, 0), 0);
    expect_invariants(a);
    struct memory_stats st;
    allocator_get_stats(a, 0, &st);
    assert_int_equal(st.segment[STAT_ALL].current, 0);
    assert_int_equal(st.reserved_bytes[STAT_ALL].current, 0);
    assert_int_equal(st.inactive_split[STAT_ALL].current, 0);
    fixture_free(fx);
}

/* Cache miss on a full device: release the cached segment and retry (num_alloc_retries), then a
 * real OOM with PyTorch's message and the oom trace entry. */
static void
test_retry_then_oom(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 64 * MIB, 1);
    struct allocator *a = fx->alloc;
    uint64_t p = must_malloc(a, 0, 30 * MIB, 0);
    must_free(a, p);
    uint64_t q = must_malloc(a, 0, 40 * MIB, 0);
    assert_true(q == B + 30 * MIB);
    uint64_t r = 0;
    assert_int_equal(allocator_malloc(a, 0, 30 * MIB, 0, 9, &r), -CUPROF_ENOMEM);
    assert_true(r == 0);
    expect_invariants(a);
    expect_stats(a, 0,
                 LARGE("allocation", 1, 1, 2, 1)
                     LARGE("allocated_bytes", 41943040, 41943040, 73400320, 31457280)
                         LARGE("active", 1, 1, 2, 1)
                             LARGE("active_bytes", 41943040, 41943040, 73400320, 31457280)
                                 LARGE("requested_bytes", 41943040, 41943040, 73400320, 31457280)
                                     LARGE("segment", 1, 1, 2, 1)
                                         LARGE("reserved_bytes", 41943040, 41943040, 73400320,
                                               31457280) " num_device_alloc=2 num_device_free=1"
                                                         " num_alloc_retries=2 num_ooms=1"
                                                         " num_sync_all_streams=2");
    char msg[1024];
    allocator_last_oom_message(a, 0, msg, sizeof(msg));
    assert_string_equal(
        msg, "CUDA out of memory. Tried to allocate 30.00 MiB. GPU 0 has a total capacity of "
             "64.00 MiB of which 24.00 MiB is free. Of the allocated memory 40.00 MiB is "
             "allocated by cuprof, and 0 bytes is reserved by cuprof but unallocated. If reserved "
             "but unallocated memory is large try setting "
             "CUPROF_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
             "documentation for Memory Management  "
             "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)");
    const struct trace_event *oom = &fx->fake.trace[fx->fake.trace_count - 1];
    assert_int_equal(oom->action, TRACE_OOM);
    assert_int_equal(oom->size, 30 * MIB);
    assert_int_equal(oom->device_free, 24 * MIB);
    assert_int_equal(oom->stack_id, 9);
    /* A 4-byte request that OOMs reports the 2 MiB segment it needed. */
    uint64_t s = 0;
    assert_int_equal(allocator_malloc(a, 0, 30 * MIB, 0, 0, &s), -CUPROF_ENOMEM);
    fx->fake.capacity[0] = 40 * MIB;
    assert_int_equal(allocator_malloc(a, 0, 4, 0, 0, &s), -CUPROF_ENOMEM);
    allocator_last_oom_message(a, 0, msg, sizeof(msg));
    assert_non_null(strstr(msg, "Tried to allocate 2.00 MiB. GPU 0 has a total capacity of "
                                "40.00 MiB of which 0 bytes is free."));
    /* 2^60 bytes and more are refused up front, without an OOM event. */
    size_t before = fx->fake.trace_count;
    assert_int_equal(allocator_malloc(a, 0, (size_t)1 << 60, 0, 0, &s), -CUPROF_ENOMEM);
    assert_int_equal(fx->fake.trace_count, before);
    allocator_last_oom_message(a, 0, msg, sizeof(msg));
    assert_string_equal(msg, "CUDA out of memory. Tried to allocate more than 1EB memory.");
    fixture_free(fx);
}

/* max_split_size_mb:128: a cached 200 MiB block is not split for 50 MiB and not used for
 * 150 MiB (it would waste >= 20 MiB), but serves 190 MiB whole. */
static void
test_oversize_rules(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("max_split_size_mb:128", 4ULL << 30, 1);
    struct allocator *a = fx->alloc;
    uint64_t p = must_malloc(a, 0, 200 * MIB, 0);
    must_free(a, p);
    uint64_t b = must_malloc(a, 0, 50 * MIB, 0);
    uint64_t c = must_malloc(a, 0, 150 * MIB, 0);
    uint64_t d = must_malloc(a, 0, 190 * MIB, 0);
    assert_true(b == B + 200 * MIB);
    assert_true(c == B + 250 * MIB);
    assert_true(d == B);
    expect_invariants(a);
    /* 200 + 50 + 150 + 200 MiB allocated in total; d keeps the unsplit 200 MiB block. */
    expect_stats(a, 0,
                 LARGE("allocation", 3, 3, 4, 1) LARGE("allocated_bytes", 419430400, 419430400,
                                                       629145600,
                                                       209715200) LARGE("active", 3, 3, 4, 1)
                     LARGE("active_bytes", 419430400, 419430400, 629145600, 209715200)
                         LARGE("requested_bytes", 408944640, 408944640, 618659840, 209715200)
                             LARGE("segment", 3, 3, 3, 0)
                                 LARGE("reserved_bytes", 419430400, 419430400, 419430400, 0)
                                     SINGLE("oversize_allocations", 2, 2, 3, 1)
                                         SINGLE("oversize_segments", 2, 2, 2,
                                                0) " num_device_alloc=3 max_split_size=134217728");
    fixture_free(fx);
}

/* release_available_cached_blocks: frees one oversize block that covers the request, or several
 * from the largest down; only the full release counts as a retry. */
static void
test_release_available(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("max_split_size_mb:128", 400 * MIB, 1);
    struct allocator *a = fx->alloc;
    uint64_t p = must_malloc(a, 0, 200 * MIB, 0);
    uint64_t q = must_malloc(a, 0, 150 * MIB, 0);
    must_free(a, p);
    must_free(a, q);
    uint64_t c = must_malloc(a, 0, 100 * MIB, 0); /* frees the 150 MiB block only */
    assert_true(c == B + 350 * MIB);
    assert_int_equal(fx->fake.segment_frees, 1);
    expect_invariants(a);
    uint64_t d = must_malloc(a, 0, 250 * MIB, 0); /* frees 200 MiB, not enough: full retry */
    assert_true(d == B + 450 * MIB);
    expect_invariants(a);
    expect_stats(a, 0,
                 LARGE("allocation", 2, 2, 4, 2) LARGE("allocated_bytes", 367001600, 367001600,
                                                       734003200,
                                                       367001600) LARGE("active", 2, 2, 4, 2)
                     LARGE("active_bytes", 367001600, 367001600, 734003200, 367001600)
                         LARGE("requested_bytes", 367001600, 367001600, 734003200, 367001600)
                             LARGE("segment", 2, 2, 4, 2)
                                 LARGE("reserved_bytes", 367001600, 367001600, 734003200, 367001600)
                                     SINGLE("oversize_allocations", 1, 2, 3, 2)
                                         SINGLE("oversize_segments", 1, 2, 3,
                                                2) " num_device_alloc=4 num_device_free=2"
                                                   " num_alloc_retries=1 num_sync_all_streams=1"
                                                   " max_split_size=134217728");
    fixture_free(fx);
}

/* Garbage collection (fraction + threshold) frees aged unsplit blocks on a miss; the fraction
 * limit fails a request without asking the device. */
static void
test_gc_and_fraction(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new(
        "per_process_memory_fraction:0.5,garbage_collection_threshold:0.5", 400 * MIB, 1);
    struct allocator *a = fx->alloc;
    uint64_t p = must_malloc(a, 0, 60 * MIB, 0);
    uint64_t q = must_malloc(a, 0, 50 * MIB, 0);
    must_free(a, p);
    must_free(a, q);
    uint64_t c = must_malloc(a, 0, 70 * MIB, 0); /* 110 MiB > 100 MiB threshold: GC both */
    assert_true(c == B + 110 * MIB);
    assert_int_equal(fx->fake.segment_frees, 2);
    uint64_t d = 0;
    assert_int_equal(allocator_malloc(a, 0, 140 * MIB, 0, 0, &d), -CUPROF_ENOMEM);
    assert_int_equal(fx->fake.segment_allocs, 3); /* 70 + 140 > 200 MiB allowed: no device call */
    char msg[1024];
    allocator_last_oom_message(a, 0, msg, sizeof(msg));
    assert_non_null(strstr(msg, "Tried to allocate 140.00 MiB. GPU 0 has a total capacity of "
                                "400.00 MiB of which 330.00 MiB is free. 200.00 MiB allowed; Of "
                                "the allocated memory 70.00 MiB is allocated by cuprof, and 0 "
                                "bytes is reserved by cuprof but unallocated."));
    expect_invariants(a);
    expect_stats(a, 0,
                 LARGE("allocation", 1, 2, 3, 2)
                     LARGE("allocated_bytes", 73400320, 115343360, 188743680, 115343360)
                         LARGE("active", 1, 2, 3, 2)
                             LARGE("active_bytes", 73400320, 115343360, 188743680, 115343360)
                                 LARGE("requested_bytes", 73400320, 115343360, 188743680, 115343360)
                                     LARGE("segment", 1, 2, 3, 2)
                                         LARGE("reserved_bytes", 73400320, 115343360, 188743680,
                                               115343360) " num_device_alloc=3 num_device_free=2"
                                                          " num_alloc_retries=1 num_ooms=1"
                                                          " num_sync_all_streams=1");
    /* Lifting the fraction lets the same request through. */
    assert_int_equal(allocator_set_memory_fraction(a, 0, 1.0), 0);
    assert_int_equal(allocator_malloc(a, 0, 140 * MIB, 0, 0, &d), 0);
    assert_true(d == B + 180 * MIB);
    assert_int_equal(allocator_set_memory_fraction(a, 0, 1.5), -CUPROF_EINVAL);
    fixture_free(fx);
}

/* The owner tag (allocator_malloc_owned) rides on the block: its alloc and free events carry
 * it whoever frees, the segment_alloc of the request that made the segment carries the request's,
 * a segment_free none; an untagged request (allocator_malloc) is owner 0. */
static void
test_owner_tags(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 30, 1);
    struct allocator *a = fx->alloc;
    const struct trace_event *t = fx->fake.trace;
    uint64_t p1 = 0, p2 = 0;
    assert_int_equal(allocator_malloc_owned(a, 0, 1000, 0, 0, 7, &p1), 0);
    assert_int_equal(allocator_malloc_owned(a, 0, 3000, 0, 0, 9, &p2), 0);
    uint64_t p3 = must_malloc(a, 0, 100, 0);
    assert_true(p1 == B && p2 == B + 1024 && p3 == B + 4096);
    must_free(a, p1);
    must_free(a, p2);
    must_free(a, p3);
    assert_int_equal(allocator_empty_cache(a, 0), 0);
    const struct {
        enum trace_action action;
        uint64_t addr;
        uint16_t owner;
    } want[] = {
        {TRACE_SEGMENT_ALLOC, B, 7},         {TRACE_ALLOC, B, 7},
        {TRACE_ALLOC, B + 1024, 9},          {TRACE_ALLOC, B + 4096, 0},
        {TRACE_FREE_REQUESTED, B, 7},        {TRACE_FREE_COMPLETED, B, 7},
        {TRACE_FREE_REQUESTED, B + 1024, 9}, {TRACE_FREE_COMPLETED, B + 1024, 9},
        {TRACE_FREE_REQUESTED, B + 4096, 0}, {TRACE_FREE_COMPLETED, B + 4096, 0},
        {TRACE_SEGMENT_FREE, B, 0},
    };
    assert_int_equal(fx->fake.trace_count, sizeof(want) / sizeof(want[0]));
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        assert_int_equal(t[i].action, want[i].action);
        assert_true(t[i].addr == want[i].addr);
        assert_int_equal(t[i].owner, want[i].owner);
    }
    fixture_free(fx);
}

/* allocator_malloc_cached serves only what the cache holds, exactly as allocator_malloc would
 * (same block, split and owner), and otherwise answers -CUPROF_EUNCACHED having recorded and
 * counted nothing: no device call, no trace entry, no stats. Expandable segments never take it. */
static void
test_cached_only(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 30, 1);
    struct allocator *a = fx->alloc;
    uint64_t p = 1;
    assert_int_equal(allocator_malloc_cached(a, 0, 4096, 0, 3, 7, &p), -CUPROF_EUNCACHED);
    assert_true(p == 0);
    assert_int_equal(fx->fake.trace_count, 0);
    expect_stats(a, 0, "");
    must_free(a, must_malloc(a, 0, 4096, 0)); /* one 2 MiB small segment, cached whole */
    size_t entries = fx->fake.trace_count;
    assert_int_equal(allocator_malloc_cached(a, 0, 1000, 0, 3, 7, &p), 0);
    assert_true(p == B);
    assert_int_equal(fx->fake.trace_count, entries + 1);
    expect_trace(&fx->fake, entries, TRACE_ALLOC, B, 1000, 0);
    assert_int_equal(fx->fake.trace[entries].owner, 7);
    assert_int_equal(fx->fake.trace[entries].stack_id, 3);
    /* Another stream's block, a large request, 1 EiB: the device (or the OOM) would be needed. */
    uint64_t q = 1;
    assert_int_equal(allocator_malloc_cached(a, 0, 1000, 5, 0, 0, &q), -CUPROF_EUNCACHED);
    assert_int_equal(allocator_malloc_cached(a, 0, 3 * MIB, 0, 0, 0, &q), -CUPROF_EUNCACHED);
    assert_int_equal(allocator_malloc_cached(a, 0, SIZE_MAX, 0, 0, 0, &q), -CUPROF_EUNCACHED);
    assert_true(q == 0);
    assert_int_equal(fx->fake.trace_count, entries + 1);
    expect_stats(a, 0,
                 SMALL("allocation", 1, 1, 2, 1) SMALL("allocated_bytes", 1024, 4096, 5120, 4096)
                     SMALL("active", 1, 1, 2, 1) SMALL("active_bytes", 1024, 4096, 5120, 4096)
                         SMALL("requested_bytes", 1000, 4096, 5096, 4096)
                             SMALL("segment", 1, 1, 1, 0)
                                 SMALL("reserved_bytes", 2097152, 2097152, 2097152, 0)
                                     SMALL("inactive_split", 1, 1, 2, 1)
                                         SMALL("inactive_split_bytes", 2096128, 2096128, 4189184,
                                               2093056) " num_device_alloc=1");
    must_free(a, p);
    expect_invariants(a);
    fixture_free(fx);

    fx = fixture_new("expandable_segments:True", 1ULL << 30, 1);
    must_free(fx->alloc, must_malloc(fx->alloc, 0, 4096, 0));
    entries = fx->fake.trace_count;
    assert_int_equal(allocator_malloc_cached(fx->alloc, 0, 1000, 0, 0, 0, &p), -CUPROF_EUNCACHED);
    assert_int_equal(fx->fake.trace_count, entries);
    fixture_free(fx);
}

/* The owner's requested bytes: counted when a cached block is handed out and when its free is
 * requested (not when another stream's use ends), whoever frees it; tags from
 * ALLOC_OWNERS_COUNTED up are carried but not counted; forgetting a device frees what it held. */
static void
expect_owner(struct allocator *a, uint16_t owner, uint64_t requested, uint64_t peak)
{
    struct alloc_owner_bytes got[ALLOC_OWNERS_COUNTED];
    allocator_lock_device(a, 0);
    allocator_owner_bytes_locked(a, 0, got, ALLOC_OWNERS_COUNTED);
    allocator_unlock_device(a, 0);
    assert_true(got[owner].requested == requested);
    assert_true(got[owner].requested_peak == peak);
}

static void
test_owner_bytes(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 30, 1);
    struct allocator *a = fx->alloc;
    uint64_t p1 = 0, p2 = 0, p3 = 0, p4 = 0;
    assert_int_equal(allocator_malloc_owned(a, 0, 1000, 0, 0, 7, &p1), 0);
    assert_int_equal(allocator_malloc_owned(a, 0, 3000, 0, 0, 7, &p2), 0);
    assert_int_equal(allocator_malloc_owned(a, 0, 100, 0, 0, 9, &p3), 0);
    assert_int_equal(allocator_malloc_owned(a, 0, 500, 0, 0, ALLOC_OWNERS_COUNTED, &p4), 0);
    uint64_t p0 = must_malloc(a, 0, 40, 0); /* untagged: owner 0 */
    expect_owner(a, 7, 4000, 4000);
    expect_owner(a, 9, 100, 100);
    expect_owner(a, 0, 40, 40);
    /* A block used on another stream: its bytes leave at the request, as PyTorch's allocated. */
    assert_int_equal(allocator_record_stream(a, p1, 2), 0);
    must_free(a, p1);
    expect_owner(a, 7, 3000, 4000);
    fake_device_complete(&fx->fake, 2);
    assert_int_equal(allocator_malloc_owned(a, 0, 200, 0, 0, 7, &p1), 0); /* polls the event */
    expect_owner(a, 7, 3200, 4000);
    must_free(a, p2);
    must_free(a, p4);
    expect_owner(a, 7, 200, 4000);
    /* Out of the counted range: nothing moved anywhere. */
    struct alloc_owner_bytes all[ALLOC_OWNERS_COUNTED];
    allocator_lock_device(a, 0);
    allocator_owner_bytes_locked(a, 0, all, ALLOC_OWNERS_COUNTED);
    allocator_unlock_device(a, 0);
    uint64_t total = 0;
    for (size_t i = 0; i < ALLOC_OWNERS_COUNTED; i++)
        total += all[i].requested;
    assert_true(total == 200 + 100 + 40);
    /* A context reset drops the live blocks: their owners' bytes go with them. */
    allocator_forget_device(a, 0);
    expect_owner(a, 7, 0, 4000);
    expect_owner(a, 9, 0, 100);
    expect_owner(a, 0, 0, 40);
    (void)p0;
    (void)p3;
    fixture_free(fx);
}

/* allocator_set_traced_actions: the sink is handed exactly the actions it asked for, and every
 * action again once it asks for all; what the allocator does is the same either way. */
static void
test_traced_actions(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 30, 1);
    struct allocator *a = fx->alloc;
    allocator_set_traced_actions(a, TRACE_ACTIONS_SEGMENTS);
    uint64_t p = must_malloc(a, 0, 4096, 0);
    must_free(a, p);
    assert_int_equal(allocator_empty_cache(a, 0), 0);
    assert_int_equal(fx->fake.trace_count, 2);
    expect_trace(&fx->fake, 0, TRACE_SEGMENT_ALLOC, B, 2 * MIB, 0);
    expect_trace(&fx->fake, 1, TRACE_SEGMENT_FREE, B, 2 * MIB, 0);
    allocator_set_traced_actions(a, 0);
    must_free(a, must_malloc(a, 0, 4096, 0));
    assert_int_equal(fx->fake.trace_count, 2);
    allocator_set_traced_actions(a, TRACE_ACTIONS_ALL);
    p = must_malloc(a, 0, 4096, 0);
    must_free(a, p);
    assert_int_equal(fx->fake.trace_count, 5);
    expect_trace(&fx->fake, 2, TRACE_ALLOC, p, 4096, 0);
    expect_trace(&fx->fake, 3, TRACE_FREE_REQUESTED, p, 4096, 0);
    expect_trace(&fx->fake, 4, TRACE_FREE_COMPLETED, p, 4096, 0);
    expect_stats(a, 0,
                 SMALL("allocation", 0, 1, 3, 3) SMALL("allocated_bytes", 0, 4096, 12288, 12288)
                     SMALL("active", 0, 1, 3, 3) SMALL("active_bytes", 0, 4096, 12288, 12288)
                         SMALL("requested_bytes", 0, 4096, 12288, 12288)
                             SMALL("segment", 1, 1, 2, 1)
                                 SMALL("reserved_bytes", 2097152, 2097152, 4194304, 2097152)
                                     SMALL("inactive_split", 0, 1, 3, 3)
                                         SMALL("inactive_split_bytes", 0, 2093056, 6279168,
                                               6279168) " num_device_alloc=2 num_device_free=1"
                                                        " num_sync_all_streams=1");
    expect_invariants(a);
    fixture_free(fx);
}

/* What cuMemGetInfo adds back (allocator_releasable_bytes): a segment whose blocks are all free,
 * a pending free included; never a segment that still holds a live block, nor external memory. */
static void
test_releasable_bytes(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 30, 1);
    struct allocator *a = fx->alloc;
    uint64_t p1 = must_malloc(a, 0, 3 * MIB, 0); /* a 20 MiB segment */
    uint64_t p2 = must_malloc(a, 0, 1000, 0);    /* a 2 MiB small segment */
    uint64_t p3 = must_malloc(a, 0, 30 * MIB, 0);
    uint64_t p4 = must_malloc(a, 0, 4 * MIB, 0); /* cut from p1's segment */
    assert_int_equal(allocator_track_external(a, 0, B + 512 * MIB, 8 * MIB, 0, TRACE_POOL_VMM, 0),
                     0);
    assert_int_equal(allocator_releasable_bytes(a, 0), 0);
    must_free(a, p3);
    assert_int_equal(allocator_releasable_bytes(a, 0), 30 * MIB);
    must_free(a, p2);
    assert_int_equal(allocator_releasable_bytes(a, 0), 32 * MIB);
    must_free(a, p1); /* p4 still holds the 20 MiB segment */
    assert_int_equal(allocator_releasable_bytes(a, 0), 32 * MIB);
    assert_int_equal(allocator_record_stream(a, p4, 7), 0);
    must_free(a, p4); /* pending until stream 7's event completes: released after waiting */
    assert_int_equal(allocator_releasable_bytes(a, 0), 52 * MIB);
    assert_int_equal(allocator_releasable_bytes(a, 1), 0);
    size_t used = fx->fake.used[0];
    assert_int_equal(allocator_empty_cache(a, 0), 0);
    assert_int_equal(used - fx->fake.used[0], 52 * MIB);
    assert_int_equal(allocator_releasable_bytes(a, 0), 0);
    expect_invariants(a);
    fixture_free(fx);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_split_reuse_merge),
        cmocka_unit_test(test_large_segments_and_split),
        cmocka_unit_test(test_free_set_rank_changes),
        cmocka_unit_test(test_recent_free_block),
        cmocka_unit_test(test_retry_then_oom),
        cmocka_unit_test(test_oversize_rules),
        cmocka_unit_test(test_release_available),
        cmocka_unit_test(test_gc_and_fraction),
        cmocka_unit_test(test_owner_tags),
        cmocka_unit_test(test_cached_only),
        cmocka_unit_test(test_owner_bytes),
        cmocka_unit_test(test_traced_actions),
        cmocka_unit_test(test_releasable_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
