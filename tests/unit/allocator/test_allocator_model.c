/* test_allocator_model.c: randomized model test: 10^6 operations (10^5 when sanitized) over
 * several streams and sizes from 1 B to 1 GiB on a small simulated device, with the invariant
 * walker run regularly and the stats checked against the test's own recount: live bytes from
 * the model, every pool's counters from the block table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "alloc_test_util.h"
#include "allocator/alloc_policy.h"
#include "allocator/cuprof_errors.h"

#define MAX_LIVE 2048

struct live {
    uint64_t addr;
    size_t requested;
    uint64_t stream;
};

struct model {
    struct live live[MAX_LIVE];
    size_t count;
    uint64_t rng;
};

static uint64_t
next_rand(struct model *m)
{
    m->rng ^= m->rng << 13;
    m->rng ^= m->rng >> 7;
    m->rng ^= m->rng << 17;
    return m->rng;
}

/* Mostly small requests, some 1-10 MiB, a few from 10 MiB up to 1 GiB. */
static size_t
pick_size(struct model *m)
{
    uint64_t r = next_rand(m);
    unsigned kind = (unsigned)(r % 100);
    r >>= 8;
    if (kind < 70)
        return 1 + (size_t)(r % (1 << 20));
    if (kind < 93)
        return (1 << 20) + (size_t)(r % (9 << 20));
    if (kind < 99)
        return (10 << 20) + (size_t)(r % (118 << 20));
    return (128 << 20) + (size_t)(r % (896u << 20));
}

/* Every pool's counters recounted from the block table (allocator_copy_locked): segments and
 * reserved bytes, allocations, active blocks, inactive split blocks, each per pool and in all. */
static void
check_pools_against_blocks(struct allocator *a, const struct memory_stats *st)
{
    size_t ns = 0, nb = 0;
    allocator_lock_device(a, 0);
    allocator_count_locked(a, 0, &ns, &nb);
    struct segment_info *segs = calloc(ns + 1, sizeof(*segs));
    struct block_info *blocks = calloc(nb + 1, sizeof(*blocks));
    size_t got_s = 0, got_b = 0;
    int rc = -1;
    if (segs != NULL && blocks != NULL) /* calloc under the lock: a test, not the hot path */
        rc = allocator_copy_locked(a, 0, segs, ns + 1, blocks, nb + 1, &got_s, &got_b);
    allocator_unlock_device(a, 0);
    assert_int_equal(rc, 0);
    int64_t segment[STAT_POOL_COUNT] = {0}, reserved[STAT_POOL_COUNT] = {0};
    int64_t allocation[STAT_POOL_COUNT] = {0}, allocated[STAT_POOL_COUNT] = {0};
    int64_t active[STAT_POOL_COUNT] = {0}, active_bytes[STAT_POOL_COUNT] = {0};
    int64_t split[STAT_POOL_COUNT] = {0}, split_bytes[STAT_POOL_COUNT] = {0};
    for (size_t i = 0; i < got_s; i++) {
        const struct segment_info *sg = &segs[i];
        int pools[2] = {STAT_ALL, sg->is_small ? STAT_SMALL_POOL : STAT_LARGE_POOL};
        for (int k = 0; k < 2; k++) {
            int p = pools[k];
            /* PyTorch: an expandable segment's mappings are reserved bytes, not segments, and
             * its free blocks are never inactive splits. */
            segment[p] += !sg->expandable;
            reserved[p] += (int64_t)sg->total_size;
            for (uint32_t j = sg->first_block; j < sg->first_block + sg->block_count; j++) {
                const struct block_info *b = &blocks[j];
                if (b->state == BLOCK_ACTIVE_ALLOCATED) {
                    allocation[p]++;
                    allocated[p] += (int64_t)b->size;
                }
                if (b->state != BLOCK_INACTIVE) {
                    active[p]++;
                    active_bytes[p] += (int64_t)b->size;
                } else if (sg->block_count > 1 && !sg->expandable) {
                    split[p]++;
                    split_bytes[p] += (int64_t)b->size;
                }
            }
        }
    }
    for (int p = 0; p < STAT_POOL_COUNT; p++) {
        assert_int_equal(st->segment[p].current, segment[p]);
        assert_int_equal(st->reserved_bytes[p].current, reserved[p]);
        assert_int_equal(st->allocation[p].current, allocation[p]);
        assert_int_equal(st->allocated_bytes[p].current, allocated[p]);
        assert_int_equal(st->active[p].current, active[p]);
        assert_int_equal(st->active_bytes[p].current, active_bytes[p]);
        assert_int_equal(st->inactive_split[p].current, split[p]);
        assert_int_equal(st->inactive_split_bytes[p].current, split_bytes[p]);
    }
    free(segs);
    free(blocks);
}

