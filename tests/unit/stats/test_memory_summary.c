/* Unit tests of stats/memory_summary: torch.cuda.memory_summary()'s table, worked out by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "stats/memory_summary.h"

#define EQ   "|===========================================================================|\n"
#define DASH "|---------------------------------------------------------------------------|\n"
#define ZB   "|      0 B   |      0 B   |      0 B   |      0 B   |\n"
#define ZC   "|       0    |       0    |       0    |       0    |\n"

/* All counters zero, device 0, with pool rows. */
static const char zero_table[] = EQ
    "|                  PyTorch CUDA memory summary, device ID 0                 |\n" DASH
    "|            CUDA OOMs: 0            |        cudaMalloc retries: 0         |\n" EQ
    "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |\n" DASH
    "| Allocated memory      " ZB "|       from large pool " ZB "|       from small pool " ZB DASH
    "| Active memory         " ZB "|       from large pool " ZB "|       from small pool " ZB DASH
    "| Requested memory      " ZB "|       from large pool " ZB "|       from small pool " ZB DASH
    "| GPU reserved memory   " ZB "|       from large pool " ZB "|       from small pool " ZB DASH
    "| Non-releasable memory " ZB "|       from large pool " ZB "|       from small pool " ZB DASH
    "| Allocations           " ZC "|       from large pool " ZC "|       from small pool " ZC DASH
    "| Active allocs         " ZC "|       from large pool " ZC "|       from small pool " ZC DASH
    "| GPU reserved segments " ZC "|       from large pool " ZC "|       from small pool " ZC DASH
    "| Non-releasable allocs " ZC "|       from large pool " ZC "|       from small pool " ZC DASH
    "| Oversize allocations  " ZC DASH "| Oversize GPU segments " ZC EQ;

static void
test_zero_table(void **state)
{
    (void)state;
    struct memory_stats s;
    memory_stats_init(&s, -1);
    char buf[8192];
    size_t n = memory_summary(&s, 0, false, buf, sizeof(buf));
    assert_string_equal(buf, zero_table);
    assert_int_equal(n, strlen(zero_table));
    assert_int_equal(n, 47 * 78); /* 47 lines of 75 characters, 2 borders and a newline */
}

/* Copies line `index` (0-based, without its newline) of text into line. */
static void
get_line(const char *text, size_t index, char *line, size_t cap)
{
    for (size_t i = 0; i < index; i++) {
        text = strchr(text, '\n');
        assert_non_null(text);
        text++;
    }
    const char *end = strchr(text, '\n');
    assert_non_null(end);
    size_t len = (size_t)(end - text);
    assert_true(len < cap);
    memcpy(line, text, len);
    line[len] = '\0';
}

static void
assert_line(const char *text, size_t index, const char *expected)
{
    char line[256];
    get_line(text, index, line, sizeof(line));
    assert_string_equal(line, expected);
}

/* Rows by index in the full table: metric k's `all` row is 7 + 4k, large 8 + 4k, small 9 + 4k. */
static void
test_units_per_column_from_all_row(void **state)
{
    (void)state;
    struct memory_stats s;
    memory_stats_init(&s, -1);
    /* allocated_bytes: all = 20 MiB + 1536 B -> KiB in Cur/Peak/Alloc, B in Freed. */
    memory_stats_increase_pool(s.allocated_bytes, STAT_LARGE_POOL, 20971520);
    memory_stats_increase_pool(s.allocated_bytes, STAT_SMALL_POOL, 1536);
    memory_stats_decrease_pool(s.allocated_bytes, STAT_SMALL_POOL, 512);
    /* active_bytes: 786431 B stays in B; 786432 B (768 KiB) is the first KiB value. */
    memory_stats_increase_pool(s.active_bytes, STAT_SMALL_POOL, 786431);
    memory_stats_increase_pool(s.active_bytes, STAT_SMALL_POOL, 1);
    memory_stats_decrease_pool(s.active_bytes, STAT_SMALL_POOL, 1);
    /* reserved_bytes: 3 GiB -> 3072 MiB; 2^60 B -> 1024 PiB (PiB is the last unit). */
    memory_stats_increase_pool(s.reserved_bytes, STAT_LARGE_POOL, 3221225472);
    memory_stats_decrease_pool(s.reserved_bytes, STAT_LARGE_POOL, 3221225472);
    memory_stats_increase_pool(s.reserved_bytes, STAT_LARGE_POOL, INT64_C(1) << 60);
    /* allocation: 750000 small + 3 large -> K for all three rows (large shows 0 K). */
    memory_stats_increase_pool(s.allocation, STAT_SMALL_POOL, 750000);
    memory_stats_increase_pool(s.allocation, STAT_LARGE_POOL, 3);
    /* active: 749999 stays plain. segment: 999250001 peak -> 999 M, 10^9 allocated -> 1000 M. */
    memory_stats_increase_pool(s.active, STAT_SMALL_POOL, 749999);
    memory_stats_increase_pool(s.segment, STAT_LARGE_POOL, 749999);
    memory_stats_decrease_pool(s.segment, STAT_LARGE_POOL, 749999);
    memory_stats_increase_pool(s.segment, STAT_LARGE_POOL, 1000000000 - 749999);
    memory_stats_decrease_pool(s.segment, STAT_LARGE_POOL, 1000000000 - 749999);
    memory_stats_increase(&s.oversize_segments, 2);
    memory_stats_decrease(&s.oversize_segments, 1);
    s.num_ooms = 12;
    s.num_alloc_retries = 345;

    char buf[8192];
    memory_summary(&s, 3, false, buf, sizeof(buf));
    assert_line(buf, 1,
                "|                  PyTorch CUDA memory summary, device ID 3                 |");
    assert_line(buf, 3,
                "|            CUDA OOMs: 12           |        cudaMalloc retries: 345       |");
    assert_line(buf, 7,
                "| Allocated memory      |  20481 KiB |  20481 KiB |  20481 KiB |    512 B   |");
    assert_line(buf, 8,
                "|       from large pool |  20480 KiB |  20480 KiB |  20480 KiB |      0 B   |");
    assert_line(buf, 9,
                "|       from small pool |      1 KiB |      1 KiB |      1 KiB |    512 B   |");
    assert_line(buf, 11,
                "| Active memory         | 786431 B   |    768 KiB |    768 KiB |      1 B   |");
    assert_line(buf, 12,
                "|       from large pool |      0 B   |      0 KiB |      0 KiB |      0 B   |");
    assert_line(buf, 13,
                "|       from small pool | 786431 B   |    768 KiB |    768 KiB |      1 B   |");
    assert_line(buf, 19,
                "| GPU reserved memory   |   1024 PiB |   1024 PiB |   1024 PiB |   3072 MiB |");
    assert_line(buf, 20,
                "|       from large pool |   1024 PiB |   1024 PiB |   1024 PiB |   3072 MiB |");
    assert_line(buf, 21,
                "|       from small pool |      0 PiB |      0 PiB |      0 PiB |      0 MiB |");
    assert_line(buf, 27,
                "| Allocations           |     750 K  |     750 K  |     750 K  |       0    |");
    assert_line(buf, 28,
                "|       from large pool |       0 K  |       0 K  |       0 K  |       0    |");
    assert_line(buf, 29,
                "|       from small pool |     750 K  |     750 K  |     750 K  |       0    |");
    assert_line(buf, 31,
                "| Active allocs         |  749999    |  749999    |  749999    |       0    |");
    assert_line(buf, 33,
                "|       from small pool |  749999    |  749999    |  749999    |       0    |");
    assert_line(buf, 35,
                "| GPU reserved segments |       0    |     999 M  |    1000 M  |    1000 M  |");
    assert_line(buf, 36,
                "|       from large pool |       0    |     999 M  |    1000 M  |    1000 M  |");
    assert_line(buf, 37,
                "|       from small pool |       0    |       0 M  |       0 M  |       0 M  |");
    assert_line(buf, 45,
                "| Oversize GPU segments |       1    |       2    |       2    |       1    |");
}

