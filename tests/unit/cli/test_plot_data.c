/* test_plot_data.c: the report page's data. Varints and base64 (RFC 4648's vectors); every
 * segment range's life (analysis_segment_spans) against analysis_segment_list_at at every state
 * of random histories of ordinary and expandable segments; and the allocations table
 * (plot_history) against analysis_run: the live bytes the page sums from it are analysis's after
 * every entry, on random histories with replaced addresses, unknown frees and blocks live before
 * the history. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "allocator/allocator.h"
#include "allocator/trace_sink.h"
#include "cli/analysis.h"
#include "cli/plot_blob.h"
#include "cli/plot_history.h"
#include "snapshot/snapshot_model.h"

static uint64_t
read_uint(const uint8_t *b, size_t *pos)
{
    uint64_t v = 0;
    for (unsigned shift = 0;; shift += 7) {
        uint8_t x = b[(*pos)++];
        v |= (uint64_t)(x & 127) << shift;
        if (x < 128)
            return v;
    }
}

static int64_t
unzig(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

static void
test_varints(void **state)
{
    (void)state;
    const uint64_t values[] = {0, 1, 127, 128, 300, UINT32_MAX, (1ull << 53) - 1, UINT64_MAX};
    const int64_t signed_values[] = {0, -1, 1, -64, 64, INT32_MIN, INT64_MAX, INT64_MIN};
    struct plot_blob b;
    plot_blob_init(&b);
    for (size_t i = 0; i < 8; i++)
        plot_blob_uint(&b, values[i]);
    for (size_t i = 0; i < 8; i++)
        plot_blob_sint(&b, signed_values[i]);
    plot_blob_uint(&b, plot_blob_delta(5, 9));
    plot_blob_uint(&b, plot_blob_delta(9, 5));
    assert_false(b.failed);
    assert_int_equal(b.data[0], 0);
    assert_int_equal(b.data[3], 0x80);
    assert_int_equal(b.data[4], 0x01);
    size_t pos = 0;
    for (size_t i = 0; i < 8; i++)
        assert_true(read_uint(b.data, &pos) == values[i]);
    for (size_t i = 0; i < 8; i++)
        assert_true(unzig(read_uint(b.data, &pos)) == signed_values[i]);
    assert_int_equal(unzig(read_uint(b.data, &pos)), -4);
    assert_int_equal(unzig(read_uint(b.data, &pos)), 4);
    assert_int_equal(pos, b.len);
    plot_blob_free(&b);
}

static void
test_base64(void **state)
{
    (void)state;
    const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    const char *want[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (size_t i = 0; i < 7; i++) {
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        assert_true(plot_blob_base64(f, (const uint8_t *)in[i], strlen(in[i])));
        fclose(f);
        assert_string_equal(text, want[i]);
        free(text);
    }
}

/* ---- random histories */

static uint64_t seed;

static uint64_t
rnd(uint64_t n)
{
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return seed % n;
}

#define PAGE    (2ull << 20)
#define BASE    0x7f0000000000ull
#define PAGES   48
#define ENTRIES 600

