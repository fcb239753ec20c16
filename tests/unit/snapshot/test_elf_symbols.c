/* test_elf_symbols.c: function symbols read straight from ELF files: this program's static
 * functions from its .symtab, a shared library's exports, and files that are no ELF file,
 * truncated or corrupt, which give NULL (and no fault under ASan). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <dlfcn.h>
#include <elf.h>
#include <limits.h>
#include <link.h>
#include <unistd.h>

#include "snapshot/elf_symbols.h"

#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

__attribute__((noinline)) static int
static_helper(int x)
{
    KEEP_FRAME();
    return x * 3 + 1;
}

static unsigned char *g_exe;
static size_t g_exe_size;
static char g_dir[] = "/tmp/cuprof-elf-XXXXXX";

/* The load bias of the object holding addr, and its path (the program: /proc/self/exe). */
static uintptr_t
bias_of(uintptr_t addr, char *path, size_t cap)
{
    Dl_info info;
    struct link_map *map = NULL;
    assert_int_not_equal(dladdr1((const void *)addr, &info, (void **)&map, RTLD_DL_LINKMAP), 0);
    assert_non_null(map);
    if (map->l_name[0] == '\0') {
        ssize_t len = readlink("/proc/self/exe", path, cap - 1);
        assert_true(len > 0);
        path[len] = '\0';
    } else {
        snprintf(path, cap, "%s", map->l_name);
    }
    return (uintptr_t)map->l_addr;
}

static void
write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static void
test_program_static_function(void **state)
{
    (void)state;
    assert_int_equal(static_helper(2), 7);
    char path[PATH_MAX];
    uintptr_t bias = bias_of((uintptr_t)&static_helper, path, sizeof(path));
    struct elf_symbols *s = elf_symbols_open(path);
    assert_non_null(s);
    assert_true(elf_symbols_count(s) > 10);
    uint64_t at = (uint64_t)((uintptr_t)&static_helper - bias);
    assert_string_equal(elf_symbols_find(s, at), "static_helper");
    assert_string_equal(elf_symbols_find(s, at + 1), "static_helper");
    assert_string_equal(
        elf_symbols_find(s, (uint64_t)((uintptr_t)&test_program_static_function - bias + 4)),
        "test_program_static_function");
    assert_null(elf_symbols_find(s, 0x10)); /* the ELF header */
    assert_null(elf_symbols_find(s, UINT64_MAX));
    elf_symbols_close(s);
}

static void
test_library_export(void **state)
{
    (void)state;
    char path[PATH_MAX];
    uintptr_t bias = bias_of((uintptr_t)&_cmocka_run_group_tests, path, sizeof(path));
    struct elf_symbols *s = elf_symbols_open(path);
    assert_non_null(s);
    assert_string_equal(
        elf_symbols_find(s, (uint64_t)((uintptr_t)&_cmocka_run_group_tests - bias + 2)),
        "_cmocka_run_group_tests");
    elf_symbols_close(s);
}

static void
test_not_elf(void **state)
{
    (void)state;
    char path[PATH_MAX];
    assert_null(elf_symbols_open("/nonexistent/cuprof/file"));
    assert_null(elf_symbols_open(g_dir)); /* a directory */
    snprintf(path, sizeof(path), "%s/empty", g_dir);
    write_file(path, "", 0);
    assert_null(elf_symbols_open(path));
    snprintf(path, sizeof(path), "%s/text", g_dir);
    write_file(path, "#!/bin/sh\necho not an ELF file\n", 31);
    assert_null(elf_symbols_open(path));
}

/* Every cut of the program's file that loses its section headers or symbol table opens as NULL;
 * one that keeps them reads the same answer. */
static void
test_truncated(void **state)
{
    (void)state;
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/cut", g_dir);
    const size_t cuts[] = {1,    sizeof(Elf64_Ehdr) - 1, sizeof(Elf64_Ehdr),
                           4096, g_exe_size / 2,         g_exe_size - 1};
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        write_file(path, g_exe, cuts[i]);
        assert_null(elf_symbols_open(path));
    }
}

