/* bench_history.c: costs of the history hot path, printed as `name: value unit (ratio baseline)`
 * lines for scripts/bench: stack capture at depths 8/32/64 against raw unw_backtrace in the same
 * run; the same captures with libunwind hidden (as on a machine without it: cuprof's unwinder)
 * and with libgcc's unwinder for every stack, against the captures with libunwind, each unwinder
 * in a child process of its own (the choice is made once per process), alternated round by round;
 * intern hits, ring appends, and bytes per history entry (measured RSS of a full ring). Usage:
 * bench_history   (bench_history --child-capture UNWINDER DEPTH is its own child) */
#include <dlfcn.h>
#include <errno.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_clock.h"
#include "snapshot/stacks.h"
#include "snapshot/symbolize.h"
#include "snapshot/trace_ring.h"

#define REPS 7

enum what { RAW_UNWIND, CAPTURE };

static volatile uint32_t g_sink;

/* libunwind's unw_backtrace, dlopen'ed privately as cuprof does: linked, libunwind's exports
 * (backtrace, _Unwind_*) would replace glibc's and libgcc's in this program, and the capture
 * with libunwind hidden would be libunwind's all the same. */
static int (*unw_backtrace)(void **, int);

static bool
load_unw_backtrace(void)
{
    void *lib = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    void *sym = lib == NULL ? NULL : dlsym(lib, "unw_backtrace");
    if (sym == NULL) {
        fprintf(stderr, "bench_history: libunwind.so.8 cannot be loaded: no libunwind figures\n");
        return false;
    }
    memcpy(&unw_backtrace, &sym, sizeof(sym));
    return true;
}

/* Times `iters` stack walks of `depth` frames, from `frames` deep in this recursion. */
__attribute__((noinline)) static double
walk_at_depth(int frames, enum what what, int depth, int iters)
{
    if (frames > 0) {
        double r = walk_at_depth(frames - 1, what, depth, iters);
        __asm__ volatile("" ::: "memory");
        return r;
    }
    void *buf[STACKS_MAX_DEPTH + 8];
    double t0 = now_ns();
    for (int i = 0; i < iters; i++) {
        if (what == RAW_UNWIND)
            g_sink = (uint32_t)unw_backtrace(buf, depth);
        else
            g_sink = stacks_capture(0);
    }
    return (now_ns() - t0) / iters;
}

static double
bench_walk(enum what what, int depth, int iters)
{
    double v[REPS];
    stacks_configure(STACKS_ALL, (unsigned)depth);
    (void)walk_at_depth(depth, what, depth, 100); /* warm: unwinder cache, interned stack */
    for (int r = 0; r < REPS; r++)
        v[r] = walk_at_depth(depth, what, depth, iters);
    return median(v, REPS);
}

/* ---- one unwinder per process ---- */

#define CHILD_BATCHES  5
#define CHILD_BATCH_NS 10e6 /* a batch of captures lasts about 10 ms, whatever the unwinder */

/* In the child: captures at `depth` with the unwinders from `first` on; prints the median ns of
 * CHILD_BATCHES batches. */
static int
child_capture(enum stacks_unwinder first, int depth)
{
    if (stacks_set_first_unwinder(first) != 0)
        return 1;
    stacks_configure(STACKS_ALL, (unsigned)depth);
    double one = walk_at_depth(depth, CAPTURE, depth, 100); /* warm, and a first estimate */
    int iters = one > 0 ? (int)(CHILD_BATCH_NS / one) : 10000;
    iters = iters < 10 ? 10 : iters > 200000 ? 200000 : iters;
    double v[CHILD_BATCHES];
    for (int r = 0; r < CHILD_BATCHES; r++)
        v[r] = walk_at_depth(depth, CAPTURE, depth, iters);
    printf("%.3f %d\n", median(v, CHILD_BATCHES), (int)stacks_unwinder());
    return 0;
}

extern char **environ;

