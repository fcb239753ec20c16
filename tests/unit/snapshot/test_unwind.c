/* test_unwind.c: cuprof's unwinder (snapshot/unwind.h) against libunwind's unw_backtrace and
 * libgcc's (glibc's backtrace), frame for frame, on whole stacks captured at one call site: C
 * recursion at many depths and a large frame, frames with rbp-based CFAs (alloca), C++ code in a
 * catch block, in a destructor run by an exception and after a rethrow, signal handlers (raised,
 * on an alternate stack, and a profiling timer interrupting code anywhere, prologues and
 * epilogues included), another thread, truncated captures; and none of the deterministic ones
 * handed to libgcc; and whether a signal handler runs (unwind_caller_context). Without libunwind
 * installed (the nolibunwind test setup), against libgcc only. */
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "snapshot/stacks.h"
#include "snapshot/unwind.h"
#include "unwind_chains.h"

#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

enum { CUPROF, LIBUNWIND, LIBGCC, UNWINDERS };
static const char *const g_names[UNWINDERS] = {"cuprof", "libunwind", "libgcc"};
static int (*g_fns[UNWINDERS])(void **, int);
static volatile int g_unwinders = UNWINDERS; /* a bound the compiler cannot unroll */

__attribute__((noinline)) void
unwind_test_shoot(struct unwind_shot *s)
{
    /* One call site for every unwinder: the first frame is the same return address. */
    for (int k = 0; k < g_unwinders; k++)
        s->n[k] = g_fns[k] != NULL ? g_fns[k](s->f[k], UNWIND_SHOT_FRAMES) : -1;
    KEEP_FRAME();
}

/* The first unwinder that differs from cuprof's, or -1. */
static int
shot_differs(const struct unwind_shot *s)
{
    for (int k = LIBUNWIND; k < UNWINDERS; k++)
        if (s->n[k] >= 0 && (s->n[k] != s->n[CUPROF] ||
                             memcmp(s->f[k], s->f[CUPROF], (size_t)s->n[k] * sizeof(void *)) != 0))
            return k;
    return -1;
}

static void
print_frames(const char *who, void *const *f, int n)
{
    fprintf(stderr, "%s: %d frames\n", who, n);
    for (int i = 0; i < n; i++) {
        Dl_info info;
        const char *name = dladdr(f[i], &info) && info.dli_sname ? info.dli_sname : "?";
        fprintf(stderr, "  %2d %p %s\n", i, f[i], name);
    }
}

static void
check_shot(const struct unwind_shot *s, const char *what)
{
    int k = shot_differs(s);
    if (k < 0) {
        assert_true(s->n[CUPROF] >= 3); /* the test, cmocka, main at least */
        return;
    }
    print_frames(g_names[CUPROF], s->f[CUPROF], s->n[CUPROF]);
    print_frames(g_names[k], s->f[k], s->n[k]);
    fail_msg("%s: cuprof's frames differ from %s's", what, g_names[k]);
}

static uint64_t
fallbacks(void)
{
    struct unwind_stats st;
    unwind_get_stats(&st);
    return st.fallbacks;
}

static struct unwind_shot g_shot;

__attribute__((noinline)) static void
recurse(int depth)
{
    if (depth == 0)
        unwind_test_shoot(&g_shot);
    else
        recurse(depth - 1);
    KEEP_FRAME();
}

static void
test_c_depths(void **state)
{
    (void)state;
    uint64_t before = fallbacks();
    for (int d = 0; d < 80; d += 7) {
        recurse(d);
        check_shot(&g_shot, "C recursion");
    }
    assert_int_equal(fallbacks(), before);
}

__attribute__((noinline)) static void
large_frame(void)
{
    volatile char big[500000];
    big[0] = 1;
    big[sizeof(big) - 1] = 1;
    unwind_test_shoot(&g_shot);
    KEEP_FRAME();
}

static void
test_large_frames_and_frame_pointers(void **state)
{
    (void)state;
    uint64_t before = fallbacks();
    large_frame();
    check_shot(&g_shot, "a 500 kB frame");
    unwind_fp_large_frame(&g_shot);
    check_shot(&g_shot, "a 300 kB frame with rbp");
    for (int bytes = 16; bytes < 100000; bytes *= 7) {
        unwind_fp_alloca(&g_shot, bytes);
        check_shot(&g_shot, "alloca");
    }
    assert_int_equal(fallbacks(), before);
}

