/* test_program_pools.c: the program's own pools (NVTX heaps and regions): what each operation
 * records, what it refuses (overlaps, outside the heap, unknown addresses), the sink that frees a
 * heap whose block the program frees, and the dump's copy. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "allocator/cuprof_errors.h"
#include "snapshot/program_pools.h"

#define MIB  ((uint64_t)1 << 20)
#define BASE ((uint64_t)0x7f0000000000)

struct recorded {
    struct trace_event ev[64];
    int n;
};

static void
record(void *ctx, const struct trace_event *e)
{
    struct recorded *r = ctx;
    if (r->n < 64)
        r->ev[r->n++] = *e;
}

static struct pool_node *
node(uint64_t addr, uint64_t size, uint32_t stack)
{
    struct pool_node *n = calloc(1, sizeof(*n));
    n->addr = addr;
    n->size = size;
    n->stack_id = stack;
    n->requested = size;
    n->stream = 7;
    return n;
}

static void
expect(const struct recorded *r, int i, uint8_t action, uint64_t addr, uint64_t size)
{
    assert_true(i < r->n);
    assert_int_equal(r->ev[i].action, action);
    assert_int_equal(r->ev[i].addr, addr);
    assert_int_equal(r->ev[i].size, size);
    assert_int_equal(r->ev[i].pool, TRACE_POOL_NVTX);
    assert_int_equal(r->ev[i].stream, 7);
}

static void
drain(struct program_pools *pp)
{
    program_pools_free_retired(program_pools_take_retired_locked(pp, 0));
}

static void
test_lifecycle(void **state)
{
    (void)state;
    struct recorded r = {0};
    struct program_pools *pp = program_pools_create(1, (struct trace_sink){&r, record});
    assert_false(program_pools_active(pp));
    struct pool_node *heap = node(BASE, 64 * MIB, 11);
    assert_int_equal(program_pools_heap_add_locked(pp, 0, heap, 5), 0);
    assert_true(program_pools_active(pp));
    expect(&r, 0, TRACE_FREE_REQUESTED, BASE, 64 * MIB); /* the block becomes the pool */
    expect(&r, 1, TRACE_FREE_COMPLETED, BASE, 64 * MIB);
    assert_int_equal(r.ev[0].stack_id, 5);
    assert_int_equal(program_pools_region_add_locked(pp, 0, BASE, node(BASE, 8 * MIB, 21)), 0);
    assert_int_equal(program_pools_region_add_locked(pp, 0, BASE, node(BASE + 16 * MIB, MIB, 22)),
                     0);
    expect(&r, 2, TRACE_ALLOC, BASE, 8 * MIB);
    assert_int_equal(r.ev[2].stack_id, 21);
    /* Refused: overlapping a region, past the heap, in no heap, an empty one. */
    struct pool_node *bad[] = {node(BASE + 4 * MIB, 8 * MIB, 0), node(BASE + 60 * MIB, 8 * MIB, 0),
                               node(BASE + 128 * MIB, MIB, 0), node(BASE + 20 * MIB, 0, 0)};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(program_pools_region_add_locked(pp, 0, BASE, bad[i]), -CUPROF_EINVAL);
        free(bad[i]);
    }
    assert_int_equal(r.n, 4);
    /* Resize: not into the next region; then 8 -> 12 MiB: a free of 8 and an alloc of 12. */
    assert_int_equal(program_pools_region_resize_locked(pp, 0, BASE, 20 * MIB, 6), -CUPROF_EINVAL);
    assert_int_equal(program_pools_region_name_locked(pp, 0, BASE, 99), 0);
    expect(&r, 4, TRACE_ANNOTATE, BASE, 8 * MIB);
    assert_int_equal(r.ev[4].stack_id, 99);
    assert_int_equal(program_pools_region_resize_locked(pp, 0, BASE, 12 * MIB, 6), 0);
    expect(&r, 5, TRACE_FREE_REQUESTED, BASE, 8 * MIB);
    expect(&r, 7, TRACE_ALLOC, BASE, 12 * MIB);
    assert_int_equal(r.ev[7].stack_id, 21);        /* the registration's stack stays */
    expect(&r, 8, TRACE_ANNOTATE, BASE, 12 * MIB); /* and its name */
    assert_int_equal(program_pools_heap_of_locked(pp, 0, BASE + 3 * MIB), BASE);
    assert_int_equal(program_pools_heap_of_locked(pp, 0, BASE + 64 * MIB), 0);
    /* The dump's copy. */
    struct pool_heap_info h[2];
    struct pool_region_info reg[4];
    size_t nh = 0, nr = 0;
    program_pools_count_locked(pp, 0, &nh, &nr);
    assert_int_equal(nh, 1);
    assert_int_equal(nr, 2);
    assert_false(program_pools_copy_locked(pp, 0, h, 2, &nh, reg, 1, &nr));
    assert_true(program_pools_copy_locked(pp, 0, h, 2, &nh, reg, 4, &nr));
    assert_int_equal(h[0].region_count, 2);
    assert_int_equal(reg[0].size, 12 * MIB);
    assert_int_equal(reg[0].name_id, 99);
    assert_int_equal(reg[1].addr, BASE + 16 * MIB);
    /* Unregister one, then the heap: the other's free, then the block given back. */
    assert_int_equal(program_pools_region_remove_locked(pp, 0, BASE + 16 * MIB, 8), 0);
    assert_int_equal(program_pools_region_remove_locked(pp, 0, BASE + 16 * MIB, 8), -CUPROF_EINVAL);
    r.n = 0;
    assert_int_equal(program_pools_heap_remove_locked(pp, 0, BASE, 9), 0);
    expect(&r, 0, TRACE_FREE_REQUESTED, BASE, 12 * MIB);
    expect(&r, 2, TRACE_ALLOC, BASE, 64 * MIB);
    assert_int_equal(r.ev[2].stack_id, 11); /* where the block was allocated */
    assert_int_equal(r.n, 3);
    drain(pp);
    program_pools_count_locked(pp, 0, &nh, &nr);
    assert_int_equal(nh + nr, 0);
    program_pools_destroy(pp);
}

