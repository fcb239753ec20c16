/* Unit tests of stats/memory_stats: PyTorch's Stat arithmetic, resets, the 122 flat keys. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "stats/memory_stats.h"

static void
assert_counter(const struct stat_counter *c, int64_t current, int64_t peak, int64_t allocated,
               int64_t freed)
{
    assert_int_equal(c->current, current);
    assert_int_equal(c->peak, peak);
    assert_int_equal(c->allocated, allocated);
    assert_int_equal(c->freed, freed);
}

/* A sequence of increase (+n) / decrease (-n) steps and the counter after each. */
struct step {
    int64_t delta;
    int64_t current, peak, allocated, freed;
};

static void
test_counter_arithmetic(void **state)
{
    (void)state;
    static const struct step steps[] = {
        {+100, 100, 100, 100, 0}, {+50, 150, 150, 150, 0},  {-120, 30, 150, 150, 120},
        {+20, 50, 150, 170, 120}, {-50, 0, 150, 170, 170},  {+200, 200, 200, 370, 170},
        {-1, 199, 200, 370, 171}, {+2, 201, 201, 372, 171},
    };
    struct stat_counter c = {0, 0, 0, 0};
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        if (steps[i].delta > 0)
            memory_stats_increase(&c, steps[i].delta);
        else
            memory_stats_decrease(&c, -steps[i].delta);
        assert_counter(&c, steps[i].current, steps[i].peak, steps[i].allocated, steps[i].freed);
    }
}

static void
test_pool_updates_all_and_one_pool(void **state)
{
    (void)state;
    struct memory_stats s;
    memory_stats_init(&s, -1);

    memory_stats_increase_pool(s.allocated_bytes, STAT_SMALL_POOL, 512);
    memory_stats_increase_pool(s.allocated_bytes, STAT_LARGE_POOL, 2097152);
    memory_stats_decrease_pool(s.allocated_bytes, STAT_SMALL_POOL, 512);
    assert_counter(&s.allocated_bytes[STAT_ALL], 2097152, 2097664, 2097664, 512);
    assert_counter(&s.allocated_bytes[STAT_SMALL_POOL], 0, 512, 512, 512);
    assert_counter(&s.allocated_bytes[STAT_LARGE_POOL], 2097152, 2097152, 2097152, 0);

    /* STAT_ALL alone is counted once. */
    memory_stats_increase_pool(s.segment, STAT_ALL, 1);
    assert_counter(&s.segment[STAT_ALL], 1, 1, 1, 0);
    assert_counter(&s.segment[STAT_SMALL_POOL], 0, 0, 0, 0);
    assert_counter(&s.segment[STAT_LARGE_POOL], 0, 0, 0, 0);

    /* Net updates: + increases, - decreases, 0 leaves everything alone. */
    memory_stats_update_pool(s.inactive_split, memory_stats_pool(false), 2);
    memory_stats_update_pool(s.inactive_split, memory_stats_pool(false), 0);
    memory_stats_update_pool(s.inactive_split, memory_stats_pool(false), -1);
    assert_counter(&s.inactive_split[STAT_ALL], 1, 2, 2, 1);
    assert_counter(&s.inactive_split[STAT_LARGE_POOL], 1, 2, 2, 1);
    assert_counter(&s.inactive_split[STAT_SMALL_POOL], 0, 0, 0, 0);
    assert_int_equal(memory_stats_pool(true), STAT_SMALL_POOL);
}

/* The lazy `all` (memory_stats_add_pool and friends), settled, reads exactly as the eager
 * updates, peaks included, over a random walk in both pools with resets on the way. */
static void
test_lazy_all_matches_eager(void **state)
{
    (void)state;
    struct memory_stats eager, lazy;
    memory_stats_init(&eager, -1);
    memory_stats_init(&lazy, -1);
    uint64_t x = 88172645463325252ULL;
    for (int i = 0; i < 20000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        enum stat_pool pool = (x & 1) ? STAT_SMALL_POOL : STAT_LARGE_POOL;
        int64_t n = (int64_t)((x >> 8) % 5000);
        int64_t have = eager.active_bytes[pool].current;
        switch ((x >> 4) % 4) {
        case 0:
        case 1:
            memory_stats_increase_pool(eager.active_bytes, pool, n);
            memory_stats_add_pool(lazy.active_bytes, pool, n);
            break;
        case 2: /* never below zero, as the allocator's counters */
            memory_stats_decrease_pool(eager.active_bytes, pool, n % (have + 1));
            memory_stats_sub_pool(lazy.active_bytes, pool, n % (have + 1));
            break;
        default:
            memory_stats_update_pool(eager.active_bytes, pool, n - have / 2);
            memory_stats_net_pool(lazy.active_bytes, pool, n - have / 2);
            break;
        }
        if (i % 5000 == 4999) {
            memory_stats_settle_all(&lazy);
            memory_stats_reset_peak(&eager);
            memory_stats_reset_peak(&lazy);
        }
        if (i % 7000 == 6999) {
            memory_stats_settle_all(&lazy);
            memory_stats_reset_accumulated(&eager);
            memory_stats_reset_accumulated(&lazy);
        }
        if (i % 97 == 0) {
            memory_stats_settle_all(&lazy);
            assert_memory_equal(&eager, &lazy, sizeof(eager));
        }
    }
    memory_stats_settle_all(&lazy);
    assert_memory_equal(&eager, &lazy, sizeof(eager));
    assert_true(eager.active_bytes[STAT_ALL].peak > eager.active_bytes[STAT_SMALL_POOL].peak);
}

