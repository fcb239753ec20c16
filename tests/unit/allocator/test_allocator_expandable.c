/* test_allocator_expandable.c: expandable_segments:True, worked out by hand from PyTorch's
 * ExpandableSegment, map_block, unmap_block and release_blocks: rule tables for where a request
 * grows and what a release unmaps, scenarios with exact addresses (from the reservation base),
 * trace entries and every stats key, snapshot runs, and a cuMemCreate failing mid-growth. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "alloc_test_util.h"
#include "allocator/alloc_expand.h"
#include "allocator/cuprof_errors.h"

#define V   FAKE_VMM_BASE
#define KIB ((size_t)1 << 10)
#define POOL4(name, pool, c, p, a, f)                                                              \
    " " name "." pool ".current=" #c " " name "." pool ".peak=" #p " " name "." pool               \
    ".allocated=" #a " " name "." pool ".freed=" #f
#define LARGE(name, c, p, a, f) POOL4(name, "all", c, p, a, f) POOL4(name, "large_pool", c, p, a, f)
/* allocation/allocated_bytes/active/active_bytes/requested_bytes move together here. */
#define USED(n, c, p, a, f, bc, bp, ba, bf)                                                        \
    LARGE("allocation", c, p, a, f)                                                                \
    LARGE("active", c, p, a, f)                                                                    \
    LARGE("allocated_bytes", bc, bp, ba, bf)                                                       \
    LARGE("active_bytes", bc, bp, ba, bf) LARGE("requested_bytes", bc, bp, ba, bf)

/* Page sizes and reservation sizes per pool (PyTorch: 2 MiB / 20 MiB pages, 1 1/8 of memory). */
static void
test_reservation_rules(void **state)
{
    (void)state;
    static const struct {
        size_t total, page, want;
    } cases[] = {
        {1ULL << 30, 2 * MIB, 1152 * MIB},    /* 1152 MiB is 576 whole small pages */
        {1ULL << 30, 20 * MIB, 1160 * MIB},   /* 57.6 large pages round up to 58 */
        {80ULL << 30, 20 * MIB, 92160 * MIB}, /* an 80 GiB card: 4608 pages */
        {100 * MIB, 20 * MIB, 120 * MIB},     /* 112.5 MiB: 6 pages */
        {7 * MIB, 2 * MIB, 8 * MIB},          /* 7 MiB + 896 KiB: 4 pages */
    };
    assert_int_equal(alloc_expand_page_size(true), 2 * MIB);
    assert_int_equal(alloc_expand_page_size(false), 20 * MIB);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        assert_int_equal(alloc_expand_reservation_size(cases[i].total, cases[i].page),
                         cases[i].want);
}

/* Growth table: one fresh device per row, requests in order, the address each gets and the
 * bytes mapped so far (large pool, stream 0, 1 GiB device). A request first fills the free
 * block at the mapped end, then maps whole 20 MiB pages behind it. */
static void
test_growth_table(void **state)
{
    (void)state;
    static const struct {
        const char *what;
        size_t sizes[4];
        int frees[4]; /* index of a request to free before the next one, -1 none */
        uint64_t addr[4];
        size_t mapped[4];
    } rows[] = {
        {"one page for 5 MiB", {5 * MIB}, {-1}, {V}, {20 * MIB}},
        {"three pages for 50 MiB", {50 * MIB}, {-1}, {V}, {60 * MIB}},
        {"the free 15 MiB tail plus one page",
         {5 * MIB, 30 * MIB},
         {-1, -1},
         {V, V + 5 * MIB},
         {20 * MIB, 40 * MIB}},
        {"a tail that fits maps nothing",
         {5 * MIB, 12 * MIB},
         {-1, -1},
         {V, V + 5 * MIB},
         {20 * MIB, 20 * MIB}},
        {"exactly a page, then the next page",
         {20 * MIB, 20 * MIB},
         {-1, -1},
         {V, V + 20 * MIB},
         {20 * MIB, 40 * MIB}},
        {"a freed block is reused before growing",
         {30 * MIB, 10 * MIB, 30 * MIB},
         {-1, 0, -1},
         {V, V + 30 * MIB, V},
         {40 * MIB, 40 * MIB, 40 * MIB}},
    };
    for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
        struct alloc_fixture *fx = fixture_new("expandable_segments:True", 1ULL << 30, 1);
        uint64_t got[4] = {0};
        for (int i = 0; i < 4 && rows[r].sizes[i] != 0; i++) {
            if (i > 0 && rows[r].frees[i - 1] >= 0)
                must_free(fx->alloc, got[rows[r].frees[i - 1]]);
            got[i] = must_malloc(fx->alloc, 0, rows[r].sizes[i], 0);
            if (got[i] != rows[r].addr[i] || fx->fake.used[0] != rows[r].mapped[i])
                fail_msg("%s: request %d got 0x%llx with %zu mapped, expected 0x%llx, %zu",
                         rows[r].what, i, (unsigned long long)got[i], fx->fake.used[0],
                         (unsigned long long)rows[r].addr[i], rows[r].mapped[i]);
            expect_invariants(fx->alloc);
        }
        fixture_free(fx);
    }
}