/* The child's median ns a capture; *chosen: the unwinder it ended up with. */
static double
run_child(const char *unwinder, int depth, enum stacks_unwinder *chosen)
{
    char depth_s[16];
    snprintf(depth_s, sizeof(depth_s), "%d", depth);
    char *argv[] = {"bench_history", "--child-capture", (char *)unwinder, depth_s, NULL};
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_addclose(&fa, fds[1]);
    pid_t pid;
    int rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    char out[64] = "";
    size_t len = 0;
    ssize_t got;
    while (
        rc == 0 && len < sizeof(out) - 1 &&
        ((got = read(fds[0], out + len, sizeof(out) - 1 - len)) > 0 || (got < 0 && errno == EINTR)))
        len += got > 0 ? (size_t)got : 0;
    close(fds[0]);
    out[len] = '\0';
    int status = 0;
    while (rc == 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || len == 0) {
        fprintf(stderr, "bench_history: child %s %d failed\n", unwinder, depth);
        exit(1);
    }
    char *end;
    double ns = strtod(out, &end);
    *chosen = (enum stacks_unwinder)strtol(end, NULL, 10);
    return ns;
}

/* The capture with libunwind, without it (cuprof's unwinder), and with libgcc's unwinder for
 * every stack (what a machine without libunwind got before cuprof's unwinder), alternated REPS
 * times at each depth; ratios are the medians of the rounds' own. */
static void
bench_unwinders(void)
{
    const int depths[] = {8, 32, 64};
    for (size_t i = 0; i < sizeof(depths) / sizeof(depths[0]); i++) {
        int d = depths[i];
        double with[REPS], without[REPS], gcc[REPS], ratio[REPS], gcc_ratio[REPS];
        enum stacks_unwinder got = STACKS_UNWINDER_LIBUNWIND, ignored;
        for (int r = 0; r < REPS; r++) {
            with[r] = run_child("libunwind", d, &got);
            without[r] = run_child("no_libunwind", d, &ignored);
            gcc[r] = run_child("libgcc", d, &ignored);
            ratio[r] = without[r] / with[r];
            gcc_ratio[r] = gcc[r] / (got == STACKS_UNWINDER_LIBUNWIND ? with[r] : without[r]);
        }
        if (got !=
            STACKS_UNWINDER_LIBUNWIND) { /* a machine without libunwind (scripts/gpu-check) */
            printf("stack_capture_d%d_no_libunwind: %.1f ns\n", d, median(without, REPS));
            printf("stack_capture_d%d_libgcc: %.1f ns (%.2fx stack_capture_d%d_no_libunwind)\n", d,
                   median(gcc, REPS), median(gcc_ratio, REPS), d);
            continue;
        }
        printf("stack_capture_d%d_libunwind: %.1f ns\n", d, median(with, REPS));
        printf("stack_capture_d%d_no_libunwind: %.1f ns (%.2fx stack_capture_d%d_libunwind)\n", d,
               median(without, REPS), median(ratio, REPS), d);
        printf("stack_capture_d%d_libgcc: %.1f ns (%.2fx stack_capture_d%d_libunwind)\n", d,
               median(gcc, REPS), median(gcc_ratio, REPS), d);
        fflush(stdout);
    }
}

static double
bench_intern_hit(int depth, int iters)
{
    uintptr_t ips[STACKS_MAX_DEPTH];
    for (int i = 0; i < depth; i++)
        ips[i] = 0x7f0000001000u + (uintptr_t)i * 0x40u;
    (void)stacks_intern(ips, (size_t)depth);
    double v[REPS];
    for (int r = 0; r < REPS; r++) {
        double t0 = now_ns();
        for (int i = 0; i < iters; i++)
            g_sink = stacks_intern(ips, (size_t)depth);
        v[r] = (now_ns() - t0) / iters;
    }
    return median(v, REPS);
}

static double
bench_ring_append(struct trace_ring *ring, int iters)
{
    struct trace_sink sink = trace_ring_sink(ring);
    double v[REPS];
    for (int r = 0; r < REPS; r++) {
        double t0 = now_ns();
        for (int i = 0; i < iters; i++) {
            struct trace_event e = {.action = TRACE_ALLOC,
                                    .addr = 0x7f0000000000u + (uint64_t)i * 512u,
                                    .size = 512,
                                    .stack_id = 1};
            sink.record(sink.ctx, &e);
        }
        v[r] = (now_ns() - t0) / iters;
    }
    return median(v, REPS);
}

static double
bench_clock(int iters)
{
    double v[REPS];
    struct timespec ts;
    for (int r = 0; r < REPS; r++) {
        double t0 = now_ns();
        for (int i = 0; i < iters; i++) {
            clock_gettime(CLOCK_REALTIME, &ts);
            g_sink = (uint32_t)ts.tv_nsec;
        }
        v[r] = (now_ns() - t0) / iters;
    }
    return median(v, REPS);
}

/* Dump-time costs: creating a symbolizer, resolving unique ips (2000 spread over libc's text, as
 * a program's unique return addresses are), then the same ips again from the cache. */