static void
test_cpp_exceptions(void **state)
{
    (void)state;
    uint64_t before = fallbacks();
    unwind_cpp_in_catch(&g_shot);
    check_shot(&g_shot, "in a catch block");
    unwind_cpp_in_cleanup(&g_shot);
    check_shot(&g_shot, "in a destructor run by a throw");
    unwind_cpp_rethrown(&g_shot);
    check_shot(&g_shot, "after a rethrow");
    assert_int_equal(fallbacks(), before);
}

static void
on_usr1(int sig, siginfo_t *info, void *ctx)
{
    (void)sig, (void)info, (void)ctx;
    unwind_test_shoot(&g_shot);
}

__attribute__((noinline)) static void
raise_usr1(void)
{
    raise(SIGUSR1);
    KEEP_FRAME();
}

static void
test_signal_handlers(void **state)
{
    (void)state;
    struct sigaction sa = {.sa_sigaction = on_usr1, .sa_flags = SA_SIGINFO}, old;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
    uint64_t before = fallbacks();
    raise_usr1();
    check_shot(&g_shot, "a signal handler");
    /* On an alternate stack: the interrupted frames are on another stack than the handler's. */
    static char alt[1 << 16];
    stack_t ss = {.ss_sp = alt, .ss_size = sizeof(alt)}, old_ss;
    assert_int_equal(sigaltstack(&ss, &old_ss), 0);
    sa.sa_flags |= SA_ONSTACK;
    assert_int_equal(sigaction(SIGUSR1, &sa, NULL), 0);
    raise_usr1();
    check_shot(&g_shot, "a signal handler on sigaltstack");
    assert_int_equal(fallbacks(), before);
    assert_int_equal(sigaltstack(&old_ss, NULL), 0);
    assert_int_equal(sigaction(SIGUSR1, &old, NULL), 0);
}

/* A profiling timer interrupts busy code anywhere; each handler compares at once. */
#define SAMPLES 300
static volatile sig_atomic_t g_samples, g_mismatches;
static struct unwind_shot g_bad;

static void
on_prof(int sig)
{
    (void)sig;
    static struct unwind_shot s;
    unwind_test_shoot(&s);
    if (shot_differs(&s) >= 0 && g_mismatches++ == 0)
        g_bad = s;
    g_samples++;
}

__attribute__((noinline)) static unsigned
busy_leaf(unsigned x)
{
    unsigned r = x;
    for (unsigned i = 0; i < 50; i++)
        r = r * 31u + i;
    return r;
}

static void
test_signal_interrupts_anywhere(void **state)
{
    (void)state;
    struct sigaction sa = {.sa_handler = on_prof}, old;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGPROF, &sa, &old), 0);
    struct itimerval every = {{0, 200}, {0, 200}}, off = {{0, 0}, {0, 0}};
    assert_int_equal(setitimer(ITIMER_PROF, &every, NULL), 0);
    volatile unsigned sink = 0;
    while (g_samples < SAMPLES)
        sink += unwind_fp_busy(1000) + busy_leaf(sink);
    assert_int_equal(setitimer(ITIMER_PROF, &off, NULL), 0);
    assert_int_equal(sigaction(SIGPROF, &old, NULL), 0);
    if (g_mismatches > 0)
        check_shot(&g_bad, "a profiling signal");
    printf("%d interrupted stacks compared\n", (int)g_samples);
}

static void *
thread_main(void *arg)
{
    recurse(5);
    (void)arg;
    return NULL;
}

static void
test_thread(void **state)
{
    (void)state;
    uint64_t before = fallbacks();
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, thread_main, NULL), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    check_shot(&g_shot, "another thread");
    assert_int_equal(fallbacks(), before);
}

__attribute__((noinline)) static void
truncated(int depth, int max, void *f[][16], int *n)
{
    if (depth > 0) {
        truncated(depth - 1, max, f, n);
        KEEP_FRAME();
        return;
    }
    for (int k = 0; k < g_unwinders; k++) /* one call site */
        n[k] = g_fns[k] != NULL ? g_fns[k](f[k], max) : -1;
    KEEP_FRAME();
}