static void
test_abbreviated_and_floor_division(void **state)
{
    (void)state;
    struct memory_stats s;
    memory_stats_init(&s, -1);
    memory_stats_increase_pool(s.requested_bytes, STAT_LARGE_POOL, 1048576);
    /* A pool row below zero is printed with Python's floor division: -1 B -> -1 KiB. */
    s.requested_bytes[STAT_SMALL_POOL].current = -1;

    char buf[8192];
    size_t n = memory_summary(&s, 1, true, buf, sizeof(buf));
    /* 6 header lines, 9 metrics and 2 oversize rows of 2 lines each, the closing line. */
    assert_int_equal(n, (6 + 2 * 11 + 1) * 78);
    assert_line(buf, 6,
                "|---------------------------------------------------------------------------|");
    assert_line(buf, 7,
                "| Allocated memory      |      0 B   |      0 B   |      0 B   |      0 B   |");
    assert_line(buf, 11,
                "| Requested memory      |   1024 KiB |   1024 KiB |   1024 KiB |      0 B   |");
    assert_line(buf, 17,
                "| Allocations           |       0    |       0    |       0    |       0    |");
    assert_null(strstr(buf, "from large pool"));

    memory_summary(&s, 1, false, buf, sizeof(buf));
    assert_line(buf, 15,
                "| Requested memory      |   1024 KiB |   1024 KiB |   1024 KiB |      0 B   |");
    assert_line(buf, 16,
                "|       from large pool |   1024 KiB |   1024 KiB |   1024 KiB |      0 B   |");
    assert_line(buf, 17,
                "|       from small pool |     -1 KiB |      0 KiB |      0 KiB |      0 B   |");
}

static void
test_cut_short_and_several_devices(void **state)
{
    (void)state;
    struct memory_stats s[2];
    memory_stats_init(&s[0], -1);
    memory_stats_init(&s[1], -1);
    char small[80];
    size_t n = memory_summary(&s[0], 0, false, small, sizeof(small));
    assert_int_equal(n, strlen(zero_table));
    assert_int_equal(strlen(small), sizeof(small) - 1);
    assert_memory_equal(small, zero_table, sizeof(small) - 1);
    assert_int_equal(memory_summary(&s[0], 0, false, NULL, 0), strlen(zero_table));

    static char buf[16384];
    n = memory_summary_devices(s, 2, false, buf, sizeof(buf));
    assert_int_equal(n, 2 * strlen(zero_table));
    assert_memory_equal(buf, zero_table, strlen(zero_table));
    assert_line(buf + strlen(zero_table), 1,
                "|                  PyTorch CUDA memory summary, device ID 1                 |");
    assert_string_equal(buf + strlen(zero_table) + 2 * 78, zero_table + 2 * 78);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zero_table),
        cmocka_unit_test(test_units_per_column_from_all_row),
        cmocka_unit_test(test_abbreviated_and_floor_division),
        cmocka_unit_test(test_cut_short_and_several_devices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
