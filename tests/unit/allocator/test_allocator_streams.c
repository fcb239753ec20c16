/* test_allocator_streams.c: stream-ordered frees pending on events, free_sync modes, trace mode,
 * external memory, several devices, lookups and ownership errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "alloc_test_util.h"
#include "allocator/cuprof_errors.h"

#define B FAKE_BASE

static size_t
count_action(const struct fake_device *f, enum trace_action action)
{
    size_t n = 0;
    for (size_t i = 0; i < f->trace_count; i++)
        n += f->trace[i].action == action;
    return n;
}

/* record_stream + free: active_pending_free until the event on the other stream completes;
 * blocks are reused only on their own stream. */
static void
test_record_stream_pending_free(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 30, 1);
    struct allocator *a = fx->alloc;
    uint64_t p = must_malloc(a, 0, 4096, 1);
    assert_int_equal(allocator_record_stream(a, p, 2), 0);
    assert_int_equal(allocator_record_stream(a, p, 1), 0); /* own stream: ignored */
    must_free(a, p);
    assert_int_equal(fx->fake.event_records, 1);
    assert_int_equal(count_action(&fx->fake, TRACE_FREE_REQUESTED), 1);
    assert_int_equal(count_action(&fx->fake, TRACE_FREE_COMPLETED), 0);
    expect_invariants(a);
    /* Pending: not allocated, still active. */
    struct memory_stats st;
    allocator_get_stats(a, 0, &st);
    assert_int_equal(st.allocation[STAT_ALL].current, 0);
    assert_int_equal(st.active[STAT_ALL].current, 1);
    assert_int_equal(st.active_bytes[STAT_SMALL_POOL].current, 4096);
    struct segment_info segs[4];
    struct block_info blocks[8];
    size_t sc = 0, bc = 0;
    allocator_lock_device(a, 0);
    assert_int_equal(allocator_copy_locked(a, 0, segs, 4, blocks, 8, &sc, &bc), 0);
    allocator_unlock_device(a, 0);
    assert_int_equal(bc, 2);
    assert_int_equal(blocks[0].state, BLOCK_ACTIVE_PENDING_FREE);
    assert_int_equal(blocks[0].stack_id, 7);
    assert_int_equal(blocks[1].state, BLOCK_INACTIVE);
    assert_true(segs[0].stream == 1);
    uint64_t q = must_malloc(a, 0, 4096, 1); /* event still pending: the remainder */
    assert_true(q == B + 4096);
    uint64_t r = must_malloc(a, 0, 512, 2); /* other stream: its own segment */
    assert_true(r == B + 2 * MIB);
    fake_device_complete(&fx->fake, 2);
    allocator_process_events(a, 0);
    assert_int_equal(count_action(&fx->fake, TRACE_FREE_COMPLETED), 1);
    uint64_t s = must_malloc(a, 0, 4096, 1);
    assert_true(s == B);
    expect_invariants(a);
    /* Stream-ordered free on the block's own stream is reusable at once. */
    assert_int_equal(allocator_free_on_stream(a, r, 2, 0), 0);
    assert_int_equal(count_action(&fx->fake, TRACE_FREE_COMPLETED), 2);
    /* ... on another stream it waits for that stream; malloc polls the event. */
    assert_int_equal(allocator_free_on_stream(a, s, 3, 0), 0);
    assert_int_equal(count_action(&fx->fake, TRACE_FREE_COMPLETED), 2);
    uint64_t t = must_malloc(a, 0, 4096, 1);
    assert_true(t == B + 8192);
    fake_device_complete(&fx->fake, 3);
    uint64_t u = must_malloc(a, 0, 4096, 1); /* process_events at malloc frees s first */
    assert_true(u == B);
    expect_invariants(a);
    /* empty_cache waits on every outstanding event. */
    assert_int_equal(allocator_record_stream(a, u, 4), 0);
    must_free(a, u);
    assert_int_equal(allocator_empty_cache(a, -1), 0);
    assert_int_equal(fx->fake.event_syncs, 1);
    expect_invariants(a);
    allocator_get_stats(a, 0, &st);
    assert_int_equal(st.num_sync_all_streams, 1);
    assert_int_equal(st.active[STAT_ALL].current, 2);  /* q and t */
    assert_int_equal(st.segment[STAT_ALL].current, 1); /* stream 2's segment went */
    fixture_free(fx);
}