static void
bench_symbolize(void)
{
    enum { UNIQUE = 2000 };
    double t0 = now_ns();
    struct symbolizer *sym = symbolizer_create();
    double create = now_ns() - t0;
    if (sym == NULL)
        return;
    struct symbolized_frame f[32];
    size_t n = 0;
    uintptr_t base = (uintptr_t)&printf;
    /* The first lookup in a module loads its symbol table and debug info: reported apart. */
    t0 = now_ns();
    if (symbolizer_lookup(sym, base - 64u, f, 32, &n) != 0)
        return;
    double first = now_ns() - t0;
    t0 = now_ns();
    for (int i = 0; i < UNIQUE; i++) {
        if (symbolizer_lookup(sym, base + (uintptr_t)i * 64u, f, 32, &n) != 0)
            break;
    }
    double miss = (now_ns() - t0) / UNIQUE;
    double v[REPS];
    for (int r = 0; r < REPS; r++) {
        t0 = now_ns();
        for (int i = 0; i < UNIQUE; i++)
            g_sink += (uint32_t)symbolizer_lookup(sym, base + (uintptr_t)i * 64u, f, 32, &n);
        v[r] = (now_ns() - t0) / UNIQUE;
    }
    double hit = median(v, REPS);
    printf("history_symbolizer_create: %.1f us\n", create / 1000.0);
    printf("history_symbolize_first_ip_in_module: %.1f us\n", first / 1000.0);
    printf("history_symbolize_unique_ip: %.1f ns\n", miss);
    printf("history_symbolize_cached_ip: %.1f ns (%.4fx symbolize_unique_ip)\n", hit, hit / miss);
    printf("history_symbolize_resolved: %zu ips (%.2fx unique)\n", symbolizer_resolved_count(sym),
           (double)symbolizer_resolved_count(sym) / UNIQUE);
    symbolizer_destroy(sym);
}

static long
rss_bytes(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL)
        return -1;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = -1;
    fclose(f);
    return resident * sysconf(_SC_PAGESIZE);
}

int
main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--child-capture") == 0) {
        enum stacks_unwinder first = strcmp(argv[2], "libunwind") == 0 ? STACKS_UNWINDER_LIBUNWIND
                                     : strcmp(argv[2], "no_libunwind") == 0
                                         ? STACKS_UNWINDER_CUPROF
                                         : STACKS_UNWINDER_LIBGCC;
        return child_capture(first, atoi(argv[3]));
    }
    bench_unwinders();
    bool libunwind = load_unw_backtrace();
    stacks_warm_up();
    const int depths[] = {8, 32, 64};
    double capture32 = 0;
    for (size_t i = 0; i < sizeof(depths) / sizeof(depths[0]); i++) {
        int d = depths[i];
        double cap = bench_walk(CAPTURE, d, 20000);
        if (d == 32)
            capture32 = cap;
        if (libunwind) {
            double raw = bench_walk(RAW_UNWIND, d, 20000);
            printf("history_unw_backtrace_d%d: %.1f ns\n", d, raw);
            printf("history_capture_d%d: %.1f ns (%.2fx unw_backtrace_d%d)\n", d, cap, cap / raw,
                   d);
        } else {
            printf("history_capture_d%d: %.1f ns\n", d, cap);
        }
        printf("history_capture_per_frame_d%d: %.1f ns\n", d, cap / d);
    }
    double hit = bench_intern_hit(32, 1000000);
    printf("history_intern_hit_d32: %.1f ns (%.3fx capture_d32)\n", hit, hit / capture32);

    const size_t entries = 1000000;
    struct trace_ring *ring = trace_ring_create(1, entries, HISTORY_ALL);
    if (ring == NULL) {
        fprintf(stderr, "bench_history: cannot create the ring\n");
        return 1;
    }
    long rss0 = rss_bytes();
    double clk = bench_clock(1000000);
    double app = bench_ring_append(ring, (int)entries);
    long rss1 = rss_bytes();
    printf("history_ring_append: %.1f ns (%.2fx clock_gettime)\n", app, app / clk);
    printf("history_bytes_per_entry: %.1f B (%.2fx sizeof trace_record)\n",
           (double)(rss1 - rss0) / (double)entries,
           (double)(rss1 - rss0) / (double)entries / (double)sizeof(struct trace_record));
    trace_ring_destroy(ring);
    bench_symbolize();
    return 0;
}
