/* test_alloc_config.c: every accepted CUPROF_ALLOC_CONF form and every rejected one with its
 * exact message (PyTorch's PYTORCH_CUDA_ALLOC_CONF syntax). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "allocator/alloc_config.h"
#include "allocator/cuprof_errors.h"

#define MIB ((size_t)1 << 20)

static void
test_defaults(void **state)
{
    (void)state;
    struct alloc_config c;
    char err[256];
    assert_int_equal(alloc_config_parse("", &c, err, sizeof(err)), 0);
    assert_true(c.caching);
    assert_true(c.max_split_size == SIZE_MAX);
    assert_int_equal(c.max_non_split_rounding_size, 20 * MIB);
    for (int i = 0; i < ALLOC_CONFIG_ROUNDUP_INTERVALS; i++)
        assert_int_equal(c.roundup_power2_divisions[i], 0);
    assert_true(c.garbage_collection_threshold == 0.0);
    assert_true(c.per_process_memory_fraction == 0.0);
    assert_false(c.expandable_segments);
    assert_false(c.release_lock_on_cudamalloc);
    assert_int_equal(c.release_threshold, 0);
    assert_int_equal(c.free_sync, FREE_SYNC_DEVICE);
    assert_string_equal(err, "");
    assert_int_equal(alloc_config_parse(NULL, &c, err, sizeof(err)), 0);
}

static void
test_scalars(void **state)
{
    (void)state;
    struct alloc_config c;
    char err[256];
    assert_int_equal(alloc_config_parse("max_split_size_mb:128", &c, err, sizeof(err)), 0);
    assert_int_equal(c.max_split_size, 128 * MIB);
    assert_string_equal(c.raw, "max_split_size_mb:128");
    /* The tokenizer drops spaces, as PyTorch's does. */
    assert_int_equal(alloc_config_parse(" max_split_size_mb : 2 0 ", &c, err, sizeof(err)), 0);
    assert_int_equal(c.max_split_size, 20 * MIB);
    assert_int_equal(alloc_config_parse("max_non_split_rounding_mb:40", &c, err, sizeof(err)), 0);
    assert_int_equal(c.max_non_split_rounding_size, 40 * MIB);
    assert_int_equal(alloc_config_parse("garbage_collection_threshold:0.6", &c, err, sizeof(err)),
                     0);
    assert_true(c.garbage_collection_threshold == 0.6);
    assert_int_equal(alloc_config_parse("per_process_memory_fraction:1", &c, err, sizeof(err)), 0);
    assert_true(c.per_process_memory_fraction == 1.0);
    assert_int_equal(alloc_config_parse("per_process_memory_fraction:0.25", &c, err, sizeof(err)),
                     0);
    assert_true(c.per_process_memory_fraction == 0.25);
    assert_int_equal(alloc_config_parse("expandable_segments:True", &c, err, sizeof(err)), 0);
    assert_true(c.expandable_segments);
    assert_int_equal(alloc_config_parse("expandable_segments:False", &c, err, sizeof(err)), 0);
    assert_false(c.expandable_segments);
    assert_int_equal(alloc_config_parse("release_lock_on_cudamalloc:True", &c, err, sizeof(err)),
                     0);
    assert_true(c.release_lock_on_cudamalloc);
    assert_int_equal(alloc_config_parse("release_threshold_mb:0", &c, err, sizeof(err)), 0);
    assert_int_equal(c.release_threshold, 0);
    assert_int_equal(alloc_config_parse("release_threshold_mb:512", &c, err, sizeof(err)), 0);
    assert_int_equal(c.release_threshold, 512 * MIB);
    assert_int_equal(alloc_config_parse("free_sync:events", &c, err, sizeof(err)), 0);
    assert_int_equal(c.free_sync, FREE_SYNC_EVENTS);
    assert_int_equal(alloc_config_parse("free_sync:none", &c, err, sizeof(err)), 0);
    assert_int_equal(c.free_sync, FREE_SYNC_NONE);
    assert_int_equal(alloc_config_parse("free_sync:device", &c, err, sizeof(err)), 0);
    assert_int_equal(c.free_sync, FREE_SYNC_DEVICE);
    assert_int_equal(alloc_config_parse("backend:native", &c, err, sizeof(err)), 0);
    /* Several keys, an empty item and a trailing comma (PyTorch accepts both). */
    assert_int_equal(alloc_config_parse("max_split_size_mb:200,,garbage_collection_threshold:0.8,"
                                        "free_sync:none,",
                                        &c, err, sizeof(err)),
                     0);
    assert_int_equal(c.max_split_size, 200 * MIB);
    assert_true(c.garbage_collection_threshold == 0.8);
    assert_int_equal(c.free_sync, FREE_SYNC_NONE);
}