/* Two heaps never overlap; a reset frees the regions and keeps the heap (0: every heap). */
static void
test_heaps(void **state)
{
    (void)state;
    struct recorded r = {0};
    struct program_pools *pp = program_pools_create(2, (struct trace_sink){&r, record});
    assert_int_equal(program_pools_heap_add_locked(pp, 1, node(BASE, 4 * MIB, 1), 0), 0);
    struct pool_node *over = node(BASE + 2 * MIB, 4 * MIB, 1);
    assert_int_equal(program_pools_heap_add_locked(pp, 1, over, 0), -CUPROF_EINVAL);
    free(over);
    assert_int_equal(program_pools_heap_add_locked(pp, 1, node(BASE + 8 * MIB, 4 * MIB, 1), 0), 0);
    assert_int_equal(program_pools_region_add_locked(pp, 1, BASE, node(BASE, MIB, 2)), 0);
    assert_int_equal(
        program_pools_region_add_locked(pp, 1, BASE + 8 * MIB, node(BASE + 8 * MIB, MIB, 2)), 0);
    r.n = 0;
    assert_int_equal(program_pools_heap_reset_locked(pp, 1, 0, 3), 0);
    assert_int_equal(r.n, 4); /* two frees of two events each, no hand-back */
    assert_int_equal(r.ev[0].device, 1);
    size_t nh, nr;
    program_pools_count_locked(pp, 1, &nh, &nr);
    assert_int_equal(nh, 2);
    assert_int_equal(nr, 0);
    assert_int_equal(program_pools_heap_reset_locked(pp, 1, BASE + MIB, 3), -CUPROF_EINVAL);
    program_pools_free_retired(program_pools_take_retired_locked(pp, 1));
    program_pools_destroy(pp); /* frees what is left */
}

/* The sink: the program frees a registered heap's block: regions freed, block given back, then
 * the program's own free passes. Other events pass untouched. */
static void
test_sink(void **state)
{
    (void)state;
    struct recorded r = {0};
    struct program_pools *pp = program_pools_create(1, (struct trace_sink){&r, record});
    struct trace_sink sink = program_pools_sink(pp);
    struct trace_event alloc = {.action = TRACE_ALLOC, .addr = BASE, .size = 64 * MIB};
    sink.record(sink.ctx, &alloc);
    assert_int_equal(r.n, 1);
    assert_int_equal(program_pools_heap_add_locked(pp, 0, node(BASE, 64 * MIB, 1), 0), 0);
    assert_int_equal(program_pools_region_add_locked(pp, 0, BASE, node(BASE, MIB, 2)), 0);
    r.n = 0;
    struct trace_event other = {.action = TRACE_FREE_REQUESTED, .addr = BASE + 64 * MIB, .size = 4};
    sink.record(sink.ctx, &other);
    assert_int_equal(r.n, 1);
    struct trace_event free_heap = {
        .action = TRACE_FREE_REQUESTED, .addr = BASE, .size = 64 * MIB, .stack_id = 4};
    sink.record(sink.ctx, &free_heap);
    assert_int_equal(r.n, 5);
    expect(&r, 1, TRACE_FREE_REQUESTED, BASE, MIB);
    expect(&r, 3, TRACE_ALLOC, BASE, 64 * MIB);
    assert_int_equal(r.ev[4].action, TRACE_FREE_REQUESTED);
    assert_int_equal(r.ev[4].pool, TRACE_POOL_DEFAULT);
    size_t nh, nr;
    program_pools_count_locked(pp, 0, &nh, &nr);
    assert_int_equal(nh + nr, 0);
    program_pools_free_retired(program_pools_take_retired_locked(pp, 0));
    program_pools_destroy(pp);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lifecycle),
        cmocka_unit_test(test_heaps),
        cmocka_unit_test(test_sink),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
