/* test_allocator_peers.c: expandable segments and peer devices, worked out by hand from PyTorch's
 * ExpandableSegment (mapAndSetAccess, addPeer, forEachAllocatedRange) and
 * DeviceCachingAllocator::addPeerAccess: the exact vmm calls, in order, when a peer is added
 * before any mapping, after several mappings (every mapped run of every segment, in the order the
 * segments were made) and before later growth (the owner first, then each peer in the order they
 * were added, over the range just mapped); a failing cuMemSetAccess; and a forgotten device. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "alloc_test_util.h"
#include "allocator/cuprof_errors.h"

#define V FAKE_VMM_BASE

/* The calls from index `from` on are exactly `want` (kind, addr, size, peer; device 0). */
static void
expect_calls(const struct fake_device *f, size_t from, const struct fake_vmm_call *want, size_t n)
{
    if (f->call_count != from + n)
        fail_msg("%zu vmm calls after %zu, expected %zu", f->call_count - from, from, n);
    for (size_t i = 0; i < n; i++) {
        const struct fake_vmm_call *c = &f->calls[from + i];
        if (c->kind != want[i].kind || c->addr != want[i].addr || c->size != want[i].size ||
            c->peer != want[i].peer || c->device != want[i].device)
            fail_msg("call %zu: %c dev %d 0x%llx %zu peer %d, expected %c dev %d 0x%llx %zu "
                     "peer %d",
                     from + i, c->kind, c->device, (unsigned long long)c->addr, c->size, c->peer,
                     want[i].kind, want[i].device, (unsigned long long)want[i].addr, want[i].size,
                     want[i].peer);
    }
}

/* Every page mapped on device 0 may be accessed by exactly the devices in `mask`. */
static void
expect_page_access(const struct fake_device *f, uint32_t mask)
{
    for (size_t i = 0; i < f->page_count; i++)
        if (f->page_device[i] == 0 && f->page_access[i] != mask)
            fail_msg("page 0x%llx: access 0x%x, expected 0x%x", (unsigned long long)f->page_addr[i],
                     f->page_access[i], mask);
}

/* Device 0 of three on a 1 GiB card: large reservations of 1160 MiB, small ones of 1152 MiB. */
static void
test_peers_added_after_mapping(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("expandable_segments:True", 1ULL << 30, 3);
    struct allocator *a = fx->alloc;
    struct fake_device *f = &fx->fake;
    /* Large reservation (made first) at V, small one of stream 5 at V + 1160 MiB. */
    uint64_t pa = must_malloc(a, 0, 30 * MIB, 0);
    uint64_t pb = must_malloc(a, 0, 50 * MIB, 0);
    uint64_t pc = must_malloc(a, 0, 30 * MIB, 0);
    uint64_t ps = must_malloc(a, 0, 1000, 5);
    assert_true(pa == V && pb == V + 30 * MIB && pc == V + 80 * MIB);
    assert_true(ps == V + 1160 * MIB);
    /* B freed and its whole pages unmapped: two runs, [V, 40 MiB) and [V + 80 MiB, 40 MiB). */
    must_free(a, pb);
    assert_int_equal(allocator_empty_cache(a, 0), 0);
    size_t n = f->call_count;
    static const struct fake_vmm_call before[] = {
        {'M', 0, V, 40 * MIB, 0},
        {'M', 0, V + 40 * MIB, 40 * MIB, 0},
        {'M', 0, V + 80 * MIB, 40 * MIB, 0},
        {'M', 0, V + 1160 * MIB, 2 * MIB, 0},
        {'U', 0, V + 40 * MIB, 40 * MIB, 0},
    };
    expect_calls(f, 0, before, 5);
    /* Device 2 enabled access to device 0: each mapped run, segments in the order made. */
    assert_int_equal(allocator_add_peer(a, 0, 2), 0);
    static const struct fake_vmm_call add2[] = {
        {'A', 0, V, 40 * MIB, 2},
        {'A', 0, V + 80 * MIB, 40 * MIB, 2},
        {'A', 0, V + 1160 * MIB, 2 * MIB, 2},
    };
    expect_calls(f, n, add2, 3);
    expect_page_access(f, 1u << 0 | 1u << 2);
    /* Added again: PyTorch's addPeerAccess returns at once. */
    assert_int_equal(allocator_add_peer(a, 0, 2), 0);
    assert_int_equal(allocator_add_peer(a, 0, 1), 0);
    expect_calls(f, n + 3,
                 (const struct fake_vmm_call[]){{'A', 0, V, 40 * MIB, 1},
                                                {'A', 0, V + 80 * MIB, 40 * MIB, 1},
                                                {'A', 0, V + 1160 * MIB, 2 * MIB, 1}},
                 3);
    expect_page_access(f, 7);
    /* 60 MiB: the 10 MiB behind C and three pages behind them (the hole at V + 40 MiB with the
     * 10 MiB before it is only 50 MiB); the owner's access, then device 2's, then device 1's. */
    n = f->call_count;
    uint64_t pd = must_malloc(a, 0, 60 * MIB, 0);
    assert_true(pd == V + 110 * MIB);
    expect_calls(f, n,
                 (const struct fake_vmm_call[]){{'M', 0, V + 120 * MIB, 60 * MIB, 0},
                                                {'A', 0, V + 120 * MIB, 60 * MIB, 2},
                                                {'A', 0, V + 120 * MIB, 60 * MIB, 1}},
                 3);
    expect_page_access(f, 7);
    expect_invariants(a);
    /* The same request refilling the hole: its pages get both peers too. */
    n = f->call_count;
    uint64_t pe = must_malloc(a, 0, 45 * MIB, 0);
    assert_true(pe == V + 30 * MIB);
    expect_calls(f, n,
                 (const struct fake_vmm_call[]){{'M', 0, V + 40 * MIB, 40 * MIB, 0},
                                                {'A', 0, V + 40 * MIB, 40 * MIB, 2},
                                                {'A', 0, V + 40 * MIB, 40 * MIB, 1}},
                 3);
    expect_page_access(f, 7);
    /* Stats are the owner's alone: a peer's access maps nothing. */
    struct memory_stats st;
    allocator_get_stats(a, 0, &st);
    assert_int_equal(st.reserved_bytes[STAT_ALL].current, 182 * MIB);
    assert_int_equal(st.num_device_alloc, 6);
    (void)pc;
    fixture_free(fx);
}