/* An event query error is never read as "pending": CUDA_ERROR_INVALID_VALUE is 1, which the old
 * contract took for "still pending", so the block stayed out of the cache forever. Now the
 * allocator waits for the event (else the device) and completes the block. */
static void
test_event_query_error(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 30, 1);
    struct allocator *a = fx->alloc;
    uint64_t p = must_malloc(a, 0, 4096, 1);
    assert_int_equal(allocator_record_stream(a, p, 2), 0);
    must_free(a, p);
    assert_int_equal(count_action(&fx->fake, TRACE_FREE_COMPLETED), 0);
    fx->fake.event_query_error = 1;                                /* CUDA_ERROR_INVALID_VALUE */
    long queries = fx->fake.event_queries, syncs = fx->fake.syncs; /* free_sync:device syncs */
    uint64_t q = must_malloc(a, 0, 4096, 1); /* polls the event: waits for it, reuses p */
    assert_true(q == p);
    assert_true(fx->fake.event_queries > queries);
    assert_int_equal(fx->fake.event_syncs, 1);
    assert_int_equal(fx->fake.syncs, syncs);
    assert_int_equal(count_action(&fx->fake, TRACE_FREE_COMPLETED), 1);
    expect_invariants(a);
    /* The event cannot be waited for either (a sticky error): the whole device is. */
    fx->fake.event_query_error = 700;
    fx->fake.event_sync_error = 700;
    assert_int_equal(allocator_record_stream(a, q, 3), 0);
    must_free(a, q);
    syncs = fx->fake.syncs;
    allocator_process_events(a, 0);
    assert_int_equal(fx->fake.event_syncs, 2);
    assert_int_equal(fx->fake.syncs, syncs + 1);
    assert_int_equal(count_action(&fx->fake, TRACE_FREE_COMPLETED), 2);
    struct memory_stats st;
    allocator_get_stats(a, 0, &st);
    assert_int_equal(st.active[STAT_ALL].current, 0);
    expect_invariants(a);
    /* A pending event (no error) still waits. */
    fx->fake.event_query_error = 0;
    fx->fake.event_sync_error = 0;
    uint64_t r = must_malloc(a, 0, 4096, 1);
    assert_int_equal(allocator_record_stream(a, r, 4), 0);
    must_free(a, r);
    allocator_process_events(a, 0);
    assert_int_equal(count_action(&fx->fake, TRACE_FREE_COMPLETED), 2);
    assert_int_equal(fx->fake.event_syncs, 2);
    fake_device_complete(&fx->fake, 4);
    allocator_process_events(a, 0);
    assert_int_equal(count_action(&fx->fake, TRACE_FREE_COMPLETED), 3);
    expect_invariants(a);
    fixture_free(fx);
}

/* A segment the device claims to have allocated at NULL, across the end of the address space,
 * or over a segment the device already holds is refused with -CUPROF_EDRIVER and never enters
 * the tables; the same for external memory (allocator_track_external). Later requests work. */
static void
test_implausible_device_answers(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 30, 1);
    struct allocator *a = fx->alloc;
    uint64_t p = must_malloc(a, 0, 4096, 0);    /* small segment at B */
    uint64_t q = must_malloc(a, 0, 4 * MIB, 0); /* 20 MiB segment at B + 2 MiB */
    const uint64_t lies[] = {0, UINT64_MAX - 4096 + 1, B + 4096, B + 3 * MIB, B + 2 * MIB - 512};
    for (size_t i = 0; i < sizeof lies / sizeof lies[0]; i++) {
        fx->fake.lie_once = true;
        fx->fake.lie_addr = lies[i];
        uint64_t r = 0;
        assert_int_equal(allocator_malloc(a, 0, 32 * MIB, 0, 0, &r), -CUPROF_EDRIVER);
        expect_invariants(a);
    }
    /* Trace mode's whole segments and external memory go through the same check. */
    assert_int_equal(
        allocator_track_external(a, 0, B + 2 * MIB + 512, 4096, 0, TRACE_POOL_MANAGED, 0),
        -CUPROF_EDRIVER);
    assert_int_equal(allocator_track_external(a, 0, 0, 4096, 0, TRACE_POOL_MANAGED, 0),
                     -CUPROF_EINVAL);
    assert_int_equal(
        allocator_track_external(a, 0, UINT64_MAX - 511, 4096, 0, TRACE_POOL_MANAGED, 0),
        -CUPROF_EDRIVER);
    expect_invariants(a);
    struct memory_stats st;
    allocator_get_stats(a, 0, &st);
    assert_int_equal(st.segment[STAT_ALL].current, 2);
    assert_int_equal(st.num_device_alloc, 2);
    /* The device tells the truth again: served as usual. */
    uint64_t r = must_malloc(a, 0, 32 * MIB, 0);
    assert_true(r == B + 22 * MIB);
    assert_int_equal(allocator_track_external(a, 0, 0x10000, 4096, 0, TRACE_POOL_MANAGED, 0), 0);
    must_free(a, p);
    must_free(a, q);
    must_free(a, r);
    assert_int_equal(allocator_untrack_external(a, 0x10000, 0), 0);
    expect_invariants(a);
    fixture_free(fx);
}