static struct snapshot *
random_segments(void)
{
    struct snapshot *s = snapshot_create(1);
    assert_non_null(s);
    /* A final table of a few ordinary segments and expandable runs (no overlaps). */
    bool used[PAGES] = {0};
    for (int k = 0; k < 8; k++) {
        uint64_t page = rnd(PAGES - 4), n = 1 + rnd(3);
        bool free_run = true;
        for (uint64_t p = page; p < page + n + 1; p++)
            free_run = free_run && !used[p];
        if (!free_run)
            continue;
        for (uint64_t p = page; p < page + n; p++)
            used[p] = true;
        struct snap_segment seg = {.device = 0,
                                   .addr = BASE + page * PAGE,
                                   .total_size = n * PAGE,
                                   .stream = rnd(2),
                                   .is_small = rnd(2) == 0,
                                   .is_expandable = rnd(2) == 0};
        assert_int_equal(snapshot_add_segment(s, &seg), 0);
    }
    /* Segments are sorted by address in a model: re-sort (no blocks yet). */
    for (size_t i = 0; i < s->segment_count; i++)
        for (size_t j = i + 1; j < s->segment_count; j++)
            if (s->segments[j].addr < s->segments[i].addr) {
                struct snap_segment t = s->segments[i];
                s->segments[i] = s->segments[j];
                s->segments[j] = t;
            }
    for (int i = 0; i < ENTRIES; i++) {
        static const uint8_t actions[] = {TRACE_SEGMENT_ALLOC, TRACE_SEGMENT_FREE,
                                          TRACE_SEGMENT_MAP, TRACE_SEGMENT_UNMAP, TRACE_ALLOC};
        struct snap_entry e = {.action = actions[rnd(5)],
                               .addr = BASE + rnd(PAGES) * PAGE,
                               .size = (1 + rnd(3)) * PAGE,
                               .stream = rnd(2)};
        assert_int_equal(snapshot_add_entry(s, 0, &e), 0);
    }
    return s;
}

static int
cmp_seg(const void *a, const void *b)
{
    const struct analysis_segment *x = a, *y = b;
    uint64_t kx[6] = {x->addr, x->size, x->stream, x->index, x->is_small, x->is_expandable};
    uint64_t ky[6] = {y->addr, y->size, y->stream, y->index, y->is_small, y->is_expandable};
    for (int k = 0; k < 6; k++)
        if (kx[k] != ky[k])
            return kx[k] < ky[k] ? -1 : 1;
    return 0;
}

static void
test_segment_spans(void **state)
{
    (void)state;
    size_t inner = 0, unmapped = 0; /* spans that begin and end inside the history; runs unmapped */
    for (int round = 0; round < 40; round++) {
        seed = 0x9e3779b97f4a7c15ull + (uint64_t)round * 7919;
        struct snapshot *s = random_segments();
        struct analysis_span *spans;
        size_t n;
        assert_int_equal(analysis_segment_spans(s, 0, &spans, &n), 0);
        size_t count = s->device_traces[0].count;
        for (size_t k = 0; k < n; k++) {
            assert_true(spans[k].from < spans[k].to);
            assert_true(spans[k].to <= count + 1);
            if (k > 0)
                assert_true(spans[k - 1].from <= spans[k].from);
            inner += spans[k].from > 0 && spans[k].to <= count;
            unmapped += spans[k].seg.is_expandable && spans[k].seg.index == UINT32_MAX;
        }
        for (size_t at = 0; at <= count; at++) {
            struct analysis_segment *want;
            size_t nwant;
            assert_int_equal(analysis_segment_list_at(s, 0, at, &want, &nwant), 0);
            struct analysis_segment *got = calloc(n + 1, sizeof(*got));
            size_t ngot = 0;
            for (size_t k = 0; k < n; k++)
                if (spans[k].from <= at && at < spans[k].to)
                    got[ngot++] = spans[k].seg;
            qsort(got, ngot, sizeof(*got), cmp_seg);
            qsort(want, nwant, sizeof(*want), cmp_seg);
            bool same = ngot == nwant;
            for (size_t k = 0; same && k < ngot; k++)
                same = cmp_seg(&got[k], &want[k]) == 0;
            if (!same)
                fail_msg("round %d, state %zu: %zu ranges from the spans, %zu from list_at", round,
                         at, ngot, nwant);
            free(got);
            free(want);
        }
        free(spans);
        snapshot_free(s);
    }
    assert_true(inner > 100 && unmapped > 10); /* the histories exercise what they should */
}

/* ---- allocations */