/* Release table: what empty_cache unmaps from one free block [V + off, + size) (the rest of
 * the mapped run allocated around it): PyTorch unmaps only the 20 MiB pages wholly inside. */
static void
test_release_table(void **state)
{
    (void)state;
    static const struct {
        size_t off, size, unmapped_at, unmapped;
    } rows[] = {
        {0, 5 * MIB, 0, 0},                       /* inside page 0: nothing */
        {0, 20 * MIB, 0, 20 * MIB},               /* exactly page 0 */
        {0, 50 * MIB, 0, 40 * MIB},               /* pages 0-1, 10 MiB stay cached */
        {10 * MIB, 50 * MIB, 20 * MIB, 40 * MIB}, /* pages 1-2, 10 MiB before stay cached */
        {10 * MIB, 20 * MIB, 0, 0},               /* straddles pages 0 and 1: nothing */
        {35 * MIB, 5 * MIB, 0, 0},
    };
    for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
        struct alloc_fixture *fx = fixture_new("expandable_segments:True", 1ULL << 30, 1);
        struct allocator *a = fx->alloc;
        uint64_t before = 0, hole = 0, after = 0;
        if (rows[r].off > 0)
            before = must_malloc(a, 0, rows[r].off, 0);
        hole = must_malloc(a, 0, rows[r].size, 0);
        after = must_malloc(a, 0, 60 * MIB, 0); /* keeps the block from the unmapped tail */
        assert_true(hole == V + rows[r].off);
        must_free(a, hole);
        size_t mapped = fx->fake.used[0];
        assert_int_equal(allocator_empty_cache(a, 0), 0);
        expect_invariants(a);
        assert_int_equal(mapped - fx->fake.used[0], rows[r].unmapped);
        if (rows[r].unmapped > 0) {
            const struct trace_event *e = &fx->fake.trace[fx->fake.trace_count - 1];
            assert_int_equal(e->action, TRACE_SEGMENT_UNMAP);
            assert_true(e->addr == V + rows[r].unmapped_at);
            assert_int_equal(e->size, rows[r].unmapped);
            assert_int_equal(fx->fake.stream_syncs, 1);
        } else {
            assert_int_equal(fx->fake.stream_syncs, 0);
        }
        (void)before;
        (void)after;
        fixture_free(fx);
    }
}

