/* test_stacks.c: stack capture, interning and symbolization on call chains with known functions,
 * files and lines (C noinline + always_inline, C++ members), plus the intern table itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <pthread.h>

#include "allocator/cuprof_errors.h"
#include "chains.h"
#include "snapshot/stacks.h"
#include "snapshot/symbolize.h"

#define KEEP_FRAME() __asm__ volatile("" ::: "memory")
#define MAX_FRAMES   256

struct frames {
    struct symbolized_frame f[MAX_FRAMES];
    size_t n;
};

static struct symbolizer *g_sym;
static int g_test_line;
/* Loop bounds the compiler cannot see, so a loop is not unrolled into several call sites (each
 * call site is a different stack). */
static volatile int g_two = 2,
                    g_four = 4; /* line of the chain call in the noinline test helpers below */

/* Symbolizes every ip of stack `id`, inlined frames expanded, innermost first. */
static void
symbolize_stack(uint32_t id, struct frames *out)
{
    const uintptr_t *ips;
    size_t count;
    assert_true(stacks_get(id, &ips, &count));
    out->n = 0;
    for (size_t i = 0; i < count && out->n < MAX_FRAMES; i++) {
        size_t n = 0;
        assert_int_equal(symbolizer_lookup(g_sym, ips[i], out->f + out->n, MAX_FRAMES - out->n, &n),
                         0);
        assert_true(n >= 1);
        out->n += n < MAX_FRAMES - out->n ? n : MAX_FRAMES - out->n;
    }
}

static bool
ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static void
assert_frame(const struct symbolized_frame *f, const char *name, const char *file, int line)
{
    if (strcmp(f->name, name) != 0 || !ends_with(f->filename, file) || f->line != line)
        fail_msg("frame is %s %s:%lld, expected %s %s:%d", f->name, f->filename, (long long)f->line,
                 name, file, line);
}

__attribute__((noinline)) static uint32_t
call_c_chain(void)
{
    g_test_line = __LINE__ + 1;
    uint32_t id = chain_c_outer();
    KEEP_FRAME();
    return id;
}

static void
test_c_chain_symbolized(void **state)
{
    (void)state;
    uint32_t id = call_c_chain();
    assert_int_not_equal(id, 0);
    struct frames fr;
    symbolize_stack(id, &fr);
    assert_true(fr.n >= 6);
    assert_frame(&fr.f[0], "chain_c_leaf", "tests/unit/snapshot/chain_c.c", chain_c_lines.leaf);
    assert_frame(&fr.f[1], "chain_c_inl", "tests/unit/snapshot/chain_c.c", chain_c_lines.inl);
    assert_frame(&fr.f[2], "chain_c_mid", "tests/unit/snapshot/chain_c.c", chain_c_lines.mid);
    assert_frame(&fr.f[3], "chain_c_outer", "tests/unit/snapshot/chain_c.c", chain_c_lines.outer);
    assert_frame(&fr.f[4], "call_c_chain", "tests/unit/snapshot/test_stacks.c", g_test_line);
    assert_frame(&fr.f[5], "test_c_chain_symbolized", "tests/unit/snapshot/test_stacks.c",
                 __LINE__ - 11);
}

static void
test_skip_drops_innermost(void **state)
{
    (void)state;
    int line = __LINE__ + 1;
    uint32_t id = chain_c_skip();
    KEEP_FRAME();
    struct frames fr;
    symbolize_stack(id, &fr);
    assert_frame(&fr.f[0], "test_skip_drops_innermost", "tests/unit/snapshot/test_stacks.c", line);
}

#ifdef HAVE_CHAIN_CPP
__attribute__((noinline)) static uint32_t
call_cpp_chain(void)
{
    g_test_line = __LINE__ + 1;
    uint32_t id = cpp_chain_entry();
    KEEP_FRAME();
    return id;
}