/* free_sync:device keeps cudaFree's barrier: one device sync per free, before it returns, and
 * none on reuse; none never syncs; events records one event per stream in use. */
static void
test_free_sync_modes(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 30, 1);
    struct allocator *a = fx->alloc;
    uint64_t p = must_malloc(a, 0, 512, 0);
    assert_int_equal(fx->fake.syncs, 0);
    must_free(a, p);
    assert_int_equal(fx->fake.syncs, 1);    /* the real cudaFree's implicit synchronization */
    uint64_t q = must_malloc(a, 0, 512, 0); /* reuses the freed block: already safe */
    assert_true(q == p);
    uint64_t r = must_malloc(a, 0, 512, 0);
    assert_int_equal(fx->fake.syncs, 1);
    must_free(a, q);
    must_free(a, r);
    assert_int_equal(fx->fake.syncs, 3);
    (void)must_malloc(a, 0, 512, 0);
    (void)must_malloc(a, 0, 512, 0);
    assert_int_equal(fx->fake.syncs, 3);
    /* A stream-ordered free is not a barrier. */
    uint64_t s = must_malloc(a, 0, 512, 7);
    assert_int_equal(allocator_free_on_stream(a, s, 7, 0), 0);
    assert_int_equal(fx->fake.syncs, 3);
    /* Nor is a pointer the allocator does not own on a device it never used... */
    assert_int_equal(allocator_free(a, 0x1000, 0), -CUPROF_ENOTOWNED);
    assert_int_equal(fx->fake.syncs, 3);
    fixture_free(fx);

    fx = fixture_new("free_sync:none", 1ULL << 30, 1);
    p = must_malloc(fx->alloc, 0, 512, 0);
    must_free(fx->alloc, p);
    assert_true(must_malloc(fx->alloc, 0, 512, 0) == p);
    assert_int_equal(fx->fake.syncs, 0);
    fixture_free(fx);

    fx = fixture_new("free_sync:events", 1ULL << 30, 1);
    a = fx->alloc;
    p = must_malloc(a, 0, 512, 0);
    q = must_malloc(a, 0, 512, 5);
    must_free(a, p); /* events on streams 0 and 5 */
    assert_int_equal(fx->fake.event_records, 2);
    assert_int_equal(count_action(&fx->fake, TRACE_FREE_COMPLETED), 0);
    r = must_malloc(a, 0, 512, 0);
    assert_true(r == p + 512);
    fake_device_complete(&fx->fake, 0);
    allocator_process_events(a, 0);
    assert_int_equal(count_action(&fx->fake, TRACE_FREE_COMPLETED), 0);
    fake_device_complete(&fx->fake, 5);
    assert_true(must_malloc(a, 0, 512, 0) == p);
    assert_int_equal(count_action(&fx->fake, TRACE_FREE_COMPLETED), 1);
    assert_int_equal(fx->fake.event_creates, 2); /* recycled events from now on */
    must_free(a, r);
    assert_int_equal(fx->fake.event_creates, 2);
    assert_int_equal(fx->fake.syncs, 0);
    expect_invariants(a);
    /* The program destroys stream 5: later frees record on stream 0 only. */
    fake_device_complete(&fx->fake, UINT64_MAX);
    allocator_process_events(a, 0);
    allocator_forget_stream(a, 5);
    allocator_forget_stream(a, 9); /* never used: nothing to drop */
    long records = fx->fake.event_records;
    p = must_malloc(a, 0, 512, 0);
    must_free(a, p);
    assert_int_equal(fx->fake.event_records, records + 1);
    int waiting = 0;
    for (size_t i = 0; i < fx->fake.event_count; i++) {
        if (fx->fake.events[i].recorded && !fx->fake.events[i].done) {
            assert_int_equal(fx->fake.events[i].stream, 0);
            waiting++;
        }
    }
    assert_int_equal(waiting, 1);
    fake_device_complete(&fx->fake, UINT64_MAX);
    allocator_process_events(a, 0);
    expect_invariants(a);
    fixture_free(fx);
}

