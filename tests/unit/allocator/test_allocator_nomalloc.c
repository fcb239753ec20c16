/* test_allocator_nomalloc.c: the cached malloc/free pair calls malloc/free zero times (malloc,
 * calloc, realloc and free are wrapped here and forwarded to glibc's __libc_* functions). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "alloc_test_util.h"

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void __libc_free(void *p);

static volatile int counting;
static volatile long host_calls;

void *
malloc(size_t size)
{
    if (counting)
        host_calls++;
    return __libc_malloc(size);
}

void *
calloc(size_t n, size_t size)
{
    if (counting)
        host_calls++;
    return __libc_calloc(n, size);
}

void *
realloc(void *p, size_t size)
{
    if (counting)
        host_calls++;
    return __libc_realloc(p, size);
}

void
free(void *p)
{
    if (counting && p != NULL)
        host_calls++;
    __libc_free(p);
}

static void
pairs(struct allocator *a, size_t size, uint64_t stream, int n)
{
    for (int i = 0; i < n; i++) {
        uint64_t p = 0;
        assert_int_equal(allocator_malloc(a, 0, size, stream, 3, &p), 0);
        assert_int_equal(allocator_free(a, p, 0), 0);
    }
}

static void
test_cached_pair_no_malloc(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 30, 1);
    struct allocator *a = fx->alloc;
    fx->fake.keep_trace = false;
    uint64_t keep = 0;
    assert_int_equal(allocator_malloc(a, 0, 4096, 0, 1, &keep), 0); /* keeps segments split */
    uint64_t keep_large = 0;
    assert_int_equal(allocator_malloc(a, 0, 2 * MIB, 0, 1, &keep_large), 0);
    pairs(a, 512, 0, 10); /* warm: segments exist, spares filled */
    pairs(a, 5 * MIB, 0, 10);
    counting = 1;
    void *volatile probe = malloc(16); /* the wrappers do see calls */
    free(probe);
    assert_int_equal(host_calls, 2);
    host_calls = 0;
    pairs(a, 512, 0, 1000);     /* small, split and merge */
    pairs(a, 5 * MIB, 0, 1000); /* large, split and merge */
    pairs(a, 1000, 0, 1000);
    counting = 0;
    assert_int_equal(host_calls, 0);
    assert_int_equal(fx->fake.segment_allocs, 2);
    expect_invariants(a);
    fixture_free(fx);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cached_pair_no_malloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