static void
test_truncated(void **state)
{
    (void)state;
    void *f[UNWINDERS][16];
    int n[UNWINDERS];
    for (int max = 0; max <= 16; max += 4) {
        truncated(40, max, f, n);
        for (int k = 0; k < UNWINDERS; k++) {
            if (n[k] < 0)
                continue;
            assert_int_equal(n[k], max);
            assert_memory_equal(f[k], f[CUPROF], (size_t)max * sizeof(void *));
        }
    }
}

#ifdef UNWIND_RELOAD_A
typedef void (*reload_entry_fn)(void (*)(void));

static void
reload_shoot(void)
{
    unwind_test_shoot(&g_shot);
}

/* Opens `path`, captures through its lib_entry and closes it again; its lib_entry's address. */
__attribute__((noinline)) static uintptr_t
reload_through(const char *path)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(lib);
    void *sym = dlsym(lib, "lib_entry");
    assert_non_null(sym);
    reload_entry_fn entry;
    memcpy(&entry, &sym, sizeof(entry));
    entry(reload_shoot);
    KEEP_FRAME();
    assert_int_equal(dlclose(lib), 0);
    return (uintptr_t)sym;
}

/* cuprof's frames against libgcc's alone: libunwind's per-thread cache is what goes stale. */
static bool
reload_same_as_libgcc(void)
{
    return g_shot.n[LIBGCC] == g_shot.n[CUPROF] &&
           memcmp(g_shot.f[LIBGCC], g_shot.f[CUPROF], (size_t)g_shot.n[CUPROF] * sizeof(void *)) ==
               0;
}

/* A library unloaded and another loaded at its address, whose lib_entry has another frame size:
 * with the old rules cuprof's walk ends at the first one's decoy, and once the rules are
 * forgotten it follows the second one's frame like libgcc. */
static void
test_reload_same_address(void **state)
{
    (void)state;
    struct unwind_stats st;
    uintptr_t a = reload_through(UNWIND_RELOAD_A);
    assert_true(reload_same_as_libgcc());
    if (reload_through(UNWIND_RELOAD_B) != a) {
        skip(); /* the loader put the second library elsewhere: nothing to compare */
        return;
    }
    bool stale = !reload_same_as_libgcc();
    assert_int_equal(reload_through(UNWIND_RELOAD_A), a);
    unwind_get_stats(&st);
    uint32_t gen = st.generation;
    unwind_forget_rules();
    unwind_get_stats(&st);
    assert_int_equal(st.generation, gen + 1);
    assert_int_equal(reload_through(UNWIND_RELOAD_B), a);
    if (!reload_same_as_libgcc()) {
        print_frames(g_names[CUPROF], g_shot.f[CUPROF], g_shot.n[CUPROF]);
        print_frames(g_names[LIBGCC], g_shot.f[LIBGCC], g_shot.n[LIBGCC]);
        fail_msg("the rules of the unloaded library were used after unwind_forget_rules");
    }
    /* The test can tell: before the rules were forgotten, the second library's stack was walked
     * with the first one's rule. */
    assert_true(stale);
    /* And the first library again, under a generation where its rule was never read. */
    unwind_forget_rules();
    assert_int_equal(reload_through(UNWIND_RELOAD_A), a);
    assert_true(reload_same_as_libgcc());
}
#endif

/* unwind_caller_context: plain code, a thread, a deep stack, signal handlers (on the thread's
 * stack and on a small alternate one), and a frame without CFI. */
static volatile int g_context = -1;

__attribute__((noinline)) static void
context_here(void)
{
    g_context = (int)unwind_caller_context();
    KEEP_FRAME();
}

__attribute__((noinline)) static void
context_deep(int depth)
{
    if (depth == 0)
        context_here();
    else
        context_deep(depth - 1);
    KEEP_FRAME();
}

static void
on_usr2(int sig)
{
    (void)sig;
    context_here();
}

static void *
context_thread(void *arg)
{
    (void)arg;
    context_here();
    return NULL;
}

#ifdef __x86_64__
/* Calls its argument from a frame that has no FDE: no unwinder's rules can step it. */
void no_cfi_call(void (*fn)(void));
__asm__(".text\n"
        ".globl no_cfi_call\n"
        ".hidden no_cfi_call\n"
        ".type no_cfi_call, @function\n"
        "no_cfi_call:\n"
        "    sub $8, %rsp\n"
        "    call *%rdi\n"
        "    add $8, %rsp\n"
        "    ret\n"
        ".size no_cfi_call, .-no_cfi_call\n");
#endif