/* caching=false (trace mode): exact-size device allocation per request, freed at once. */
static void
test_trace_mode(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 30, 1);
    allocator_destroy(fx->alloc);
    fx->config.caching = false;
    fx->alloc = allocator_create(&fx->config, &fx->ops, &fx->sink, 1);
    struct allocator *a = fx->alloc;
    uint64_t p = must_malloc(a, 0, 1000, 3);
    uint64_t q = must_malloc(a, 0, 3 * MIB, 3);
    assert_true(p == B);
    assert_true(q == B + 2 * MIB);
    must_free(a, p);
    expect_invariants(a);
    const struct fake_device *f = &fx->fake;
    assert_int_equal(f->trace_count, 7);
    expect_trace(f, 0, TRACE_SEGMENT_ALLOC, B, 1000, 3);
    expect_trace(f, 1, TRACE_ALLOC, B, 1000, 3);
    expect_trace(f, 4, TRACE_FREE_REQUESTED, B, 1000, 3);
    expect_trace(f, 5, TRACE_FREE_COMPLETED, B, 1000, 3);
    expect_trace(f, 6, TRACE_SEGMENT_FREE, B, 1000, 3);
    assert_int_equal(f->trace[6].pool, TRACE_POOL_TRACE);
    expect_stats(
        a, 0,
        " allocation.all.current=1 allocation.all.peak=2 allocation.all.allocated=2"
        " allocation.all.freed=1 allocation.small_pool.peak=1"
        " allocation.small_pool.allocated=1 allocation.small_pool.freed=1"
        " allocation.large_pool.current=1 allocation.large_pool.peak=1"
        " allocation.large_pool.allocated=1"
        " active.all.current=1 active.all.peak=2 active.all.allocated=2"
        " active.all.freed=1 active.small_pool.peak=1"
        " active.small_pool.allocated=1 active.small_pool.freed=1"
        " active.large_pool.current=1 active.large_pool.peak=1"
        " active.large_pool.allocated=1"
        " segment.all.current=1 segment.all.peak=2 segment.all.allocated=2"
        " segment.all.freed=1 segment.small_pool.peak=1"
        " segment.small_pool.allocated=1 segment.small_pool.freed=1"
        " segment.large_pool.current=1 segment.large_pool.peak=1"
        " segment.large_pool.allocated=1"
        " allocated_bytes.all.current=3145728 allocated_bytes.all.peak=3146728"
        " allocated_bytes.all.allocated=3146728 allocated_bytes.all.freed=1000"
        " allocated_bytes.small_pool.peak=1000 allocated_bytes.small_pool.allocated=1000"
        " allocated_bytes.small_pool.freed=1000"
        " allocated_bytes.large_pool.current=3145728 allocated_bytes.large_pool.peak=3145728"
        " allocated_bytes.large_pool.allocated=3145728"
        " active_bytes.all.current=3145728 active_bytes.all.peak=3146728"
        " active_bytes.all.allocated=3146728 active_bytes.all.freed=1000"
        " active_bytes.small_pool.peak=1000 active_bytes.small_pool.allocated=1000"
        " active_bytes.small_pool.freed=1000"
        " active_bytes.large_pool.current=3145728 active_bytes.large_pool.peak=3145728"
        " active_bytes.large_pool.allocated=3145728"
        " requested_bytes.all.current=3145728 requested_bytes.all.peak=3146728"
        " requested_bytes.all.allocated=3146728 requested_bytes.all.freed=1000"
        " requested_bytes.small_pool.peak=1000 requested_bytes.small_pool.allocated=1000"
        " requested_bytes.small_pool.freed=1000"
        " requested_bytes.large_pool.current=3145728"
        " requested_bytes.large_pool.peak=3145728"
        " requested_bytes.large_pool.allocated=3145728"
        " reserved_bytes.all.current=3145728 reserved_bytes.all.peak=3146728"
        " reserved_bytes.all.allocated=3146728 reserved_bytes.all.freed=1000"
        " reserved_bytes.small_pool.peak=1000 reserved_bytes.small_pool.allocated=1000"
        " reserved_bytes.small_pool.freed=1000"
        " reserved_bytes.large_pool.current=3145728 reserved_bytes.large_pool.peak=3145728"
        " reserved_bytes.large_pool.allocated=3145728"
        " num_device_alloc=2 num_device_free=1");
    assert_int_equal(fx->fake.segment_frees, 1);
    fixture_free(fx);
}