static void
check_against_model(struct alloc_fixture *fx, struct model *m, bool settled)
{
    struct allocator *a = fx->alloc;
    struct memory_stats st;
    expect_invariants(a);
    allocator_get_stats(a, 0, &st);
    int64_t block_bytes = 0, requested = 0;
    for (size_t i = 0; i < m->count; i++) {
        int dev = -1;
        uint64_t base = 0;
        size_t size = 0;
        assert_true(allocator_lookup(a, m->live[i].addr, &dev, &base, &size));
        assert_int_equal(dev, 0);
        assert_true(base == m->live[i].addr);
        size_t rounded = alloc_policy_round_size(&fx->config, m->live[i].requested);
        /* PyTorch: a block is the rounded size, plus at most 1 MiB unsplit in the large pool
         * (or < 20 MiB of oversize waste, or 2 MiB segment rounding). */
        assert_true(size >= rounded);
        assert_true(size < rounded + fx->config.max_non_split_rounding_size + 2 * MIB);
        block_bytes += (int64_t)size;
        requested += (int64_t)m->live[i].requested;
    }
    assert_int_equal(st.allocation[STAT_ALL].current, (int64_t)m->count);
    assert_int_equal(st.allocated_bytes[STAT_ALL].current, block_bytes);
    assert_int_equal(st.reserved_bytes[STAT_ALL].current, (int64_t)fx->fake.used[0]);
    assert_int_equal(st.num_device_alloc, fx->fake.segment_allocs + fx->fake.vmm_map_calls);
    assert_int_equal(st.num_device_free, fx->fake.segment_frees + fx->fake.vmm_unmap_calls);
    check_pools_against_blocks(a, &st);
    for (int p = 0; p < STAT_POOL_COUNT; p++) {
        const struct stat_counter *arrays[] = {
            &st.allocation[p],     &st.allocated_bytes[p], &st.active[p],
            &st.active_bytes[p],   &st.requested_bytes[p], &st.segment[p],
            &st.reserved_bytes[p], &st.inactive_split[p],  &st.inactive_split_bytes[p],
        };
        for (size_t k = 0; k < sizeof(arrays) / sizeof(arrays[0]); k++) {
            assert_int_equal(arrays[k]->allocated - arrays[k]->freed, arrays[k]->current);
            assert_true(arrays[k]->peak >= arrays[k]->current);
        }
    }
    if (settled) {
        assert_int_equal(st.active[STAT_ALL].current, (int64_t)m->count);
        assert_int_equal(st.requested_bytes[STAT_ALL].current, requested);
        assert_int_equal(st.active_bytes[STAT_ALL].current, block_bytes);
    }
}