static struct snapshot *
random_allocations(void)
{
    struct snapshot *s = snapshot_create(1);
    assert_non_null(s);
    uint32_t frame, stack;
    assert_int_equal(snapshot_add_frame(s, "f", "a.c", 1, &frame), 0);
    assert_int_equal(snapshot_add_stack(s, &frame, 1, &stack), 0);
    /* One segment whose table holds a few live blocks (some live before the history). */
    struct snap_segment seg = {.device = 0, .addr = BASE, .total_size = 64 * PAGE};
    assert_int_equal(snapshot_add_segment(s, &seg), 0);
    for (int k = 0; k < 64; k += 1 + (int)rnd(6)) {
        struct snap_block b = {.addr = BASE + (uint64_t)k * PAGE,
                               .size = PAGE,
                               .requested_size = 1 + rnd(PAGE),
                               .stack = stack,
                               .state = BLOCK_ACTIVE_ALLOCATED};
        assert_int_equal(snapshot_add_block(s, &b), 0);
    }
    static const uint8_t actions[] = {TRACE_ALLOC,
                                      TRACE_ALLOC,
                                      TRACE_FREE_REQUESTED,
                                      TRACE_FREE_COMPLETED,
                                      TRACE_FREE_COMPLETED,
                                      TRACE_SEGMENT_ALLOC,
                                      TRACE_OOM};
    for (int i = 0; i < ENTRIES; i++) {
        struct snap_entry e = {.action = actions[rnd(7)],
                               .addr = BASE + rnd(64) * PAGE,
                               .size = 1 + rnd(PAGE),
                               .stack = rnd(2) ? stack : 0,
                               .has_time = rnd(4) != 0,
                               .time_us = 1000 + i};
        assert_int_equal(snapshot_add_entry(s, 0, &e), 0);
    }
    return s;
}

static void
test_history_live(void **state)
{
    (void)state;
    for (int round = 0; round < 30; round++) {
        seed = 0x2545f4914f6cdd1dull + (uint64_t)round * 104729;
        struct snapshot *s = random_allocations();
        struct device_analysis a;
        assert_int_equal(analysis_run(s, 0, true, &a), 0);
        struct plot_streams streams;
        plot_streams_init(&streams);
        struct plot_history h;
        assert_int_equal(plot_history_build(s, 0, &streams, &h), 0);
        size_t count = s->device_traces[0].count;
        int64_t *delta = calloc(count + 2, sizeof(int64_t));
        size_t pos = 0;
        uint64_t born = 0;
        for (size_t k = 0; k < h.alloc_count; k++) {
            born += read_uint(h.allocs.data, &pos);
            uint64_t life = read_uint(h.allocs.data, &pos);
            uint64_t pending = read_uint(h.allocs.data, &pos);
            (void)read_uint(h.allocs.data, &pos); /* addr */
            uint64_t size = read_uint(h.allocs.data, &pos);
            for (int f = 0; f < 4; f++)
                (void)read_uint(h.allocs.data, &pos);
            assert_true(life > 0 && born + life <= count + 1);
            assert_true(pending <= life);
            delta[born] += (int64_t)size;
            delta[born + life] -= (int64_t)size;
        }
        assert_int_equal(pos, h.allocs.len);
        int64_t live = 0;
        for (size_t at = 0; at <= count; at++) {
            live += delta[at];
            if ((uint64_t)live != a.live_series[at])
                fail_msg("round %d, state %zu: the table sums %lld, analysis %llu", round, at,
                         (long long)live, (unsigned long long)a.live_series[at]);
        }
        /* Every entry that is not an allocation's is an event. */
        size_t events = 0;
        for (size_t i = 0; i < count; i++) {
            unsigned act = s->device_traces[0].entries[i].action;
            events += act == TRACE_SEGMENT_ALLOC || act == TRACE_OOM;
        }
        assert_true(h.event_count >= events);
        free(delta);
        plot_history_free(&h);
        plot_streams_free(&streams);
        analysis_free(&a);
        snapshot_free(s);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_varints),
        cmocka_unit_test(test_base64),
        cmocka_unit_test(test_segment_spans),
        cmocka_unit_test(test_history_live),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