/* What cuMemGetAddressRange and the IPC wrapper are told: a live block answers for the bytes
 * asked for, its rounding and the cached rest of the segment for no allocation, other memory is
 * the driver's; the segment a block was cut from. */
static void
test_range_of(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 30, 1);
    struct allocator *a = fx->alloc;
    uint64_t first = must_malloc(a, 0, 3000, 0); /* 3072 bytes at the start of a 2 MiB segment */
    uint64_t second = must_malloc(a, 0, 1000, 0);
    assert_true(first == B && second == B + 3072);
    struct alloc_range_block block = {0};
    assert_int_equal(allocator_range_of(a, first + 2999, &block), ALLOC_RANGE_BLOCK);
    assert_true(block.base == first && block.size == 3000 && block.segment == B);
    assert_false(block.whole);
    assert_int_equal(allocator_range_of(a, first + 3000, &block), ALLOC_RANGE_NONE);
    assert_int_equal(allocator_range_of(a, first + 3071, NULL), ALLOC_RANGE_NONE);
    block.segment = 0;
    assert_int_equal(allocator_range_of(a, second, &block), ALLOC_RANGE_BLOCK);
    assert_true(block.base == second && block.size == 1000 && block.segment == B);
    assert_int_equal(allocator_range_of(a, B + 2 * MIB - 1, NULL),
                     ALLOC_RANGE_NONE); /* the cached remainder */
    assert_int_equal(allocator_range_of(a, B + 2 * MIB, NULL), ALLOC_RANGE_NOT_OURS);
    assert_int_equal(allocator_range_of(a, 12345, NULL), ALLOC_RANGE_NOT_OURS);
    must_free(a, second);
    assert_int_equal(allocator_range_of(a, second, NULL), ALLOC_RANGE_NONE);
    uint64_t ext = 0x100000000ULL; /* external memory: one block, its own segment */
    assert_int_equal(allocator_track_external(a, 0, ext, 4096, 0, TRACE_POOL_MANAGED, 0), 0);
    assert_int_equal(allocator_range_of(a, ext + 100, &block), ALLOC_RANGE_BLOCK);
    assert_true(block.base == ext && block.size == 4096 && block.segment == ext);
    assert_true(block.whole && block.buffer_id == 0 && !block.stream_ordered);
    assert_int_equal(allocator_range_of(NULL, first, &block), ALLOC_RANGE_NOT_OURS);
    expect_invariants(a);
    fixture_free(fx);
}

static uint64_t
buffer_id_of(struct allocator *a, uint64_t addr)
{
    struct alloc_range_block block = {0};
    assert_int_equal(allocator_range_of(a, addr, &block), ALLOC_RANGE_BLOCK);
    return block.buffer_id;
}

/* cuda.h's BUFFER_ID is unique within the process: each block the cache hands out answers an ID
 * of its own (not its segment's), kept while it lives, and a new one when the cache hands the
 * same block out again; every one lies above the driver's (ALLOC_BUFFER_ID_FIRST), even across
 * allocators. Trace mode's and external blocks are whole driver allocations: the driver's ID. */