/* Grows from a free tail, frees everything, empty_cache unmaps all and gives the range back. */
static void
test_grow_and_release(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("expandable_segments:True", 1ULL << 30, 1);
    struct allocator *a = fx->alloc;
    const struct fake_device *f = &fx->fake;
    uint64_t p1 = must_malloc(a, 0, 5 * MIB, 0);
    uint64_t p2 = must_malloc(a, 0, 30 * MIB, 0);
    assert_true(p1 == V);
    assert_true(p2 == V + 5 * MIB);
    must_free(a, p1);
    /* Free [V, 5 MiB) and [V + 35 MiB, 5 MiB) hold no whole page: nothing to unmap. */
    assert_int_equal(allocator_releasable_bytes(a, 0), 0);
    assert_int_equal(allocator_empty_cache(a, 0), 0);
    expect_invariants(a);
    expect_stats(a, 0,
                 USED(x, 1, 2, 2, 1, 31457280, 36700160, 36700160, 5242880)
                     LARGE("reserved_bytes", 41943040, 41943040, 41943040,
                           0) " num_device_alloc=2 num_sync_all_streams=1");
    must_free(a, p2);
    assert_int_equal(allocator_releasable_bytes(a, 0), 40 * MIB);
    assert_int_equal(allocator_empty_cache(a, 0), 0);
    assert_int_equal(allocator_releasable_bytes(a, 0), 0);
    expect_invariants(a);
    expect_stats(a, 0,
                 USED(x, 0, 2, 2, 2, 0, 36700160, 36700160, 36700160) LARGE(
                     "reserved_bytes", 0, 41943040, 41943040,
                     41943040) " num_device_alloc=2 num_device_free=1 num_sync_all_streams=2");
    assert_int_equal(f->trace_count, 9);
    expect_trace(f, 0, TRACE_SEGMENT_MAP, V, 20 * MIB, 0);
    expect_trace(f, 1, TRACE_ALLOC, V, 5 * MIB, 0);
    expect_trace(f, 2, TRACE_SEGMENT_MAP, V + 20 * MIB, 20 * MIB, 0);
    expect_trace(f, 3, TRACE_ALLOC, V + 5 * MIB, 30 * MIB, 0);
    expect_trace(f, 4, TRACE_FREE_REQUESTED, V, 5 * MIB, 0);
    expect_trace(f, 5, TRACE_FREE_COMPLETED, V, 5 * MIB, 0);
    expect_trace(f, 6, TRACE_FREE_REQUESTED, V + 5 * MIB, 30 * MIB, 0);
    expect_trace(f, 7, TRACE_FREE_COMPLETED, V + 5 * MIB, 30 * MIB, 0);
    expect_trace(f, 8, TRACE_SEGMENT_UNMAP, V, 40 * MIB, 0);
    assert_int_equal(f->vmm_reserves, 1);
    assert_int_equal(f->vmm_releases, 1);
    assert_int_equal(f->pages_mapped, 2);
    assert_int_equal(f->pages_unmapped, 2);
    assert_int_equal(f->stream_syncs, 1);
    assert_int_equal(f->used[0], 0);
    fixture_free(fx);
}

/* A release leaves a hole; the next growth fills it at the lowest address, and a snapshot
 * reports each mapped run as its own expandable segment. */
static void
test_hole_refill_and_runs(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("expandable_segments:True", 1ULL << 30, 1);
    struct allocator *a = fx->alloc;
    const struct fake_device *f = &fx->fake;
    uint64_t pa = must_malloc(a, 0, 50 * MIB, 0);
    uint64_t pb = must_malloc(a, 0, 50 * MIB, 0);
    uint64_t pc = must_malloc(a, 0, 30 * MIB, 0);
    assert_true(pa == V && pb == V + 50 * MIB && pc == V + 100 * MIB);
    must_free(a, pb);
    assert_int_equal(allocator_empty_cache(a, 0), 0); /* unmaps pages 3-4 of B's 50 MiB */
    expect_invariants(a);
    size_t ns = 0, nb = 0, got_s = 0, got_b = 0;
    struct segment_info segs[4];
    struct block_info blocks[8];
    allocator_lock_device(a, 0);
    allocator_count_locked(a, 0, &ns, &nb);
    int rc = allocator_copy_locked(a, 0, segs, 4, blocks, 8, &got_s, &got_b);
    allocator_unlock_device(a, 0);
    assert_int_equal(rc, 0);
    assert_int_equal(ns, 2);
    assert_int_equal(nb, 4);
    assert_int_equal(got_s, 2);
    assert_true(segs[0].addr == V && segs[0].total_size == 60 * MIB && segs[0].expandable);
    assert_true(segs[1].addr == V + 100 * MIB && segs[1].total_size == 40 * MIB);
    assert_true(blocks[1].addr == V + 50 * MIB && blocks[1].state == BLOCK_INACTIVE);
    assert_true(blocks[3].addr == V + 130 * MIB && blocks[3].size == 10 * MIB);
    /* 30 MiB: the free 10 MiB at V + 50 MiB plus one page of the hole, not the end. */
    uint64_t pd = must_malloc(a, 0, 30 * MIB, 0);
    assert_true(pd == V + 50 * MIB);
    expect_invariants(a);
    expect_stats(a, 0,
                 USED(x, 3, 3, 4, 1, 115343360, 136314880, 167772160, 52428800) LARGE(
                     "reserved_bytes", 125829120, 146800640, 167772160,
                     41943040) " num_device_alloc=4 num_device_free=1 num_sync_all_streams=1");
    assert_int_equal(f->trace_count, 11);
    expect_trace(f, 0, TRACE_SEGMENT_MAP, V, 60 * MIB, 0);
    expect_trace(f, 2, TRACE_SEGMENT_MAP, V + 60 * MIB, 40 * MIB, 0);
    expect_trace(f, 4, TRACE_SEGMENT_MAP, V + 100 * MIB, 40 * MIB, 0);
    expect_trace(f, 8, TRACE_SEGMENT_UNMAP, V + 60 * MIB, 40 * MIB, 0);
    expect_trace(f, 9, TRACE_SEGMENT_MAP, V + 60 * MIB, 20 * MIB, 0);
    expect_trace(f, 10, TRACE_ALLOC, V + 50 * MIB, 30 * MIB, 0);
    fixture_free(fx);
}

