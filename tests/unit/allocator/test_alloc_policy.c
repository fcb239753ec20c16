/* test_alloc_policy.c: PyTorch's size rules as tables (rounding, power-of-two divisions, pools,
 * segment sizes, should_split, oversize guards, format_size) and the AVL tree under churn. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "allocator/alloc_config.h"
#include "allocator/alloc_policy.h"
#include "allocator/avl.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

static struct alloc_config
config_with(const char *text)
{
    struct alloc_config c;
    char err[256];
    if (alloc_config_parse(text, &c, err, sizeof(err)) != 0)
        fail_msg("%s: %s", text, err);
    return c;
}

struct size_case {
    const char *config;
    size_t in;
    size_t out;
};

static void
test_round_size(void **state)
{
    (void)state;
    static const struct size_case cases[] = {
        {"", 1, 512},
        {"", 511, 512},
        {"", 512, 512},
        {"", 513, 1024},
        {"", 1048577, 1049088},
        {"", 5000000, 5000192},
        {"roundup_power2_divisions:4", 1200, 1536}, /* 1200 <= 512*4: plain 512 rounding */
        {"roundup_power2_divisions:4", 2048, 2048},
        {"roundup_power2_divisions:4", 2049, 2560},
        {"roundup_power2_divisions:4", 3000, 3072},
        {"roundup_power2_divisions:4", 5000000, 5242880},
        {"roundup_power2_divisions:8", 5000000, 5242880},
        {"roundup_power2_divisions:8", 300 * MIB + 1, 320 * MIB},
        {"roundup_power2_divisions:8", 256 * MIB, 256 * MIB},
        {"roundup_power2_divisions:2", 700 * KIB, 768 * KIB},
        /* [256:1,512:2,>:8]: no rounding below 512 MiB, halves in [512 MiB, 1 GiB), eighths
         * from 1 GiB. */
        {"roundup_power2_divisions:[256:1,512:2,>:8]", 300 * MIB + 1, 300 * MIB + 512},
        {"roundup_power2_divisions:[256:1,512:2,>:8]", 600 * MIB, 768 * MIB},
        {"roundup_power2_divisions:[256:1,512:2,>:8]", 1536 * MIB + 1, 1664 * MIB},
        {"roundup_power2_divisions:[256:1,512:2,>:8]", 3000, 3072},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct alloc_config c = config_with(cases[i].config);
        size_t got = alloc_policy_round_size(&c, cases[i].in);
        if (got != cases[i].out)
            fail_msg("[%s] round_size(%zu) = %zu, expected %zu", cases[i].config, cases[i].in, got,
                     cases[i].out);
    }
    assert_int_equal(alloc_policy_next_division(1024, 4), 1024);
    assert_int_equal(alloc_policy_next_division(1536, 8), 1536);
    assert_int_equal(alloc_policy_next_division(1537, 8), 1664);
    assert_int_equal(alloc_policy_next_division(600, 1024), 1024); /* step 0: next power */
}

static void
test_pools_and_segments(void **state)
{
    (void)state;
    static const struct size_case seg[] = {
        {"", 512, 2 * MIB},
        {"", MIB, 2 * MIB},
        {"", MIB + 512, 20 * MIB},
        {"", 9 * MIB, 20 * MIB},
        {"", 10 * MIB - 512, 20 * MIB},
        {"", 10 * MIB, 10 * MIB},
        {"", 10 * MIB + 512, 12 * MIB},
        {"", 100 * MIB + 512, 102 * MIB},
        {"", 200 * MIB, 200 * MIB},
    };
    for (size_t i = 0; i < sizeof(seg) / sizeof(seg[0]); i++) {
        size_t got = alloc_policy_segment_size(seg[i].in);
        if (got != seg[i].out)
            fail_msg("segment_size(%zu) = %zu, expected %zu", seg[i].in, got, seg[i].out);
    }
    struct alloc_config c = config_with("");
    assert_true(alloc_policy_is_small(alloc_policy_round_size(&c, MIB)));
    /* Rounding happens before the pool choice: 1 MiB + 1 B is large. */
    assert_false(alloc_policy_is_small(alloc_policy_round_size(&c, MIB + 1)));
}

struct split_case {
    const char *config;
    bool small;
    size_t block;
    size_t size;
    bool split;
};