static void
test_buffer_ids(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 30, 1);
    struct allocator *a = fx->alloc;
    uint64_t first = must_malloc(a, 0, 1000, 0);
    uint64_t second = must_malloc(a, 0, 1000, 0);
    assert_true(first == B && second == B + 1024); /* one segment */
    uint64_t i1 = buffer_id_of(a, first), i2 = buffer_id_of(a, second + 999);
    assert_true(i1 >= ALLOC_BUFFER_ID_FIRST && i2 >= ALLOC_BUFFER_ID_FIRST && i1 != i2);
    assert_true(buffer_id_of(a, first + 10) == i1); /* the same allocation, the same ID */
    must_free(a, first);
    uint64_t again = must_malloc(a, 0, 1000, 0);
    assert_true(again == first); /* the cached block again: a new allocation */
    uint64_t i3 = buffer_id_of(a, again);
    assert_true(i3 >= ALLOC_BUFFER_ID_FIRST && i3 != i1 && i3 != i2);
    struct alloc_fixture *other = fixture_new("", 1ULL << 30, 1);
    uint64_t elsewhere = must_malloc(other->alloc, 0, 1000, 0);
    uint64_t i4 = buffer_id_of(other->alloc, elsewhere);
    assert_true(i4 >= ALLOC_BUFFER_ID_FIRST && i4 != i1 && i4 != i2 && i4 != i3);
    fixture_free(other);
    uint64_t ext = 0x100000000ULL;
    assert_int_equal(allocator_track_external(a, 0, ext, 4096, 0, TRACE_POOL_TRACE, 0), 0);
    assert_true(buffer_id_of(a, ext) == 0);
    expect_invariants(a);
    fixture_free(fx);
    struct alloc_fixture *trace = fixture_new("", 1ULL << 30, 1);
    allocator_destroy(trace->alloc);
    trace->config.caching = false; /* trace mode */
    trace->alloc = allocator_create(&trace->config, &trace->ops, &trace->sink, 1);
    uint64_t own = must_malloc(trace->alloc, 0, 1000, 0);
    struct alloc_range_block block = {0};
    assert_int_equal(allocator_range_of(trace->alloc, own, &block), ALLOC_RANGE_BLOCK);
    assert_true(block.whole && block.buffer_id == 0);
    fixture_free(trace);
}

/* A block served for a stream-ordered request remembers it while it lives (the IPC wrapper
 * refuses it as the driver refuses pool memory); the same block served again to cudaMalloc does
 * not. */
static void
test_stream_ordered_blocks(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 30, 1);
    struct allocator *a = fx->alloc;
    uint64_t plain = must_malloc(a, 0, 1000, 0);
    uint64_t ordered = 0;
    assert_int_equal(allocator_malloc_stream_ordered(a, 0, 1000, 0, 0, 0, &ordered), 0);
    assert_true(plain == B && ordered == B + 1024);
    struct alloc_range_block block = {0};
    assert_int_equal(allocator_range_of(a, plain, &block), ALLOC_RANGE_BLOCK);
    assert_false(block.stream_ordered);
    assert_int_equal(allocator_range_of(a, ordered + 5, &block), ALLOC_RANGE_BLOCK);
    assert_true(block.stream_ordered && block.base == ordered);
    assert_int_equal(allocator_free_on_stream(a, ordered, 0, 0), 0);
    uint64_t reused = must_malloc(a, 0, 1000, 0);
    assert_true(reused == ordered);
    assert_int_equal(allocator_range_of(a, reused, &block), ALLOC_RANGE_BLOCK);
    assert_false(block.stream_ordered);
    must_free(a, reused);
    assert_int_equal(allocator_malloc_stream_ordered(a, 0, 1000, 0, 0, 0, &ordered), 0);
    assert_true(ordered == reused);
    assert_int_equal(allocator_range_of(a, ordered, &block), ALLOC_RANGE_BLOCK);
    assert_true(block.stream_ordered);
    assert_int_equal(allocator_malloc_stream_ordered(NULL, 0, 1000, 0, 0, 0, &ordered),
                     -CUPROF_EINVAL);
    expect_invariants(a);
    fixture_free(fx);
}

/* External memory: tracked as a one-block segment with its pool tag, never cached or freed by
 * the allocator; ownership errors. */
