/* test_selfskip.c: frames inside the shared object that holds the stack capture (libcuprof.so in
 * real use) are dropped; symbols without DWARF are demangled even in a C-only program. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "snapshot/symbolize.h"

#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

uint32_t selfskip_capture(void);
bool selfskip_get(uint32_t id, const uintptr_t **ips, size_t *count);
uint32_t selfskip_mangled(void) __asm__("_ZN11cuprof_test7mangledEv");

static int g_line;

__attribute__((noinline)) static uint32_t
selfskip_caller(void)
{
    g_line = __LINE__ + 1;
    uint32_t id = selfskip_capture();
    KEEP_FRAME();
    return id;
}

static bool
ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static void
test_own_frames_dropped(void **state)
{
    (void)state;
    uint32_t id = selfskip_caller();
    assert_int_not_equal(id, 0);
    const uintptr_t *ips;
    size_t n;
    assert_true(selfskip_get(id, &ips, &n));
    assert_true(n >= 2);
    struct symbolizer *sym = symbolizer_create();
    assert_non_null(sym);
    struct symbolized_frame f[8];
    size_t count = 0;
    assert_int_equal(symbolizer_lookup(sym, ips[0], f, 8, &count), 0);
    if (strcmp(f[0].name, "selfskip_caller") != 0 ||
        !ends_with(f[0].filename, "tests/unit/snapshot/test_selfskip.c") || f[0].line != g_line)
        fail_msg("frame 0 is %s %s:%lld, expected selfskip_caller test_selfskip.c:%d", f[0].name,
                 f[0].filename, (long long)f[0].line, g_line);
    assert_int_equal(symbolizer_lookup(sym, ips[1], f, 8, &count), 0);
    assert_string_equal(f[0].name, "test_own_frames_dropped");
    symbolizer_destroy(sym);
}

static void
test_elf_symbol_demangled(void **state)
{
    (void)state;
    assert_int_equal(selfskip_mangled(), 7);
    struct symbolizer *sym = symbolizer_create();
    assert_non_null(sym);
    struct symbolized_frame f[8];
    size_t count = 0;
    assert_int_equal(symbolizer_lookup(sym, (uintptr_t)&selfskip_mangled + 1, f, 8, &count), 0);
    assert_int_equal(count, 1);
    assert_string_equal(f[0].name, "cuprof_test::mangled()");
    assert_true(ends_with(f[0].filename, "/libsnapshot_selfskip.so"));
    assert_int_equal(f[0].line, 0);
    symbolizer_destroy(sym);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_own_frames_dropped),
        cmocka_unit_test(test_elf_symbol_demangled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