static void
run_model(const char *conf, long ops, uint64_t seed)
{
    struct alloc_fixture *fx = fixture_new(conf, 3ULL << 30, 1);
    struct allocator *a = fx->alloc;
    struct model *m = calloc(1, sizeof(*m));
    assert_non_null(m);
    fx->fake.keep_trace = false;
    m->rng = seed;
    long ooms = 0, mallocs = 0, releases_checked = 0;
    for (long op = 1; op <= ops; op++) {
        uint64_t r = next_rand(m) % 1000;
        if (r < 480 && m->count < MAX_LIVE) {
            size_t size = pick_size(m);
            uint64_t stream = next_rand(m) % 3;
            uint64_t addr = 0;
            int rc = allocator_malloc(a, 0, size, stream, 1, &addr);
            if (rc == -CUPROF_ENOMEM) {
                ooms++;
                continue;
            }
            assert_int_equal(rc, 0);
            m->live[m->count++] = (struct live){addr, size, stream};
            mallocs++;
        } else if (r < 960 && m->count > 0) {
            size_t i = (size_t)(next_rand(m) % m->count);
            struct live l = m->live[i];
            m->live[i] = m->live[--m->count];
            uint64_t how = next_rand(m) % 10;
            if (how == 0) {
                assert_int_equal(allocator_record_stream(a, l.addr, 7), 0);
                assert_int_equal(allocator_free(a, l.addr, 0), 0);
            } else if (how == 1) {
                assert_int_equal(allocator_free_on_stream(a, l.addr, (l.stream + 1) % 3, 0), 0);
            } else {
                assert_int_equal(allocator_free(a, l.addr, 0), 0);
            }
            assert_int_equal(allocator_free(a, l.addr, 0), -CUPROF_ENOTOWNED);
        } else if (r < 990) {
            fake_device_complete(&fx->fake, next_rand(m) % 8);
        } else if (r < 992) {
            /* What cuMemGetInfo adds back is exactly what a release gives the device. */
            size_t releasable = allocator_releasable_bytes(a, 0);
            size_t used = fx->fake.used[0];
            assert_int_equal(allocator_empty_cache(a, 0), 0);
            assert_int_equal(used - fx->fake.used[0], releasable);
            assert_int_equal(allocator_releasable_bytes(a, 0), 0);
            releases_checked += releasable > 0;
        }
        if (op % 2000 == 0)
            check_against_model(fx, m, false);
        if (op % 20000 == 0) {
            fake_device_complete(&fx->fake, UINT64_MAX);
            allocator_process_events(a, 0);
            check_against_model(fx, m, true);
        }
    }
    /* Everything freed and released: the device is empty again. */
    while (m->count > 0)
        assert_int_equal(allocator_free(a, m->live[--m->count].addr, 0), 0);
    assert_int_equal(allocator_empty_cache(a, 0), 0);
    check_against_model(fx, m, true);
    struct memory_stats st;
    allocator_get_stats(a, 0, &st);
    assert_int_equal(st.reserved_bytes[STAT_ALL].current, 0);
    assert_int_equal(st.num_ooms, ooms);
    assert_int_equal(fx->fake.used[0], 0);
    assert_int_equal(fx->fake.page_count, 0);
    assert_true(ooms > 0); /* the 3 GiB device did run out now and then */
    assert_true(mallocs > ops / 3);
    assert_true(releases_checked > 0);
    if (getenv("MODEL_VERBOSE"))
        print_message("%s: %ld ops, %ld mallocs, %ld ooms, %ld segments\n", conf, ops, mallocs,
                      ooms, fx->fake.segment_allocs);
    free(m);
    fixture_free(fx);
}

static long
scaled(long ops)
{
    const char *s = getenv("SANITIZER_BUILD");
    return s != NULL && strcmp(s, "1") == 0 ? ops / 10 : ops;
}

static void
test_model_default(void **state)
{
    (void)state;
    run_model("", scaled(400000), 0x9e3779b97f4a7c15ULL);
}

static void
test_model_max_split(void **state)
{
    (void)state;
    run_model("max_split_size_mb:64,roundup_power2_divisions:[1:1,16:4,>:8]", scaled(300000),
              0x243f6a8885a308d3ULL);
}

static void
test_model_gc_fraction(void **state)
{
    (void)state;
    run_model("per_process_memory_fraction:0.8,garbage_collection_threshold:0.6,"
              "free_sync:events",
              scaled(300000), 0x13198a2e03707344ULL);
}

/* Expandable segments: growth, shrinking on empty_cache and the OOM retry, three streams. */
static void
test_model_expandable(void **state)
{
    (void)state;
    run_model("expandable_segments:True", scaled(300000), 0xa4093822299f31d0ULL);
}

static void
test_model_expandable_limits(void **state)
{
    (void)state;
    run_model("expandable_segments:True,max_split_size_mb:64,per_process_memory_fraction:0.8,"
              "garbage_collection_threshold:0.6,free_sync:events",
              scaled(200000), 0x082efa98ec4e6c89ULL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_default),           cmocka_unit_test(test_model_max_split),
        cmocka_unit_test(test_model_gc_fraction),       cmocka_unit_test(test_model_expandable),
        cmocka_unit_test(test_model_expandable_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