static void
test_external_and_ownership(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 30, 2);
    struct allocator *a = fx->alloc;
    uint64_t ext = 0x100000000ULL;
    assert_int_equal(allocator_track_external(a, 1, ext, 4096, 0, TRACE_POOL_MANAGED, 5), 0);
    assert_int_equal(fx->fake.segment_allocs, 0);
    expect_trace(&fx->fake, 0, TRACE_SEGMENT_ALLOC, ext, 4096, 0);
    assert_int_equal(fx->fake.trace[0].pool, TRACE_POOL_MANAGED);
    assert_int_equal(fx->fake.trace[0].device, 1);
    assert_int_equal(allocator_free(a, ext, 0), -CUPROF_ENOTOWNED);
    int dev = -1;
    uint64_t base = 0;
    size_t size = 0;
    assert_true(allocator_lookup(a, ext + 100, &dev, &base, &size));
    assert_int_equal(dev, 1);
    assert_true(base == ext && size == 4096);
    struct memory_stats st;
    allocator_get_stats(a, 1, &st);
    assert_int_equal(st.reserved_bytes[STAT_ALL].current, 4096);
    assert_int_equal(st.num_device_alloc, 0);
    assert_int_equal(allocator_untrack_external(a, ext, 0), 0);
    assert_int_equal(allocator_untrack_external(a, ext, 0), -CUPROF_ENOTOWNED);
    assert_int_equal(fx->fake.segment_frees, 0);
    allocator_get_stats(a, 1, &st);
    assert_int_equal(st.reserved_bytes[STAT_ALL].current, 0);
    assert_int_equal(st.segment[STAT_ALL].freed, 1);
    /* Two devices: addresses from each device's range, lookups of interior pointers. */
    uint64_t p0 = must_malloc(a, 0, 5 * MIB, 0);
    uint64_t p1 = must_malloc(a, 1, 5 * MIB, 0);
    assert_true(p0 == B);
    assert_true(p1 == B + (1ULL << 40));
    assert_true(allocator_lookup(a, p1 + 4 * MIB, &dev, &base, &size));
    assert_int_equal(dev, 1);
    assert_true(base == p1 && size == 5 * MIB);
    assert_false(allocator_lookup(a, p1 + 6 * MIB, &dev, &base, &size)); /* cached remainder */
    must_free(a, p0);
    assert_false(allocator_lookup(a, p0, &dev, &base, &size));
    assert_int_equal(allocator_free(a, p0, 0), -CUPROF_ENOTOWNED); /* double free */
    assert_int_equal(allocator_free(a, 12345, 0), -CUPROF_ENOTOWNED);
    assert_int_equal(allocator_record_stream(a, p0, 3), -CUPROF_ENOTOWNED);
    uint64_t z = 1;
    assert_int_equal(allocator_malloc(a, 0, 0, 0, 0, &z), 0); /* malloc(0): 0, nothing traced */
    assert_true(z == 0);
    assert_int_equal(allocator_malloc(a, 2, 16, 0, 0, &z), -CUPROF_EINVAL);
    assert_int_equal(allocator_device_count(a), 2);
    /* The free stack, when given, goes on free_requested and free_completed. */
    uint64_t p2 = must_malloc(a, 1, 512, 0);
    assert_int_equal(allocator_free(a, p2, 42), 0);
    const struct trace_event *last = &fx->fake.trace[fx->fake.trace_count - 1];
    assert_int_equal(last->action, TRACE_FREE_COMPLETED);
    assert_int_equal(last->stack_id, 42);
    expect_invariants(a);
    /* A context reset: the device's blocks are forgotten without device calls. */
    long frees = fx->fake.segment_frees;
    allocator_forget_device(a, 1);
    assert_int_equal(fx->fake.segment_frees, frees);
    assert_false(allocator_lookup(a, p1, &dev, &base, &size));
    allocator_get_stats(a, 1, &st);
    assert_int_equal(st.reserved_bytes[STAT_ALL].current, 0);
    assert_int_equal(st.allocated_bytes[STAT_ALL].current, 0);
    assert_int_equal(st.inactive_split[STAT_ALL].current, 0);
    expect_invariants(a);
    fixture_free(fx);
}