/* A peer added before anything is mapped: the first mapping gives it access. */
static void
test_peer_added_first(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("expandable_segments:True", 1ULL << 30, 3);
    struct allocator *a = fx->alloc;
    struct fake_device *f = &fx->fake;
    assert_int_equal(allocator_add_peer(a, 0, 1), 0);
    assert_int_equal(f->call_count, 0);
    assert_true(must_malloc(a, 0, 5 * MIB, 0) == V);
    expect_calls(f, 0,
                 (const struct fake_vmm_call[]){{'M', 0, V, 20 * MIB, 0}, {'A', 0, V, 20 * MIB, 1}},
                 2);
    /* Device 1's own memory is not device 0's business. */
    uint64_t q = must_malloc(a, 1, 5 * MIB, 0);
    assert_true(q == V + (1ULL << 40));
    assert_int_equal(f->calls[f->call_count - 1].kind, 'M');
    assert_int_equal(f->calls[f->call_count - 1].device, 1);
    /* Out of range, or the device itself: refused. */
    assert_int_equal(allocator_add_peer(a, 0, 0), -CUPROF_EINVAL);
    assert_int_equal(allocator_add_peer(a, 0, 3), -CUPROF_EINVAL);
    assert_int_equal(allocator_add_peer(a, 0, -1), -CUPROF_EINVAL);
    assert_int_equal(allocator_add_peer(a, 3, 0), -CUPROF_EINVAL);
    fixture_free(fx);
}

/* cuMemSetAccess for a peer fails: at a growth the pages go again (all or nothing) and the error
 * goes up; when the peer is added, it is returned after every run was tried. A forgotten device
 * (its context destroyed) is no one's peer any more. */
static void
test_set_access_fails_and_forget(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("expandable_segments:True", 1ULL << 30, 3);
    struct allocator *a = fx->alloc;
    struct fake_device *f = &fx->fake;
    uint64_t p = must_malloc(a, 0, 5 * MIB, 0);
    assert_int_equal(allocator_add_peer(a, 0, 1), 0);
    size_t n = f->call_count;
    f->set_access_error = 999;
    uint64_t addr = 0;
    assert_int_equal(allocator_malloc(a, 0, 30 * MIB, 0, 0, &addr), 999);
    expect_calls(f, n,
                 (const struct fake_vmm_call[]){{'M', 0, V + 20 * MIB, 20 * MIB, 0},
                                                {'U', 0, V + 20 * MIB, 20 * MIB, 0}},
                 2);
    assert_int_equal(f->used[0], 20 * MIB);
    expect_invariants(a);
    f->set_access_error = 998;
    assert_int_equal(allocator_add_peer(a, 0, 2), 998);
    assert_false(fake_device_accessible(f, V, 2));
    /* Device 1's context goes: device 0 stops giving it access. */
    allocator_forget_device(a, 1);
    n = f->call_count;
    assert_true(must_malloc(a, 0, 30 * MIB, 0) == V + 5 * MIB);
    expect_calls(f, n,
                 (const struct fake_vmm_call[]){{'M', 0, V + 20 * MIB, 20 * MIB, 0},
                                                {'A', 0, V + 20 * MIB, 20 * MIB, 2}},
                 2);
    expect_invariants(a);
    (void)p;
    fixture_free(fx);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_peers_added_after_mapping),
        cmocka_unit_test(test_peer_added_first),
        cmocka_unit_test(test_set_access_fails_and_forget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