static void
test_init_and_resets(void **state)
{
    (void)state;
    struct memory_stats s;
    memset(&s, 0x5a, sizeof(s));
    memory_stats_init(&s, 134217728);
    assert_int_equal(s.max_split_size, 134217728);
    assert_counter(&s.requested_bytes[STAT_LARGE_POOL], 0, 0, 0, 0);
    assert_int_equal(s.num_ooms, 0);

    memory_stats_increase_pool(s.reserved_bytes, STAT_LARGE_POOL, 1000);
    memory_stats_decrease_pool(s.reserved_bytes, STAT_LARGE_POOL, 400);
    memory_stats_increase(&s.oversize_segments, 3);
    memory_stats_decrease(&s.oversize_segments, 1);
    s.num_alloc_retries = 1;
    s.num_ooms = 2;
    s.num_sync_all_streams = 3;
    s.num_device_alloc = 4;
    s.num_device_free = 5;

    memory_stats_reset_peak(&s);
    assert_counter(&s.reserved_bytes[STAT_ALL], 600, 600, 1000, 400);
    assert_counter(&s.reserved_bytes[STAT_LARGE_POOL], 600, 600, 1000, 400);
    assert_counter(&s.oversize_segments, 2, 2, 3, 1);
    assert_int_equal(s.num_ooms, 2);

    memory_stats_reset_accumulated(&s);
    assert_counter(&s.reserved_bytes[STAT_ALL], 600, 600, 0, 0);
    assert_counter(&s.reserved_bytes[STAT_LARGE_POOL], 600, 600, 0, 0);
    assert_counter(&s.oversize_segments, 2, 2, 0, 0);
    assert_int_equal(s.num_alloc_retries, 0);
    assert_int_equal(s.num_ooms, 0);
    assert_int_equal(s.num_sync_all_streams, 0);
    assert_int_equal(s.num_device_alloc, 0);
    assert_int_equal(s.num_device_free, 0);
    assert_int_equal(s.max_split_size, 134217728);
}

/* The expected key list, written out independently of memory_stats.def: PyTorch's top-level
 * names sorted by hand ('.' < '_' < letters), each expanded in sorted sub-key order. */
static size_t
expected_keys(char keys[][64])
{
    static const char *const arrays[] = {
        "active",           "active_bytes",         "allocated_bytes",
        "allocation",       "inactive_split",       "inactive_split_bytes",
        NULL /* scalars */, "oversize_allocations", "oversize_segments",
        "requested_bytes",  "reserved_bytes",       "segment",
    };
    static const char *const scalars[] = {"max_split_size",   "num_alloc_retries",
                                          "num_device_alloc", "num_device_free",
                                          "num_ooms",         "num_sync_all_streams"};
    static const char *const pools[] = {"all", "large_pool", "small_pool"};
    static const char *const fields[] = {"allocated", "current", "freed", "peak"};
    size_t n = 0;
    for (size_t a = 0; a < sizeof(arrays) / sizeof(arrays[0]); a++) {
        if (!arrays[a]) {
            for (size_t i = 0; i < 6; i++)
                snprintf(keys[n++], 64, "%s", scalars[i]);
        } else if (strncmp(arrays[a], "oversize_", 9) == 0) {
            for (size_t f = 0; f < 4; f++)
                snprintf(keys[n++], 64, "%s.%s", arrays[a], fields[f]);
        } else {
            for (size_t p = 0; p < 3; p++)
                for (size_t f = 0; f < 4; f++)
                    snprintf(keys[n++], 64, "%s.%s.%s", arrays[a], pools[p], fields[f]);
        }
    }
    return n;
}

static void
test_flat_keys_names_and_order(void **state)
{
    (void)state;
    char keys[200][64];
    size_t expected = expected_keys(keys);
    assert_int_equal(expected, 122);

    struct memory_stats s;
    memory_stats_init(&s, -1);
    struct memory_stat_kv kv[130];
    assert_int_equal(memory_stats_flatten(&s, kv, 130), 122);
    for (size_t i = 0; i < 122; i++) {
        assert_string_equal(kv[i].key, keys[i]);
        if (i > 0)
            assert_true(strcmp(kv[i - 1].key, kv[i].key) < 0);
    }
    assert_string_equal(kv[72].key, "max_split_size");
    assert_int_equal(kv[72].value, -1);

    /* A short buffer gets the first entries only; the return still says 122. */
    struct memory_stat_kv few[3] = {{NULL, 7}, {NULL, 7}, {"untouched", 7}};
    assert_int_equal(memory_stats_flatten(&s, few, 2), 122);
    assert_string_equal(few[0].key, "active.all.allocated");
    assert_string_equal(few[1].key, "active.all.current");
    assert_string_equal(few[2].key, "untouched");
    assert_int_equal(memory_stats_flatten(&s, NULL, 0), 122);
}