/* A backend error other than out-of-memory is handed up unchanged, with no OOM. */
static void
test_backend_error(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 30, 1);
    uint64_t p = 0;
    fx->fake.fail_next_alloc = 999;
    assert_int_equal(allocator_malloc(fx->alloc, 0, 512, 0, 0, &p), 999);
    struct memory_stats st;
    allocator_get_stats(fx->alloc, 0, &st);
    assert_int_equal(st.num_ooms, 0);
    assert_int_equal(st.num_alloc_retries, 0);
    assert_true(must_malloc(fx->alloc, 0, 512, 0) == B);
    expect_invariants(fx->alloc);
    fixture_free(fx);
}

/* Devices whose address ranges interleave (no UVA split): every pointer is still found on its
 * own device, and a device's pointer map grows past its first buckets. */
static void
test_interleaved_devices(void **state)
{
    (void)state;
    struct alloc_fixture *fx = fixture_new("", 1ULL << 34, 2);
    struct allocator *a = fx->alloc;
    fx->fake.next_addr[1] = B + 20 * MIB;        /* device 1's first segment follows device 0's */
    uint64_t p0 = must_malloc(a, 0, 5 * MIB, 0); /* device 0: [B, B + 20 MiB) */
    uint64_t p1 = must_malloc(a, 1, 5 * MIB, 0); /* device 1: [B + 20 MiB, B + 40 MiB) */
    fx->fake.next_addr[0] = B + 40 * MIB;
    uint64_t q0 = must_malloc(a, 0, 16 * MIB, 0); /* device 0 again, above device 1 */
    assert_true(p0 == B && p1 == B + 20 * MIB && q0 == B + 40 * MIB);
    int dev = -1;
    uint64_t base = 0;
    size_t size = 0;
    assert_true(allocator_lookup(a, p1 + 100, &dev, &base, &size));
    assert_true(dev == 1 && base == p1 && size == 5 * MIB);
    assert_int_equal(allocator_record_stream(a, p1, 0), 0);
    assert_int_equal(allocator_free(a, p1 + 512, 0), -CUPROF_ENOTOWNED);
    must_free(a, p1);
    assert_int_equal(allocator_free(a, p1, 0), -CUPROF_ENOTOWNED);
    struct memory_stats st0, st1;
    allocator_get_stats(a, 0, &st0);
    allocator_get_stats(a, 1, &st1);
    assert_int_equal(st0.allocated_bytes[STAT_ALL].current, 21 * MIB);
    assert_int_equal(st1.allocated_bytes[STAT_ALL].current, 0);
    assert_int_equal(st1.allocation[STAT_ALL].freed, 1);
    /* 300 live small blocks on device 1 (its map starts with 64 buckets), then all freed. */
    uint64_t live[300];
    fx->fake.next_addr[1] = B + 60 * MIB; /* device 0's second segment ends at B + 56 MiB */
    for (int i = 0; i < 300; i++) {
        live[i] = must_malloc(a, 1, 512, 0);
        assert_true(live[i] == B + 60 * MIB + 512 * (uint64_t)i);
    }
    for (int i = 0; i < 300; i++) {
        assert_true(allocator_lookup(a, live[i], &dev, &base, &size));
        assert_true(dev == 1 && base == live[i] && size == 512);
    }
    for (int i = 299; i >= 0; i--)
        must_free(a, live[i]);
    allocator_get_stats(a, 1, &st1);
    assert_int_equal(st1.allocation[STAT_ALL].current, 0);
    assert_int_equal(st1.allocation[STAT_ALL].freed, 301);
    must_free(a, p0);
    must_free(a, q0);
    expect_invariants(a);
    fixture_free(fx);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record_stream_pending_free),
        cmocka_unit_test(test_free_sync_modes),
        cmocka_unit_test(test_event_query_error),
        cmocka_unit_test(test_implausible_device_answers),
        cmocka_unit_test(test_trace_mode),
        cmocka_unit_test(test_external_and_ownership),
        cmocka_unit_test(test_range_of),
        cmocka_unit_test(test_buffer_ids),
        cmocka_unit_test(test_stream_ordered_blocks),
        cmocka_unit_test(test_backend_error),
        cmocka_unit_test(test_interleaved_devices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
