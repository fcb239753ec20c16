/* test_symbolize_unloaded.c: frames in a library the program unloaded are still named at a dump
 * (snapshot/unloaded_modules.h), and an address that a library loaded later took is named after
 * that library, by one symbolizer kept across all of it as the dumper keeps its own. The two
 * libraries are unwind_reload.S's variants, which the loader puts at the same address. With the
 * argument "nodw", libdw.so.1 is made unloadable first (the ELF symbol table path). */
#include <dlfcn.h>
#include <link.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "snapshot/dw_api.h"
#include "snapshot/symbolize.h"
#include "snapshot/unloaded_modules.h"

static struct symbolizer *g_sym;

struct place {
    const char *name;
    uintptr_t base, lo, hi;
};

static int
place_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct place *p = data;
    if (info->dlpi_name == NULL || strcmp(info->dlpi_name, p->name) != 0)
        return 0;
    p->base = info->dlpi_addr;
    unloaded_modules_code_range(info, &p->lo, &p->hi);
    return 1;
}

/* Opens `path`; its lib_entry's address and where it is mapped. */
static void *
open_library(const char *path, uintptr_t *entry, struct place *where)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(lib);
    *entry = (uintptr_t)dlsym(lib, "lib_entry");
    assert_true(*entry != 0);
    *where = (struct place){.name = path};
    dl_iterate_phdr(place_cb, where);
    assert_true(where->lo <= *entry && *entry < where->hi);
    return lib;
}

/* Closes it and notes it as preload/unload.c does. */
static void
close_library(void *lib, const struct place *where)
{
    assert_int_equal(dlclose(lib), 0);
    unloaded_modules_add(where->name, where->base, where->lo, where->hi);
}

/* A return address inside lib_entry (the symbolizer looks up ip - 1). */
static void
expect_frame(uintptr_t entry, const char *file)
{
    struct symbolized_frame f;
    size_t n = 0;
    assert_int_equal(symbolizer_lookup(g_sym, entry + 8, &f, 1, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(f.name, "lib_entry");
    assert_string_equal(f.filename, file);
}

static void
test_unloaded_and_replaced(void **state)
{
    (void)state;
    uintptr_t a_entry, b_entry;
    struct place a, b;
    void *lib = open_library(UNWIND_RELOAD_A, &a_entry, &a);
    expect_frame(a_entry, UNWIND_RELOAD_A);
    close_library(lib, &a);
    assert_int_equal(unloaded_modules_count(), 1);
    /* Unmapped now, named from its file (it was "<unknown>"). */
    expect_frame(a_entry, UNWIND_RELOAD_A);

    lib = open_library(UNWIND_RELOAD_B, &b_entry, &b);
    if (b_entry != a_entry) {
        dlclose(lib);
        skip(); /* the loader put it elsewhere: nothing took the address */
        return;
    }
    /* The same address is the new library's now, not the cached unloaded one's. */
    expect_frame(b_entry, UNWIND_RELOAD_B);
    close_library(lib, &b);
    /* Both unloaded from there: the most recent is the one named. */
    expect_frame(b_entry, UNWIND_RELOAD_B);
    /* And the first again, loaded anew. */
    lib = open_library(UNWIND_RELOAD_A, &a_entry, &a);
    expect_frame(a_entry, UNWIND_RELOAD_A);
    close_library(lib, &a);
    expect_frame(a_entry, UNWIND_RELOAD_A);
}

/* The same object unloaded again and again is one entry: the list stays short. */
static void
test_same_object_noted_once(void **state)
{
    (void)state;
    uint64_t before = unloaded_modules_count();
    for (int i = 0; i < 3; i++)
        unloaded_modules_add("/nowhere/libsame.so", 0x7000000000, 0x7000001000, 0x7000002000);
    assert_int_equal(unloaded_modules_count(), before + 3);
    struct unloaded_module m;
    assert_true(unloaded_modules_find(0x7000001800, &m));
    assert_string_equal(m.path, "/nowhere/libsame.so");
    assert_false(unloaded_modules_find(0x7000002000, &m));
    /* An unreadable file: the frame keeps its module and offset. */
    struct symbolized_frame f;
    size_t n = 0;
    assert_int_equal(symbolizer_lookup(g_sym, 0x7000001801, &f, 1, &n), 0);
    assert_string_equal(f.filename, "/nowhere/libsame.so");
    assert_string_equal(f.name, "libsame.so+0x1800");
}

static int
setup(void **state)
{
    (void)state;
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
main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "nodw") == 0 &&
        dw_api_set_soname("libcuprof-test-no-such-libdw.so.1") != 0)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unloaded_and_replaced),
        cmocka_unit_test(test_same_object_noted_once),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