static void
test_flatten_values_and_get(void **state)
{
    (void)state;
    struct memory_stats s;
    memory_stats_init(&s, -1);
    memory_stats_increase_pool(s.allocated_bytes, STAT_LARGE_POOL, 20971520);
    memory_stats_decrease_pool(s.allocated_bytes, STAT_LARGE_POOL, 1048576);
    memory_stats_increase_pool(s.allocation, STAT_SMALL_POOL, 1);
    memory_stats_increase(&s.oversize_allocations, 7);
    s.num_ooms = 3;

    struct memory_stat_kv kv[MEMORY_STATS_KEY_COUNT];
    memory_stats_flatten(&s, kv, MEMORY_STATS_KEY_COUNT);
    int64_t sum = 0;
    for (size_t i = 0; i < MEMORY_STATS_KEY_COUNT; i++) {
        int64_t v = 0;
        if (strcmp(kv[i].key, "allocated_bytes.large_pool.current") == 0)
            assert_int_equal(kv[i].value, 19922944);
        if (strcmp(kv[i].key, "allocated_bytes.all.freed") == 0)
            assert_int_equal(kv[i].value, 1048576);
        if (strcmp(kv[i].key, "allocation.small_pool.peak") == 0)
            assert_int_equal(kv[i].value, 1);
        if (strcmp(kv[i].key, "oversize_allocations.allocated") == 0)
            assert_int_equal(kv[i].value, 7);
        assert_true(memory_stats_get(&s, kv[i].key, &v));
        assert_int_equal(v, kv[i].value);
        if (strcmp(kv[i].key, "max_split_size") != 0)
            sum += kv[i].value;
    }
    /* allocated_bytes: (all + large) x (current 19922944, peak 20971520, allocated 20971520,
     * freed 1048576); allocation: (all + small) x (1, 1, 1, 0); oversize: 7 x 3; num_ooms. */
    assert_int_equal(sum, 2 * (19922944 + 20971520 + 20971520 + 1048576) + 6 + 21 + 3);

    int64_t v = 42;
    assert_false(memory_stats_get(&s, "allocated.all.current", &v));
    assert_false(memory_stats_get(&s, "num_oom_rejections", &v));
    assert_int_equal(v, 42);
}

static void
test_from_flat_round_trip(void **state)
{
    (void)state;
    struct memory_stats s;
    memory_stats_init(&s, 268435456);
    /* Give every counter a distinct value through its flat key. */
    struct memory_stat_kv kv[MEMORY_STATS_KEY_COUNT];
    memory_stats_flatten(&s, kv, MEMORY_STATS_KEY_COUNT);
    struct memory_stat_kv reversed[MEMORY_STATS_KEY_COUNT + 2];
    for (size_t i = 0; i < MEMORY_STATS_KEY_COUNT; i++) {
        reversed[MEMORY_STATS_KEY_COUNT - 1 - i].key = kv[i].key;
        reversed[MEMORY_STATS_KEY_COUNT - 1 - i].value = (int64_t)(i * 1000003) - 5;
    }
    reversed[MEMORY_STATS_KEY_COUNT].key = "num_oom_rejections"; /* newer PyTorch: skipped */
    reversed[MEMORY_STATS_KEY_COUNT].value = 9;
    reversed[MEMORY_STATS_KEY_COUNT + 1].key = NULL;
    reversed[MEMORY_STATS_KEY_COUNT + 1].value = 9;

    struct memory_stats back;
    assert_int_equal(memory_stats_from_flat(reversed, MEMORY_STATS_KEY_COUNT + 2, &back), 122);
    struct memory_stat_kv again[MEMORY_STATS_KEY_COUNT];
    memory_stats_flatten(&back, again, MEMORY_STATS_KEY_COUNT);
    for (size_t i = 0; i < MEMORY_STATS_KEY_COUNT; i++) {
        assert_string_equal(again[i].key, kv[i].key);
        assert_int_equal(again[i].value, (int64_t)(i * 1000003) - 5);
    }
    assert_int_equal(back.active[STAT_ALL].allocated, -5); /* first sorted key */
    assert_int_equal(back.segment[STAT_SMALL_POOL].peak, 121 * 1000003 - 5);

    /* Missing keys read as 0, max_split_size as PyTorch's default -1. */
    struct memory_stat_kv one = {"num_ooms", 4};
    assert_int_equal(memory_stats_from_flat(&one, 1, &back), 1);
    assert_int_equal(back.num_ooms, 4);
    assert_int_equal(back.max_split_size, -1);
    assert_int_equal(back.reserved_bytes[STAT_ALL].current, 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counter_arithmetic),
        cmocka_unit_test(test_pool_updates_all_and_one_pool),
        cmocka_unit_test(test_lazy_all_matches_eager),
        cmocka_unit_test(test_init_and_resets),
        cmocka_unit_test(test_flat_keys_names_and_order),
        cmocka_unit_test(test_flatten_values_and_get),
        cmocka_unit_test(test_from_flat_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