static void
test_should_split(void **state)
{
    (void)state;
    static const struct split_case cases[] = {
        {"", true, 2 * MIB, 512, true},
        {"", true, 1024, 512, true},
        {"", true, 512, 512, false},
        {"", false, 20 * MIB, 19 * MIB, false},       /* remainder exactly 1 MiB stays */
        {"", false, 20 * MIB, 19 * MIB - 512, true},  /* remainder 1 MiB + 512 splits */
        {"", false, 12 * MIB, 10 * MIB + 512, true},  /* 2 MiB - 512 left */
        {"", false, 2 * MIB + 512, MIB + 512, false}, /* exactly 1 MiB left */
        {"max_split_size_mb:128", false, 200 * MIB, 50 * MIB, true},
        {"max_split_size_mb:128", false, 200 * MIB, 150 * MIB, false}, /* oversize: never */
        /* PyTorch: expandable_segments:True applies the 512-byte rule to every block. */
        {"expandable_segments:True", false, 20 * MIB, 19 * MIB, true},
        {"expandable_segments:True", false, 20 * MIB, 20 * MIB - 512, true},
        {"expandable_segments:True", false, 20 * MIB, 20 * MIB - 511, false},
        {"expandable_segments:True", false, 20 * MIB, 20 * MIB, false},
        {"expandable_segments:True,max_split_size_mb:128", false, 200 * MIB, 150 * MIB, true},
        {"expandable_segments:False", false, 20 * MIB, 19 * MIB, false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct alloc_config c = config_with(cases[i].config);
        bool got = alloc_policy_should_split(&c, cases[i].small, cases[i].block, cases[i].size);
        if (got != cases[i].split)
            fail_msg("[%s] should_split(%s, %zu, %zu) = %d", cases[i].config,
                     cases[i].small ? "small" : "large", cases[i].block, cases[i].size, got);
    }
}

struct use_case {
    const char *config;
    size_t size;
    size_t candidate;
    bool ok;
};

static void
test_oversize_guards(void **state)
{
    (void)state;
    static const struct use_case cases[] = {
        {"", 50 * MIB, 2000 * MIB, true},
        {"max_split_size_mb:128", 50 * MIB, 200 * MIB, false}, /* small request, big block */
        {"max_split_size_mb:128", 50 * MIB, 127 * MIB, true},
        {"max_split_size_mb:128", 150 * MIB, 200 * MIB, false}, /* leaves >= 20 MiB */
        {"max_split_size_mb:128", 150 * MIB, 170 * MIB, false}, /* exactly 20 MiB more */
        {"max_split_size_mb:128", 150 * MIB, 170 * MIB - 512, true},
        {"max_split_size_mb:128", 150 * MIB, 150 * MIB, true},
        {"max_split_size_mb:128,max_non_split_rounding_mb:64", 150 * MIB, 200 * MIB, true},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct alloc_config c = config_with(cases[i].config);
        bool got = alloc_policy_may_use(&c, cases[i].size, cases[i].candidate);
        if (got != cases[i].ok)
            fail_msg("[%s] may_use(%zu, %zu) = %d", cases[i].config, cases[i].size,
                     cases[i].candidate, got);
    }
}

static void
test_format_size(void **state)
{
    (void)state;
    static const struct {
        uint64_t n;
        const char *s;
    } cases[] = {
        {0, "0 bytes"},
        {512, "512 bytes"},
        {1024, "1024 bytes"},
        {1025, "1.00 KiB"},
        {1536, "1.50 KiB"},
        {1048576, "1024.00 KiB"},
        {1048577, "1.00 MiB"},
        {2097152, "2.00 MiB"},
        {1073741824, "1024.00 MiB"},
        {3221225472ULL, "3.00 GiB"},
        {85899345920ULL, "80.00 GiB"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[32];
        alloc_policy_format_size(cases[i].n, buf, sizeof(buf));
        if (strcmp(buf, cases[i].s) != 0)
            fail_msg("format_size(%llu) = %s, expected %s", (unsigned long long)cases[i].n, buf,
                     cases[i].s);
    }
}

struct item {
    struct avl_node node;
    unsigned key;
};

static void
insert_item(struct avl_tree *t, struct item *it)
{
    struct avl_node *parent = NULL, *n = t->root;
    int left = 0;
    while (n != NULL) {
        parent = n;
        left = it->key < ((struct item *)(void *)n)->key;
        n = left ? n->left : n->right;
    }
    avl_link(t, &it->node, parent, left);
}

static void
test_avl_churn(void **state)
{
    (void)state;
    enum { N = 4000 };
    static struct item items[N];
    static bool in[N];
    struct avl_tree t = {NULL, 0};
    unsigned seed = 12345;
    memset(in, 0, sizeof(in));
    for (int step = 0; step < 60000; step++) {
        seed = seed * 1103515245u + 12345u;
        unsigned i = (seed >> 8) % N;
        if (in[i]) {
            avl_remove(&t, &items[i].node);
            in[i] = false;
        } else {
            items[i].key = i * 7919u % 100003u;
            insert_item(&t, &items[i]);
            in[i] = true;
        }
        if (step % 997 == 0) {
            assert_int_equal(avl_check(&t), 0);
            size_t count = 0;
            unsigned last = 0;
            for (struct avl_node *n = avl_first(&t); n != NULL; n = avl_next(n), count++) {
                unsigned k = ((struct item *)(void *)n)->key;
                assert_true(count == 0 || k > last);
                last = k;
            }
            assert_int_equal(count, t.count);
            size_t back = 0;
            for (struct avl_node *n = avl_last(&t); n != NULL; n = avl_prev(n))
                back++;
            assert_int_equal(back, t.count);
        }
    }
    size_t expect = 0;
    for (int i = 0; i < N; i++)
        expect += in[i];
    assert_int_equal(t.count, expect);
    /* Height stays logarithmic: an AVL tree of n nodes is at most 1.45 log2(n+2) high. */
    assert_true(avl_height(t.root) <= 18);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_size),   cmocka_unit_test(test_pools_and_segments),
        cmocka_unit_test(test_should_split), cmocka_unit_test(test_oversize_guards),
        cmocka_unit_test(test_format_size),  cmocka_unit_test(test_avl_churn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