static void
test_caller_context(void **state)
{
    (void)state;
#ifndef __x86_64__
    context_here();
    assert_int_equal(g_context, UNWIND_CONTEXT_UNKNOWN);
    skip();
#else
    context_here();
    assert_int_equal(g_context, UNWIND_CONTEXT_PLAIN);
    context_deep(3000); /* past any frame limit of a captured stack */
    assert_int_equal(g_context, UNWIND_CONTEXT_PLAIN);
    pthread_t t;
    g_context = -1;
    assert_int_equal(pthread_create(&t, NULL, context_thread, NULL), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(g_context, UNWIND_CONTEXT_PLAIN);
    struct sigaction sa = {.sa_handler = on_usr2}, old;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGUSR2, &sa, &old), 0);
    g_context = -1;
    raise(SIGUSR2);
    assert_int_equal(g_context, UNWIND_CONTEXT_SIGNAL_HANDLER);
    /* A small alternate stack: the walk keeps no frames, so it fits. */
    static char alt[16384];
    stack_t ss = {.ss_sp = alt, .ss_size = sizeof(alt)}, old_ss;
    assert_int_equal(sigaltstack(&ss, &old_ss), 0);
    sa.sa_flags = SA_ONSTACK;
    assert_int_equal(sigaction(SIGUSR2, &sa, NULL), 0);
    g_context = -1;
    raise(SIGUSR2);
    assert_int_equal(g_context, UNWIND_CONTEXT_SIGNAL_HANDLER);
    assert_int_equal(sigaltstack(&old_ss, NULL), 0);
    assert_int_equal(sigaction(SIGUSR2, &old, NULL), 0);
    no_cfi_call(context_here);
    assert_int_equal(g_context, UNWIND_CONTEXT_UNKNOWN);
#endif
}

/* The unwinder stacks.c picks: libunwind where it loads, cuprof's where it does not. */
static void
test_stacks_choice(void **state)
{
    (void)state;
    enum stacks_unwinder want =
        g_fns[LIBUNWIND] != NULL ? STACKS_UNWINDER_LIBUNWIND : STACKS_UNWINDER_CUPROF;
    assert_int_equal(stacks_unwinder(), want);
    printf("stacks unwinder: %s\n", want == STACKS_UNWINDER_LIBUNWIND ? "libunwind" : "cuprof");
}

/* A forked child walks with cuprof's unwinder whatever the parent used: a parent thread inside
 * libunwind at the fork would leave the child one of its mutexes locked. */
static void
test_stacks_after_fork(void **state)
{
    (void)state;
    uintptr_t ips[8];
    assert_true(stacks_backtrace(0, ips, 8) > 0); /* the parent's choice is made */
    enum stacks_unwinder parent = stacks_unwinder();
    pid_t pid = fork();
    if (pid == 0) {
        stacks_reset_after_fork();
        int bad = stacks_unwinder() != STACKS_UNWINDER_CUPROF;
        bad |= (stacks_backtrace(0, ips, 8) == 0) << 1;
        _exit(bad);
    }
    assert_true(pid > 0);
    int status = -1;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(stacks_unwinder(), parent);
}

static int
setup(void **state)
{
    (void)state;
    if (!unwind_init())
        return -1;
    g_fns[CUPROF] = unwind_backtrace;
    g_fns[LIBGCC] = unwind_libc_backtrace(); /* glibc's, not a sanitizer's interceptor */
    /* Privately, as stacks.c loads it: linked, its _Unwind_* would run this program's throws. */
    void *lib = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    void *sym = lib == NULL ? NULL : dlsym(lib, "unw_backtrace");
    if (sym != NULL)
        memcpy(&g_fns[LIBUNWIND], &sym, sizeof(sym));
    else
        printf("libunwind.so.8 is not installed: cuprof's frames against libgcc's only\n");
    return 0;
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_c_depths),
        cmocka_unit_test(test_large_frames_and_frame_pointers),
        cmocka_unit_test(test_cpp_exceptions),
        cmocka_unit_test(test_signal_handlers),
        cmocka_unit_test(test_signal_interrupts_anywhere),
        cmocka_unit_test(test_thread),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_stacks_choice),
        cmocka_unit_test(test_stacks_after_fork),
        cmocka_unit_test(test_caller_context),
#ifdef UNWIND_RELOAD_A
        cmocka_unit_test(test_reload_same_address),
#endif
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