static void
test_cpp_chain_symbolized(void **state)
{
    (void)state;
    uint32_t id = call_cpp_chain();
    assert_int_not_equal(id, 0);
    struct frames fr;
    symbolize_stack(id, &fr);
    assert_true(fr.n >= 4);
    const char *file = "tests/unit/snapshot/chain_cpp.cpp";
    assert_frame(&fr.f[0], "cuprof_test::Widget::inner(int)", file, chain_cpp_lines.leaf);
    assert_frame(&fr.f[1], "cuprof_test::Widget::capture(int)", file, chain_cpp_lines.mid);
    assert_frame(&fr.f[2], "cpp_chain_entry", file, chain_cpp_lines.outer);
    assert_frame(&fr.f[3], "call_cpp_chain", "tests/unit/snapshot/test_stacks.c", g_test_line);
}
#endif

static void
test_same_stack_same_id(void **state)
{
    (void)state;
    uint32_t ids[4];
    size_t counts[4];
    for (int i = 0; i < g_four; i++) {
        ids[i] = chain_c_outer(); /* one call site: one stack */
        counts[i] = stacks_count();
    }
    for (int i = 1; i < 4; i++) {
        assert_int_equal(ids[i], ids[0]);
        assert_int_equal(counts[i], counts[0]); /* hits add nothing */
    }
    /* Same innermost frames, another call site: another stack. */
    uint32_t other[2];
    for (int i = 0; i < g_two; i++)
        other[i] = chain_c_other();
    assert_int_not_equal(other[0], 0);
    assert_int_not_equal(other[0], ids[0]);
    assert_int_equal(other[1], other[0]);
    /* Different depths of one recursion are different stacks. */
    uint32_t r3 = chain_c_recurse(3), r4 = chain_c_recurse(4);
    assert_int_not_equal(r3, r4);
    const uintptr_t *a, *b;
    size_t na, nb;
    assert_true(stacks_get(r3, &a, &na));
    assert_true(stacks_get(r4, &b, &nb));
    assert_int_equal(nb, na + 1); /* one more chain_c_recurse frame */
    assert_true(stacks_count() >= 3);
    assert_false(stacks_get(0, &a, &na));
    assert_false(stacks_get((uint32_t)stacks_count() + 1, &a, &na));
}

static void
test_depth_and_modes(void **state)
{
    (void)state;
    uint32_t full = chain_c_recurse(40);
    const uintptr_t *ips, *cut;
    size_t n, ncut;
    assert_true(stacks_get(full, &ips, &n));
    assert_int_equal(n, STACKS_DEFAULT_DEPTH);
    stacks_configure(STACKS_ALL, 5);
    assert_int_equal(stacks_depth(), 5);
    uint32_t five = chain_c_recurse(40);
    assert_true(stacks_get(five, &cut, &ncut));
    assert_int_equal(ncut, 5);
    assert_memory_equal(cut, ips, 5 * sizeof(*ips));
    stacks_configure(STACKS_ALL, 100000);
    assert_int_equal(stacks_depth(), STACKS_MAX_DEPTH);
    stacks_configure(STACKS_NONE, 0);
    assert_int_equal(stacks_mode(), STACKS_NONE);
    assert_int_equal(stacks_depth(), STACKS_DEFAULT_DEPTH);
    assert_int_equal(chain_c_outer(), 0);
    stacks_configure(STACKS_ALLOC, 0);
    assert_int_equal(stacks_mode(), STACKS_ALLOC);
    assert_int_not_equal(chain_c_outer(), 0);
}

#define SYNTH_STACKS 20000
#define SYNTH_DEPTH  6

static void
synth_stack(unsigned k, uintptr_t *ips)
{
    for (unsigned j = 0; j < SYNTH_DEPTH; j++)
        ips[j] = 0x400000u + (uintptr_t)k * 64u + j * (k % 7u + 1u);
}

struct intern_job {
    int reverse;
    uint32_t ids[SYNTH_STACKS];
};

static void *
intern_worker(void *arg)
{
    struct intern_job *job = arg;
    uintptr_t ips[SYNTH_DEPTH];
    for (unsigned i = 0; i < SYNTH_STACKS; i++) {
        unsigned k = job->reverse ? SYNTH_STACKS - 1 - i : i;
        synth_stack(k, ips);
        job->ids[k] = stacks_intern(ips, SYNTH_DEPTH);
    }
    return NULL;
}