/* Each stream and pool grows its own reservation; small pools map 2 MiB pages. */
static void
test_streams_and_small_pages(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("expandable_segments:True", 1ULL << 30, 1);
    struct allocator *a = fx->alloc;
    uint64_t s0 = must_malloc(a, 0, 1000, 0);
    uint64_t s7 = must_malloc(a, 0, 1000, 7);
    uint64_t l0 = must_malloc(a, 0, 3 * MIB, 0);
    assert_true(s0 == V);
    assert_true(s7 == V + 1152 * MIB);
    assert_true(l0 == V + 2304 * MIB);
    assert_int_equal(fx->fake.used[0], 24 * MIB);
    assert_int_equal(fx->fake.vmm_reserves, 3);
    struct memory_stats st;
    allocator_get_stats(a, 0, &st);
    assert_int_equal(st.segment[STAT_ALL].current, 0);
    assert_int_equal(st.reserved_bytes[STAT_SMALL_POOL].current, 4 * MIB);
    assert_int_equal(st.reserved_bytes[STAT_LARGE_POOL].current, 20 * MIB);
    /* A small block splits as usual: the next 1000 B on stream 0 follows the first. */
    assert_true(must_malloc(a, 0, 1000, 0) == V + 1024);
    must_free(a, s7);
    assert_int_equal(allocator_empty_cache(a, 0), 0);
    assert_int_equal(fx->fake.last_stream_sync, 7); /* PyTorch syncs the segment's stream */
    assert_int_equal(fx->fake.vmm_releases, 1);
    expect_invariants(a);
    fixture_free(fx);
}

/* The 2nd cuMemCreate of a growth fails: nothing is mapped or lost, and the retry after
 * release_cached_blocks finds the reservation made by the failed attempt. */
static void
test_create_fails_mid_growth(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("expandable_segments:True", 1ULL << 30, 1);
    struct allocator *a = fx->alloc;
    fx->fake.fail_create_at = 2;
    uint64_t p = must_malloc(a, 0, 50 * MIB, 0);
    assert_true(p == V);
    assert_int_equal(fx->fake.pages_created, 1 + 3);
    assert_int_equal(fx->fake.page_count, 3);
    assert_int_equal(fx->fake.used[0], 60 * MIB);
    assert_int_equal(fx->fake.vmm_reserves, 1);
    expect_invariants(a);
    expect_stats(a, 0,
                 USED(x, 1, 1, 1, 0, 52428800, 52428800, 52428800, 0)
                     LARGE("reserved_bytes", 62914560, 62914560, 62914560,
                           0) " num_device_alloc=1 num_alloc_retries=1 num_sync_all_streams=1");
    /* A backend error other than OOM goes up unchanged, with nothing changed. */
    fx->fake.vmm_error = 999;
    uint64_t addr = 0;
    assert_int_equal(allocator_malloc(a, 0, 100 * MIB, 0, 0, &addr), 999);
    assert_int_equal(fx->fake.used[0], 60 * MIB);
    expect_invariants(a);
    fixture_free(fx);
}

/* A 100 MiB device: the OOM retry unmaps free pages, then the growth still fails at the device's
 * limit; the oom entry follows the unmap and nothing stays mapped from the failed attempts. */
