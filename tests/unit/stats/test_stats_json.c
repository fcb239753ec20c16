/* Unit tests of stats/stats_json: the flat dict as JSON, read back with jansson. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "stats/stats_json.h"

static void
fill(struct memory_stats *s)
{
    memory_stats_init(s, -1);
    memory_stats_increase_pool(s->reserved_bytes, STAT_LARGE_POOL, INT64_C(4611686018427387907));
    memory_stats_decrease_pool(s->reserved_bytes, STAT_LARGE_POOL, 2097152);
    memory_stats_increase_pool(s->allocation, STAT_SMALL_POOL, 3);
    memory_stats_increase(&s->oversize_allocations, 9);
    s->num_device_alloc = 17;
}

static int64_t
get_int(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    assert_non_null(v);
    assert_true(json_is_integer(v));
    return (int64_t)json_integer_value(v);
}

static void
test_json_parses_back_exactly(void **state)
{
    (void)state;
    struct memory_stats s;
    fill(&s);
    static char buf[16384];
    size_t n = stats_json(&s, buf, sizeof(buf));
    assert_int_equal(n, strlen(buf));

    json_error_t err;
    json_t *obj = json_loads(buf, 0, &err);
    assert_non_null(obj);
    assert_true(json_is_object(obj));
    assert_int_equal(json_object_size(obj), 122);
    assert_int_equal(get_int(obj, "reserved_bytes.all.current"), INT64_C(4611686018425290755));
    assert_int_equal(get_int(obj, "reserved_bytes.large_pool.peak"), INT64_C(4611686018427387907));
    assert_int_equal(get_int(obj, "reserved_bytes.large_pool.freed"), 2097152);
    assert_int_equal(get_int(obj, "reserved_bytes.small_pool.allocated"), 0);
    assert_int_equal(get_int(obj, "allocation.small_pool.current"), 3);
    assert_int_equal(get_int(obj, "oversize_allocations.peak"), 9);
    assert_int_equal(get_int(obj, "num_device_alloc"), 17);
    assert_int_equal(get_int(obj, "max_split_size"), -1);

    /* Every value equals the flat view's. */
    struct memory_stat_kv kv[MEMORY_STATS_KEY_COUNT];
    memory_stats_flatten(&s, kv, MEMORY_STATS_KEY_COUNT);
    for (size_t i = 0; i < MEMORY_STATS_KEY_COUNT; i++)
        assert_int_equal(get_int(obj, kv[i].key), kv[i].value);
    json_decref(obj);
}

static void
test_json_text_is_sorted_like_json_dumps(void **state)
{
    (void)state;
    struct memory_stats s;
    fill(&s);
    static char buf[16384];
    stats_json(&s, buf, sizeof(buf));
    /* json.dumps(torch.cuda.memory_stats()) starts and ends like this. */
    const char *head = "{\"active.all.allocated\": 0, \"active.all.current\": 0, ";
    assert_memory_equal(buf, head, strlen(head));
    const char *tail = "\"segment.small_pool.freed\": 0, \"segment.small_pool.peak\": 0}";
    assert_string_equal(buf + strlen(buf) - strlen(tail), tail);
    assert_non_null(strstr(buf, ", \"max_split_size\": -1, \"num_alloc_retries\": 0, "));

    /* Each key appears once, after the one before it. */
    struct memory_stat_kv kv[MEMORY_STATS_KEY_COUNT];
    memory_stats_flatten(&s, kv, MEMORY_STATS_KEY_COUNT);
    const char *prev = buf;
    for (size_t i = 0; i < MEMORY_STATS_KEY_COUNT; i++) {
        char quoted[80];
        snprintf(quoted, sizeof(quoted), "\"%s\": ", kv[i].key);
        const char *at = strstr(buf, quoted);
        assert_non_null(at);
        assert_true(at >= prev);
        assert_null(strstr(at + 1, quoted));
        prev = at;
    }
}

static void
test_json_cut_short_and_devices(void **state)
{
    (void)state;
    struct memory_stats s[2];
    fill(&s[0]);
    memory_stats_init(&s[1], 1048576);
    static char full[16384];
    size_t n = stats_json(&s[0], full, sizeof(full));

    char small[40];
    assert_int_equal(stats_json(&s[0], small, sizeof(small)), n);
    assert_int_equal(strlen(small), sizeof(small) - 1);
    assert_memory_equal(small, full, sizeof(small) - 1);
    assert_int_equal(stats_json(&s[0], NULL, 0), n);

    static char both[32768];
    size_t m = stats_json_devices(s, 2, both, sizeof(both));
    assert_int_equal(m, strlen(both));
    json_error_t err;
    json_t *arr = json_loads(both, 0, &err);
    assert_non_null(arr);
    assert_true(json_is_array(arr));
    assert_int_equal(json_array_size(arr), 2);
    assert_int_equal(get_int(json_array_get(arr, 0), "num_device_alloc"), 17);
    assert_int_equal(get_int(json_array_get(arr, 1), "max_split_size"), 1048576);
    assert_int_equal(get_int(json_array_get(arr, 1), "reserved_bytes.all.current"), 0);
    json_decref(arr);

    assert_int_equal(stats_json_devices(s, 0, both, sizeof(both)), 2);
    assert_string_equal(both, "[]");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_parses_back_exactly),
        cmocka_unit_test(test_json_text_is_sorted_like_json_dumps),
        cmocka_unit_test(test_json_cut_short_and_devices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