struct roundup_case {
    const char *text;
    uint32_t expect[ALLOC_CONFIG_ROUNDUP_INTERVALS];
};

static void
test_roundup_forms(void **state)
{
    (void)state;
    static const struct roundup_case cases[] = {
        {"roundup_power2_divisions:4", {4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4}},
        {"roundup_power2_divisions:1", {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
        /* 256 MiB is interval 8; the first entry also fills every lower interval. */
        {"roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
         {1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 4, 8, 8, 8, 8, 8}},
        {"roundup_power2_divisions:[256:1,512:2,>:8]",
         {1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 8, 8, 8, 8, 8, 8}},
        {"roundup_power2_divisions:[64:8,>:2]", {8, 8, 8, 8, 8, 8, 8, 2, 2, 2, 2, 2, 2, 2, 2, 2}},
        {"roundup_power2_divisions:[1:4]", {4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
        {"roundup_power2_divisions:[2:4]", {4, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
        /* Boundaries past 32 GiB clamp to the last interval. */
        {"roundup_power2_divisions:[65536:4]", {4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4}},
        {"roundup_power2_divisions:[256:0,>:4]", {0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4}},
        {"roundup_power2_divisions:[ 512 : 2 , > : 16 ]",
         {2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 16, 16, 16, 16, 16, 16}},
        /* PyTorch tolerates a comma before the closing bracket. */
        {"roundup_power2_divisions:[256:1,]", {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}},
        {"roundup_power2_divisions:[>:8]", {0, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8}},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct alloc_config c;
        char err[256];
        int rc = alloc_config_parse(cases[i].text, &c, err, sizeof(err));
        if (rc != 0)
            fail_msg("%s: %s", cases[i].text, err);
        for (int k = 0; k < ALLOC_CONFIG_ROUNDUP_INTERVALS; k++) {
            if (c.roundup_power2_divisions[k] != cases[i].expect[k])
                fail_msg("%s: interval %d is %u, expected %u", cases[i].text, k,
                         c.roundup_power2_divisions[k], cases[i].expect[k]);
        }
    }
}

struct reject_case {
    const char *text;
    const char *message;
};

#define KEYS                                                                                       \
    "max_split_size_mb, roundup_power2_divisions, max_non_split_rounding_mb, "                     \
    "garbage_collection_threshold, per_process_memory_fraction, expandable_segments, "             \
    "release_lock_on_cudamalloc, release_threshold_mb, free_sync, backend"
#define MIB20        "expected an integer number of MiB >= 20"
#define ROUND_SCALAR "expected a power of two, or a list like [256:1,512:2,>:8]"
#define ROUND_LIST                                                                                 \
    "expected a list of <MiB, a power of two>:<divisions, 0 or a power of two> pairs like "        \
    "[256:1,512:2,>:8]"

static void
test_rejected(void **state)
{
    (void)state;
    static const struct reject_case cases[] = {
        {"max_split_size_mb:abc", "bad value \"max_split_size_mb:abc\": " MIB20},
        {"max_split_size_mb:19", "bad value \"max_split_size_mb:19\": " MIB20},
        {"max_split_size_mb:-5", "bad value \"max_split_size_mb:-5\": " MIB20},
        {"max_split_size_mb:20.5", "bad value \"max_split_size_mb:20.5\": " MIB20},
        {"max_split_size_mb:", "bad value \"max_split_size_mb:\": " MIB20},
        {"max_split_size_mb", "bad value \"max_split_size_mb\": " MIB20},
        {"max_split_size_mb:,free_sync:none", "bad value \"max_split_size_mb:\": " MIB20},
        {"max_split_size_mb:99999999999999999999",
         "bad value \"max_split_size_mb:99999999999999999999\": " MIB20},
        {"max_non_split_rounding_mb:10", "bad value \"max_non_split_rounding_mb:10\": " MIB20},
        {"foo:1", "unknown key \"foo\": expected one of " KEYS},
        {"max_split_size_mb:100,Max_split_size_mb:100",
         "unknown key \"Max_split_size_mb\": expected one of " KEYS},
        {"roundup_power2_divisions:3", "bad value \"roundup_power2_divisions:3\": " ROUND_SCALAR},
        {"roundup_power2_divisions:0", "bad value \"roundup_power2_divisions:0\": " ROUND_SCALAR},
        {"roundup_power2_divisions:x", "bad value \"roundup_power2_divisions:x\": " ROUND_SCALAR},
        {"roundup_power2_divisions:", "bad value \"roundup_power2_divisions:\": " ROUND_SCALAR},
        {"roundup_power2_divisions:[300:1]",
         "bad value \"roundup_power2_divisions:[300:1]\": " ROUND_LIST},
        {"roundup_power2_divisions:[256:3]",
         "bad value \"roundup_power2_divisions:[256:3]\": " ROUND_LIST},
        {"roundup_power2_divisions:[256:1 512:2]",
         "bad value \"roundup_power2_divisions:[256:1512:2]\": " ROUND_LIST},
        {"roundup_power2_divisions:[256]",
         "bad value \"roundup_power2_divisions:[256]\": " ROUND_LIST},
        {"roundup_power2_divisions:[256:1", "bad value \"roundup_power2_divisions:[256:1\": "
                                            "expected a closing ]"},
        {"garbage_collection_threshold:1",
         "bad value \"garbage_collection_threshold:1\": expected a number strictly between 0 "
         "and 1"},
        {"garbage_collection_threshold:0",
         "bad value \"garbage_collection_threshold:0\": expected a number strictly between 0 "
         "and 1"},
        {"garbage_collection_threshold:nan",
         "bad value \"garbage_collection_threshold:nan\": expected a number strictly between 0 "
         "and 1"},
        {"garbage_collection_threshold:0.5x",
         "bad value \"garbage_collection_threshold:0.5x\": expected a number strictly between 0 "
         "and 1"},
        {"per_process_memory_fraction:0",
         "bad value \"per_process_memory_fraction:0\": expected a number greater than 0 and at "
         "most 1"},
        {"per_process_memory_fraction:1.5",
         "bad value \"per_process_memory_fraction:1.5\": expected a number greater than 0 and "
         "at most 1"},
        {"expandable_segments:true",
         "bad value \"expandable_segments:true\": expected True or False"},
        {"release_lock_on_cudamalloc:1",
         "bad value \"release_lock_on_cudamalloc:1\": expected True or False"},
        {"release_threshold_mb:x",
         "bad value \"release_threshold_mb:x\": expected an integer number of MiB >= 0"},
        {"free_sync:sometimes",
         "bad value \"free_sync:sometimes\": expected device, events or none"},
        {"backend:cudaMallocAsync",
         "bad value \"backend:cudaMallocAsync\": expected native: cuprof serves every "
         "allocation with its own copy of PyTorch's native caching allocator and cannot profile "
         "the cudaMallocAsync backend"},
        {"backend:other", "bad value \"backend:other\": expected native"},
        {"max_split_size_mb:100:200", "expected \",\" after \"max_split_size_mb:100\""},
        {"max_split_size_mb:100 free_sync:none",
         "bad value \"max_split_size_mb:100free_sync\": " MIB20},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct alloc_config c;
        char err[512];
        int rc = alloc_config_parse(cases[i].text, &c, err, sizeof(err));
        if (rc != -CUPROF_EINVAL)
            fail_msg("%s: accepted (rc %d)", cases[i].text, rc);
        if (strcmp(err, cases[i].message) != 0)
            fail_msg("%s:\n got      %s\n expected %s", cases[i].text, err, cases[i].message);
    }
}

static void
test_parse_resets_to_defaults(void **state)
{
    (void)state;
    struct alloc_config c;
    char err[256];
    assert_int_equal(
        alloc_config_parse("max_split_size_mb:64,roundup_power2_divisions:4", &c, err, sizeof(err)),
        0);
    /* PyTorch: every parse starts from the defaults, so omitted keys go back to them. */
    assert_int_equal(alloc_config_parse("free_sync:none", &c, err, sizeof(err)), 0);
    assert_true(c.max_split_size == SIZE_MAX);
    assert_int_equal(c.roundup_power2_divisions[3], 0);
    /* A short error buffer is still NUL-terminated. */
    char small[8];
    assert_int_equal(alloc_config_parse("foo:1", &c, small, sizeof(small)), -CUPROF_EINVAL);
    assert_string_equal(small, "unknown");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_scalars),
        cmocka_unit_test(test_roundup_forms),
        cmocka_unit_test(test_rejected),
        cmocka_unit_test(test_parse_resets_to_defaults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
