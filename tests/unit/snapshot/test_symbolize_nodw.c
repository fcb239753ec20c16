/* test_symbolize_nodw.c: with libdw.so.1 unloadable (the dw_api_set_soname hook names a library
 * that does not exist), the symbolizer still names functions: dladdr's exported symbol
 * (demangled), else the module's own ELF symbol table (a static function of the program), else
 * module+offset; the module's path, line 0; unmapped addresses stay "<unknown>" / "??". */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <limits.h>
#include <link.h>

#include "snapshot/dw_api.h"
#include "snapshot/symbolize.h"

#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

uint32_t selfskip_mangled(void) __asm__("_ZN11cuprof_test7mangledEv");

static struct symbolizer *g_sym;

/* Not exported from the executable: dladdr has no name for it, its .symtab has. */
__attribute__((noinline)) static int
local_function(void)
{
    KEEP_FRAME();
    return 3;
}

static bool
ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static void
lookup_one(uintptr_t ip, struct symbolized_frame *f)
{
    size_t n = 0;
    assert_int_equal(symbolizer_lookup(g_sym, ip, f, 1, &n), 0);
    assert_int_equal(n, 1);
}

static void
test_libdw_not_loaded(void **state)
{
    (void)state;
    assert_null(dw_api_get());
    /* The hook is refused once the load ran. */
    assert_int_equal(dw_api_set_soname("libdw.so.1"), -1);
    assert_null(dw_api_get());
}

static void
test_unknown_address(void **state)
{
    (void)state;
    struct symbolized_frame f;
    lookup_one(0x1010, &f); /* nothing is mapped at page 1 */
    assert_string_equal(f.name, "<unknown>");
    assert_string_equal(f.filename, "??");
    assert_int_equal(f.line, 0);
}

static void
test_shared_library_symbols(void **state)
{
    (void)state;
    struct symbolized_frame f;
    size_t resolved = symbolizer_resolved_count(g_sym);
    lookup_one((uintptr_t)&_cmocka_run_group_tests + 1, &f);
    assert_string_equal(f.name, "_cmocka_run_group_tests");
    assert_non_null(strstr(f.filename, "/libcmocka.so"));
    assert_int_equal(f.line, 0);
    assert_int_equal(symbolizer_resolved_count(g_sym), resolved + 1);
    /* Cache hit: the same interned strings, no new resolution. */
    struct symbolized_frame again;
    lookup_one((uintptr_t)&_cmocka_run_group_tests + 1, &again);
    assert_ptr_equal(again.name, f.name);
    assert_ptr_equal(again.filename, f.filename);
    assert_int_equal(symbolizer_resolved_count(g_sym), resolved + 1);

    /* A C++-mangled dynamic symbol comes out demangled (libstdc++ dlopen'ed for a C program). */
    assert_int_equal(selfskip_mangled(), 7);
    lookup_one((uintptr_t)&selfskip_mangled + 1, &f);
    assert_string_equal(f.name, "cuprof_test::mangled()");
    assert_true(ends_with(f.filename, "/libsnapshot_selfskip.so"));
    assert_int_equal(f.line, 0);

    lookup_one((uintptr_t)&getpid + 1, &f);
    assert_non_null(strstr(f.name, "getpid"));
    assert_non_null(strstr(f.filename, "libc.so"));
    assert_int_equal(f.line, 0);
}

static int
main_start_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type == PT_LOAD) {
            uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
            *(uintptr_t *)data = (info->dlpi_addr + info->dlpi_phdr[i].p_vaddr) & ~(page - 1);
            break;
        }
    }
    return 1; /* the first object reported is the main program */
}

static void
test_main_program_symbols(void **state)
{
    (void)state;
    assert_false(symbolizer_reads_lines(g_sym));
    assert_int_equal(local_function(), 3);
    uintptr_t start = 0;
    dl_iterate_phdr(main_start_cb, &start);
    assert_int_not_equal(start, 0);
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    assert_true(len > 0);
    exe[len] = '\0';

    struct symbolized_frame f;
    lookup_one((uintptr_t)&local_function + 1, &f);
    assert_string_equal(f.name, "local_function");
    assert_string_equal(f.filename, exe); /* the full path, not argv[0] */
    assert_int_equal(f.line, 0);

    /* The ELF header: mapped, but inside no function: module+offset. */
    lookup_one(start + 0x41, &f);
    char want[PATH_MAX + 32];
    snprintf(want, sizeof(want), "%s+0x40", strrchr(exe, '/') + 1);
    assert_string_equal(f.name, want);
    assert_string_equal(f.filename, exe);
}

static int
setup(void **state)
{
    (void)state;
    if (dw_api_set_soname("libcuprof-test-no-such-libdw.so.1") != 0)
        return -1;
    g_sym = symbolizer_create();
    return g_sym == NULL ? -1 : 0;
}

static int
teardown(void **state)
{
    (void)state;
    symbolizer_destroy(g_sym);
    return 0;
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_libdw_not_loaded),
        cmocka_unit_test(test_unknown_address),
        cmocka_unit_test(test_shared_library_symbols),
        cmocka_unit_test(test_main_program_symbols),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