static void
test_oom_after_unmap(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("expandable_segments:True", 100 * MIB, 1);
    struct allocator *a = fx->alloc;
    const struct fake_device *f = &fx->fake;
    uint64_t pa = must_malloc(a, 0, 50 * MIB, 0);
    uint64_t pb = must_malloc(a, 0, 50 * MIB, 0);
    assert_true(pa == V && pb == V + 50 * MIB);
    must_free(a, pa);
    uint64_t addr = 0;
    assert_int_equal(allocator_malloc(a, 0, 70 * MIB, 0, 0, &addr), -CUPROF_ENOMEM);
    expect_invariants(a);
    assert_int_equal(f->used[0], 60 * MIB);
    assert_int_equal(f->page_count, 3);
    assert_int_equal(f->trace_count, 8);
    expect_trace(f, 6, TRACE_SEGMENT_UNMAP, V, 40 * MIB, 0);
    expect_trace(f, 7, TRACE_OOM, 0, 70 * MIB, 0);
    assert_int_equal(f->trace[7].device_free, 40 * MIB);
    expect_stats(a, 0,
                 USED(x, 1, 2, 2, 1, 52428800, 104857600, 104857600, 52428800)
                     LARGE("reserved_bytes", 62914560, 104857600, 104857600,
                           41943040) " num_device_alloc=2 num_device_free=1 num_alloc_retries=1"
                                     " num_ooms=1 num_sync_all_streams=1");
    fixture_free(fx);
}

/* allocator_unmap_expandable (cuprof replay's rebuild): the page under a freed block goes, the
 * free piece of 512 KiB behind it stays cached at the start of the run, in front of a live block
 * (what release_blocks leaves of a free block ending there); ranges that are not whole pages of
 * one free mapped block are refused with nothing changed; a growth takes the page and the piece. */
static void
test_unmap_at(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("expandable_segments:True", 1ULL << 30, 1);
    struct allocator *a = fx->alloc;
    const struct fake_device *f = &fx->fake;
    uint64_t pa = must_malloc(a, 0, 20 * MIB + 512 * KIB, 0);
    uint64_t pb = must_malloc(a, 0, 2 * MIB, 0);
    assert_true(pa == V && pb == V + 20 * MIB + 512 * KIB);
    must_free(a, pa);
    static const struct {
        uint64_t addr;
        size_t size;
    } refused[] = {
        {V + MIB, 20 * MIB},      /* not on a page */
        {V, 10 * MIB},            /* not whole pages */
        {V, 40 * MIB},            /* runs into the live block */
        {V + 20 * MIB, 20 * MIB}, /* the live block's page */
        {V + 40 * MIB, 20 * MIB}, /* unmapped */
        {V, 0},                   /* nothing */
        {FAKE_BASE, 20 * MIB},    /* no segment there */
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
        assert_int_equal(allocator_unmap_expandable(a, 0, refused[i].addr, refused[i].size),
                         -CUPROF_EINVAL);
    assert_int_equal(f->used[0], 40 * MIB);
    assert_int_equal(allocator_unmap_expandable(a, 0, V, 20 * MIB), 0);
    expect_invariants(a);
    assert_int_equal(f->used[0], 20 * MIB);
    assert_false(fake_device_mapped(f, V));
    expect_trace(f, f->trace_count - 1, TRACE_SEGMENT_UNMAP, V, 20 * MIB, 0);
    struct segment_info segs[4];
    struct block_info blocks[8];
    size_t got_s = 0, got_b = 0;
    allocator_lock_device(a, 0);
    int rc = allocator_copy_locked(a, 0, segs, 4, blocks, 8, &got_s, &got_b);
    allocator_unlock_device(a, 0);
    assert_int_equal(rc, 0);
    assert_int_equal(got_s, 1);
    assert_true(segs[0].addr == V + 20 * MIB && segs[0].total_size == 20 * MIB);
    assert_int_equal(got_b, 3);
    assert_true(blocks[0].addr == V + 20 * MIB && blocks[0].size == 512 * KIB &&
                blocks[0].state == BLOCK_INACTIVE);
    assert_true(blocks[1].addr == pb && blocks[1].state == BLOCK_ACTIVE_ALLOCATED);
    /* find_expandable_block: the unmapped page and the free piece reach 20 MiB + 256 KiB. */
    uint64_t pd = must_malloc(a, 0, 20 * MIB + 256 * KIB, 0);
    assert_true(pd == V);
    expect_trace(f, f->trace_count - 2, TRACE_SEGMENT_MAP, V, 20 * MIB, 0);
    expect_invariants(a);
    fixture_free(fx);
}

/* A backend without VMM calls serves expandable_segments:True with ordinary segments (and
 * PyTorch's 512-byte split rule, which follows the setting). */
static void
test_backend_without_vmm(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 30, 1);
    allocator_destroy(fx->alloc);
    fx->ops = fake_device_ops_no_vmm(&fx->fake);
    char err[128];
    assert_int_equal(alloc_config_parse("expandable_segments:True", &fx->config, err, sizeof(err)),
                     0);
    fx->alloc = allocator_create(&fx->config, &fx->ops, &fx->sink, 1);
    uint64_t p = must_malloc(fx->alloc, 0, 19 * MIB, 0);
    int dev = -1;
    uint64_t base = 0;
    size_t size = 0;
    assert_true(p == FAKE_BASE);
    assert_true(allocator_lookup(fx->alloc, p, &dev, &base, &size));
    assert_int_equal(size, 19 * MIB); /* the 1 MiB remainder was split off */
    assert_int_equal(fx->fake.segment_allocs, 1);
    assert_int_equal(fx->fake.vmm_reserves, 0);
    expect_invariants(fx->alloc);
    fixture_free(fx);
}