/* Two threads intern the same 20000 stacks in opposite orders while the table grows: both see
 * one id per stack, ids are distinct, and each id reads back its own ips. */
static void
test_intern_concurrent_growth(void **state)
{
    (void)state;
    static struct intern_job jobs[2] = {{.reverse = 0}, {.reverse = 1}};
    size_t before = stacks_count();
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, intern_worker, &jobs[i]), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    assert_int_equal(stacks_count(), before + SYNTH_STACKS);
    uintptr_t want[SYNTH_DEPTH];
    for (unsigned k = 0; k < SYNTH_STACKS; k++) {
        assert_int_equal(jobs[0].ids[k], jobs[1].ids[k]);
        assert_true(jobs[0].ids[k] > before && jobs[0].ids[k] <= before + SYNTH_STACKS);
        const uintptr_t *ips;
        size_t n;
        assert_true(stacks_get(jobs[0].ids[k], &ips, &n));
        synth_stack(k, want);
        assert_int_equal(n, SYNTH_DEPTH);
        assert_memory_equal(ips, want, sizeof(want));
        assert_int_equal(stacks_intern(want, SYNTH_DEPTH), jobs[0].ids[k]);
    }
    assert_int_equal(stacks_intern(want, 0), 0);
}

static void
test_symbolizer_fallbacks(void **state)
{
    (void)state;
    struct symbolized_frame f[4];
    size_t n = 0;
    /* Nothing is mapped at page 1. */
    assert_int_equal(symbolizer_lookup(g_sym, 0x1010, f, 4, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(f[0].name, "<unknown>");
    assert_string_equal(f[0].filename, "??");
    assert_int_equal(f[0].line, 0);
    assert_int_equal(symbolizer_lookup(g_sym, 0, f, 4, &n), 0);
    assert_string_equal(f[0].filename, "??");
    /* libcmocka has no DWARF: its ELF symbol and the module path, line 0. */
    uintptr_t in_cmocka = (uintptr_t)&_cmocka_run_group_tests + 1;
    size_t resolved = symbolizer_resolved_count(g_sym);
    assert_int_equal(symbolizer_lookup(g_sym, in_cmocka, f, 4, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(f[0].name, "_cmocka_run_group_tests");
    assert_non_null(strstr(f[0].filename, "/libcmocka.so"));
    assert_int_equal(f[0].line, 0);
    assert_int_equal(symbolizer_resolved_count(g_sym), resolved + 1);
    /* A second lookup is a cache hit with the very same strings. */
    struct symbolized_frame again;
    assert_int_equal(symbolizer_lookup(g_sym, in_cmocka, &again, 1, &n), 0);
    assert_ptr_equal(again.name, f[0].name);
    assert_ptr_equal(again.filename, f[0].filename);
    assert_int_equal(symbolizer_resolved_count(g_sym), resolved + 1);
    /* cap 0 still reports the count. */
    assert_int_equal(symbolizer_lookup(g_sym, in_cmocka, NULL, 0, &n), 0);
    assert_int_equal(n, 1);
    /* A function in libc: its name whatever debug info is installed. */
    assert_int_equal(symbolizer_lookup(g_sym, (uintptr_t)&getpid + 1, f, 4, &n), 0);
    assert_non_null(strstr(f[0].name, "getpid"));
}

static int
setup(void **state)
{
    (void)state;
    stacks_configure(STACKS_ALL, 0);
    stacks_warm_up();
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
        cmocka_unit_test(test_c_chain_symbolized),
        cmocka_unit_test(test_skip_drops_innermost),
#ifdef HAVE_CHAIN_CPP
        cmocka_unit_test(test_cpp_chain_symbolized),
#endif
        cmocka_unit_test(test_same_stack_same_id),
        cmocka_unit_test(test_depth_and_modes),
        cmocka_unit_test(test_intern_concurrent_growth),
        cmocka_unit_test(test_symbolizer_fallbacks),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