/* Section headers pointing outside the file, at a symbol table of the wrong entry size, or at a
 * string table that is not one: NULL. Without .symtab the stripped fallback (.dynsym) names no
 * static function. */
static void
test_corrupt(void **state)
{
    (void)state;
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/bad", g_dir);
    unsigned char *copy = malloc(g_exe_size);
    assert_non_null(copy);
    Elf64_Ehdr eh;
    memcpy(&eh, g_exe, sizeof(eh));
    uint64_t symtab_at = 0;
    Elf64_Shdr symtab;
    for (uint64_t i = 0; i < eh.e_shnum && symtab_at == 0; i++) {
        memcpy(&symtab, g_exe + eh.e_shoff + i * sizeof(symtab), sizeof(symtab));
        if (symtab.sh_type == SHT_SYMTAB)
            symtab_at = eh.e_shoff + i * sizeof(symtab);
    }
    assert_int_not_equal(symtab_at, 0);

    Elf64_Ehdr bad_eh = eh;
    bad_eh.e_shoff = g_exe_size - 8;
    memcpy(copy, g_exe, g_exe_size);
    memcpy(copy, &bad_eh, sizeof(bad_eh));
    write_file(path, copy, g_exe_size);
    assert_null(elf_symbols_open(path));

    const struct {
        size_t field;
        uint64_t value;
    } edits[] = {
        {offsetof(Elf64_Shdr, sh_offset), g_exe_size - 16}, /* table runs past the end */
        {offsetof(Elf64_Shdr, sh_size), (uint64_t)1 << 62}, /* far past the end */
        {offsetof(Elf64_Shdr, sh_entsize), 16},             /* not an Elf64_Sym */
        {offsetof(Elf64_Shdr, sh_link), 0},                 /* string table: the null section */
        {offsetof(Elf64_Shdr, sh_link), (uint64_t)1 << 31}, /* past the section count */
    };
    for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
        memcpy(copy, g_exe, g_exe_size);
        Elf64_Shdr bad = symtab;
        if (edits[i].field == offsetof(Elf64_Shdr, sh_link))
            bad.sh_link = (uint32_t)edits[i].value;
        else
            memcpy((unsigned char *)&bad + edits[i].field, &edits[i].value, sizeof(uint64_t));
        memcpy(copy + symtab_at, &bad, sizeof(bad));
        write_file(path, copy, g_exe_size);
        assert_null(elf_symbols_open(path));
    }

    /* .symtab gone (its type made PROGBITS): the .dynsym fallback has no static functions. */
    memcpy(copy, g_exe, g_exe_size);
    Elf64_Shdr gone = symtab;
    gone.sh_type = SHT_PROGBITS;
    memcpy(copy + symtab_at, &gone, sizeof(gone));
    write_file(path, copy, g_exe_size);
    char self[PATH_MAX];
    uintptr_t bias = bias_of((uintptr_t)&static_helper, self, sizeof(self));
    struct elf_symbols *s = elf_symbols_open(path);
    if (s != NULL)
        assert_null(elf_symbols_find(s, (uint64_t)((uintptr_t)&static_helper - bias)));
    elf_symbols_close(s);
    free(copy);
}

static int
setup(void **state)
{
    (void)state;
    if (mkdtemp(g_dir) == NULL)
        return -1;
    FILE *f = fopen("/proc/self/exe", "rb");
    if (f == NULL || fseek(f, 0, SEEK_END) != 0)
        return -1;
    long size = ftell(f);
    rewind(f);
    g_exe = malloc((size_t)size);
    if (size <= 0 || g_exe == NULL || fread(g_exe, 1, (size_t)size, f) != (size_t)size)
        return -1;
    fclose(f);
    g_exe_size = (size_t)size;
    return 0;
}

static int
teardown(void **state)
{
    (void)state;
    const char *names[] = {"empty", "text", "cut", "bad"};
    char path[PATH_MAX];
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", g_dir, names[i]);
        unlink(path);
    }
    rmdir(g_dir);
    free(g_exe);
    return 0;
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_program_static_function),
        cmocka_unit_test(test_library_export),
        cmocka_unit_test(test_not_elf),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_corrupt),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