/* Settings changed at run time (allocator_apply_settings, PyTorch's _set_allocator_settings):
 * segments already made keep their kind, later requests follow the new rules. */
static void
test_settings_changed_at_run_time(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 30, 1);
    struct allocator *a = fx->alloc;
    uint64_t big = must_malloc(a, 0, 30 * MIB, 0); /* an ordinary 30 MiB segment */
    assert_true(big == FAKE_BASE);
    struct alloc_config next;
    char err[128];
    assert_int_equal(
        alloc_config_parse("expandable_segments:True,max_split_size_mb:20", &next, err, 128), 0);
    allocator_apply_settings(a, &next);
    uint64_t small = must_malloc(a, 0, 5 * MIB, 0); /* mapped: the segment is full */
    assert_true(small == V);
    must_free(a, big);
    /* 25 MiB is oversize now, and the cached 30 MiB block (< 25 + 20 MiB) may serve it; with
     * expandable segments on, PyTorch splits every block by the 512-byte rule. */
    uint64_t again = must_malloc(a, 0, 25 * MIB, 0);
    assert_true(again == FAKE_BASE);
    int dev = -1;
    uint64_t base = 0;
    size_t size = 0;
    assert_true(allocator_lookup(a, again, &dev, &base, &size));
    assert_int_equal(size, 25 * MIB);
    /* Off again: the free 20 MiB page at V serves no new request (nor does the 5 MiB rest): a
     * new ordinary segment does. */
    must_free(a, small);
    assert_int_equal(alloc_config_parse("", &next, err, 128), 0);
    allocator_apply_settings(a, &next);
    uint64_t third = must_malloc(a, 0, 6 * MIB, 0);
    assert_true(third >= FAKE_BASE + 30 * MIB && third < FAKE_VMM_BASE);
    assert_int_equal(fx->fake.segment_allocs, 2);
    assert_int_equal(fx->fake.vmm_reserves, 1);
    expect_invariants(a);
    fixture_free(fx);
}

/* Context reset: the driver dropped pages and range; the trace unmaps each mapped run. */
static void
test_forget_device(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("expandable_segments:True", 1ULL << 30, 1);
    struct allocator *a = fx->alloc;
    (void)must_malloc(a, 0, 50 * MIB, 0);
    (void)must_malloc(a, 0, 1000, 3);
    allocator_forget_device(a, 0);
    expect_invariants(a);
    struct memory_stats st;
    allocator_get_stats(a, 0, &st);
    assert_int_equal(st.reserved_bytes[STAT_ALL].current, 0);
    assert_int_equal(st.allocation[STAT_ALL].current, 0);
    assert_int_equal(st.num_device_free, 2);
    fixture_free(fx);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reservation_rules),
        cmocka_unit_test(test_growth_table),
        cmocka_unit_test(test_release_table),
        cmocka_unit_test(test_grow_and_release),
        cmocka_unit_test(test_hole_refill_and_runs),
        cmocka_unit_test(test_streams_and_small_pages),
        cmocka_unit_test(test_create_fails_mid_growth),
        cmocka_unit_test(test_oom_after_unmap),
        cmocka_unit_test(test_unmap_at),
        cmocka_unit_test(test_backend_without_vmm),
        cmocka_unit_test(test_settings_changed_at_run_time),
        cmocka_unit_test(test_forget_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
