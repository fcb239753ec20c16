/* bench_shim.c: end-to-end cost of libcuprof.so on the simulated device. cudaMalloc+cudaFree pair
 * ns for 4 KiB and 32 MiB under the shim (cache mode with CUPROF_STACKS=alloc at depth 32 and with
 * none, trace mode, off) against the raw simulated pair, off mode once more within one process
 * (the program's bound symbols against the runtime's own functions), and the dump stall: the
 * longest gap between consecutive allocations of one thread while another writes a snapshot of a
 * full 100k-entry history, against the longest gap in an equal window without a dump; and the pair
 * while another thread floods the control socket with TOP requests, against the pair without; and
 * the default configuration's pair (stacks at depth 32) with libunwind and with it hidden, on the
 * simulated device and on the null runtime (tests/bench/null_cuda); and a kernel launch through
 * the pointer cuGetProcAddress hands out (cuprof's wrapper under the shim) on the null driver.
 * The program re-executes itself: a child without LD_PRELOAD measures the baseline and a child
 * under it the candidate, back to back in every repetition, so load slows both sides alike.
 * Prints `name: value unit (ratio× baseline)`; figures are medians of REPS repetitions.
 * Usage: bench_shim [--lib PATH/libcuprof.so] [--sim-path DIR:DIR] [--pairs N]
 *   (defaults: the build tree). --pairs N: only the pair figures and the pair with libunwind
 *   hidden, N pairs a child (N / 10 at 32 MiB): with --sim-path naming NVIDIA's libcudart.so.13
 *   on a machine with a GPU, the real driver's figures (scripts/gpu-check). */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_clock.h"
#include "preload/cuprof.h"

#define KIB           ((size_t)1 << 10)
#define MIB           ((size_t)1 << 20)
#define REPS          7
#define WARMUP        2000
#define CALL_DEPTH    40 /* frames of recursion below every timed cudaMalloc: > CUPROF_STACK_DEPTH */
#define STALL_ENTRIES 100000
#define STALL_LIVE    1000
#define STALL_STAMPS  ((size_t)1 << 22)
#define ENV_COMMON_FLOOD                                                                           \
    "SIMCUDA_MALLOC_US=0", "SIMCUDA_FREE_US=0", "CUPROF_LOG=quiet", "CUPROF_DUMP_ON=none",         \
        "CUPROF_MODE=cache", "CUPROF_STACKS=alloc", "CUPROF_STACK_DEPTH=32"

extern char **environ;

static void
die(const char *what, int rc)
{
    fprintf(stderr, "bench_shim: %s failed (%d)\n", what, rc);
    exit(1);
}

static void
pair(size_t size)
{
    void *p = NULL;
    cudaError_t rc = cudaMalloc(&p, size);
    if (rc != cudaSuccess)
        die("cudaMalloc", (int)rc);
    rc = cudaFree(p);
    if (rc != cudaSuccess)
        die("cudaFree", (int)rc);
}

static double median(double *v, int n);

/* What runs at the bottom of the recursion. */
struct leaf {
    size_t size;
    long n;
    double ns; /* out: per pair */
};

/* One block of the size stays live before the pairs, as in bench_allocator's split pair: under
 * the cache every malloc splits the free rest of that block's segment and every free merges back
 * into it (PyTorch's steady state for a repeated request), so the two count the same work. */
static void
leaf_pairs(struct leaf *leaf)
{
    void *neighbour = NULL;
    cudaError_t rc = cudaMalloc(&neighbour, leaf->size);
    if (rc != cudaSuccess)
        die("cudaMalloc", (int)rc);
    for (int i = 0; i < WARMUP; i++)
        pair(leaf->size);
    double t0 = now_ns();
    for (long i = 0; i < leaf->n; i++)
        pair(leaf->size);
    leaf->ns = (now_ns() - t0) / (double)leaf->n;
    rc = cudaFree(neighbour);
    if (rc != cudaSuccess)
        die("cudaFree", (int)rc);
}

/* Recurses `depth` frames, then allocates. Below level 10 each level is one of two functions
 * chosen by a bit of `pattern`, so that patterns give distinct stacks within the kept depth. The
 * volatile read after the call keeps the compiler from turning the recursion into a loop. */
static int deep_b(int depth, unsigned pattern, void (*fn)(void *), void *arg);

__attribute__((noinline)) static int
deep_a(int depth, unsigned pattern, void (*fn)(void *), void *arg)
{
    volatile int keep = depth;
    if (depth == 0) {
        fn(arg);
        return keep;
    }
    int r = (depth < 10 && (pattern >> depth & 1u)) ? deep_b(depth - 1, pattern, fn, arg)
                                                    : deep_a(depth - 1, pattern, fn, arg);
    return r + keep;
}

__attribute__((noinline)) static int
deep_b(int depth, unsigned pattern, void (*fn)(void *), void *arg)
{
    volatile int keep = depth;
    if (depth == 0) {
        fn(arg);
        return keep;
    }
    int r = (depth < 10 && (pattern >> depth & 1u)) ? deep_b(depth - 1, pattern, fn, arg)
                                                    : deep_a(depth - 1, pattern, fn, arg);
    return r - keep;
}

static void
leaf_pairs_cb(void *arg)
{
    leaf_pairs(arg);
}

static int
child_pairs(size_t size, long n)
{
    struct leaf leaf = {size, n, 0};
    (void)deep_a(CALL_DEPTH, 0, leaf_pairs_cb, &leaf);
    printf("%.3f\n", leaf.ns);
    return 0;
}

/* glibc's malloc+free of `size`, through volatile pointers so that neither call is elided. */
static void *(*volatile glibc_malloc)(size_t) = malloc;
static void (*volatile glibc_free)(void *) = free;

static double
glibc_pairs(size_t size, long n)
{
    for (int i = 0; i < WARMUP; i++)
        glibc_free(glibc_malloc(size));
    double t0 = now_ns();
    for (long i = 0; i < n; i++)
        glibc_free(glibc_malloc(size));
    return (now_ns() - t0) / (double)n;
}

/* The CUDA pair and glibc's pair of the same size, alternated in one process (on the null
 * runtime: issue 14's "a runtime that adds nothing of its own"); prints both medians and the
 * median ratio. */
static int
child_null_pairs(size_t size, long n)
{
    /* Many short rounds, alternated; the ratio is the median of the rounds' own ratios, so a
     * burst of load that slows one side of a round moves it little. */
    enum { ROUNDS = 3 * REPS };
    double cuda[ROUNDS], host[ROUNDS], ratio[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        struct leaf leaf = {size, n / 3, 0};
        (void)deep_a(CALL_DEPTH, 0, leaf_pairs_cb, &leaf);
        cuda[r] = leaf.ns;
        host[r] = glibc_pairs(size, n / 3);
        ratio[r] = cuda[r] / host[r];
    }
    printf("%.3f %.3f %.4f\n", median(cuda, ROUNDS), median(host, ROUNDS), median(ratio, ROUNDS));
    return 0;
}

/* Off mode in one process: pairs through the symbols the program binds (cuprof's exports,
 * passing through) alternated with pairs through the runtime's own functions (asked of its
 * handle), so that both sides share the heap, the layout and the load. Prints the medians of
 * both and of the per-repetition ratios. */
typedef cudaError_t (*malloc_fn)(void **, size_t);
typedef cudaError_t (*free_fn)(void *);

static double
pairs_through(malloc_fn volatile m, free_fn volatile f, size_t size, long n)
{
    void *p = NULL;
    for (int i = 0; i < WARMUP; i++)
        if (m(&p, size) != cudaSuccess || f(p) != cudaSuccess)
            die("warm-up pair", 0);
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        if (m(&p, size) != cudaSuccess)
            die("cudaMalloc", 0);
        if (f(p) != cudaSuccess)
            die("cudaFree", 0);
    }
    return (now_ns() - t0) / (double)n;
}

static int
child_off_same_process(size_t size, long n)
{
    void *runtime = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
    if (runtime == NULL)
        die("dlopen libcudart.so.13", 0);
    malloc_fn own_malloc;
    free_fn own_free;
    void *own_malloc_address = dlsym(runtime, "cudaMalloc");
    void *own_free_address = dlsym(runtime, "cudaFree");
    memcpy(&own_malloc, &own_malloc_address, sizeof(own_malloc)); /* POSIX: the same bits */
    memcpy(&own_free, &own_free_address, sizeof(own_free));
    Dl_info where;
    /* The runtime's own functions, not the program's binding (which goes through the shim). */
    if (own_malloc_address == NULL || own_free_address == NULL || own_malloc == cudaMalloc ||
        dladdr(own_malloc_address, &where) == 0 || strstr(where.dli_fname, "libcudart") == NULL)
        die("the runtime's own cudaMalloc", 0);
    void *neighbour = NULL; /* kept live, as in leaf_pairs */
    if (own_malloc(&neighbour, size) != cudaSuccess)
        die("cudaMalloc", 0);
    /* Many short rounds, alternated: a burst of load falls on both sides of a few of them. */
    enum { ROUNDS = 3 * REPS };
    double bound[ROUNDS], own[ROUNDS], ratio[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        own[r] = pairs_through(own_malloc, own_free, size, n / 3);
        bound[r] = pairs_through(cudaMalloc, cudaFree, size, n / 3);
        ratio[r] = bound[r] / own[r];
    }
    if (own_free(neighbour) != cudaSuccess)
        die("cudaFree", 0);
    printf("%.3f %.3f %.4f\n", median(bound, ROUNDS), median(own, ROUNDS), median(ratio, ROUNDS));
    return 0;
}

/* ---- control socket under a request flood ---- */

static void pin_cpu(int which);

static atomic_bool flood_stop;
static atomic_long flood_requests;

/* Asks the process's own control socket for TOP 20 (a copy of the block table and symbolized
 * call sites each time) as fast as it answers. */
static void *
flood_thread(void *arg)
{
    const char *path = arg;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    char buf[65536];
    while (!atomic_load(&flood_stop)) {
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
            if (fd >= 0)
                close(fd);
            continue;
        }
        static const char req[] = "CUPROF/1 TOP 20\n";
        if (write(fd, req, sizeof(req) - 1) == (ssize_t)sizeof(req) - 1)
            while (read(fd, buf, sizeof(buf)) > 0) {
            }
        close(fd);
        atomic_fetch_add(&flood_requests, 1);
    }
    return NULL;
}

/* Puts every other thread of the process (the control thread, the flood) on the first CPU, so
 * the timed thread has the second to itself and meets the server only through cuprof's locks. */
static void
other_threads_to_cpu0(void)
{
    cpu_set_t set, one;
    if (sched_getaffinity(0, sizeof(set), &set) != 0 || CPU_COUNT(&set) < 2)
        return;
    int first = 0;
    while (!CPU_ISSET(first, &set))
        first++;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    DIR *dir = opendir("/proc/self/task");
    struct dirent *e;
    pid_t self = (pid_t)syscall(SYS_gettid);
    while (dir != NULL && (e = readdir(dir)) != NULL) {
        pid_t tid = (pid_t)atoi(e->d_name);
        if (tid > 0 && tid != self)
            (void)sched_setaffinity(tid, sizeof(one), &one);
    }
    if (dir != NULL)
        closedir(dir);
}

/* Pairs timed while (with `flood`) another thread floods the control socket with requests. */
static int
child_flood(size_t size, long n, bool flood)
{
    pair(size); /* the first CUDA call opens the control socket */
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    static char path[4096];
    snprintf(path, sizeof(path), "%s/cuprof/%ld.sock", xdg ? xdg : "/tmp", (long)getpid());
    pthread_t t;
    if (flood && pthread_create(&t, NULL, flood_thread, path) != 0)
        die("pthread_create", 0);
    pin_cpu(1);
    other_threads_to_cpu0();
    struct leaf leaf = {size, n, 0};
    (void)deep_a(CALL_DEPTH, 0, leaf_pairs_cb, &leaf);
    atomic_store(&flood_stop, true);
    if (flood)
        pthread_join(t, NULL);
    printf("%.3f %ld\n", leaf.ns, atomic_load(&flood_requests));
    return 0;
}

/* ---- dump stall ---- */

/* The allocating thread's clock after every pair, and whether it slept (a voluntary context
 * switch: in cache mode only a contended cuprof lock puts it to sleep) since the previous one. */
struct stamps {
    double *t;
    unsigned char *slept;
    atomic_size_t count;
    atomic_bool stop;
};

/* Pins the calling thread to the `which`-th CPU it may use, when there are two, so that the
 * allocating thread and the dumping thread do not take turns on one CPU. (SCHED_FIFO is not used:
 * sandboxed kernels throttle it to a crawl.) */
static void
pin_cpu(int which)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) != 0 || CPU_COUNT(&set) < 2)
        return;
    for (int cpu = 0, seen = 0; cpu < CPU_SETSIZE; cpu++) {
        if (CPU_ISSET(cpu, &set) && seen++ == which) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            (void)pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
            return;
        }
    }
}

static long
voluntary_switches(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nvcsw : 0;
}

static void *
stall_worker(void *arg)
{
    struct stamps *s = arg;
    size_t i = 0;
    pin_cpu(0);
    long switches = voluntary_switches();
    while (!atomic_load_explicit(&s->stop, memory_order_relaxed) && i < STALL_STAMPS) {
        pair(4 * KIB);
        s->t[i] = now_ns();
        long now = voluntary_switches();
        s->slept[i++] = now != switches;
        switches = now;
    }
    atomic_store(&s->count, i);
    return NULL;
}

/* Longest gap between consecutive stamps among the gaps overlapping [t0, t1]; with `slept`, only
 * gaps in which the thread slept. */
static double
max_gap(const struct stamps *s, double t0, double t1, bool slept)
{
    double worst = 0;
    size_t n = atomic_load(&s->count);
    for (size_t i = 1; i < n; i++) {
        if (s->t[i] > t0 && s->t[i - 1] < t1 && s->t[i] - s->t[i - 1] > worst &&
            (!slept || s->slept[i]))
            worst = s->t[i] - s->t[i - 1];
    }
    return worst;
}

static void
sleep_ns(double ns)
{
    struct timespec ts = {(time_t)(ns / 1e9), (long)((long long)ns % 1000000000LL)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

struct window {
    double gap;     /* longest gap between two pairs */
    double blocked; /* longest gap in which the allocating thread slept */
    double took;    /* length of the window */
};

/* One window with an allocating thread: dumps to `path` (or, for NULL, sleeps `length` ns). */
static struct window
stall_window(struct stamps *s, const char *path, double length)
{
    pthread_t tid;
    atomic_store(&s->count, 0);
    atomic_store(&s->stop, false);
    if (pthread_create(&tid, NULL, stall_worker, s) != 0)
        die("pthread_create", 0);
    sleep_ns(5e6);
    double t0 = now_ns();
    if (path != NULL) {
        int rc = cuprof_dump_snapshot(path);
        if (rc != CUPROF_SUCCESS)
            die("cuprof_dump_snapshot", rc);
    } else {
        sleep_ns(length);
    }
    double t1 = now_ns();
    sleep_ns(2e6);
    atomic_store(&s->stop, true);
    pthread_join(tid, NULL);
    if (path != NULL)
        unlink(path);
    return (struct window){max_gap(s, t0, t1, false), max_gap(s, t0, t1, true), t1 - t0};
}

struct fill {
    long n;
    void **live;
};

static void
fill_one(void *arg)
{
    struct fill *f = arg;
    /* Some blocks stay live, so the dump has a block table to copy as well as the ring. */
    if (f->n < STALL_LIVE) {
        cudaError_t rc = cudaMalloc(&f->live[f->n], 4 * KIB + (size_t)f->n * 512);
        if (rc != cudaSuccess)
            die("cudaMalloc", (int)rc);
    } else {
        pair(4 * KIB + (size_t)(f->n % 64) * 512);
    }
}

/* Under the shim with CUPROF_MAX_ENTRIES=STALL_ENTRIES: fills the ring from 1024 call sites
 * (overflowing it, so it is full), then alternates windows with and without a dump. Prints
 * "gap_without gap_with blocked_with dump_ns" (ns) per repetition. */
static int
child_stall(const char *dir)
{
    static void *live[STALL_LIVE];
    struct fill f = {0, live};
    for (f.n = 0; f.n < STALL_ENTRIES; f.n++)
        (void)deep_a(CALL_DEPTH, (unsigned)f.n & 1023u, fill_one, &f);
    char path[4096];
    snprintf(path, sizeof(path), "%s/stall.pickle", dir);
    struct stamps s = {calloc(STALL_STAMPS, sizeof(double)), calloc(STALL_STAMPS, 1), 0, false};
    if (s.t == NULL || s.slept == NULL)
        die("calloc", 0);
    pin_cpu(1);
    (void)stall_window(&s, path, 0); /* warm-up: first symbolization of every module */
    for (int r = 0; r < REPS; r++) {
        struct window with = stall_window(&s, path, 0);
        struct window without = stall_window(&s, NULL, with.took);
        printf("%.0f %.0f %.0f %.0f\n", without.gap, with.gap, with.blocked, with.took);
    }
    free(s.t);
    free(s.slept);
    for (int i = 0; i < STALL_LIVE; i++)
        if (cudaFree(live[i]) != cudaSuccess)
            die("cudaFree", i);
    return 0;
}

/* ---- parent: runs the children ---- */

struct setup {
    const char *lib;
    const char *sim_path;
    const char *tmpdir;
};

/* Runs this program with `args` under environ minus LD_PRELOAD, CUPROF_* and SIMCUDA_*, plus
 * `extra` (NULL-terminated; with the library preloaded when `preload`). Returns its stdout. */
static char *
run_child(const struct setup *st, bool preload, const char *const *extra, const char *const *args)
{
    size_t n_env = 0, n_extra = 0, n_args = 0;
    while (environ[n_env] != NULL)
        n_env++;
    while (extra[n_extra] != NULL)
        n_extra++;
    while (args[n_args] != NULL)
        n_args++;
    char **env = calloc(n_env + n_extra + 4, sizeof(*env));
    char *argv[16];
    static char preload_var[4200], ld_var[8400];
    if (env == NULL || n_args + 2 > sizeof(argv) / sizeof(argv[0]))
        die("child setup", 0);
    size_t k = 0;
    const char *old_ld = getenv("LD_LIBRARY_PATH");
    snprintf(ld_var, sizeof(ld_var), "LD_LIBRARY_PATH=%s%s%s", st->sim_path,
             old_ld != NULL ? ":" : "", old_ld != NULL ? old_ld : "");
    env[k++] = ld_var;
    for (size_t i = 0; i < n_env; i++) {
        const char *e = environ[i];
        if (strncmp(e, "LD_PRELOAD=", 11) != 0 && strncmp(e, "CUPROF_", 7) != 0 &&
            strncmp(e, "SIMCUDA_", 8) != 0 && strncmp(e, "LD_LIBRARY_PATH=", 16) != 0)
            env[k++] = environ[i];
    }
    if (preload) {
        snprintf(preload_var, sizeof(preload_var), "LD_PRELOAD=%s", st->lib);
        env[k++] = preload_var;
    }
    for (size_t i = 0; i < n_extra; i++)
        env[k++] = (char *)extra[i];
    env[k] = NULL;
    argv[0] = "bench_shim";
    for (size_t i = 0; i < n_args; i++)
        argv[i + 1] = (char *)args[i];
    argv[n_args + 1] = NULL;

    int fds[2];
    if (pipe(fds) != 0)
        die("pipe", errno);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_addclose(&fa, fds[1]);
    pid_t pid;
    int rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    if (rc != 0)
        die("posix_spawn", rc);
    close(fds[1]);
    size_t cap = 4096, len = 0;
    char *out = malloc(cap);
    ssize_t got;
    while (out != NULL && (got = read(fds[0], out + len, cap - len - 1)) != 0) {
        if (got < 0) {
            if (errno == EINTR)
                continue;
            die("read", errno);
        }
        len += (size_t)got;
        if (cap - len < 2)
            out = realloc(out, cap *= 2);
    }
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (out == NULL || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench_shim: child %s %s exited with status %d\n", args[0], args[1],
                status);
        exit(1);
    }
    out[len] = '\0';
    return out;
}

static double
child_number(const struct setup *st, bool preload, const char *const *extra, const char *size,
             const char *n)
{
    const char *args[] = {"--child-pairs", size, n, NULL};
    char *out = run_child(st, preload, extra, args);
    double v = strtod(out, NULL);
    free(out);
    return v;
}

/* Median over REPS of the raw pair and the pair under the shim with `extra`, measured back to
 * back; prints the candidate's median ns with the median of the per-repetition ratios, and the
 * added cost (median candidate minus median raw). */
static void
pair_figure(const struct setup *st, const char *name, const char *const *extra, size_t size, long n)
{
    double raw[REPS], ns[REPS], ratio[REPS];
    char size_s[32], n_s[32];
    snprintf(size_s, sizeof(size_s), "%zu", size);
    snprintf(n_s, sizeof(n_s), "%ld", n);
    const char *const raw_env[] = {"SIMCUDA_MALLOC_US=0", "SIMCUDA_FREE_US=0", NULL};
    for (int r = 0; r < REPS; r++) {
        raw[r] = child_number(st, false, raw_env, size_s, n_s);
        ns[r] = child_number(st, true, extra, size_s, n_s);
        ratio[r] = ns[r] / raw[r];
    }
    const char *base = size < MIB ? "raw_pair_4k" : "raw_pair_32m";
    if (strcmp(st->sim_path, BENCH_NULL_CUDA_PATH) == 0)
        base = size < MIB ? "null_runtime_pair_4k" : "null_runtime_pair_32m";
    double m = median(ns, REPS), mr = median(ratio, REPS), mraw = median(raw, REPS);
    printf("shim_%s: %.1f ns (%.2fx %s)\n", name, m, mr, base);
    printf("shim_%s_added: %.1f ns\n", name, m - mraw);
    fflush(stdout);
}

/* The cached pair through the shim on the null runtime and driver (tests/bench/null_cuda), in
 * cache mode without stacks or history, against glibc's malloc+free of the same size timed in the
 * same process; and the null runtime's own pair without the shim, against the same. */
static void
null_runtime_figures(const struct setup *st, size_t size, const char *name)
{
    struct setup null = *st;
    null.sim_path = BENCH_NULL_CUDA_PATH;
    char size_s[32];
    snprintf(size_s, sizeof(size_s), "%zu", size);
    const char *const env[] = {"CUPROF_LOG=quiet",
                               "CUPROF_DUMP_ON=none",
                               "CUPROF_MODE=cache",
                               "CUPROF_STACKS=none",
                               "CUPROF_HISTORY=off",
                               "CUPROF_CONTROL=off",
                               NULL};
    const char *const raw_env[] = {NULL};
    const char *args[] = {"--child-null-pairs", size_s, "200000", NULL};
    char *out = run_child(&null, true, env, args);
    char *end;
    double shim = strtod(out, &end), host = strtod(end, &end), shim_ratio = strtod(end, NULL);
    free(out);
    out = run_child(&null, false, raw_env, args);
    double raw = strtod(out, &end);
    (void)strtod(end, &end); /* its glibc pair: the ratio is per round */
    double raw_ratio = strtod(end, NULL);
    free(out);
    printf("shim_pair_%s_cache_null_runtime: %.1f ns (%.2fx glibc_malloc_free_%s)\n", name, shim,
           shim_ratio, name);
    printf("null_runtime_pair_%s: %.1f ns (%.2fx glibc_malloc_free_%s)\n", name, raw, raw_ratio,
           name);
    printf("glibc_malloc_free_%s: %.1f ns (1.00x glibc_malloc_free_%s)\n", name, host, name);
    fflush(stdout);
    /* Off mode against the bare null runtime: what interception alone costs where the runtime
     * costs nearly nothing. */
    const char *const off_env[] = {"CUPROF_LOG=quiet", "CUPROF_MODE=off", NULL};
    char fig[64];
    snprintf(fig, sizeof(fig), "pair_%s_off_null_runtime", name);
    pair_figure(&null, fig, off_env, size, 200000);
}

/* `name`: 4k or 32m, with _null_runtime when `st` is the null runtime's. */
static void
off_same_process_figure(const struct setup *st, const char *name, size_t size, long n)
{
    char size_s[32], n_s[32];
    snprintf(size_s, sizeof(size_s), "%zu", size);
    snprintf(n_s, sizeof(n_s), "%ld", n);
    const char *const env[] = {"SIMCUDA_MALLOC_US=0", "SIMCUDA_FREE_US=0", "CUPROF_LOG=quiet",
                               "CUPROF_MODE=off", NULL};
    const char *args[] = {"--child-off-same-process", size_s, n_s, NULL};
    char *out = run_child(st, true, env, args);
    char *end;
    double bound = strtod(out, &end), own = strtod(end, &end), ratio = strtod(end, NULL);
    free(out);
    printf("shim_pair_%s_off_same_process: %.1f ns (%.3fx runtime_own_pair_%s)\n", name, bound,
           ratio, name);
    printf("runtime_own_pair_%s: %.1f ns (1.00x runtime_own_pair_%s)\n", name, own, name);
    fflush(stdout);
}

static void
raw_figure(const struct setup *st, const char *name, size_t size, long n)
{
    double raw[REPS];
    char size_s[32], n_s[32];
    snprintf(size_s, sizeof(size_s), "%zu", size);
    snprintf(n_s, sizeof(n_s), "%ld", n);
    const char *const raw_env[] = {"SIMCUDA_MALLOC_US=0", "SIMCUDA_FREE_US=0", NULL};
    for (int r = 0; r < REPS; r++)
        raw[r] = child_number(st, false, raw_env, size_s, n_s);
    printf("shim_%s: %.1f ns (1.00x %s)\n", name, median(raw, REPS), name);
    fflush(stdout);
}

/* The default configuration's pair (cache mode, CUPROF_STACKS=alloc at depth 32, history on)
 * with libunwind and without it, alternated: a folder first on the library path holds an empty
 * libunwind.so.8, so cuprof's dlopen of it fails as on a machine without libunwind (issue 30:
 * at most 1 us a pair either way). */
static void
unwinder_figure(const struct setup *st, const char *name, size_t size, long n)
{
    static char hide[4200], hidden_path[8400];
    snprintf(hide, sizeof(hide), "%s/no-libunwind", st->tmpdir);
    char fake[4300];
    snprintf(fake, sizeof(fake), "%s/libunwind.so.8", hide);
    FILE *f = mkdir(hide, 0700) == 0 ? fopen(fake, "w") : NULL;
    if (f == NULL)
        die("the folder hiding libunwind", errno);
    fclose(f);
    snprintf(hidden_path, sizeof(hidden_path), "%s:%s", hide, st->sim_path);
    struct setup hidden = *st;
    hidden.sim_path = hidden_path;
    const char *const env[] = {ENV_COMMON_FLOOD, NULL};
    char size_s[32], n_s[32];
    snprintf(size_s, sizeof(size_s), "%zu", size);
    snprintf(n_s, sizeof(n_s), "%ld", n);
    double with[REPS], without[REPS], ratio[REPS];
    for (int r = 0; r < REPS; r++) {
        with[r] = child_number(st, true, env, size_s, n_s);
        without[r] = child_number(&hidden, true, env, size_s, n_s);
        ratio[r] = without[r] / with[r];
    }
    unlink(fake);
    rmdir(hide);
    printf("shim_%s_libunwind: %.1f ns\n", name, median(with, REPS));
    printf("shim_%s_no_libunwind: %.1f ns (%.2fx shim_%s_libunwind)\n", name, median(without, REPS),
           median(ratio, REPS), name);
    fflush(stdout);
}

/* Pairs while the control socket answers a flood of TOP requests, against the same child without
 * them (issue 15: at most 5% slower). */
static void
flood_figure(const struct setup *st)
{
    char xdg[4200];
    snprintf(xdg, sizeof(xdg), "XDG_RUNTIME_DIR=%s", st->tmpdir);
    const char *const env[] = {ENV_COMMON_FLOOD, xdg, NULL};
    double quiet[REPS], flooded[REPS], ratio[REPS], rate[REPS];
    for (int r = 0; r < REPS; r++) {
        const char *a_quiet[] = {"--child-flood", "4096", "200000", "0", NULL};
        const char *a_flood[] = {"--child-flood", "4096", "200000", "1", NULL};
        char *q = run_child(st, true, env, a_quiet);
        char *f = run_child(st, true, env, a_flood);
        char *end;
        quiet[r] = strtod(q, NULL);
        flooded[r] = strtod(f, &end);
        double requests = strtod(end, NULL);
        ratio[r] = flooded[r] / quiet[r];
        rate[r] = requests / (flooded[r] * 200000 / 1e9);
        free(q);
        free(f);
    }
    printf("shim_pair_4k_under_control_flood: %.1f ns (%.3fx pair_4k_control_idle)\n",
           median(flooded, REPS), median(ratio, REPS));
    printf("shim_control_flood_requests: %.0f requests/s\n", median(rate, REPS));
    fflush(stdout);
}

static void
stall_figure(const struct setup *st)
{
    char entries[64];
    snprintf(entries, sizeof(entries), "CUPROF_MAX_ENTRIES=%d", STALL_ENTRIES);
    const char *const env[] = {"SIMCUDA_MALLOC_US=0",
                               "CUPROF_MODE=cache",
                               "CUPROF_STACKS=alloc",
                               "CUPROF_STACK_DEPTH=32",
                               "CUPROF_LOG=quiet",
                               "CUPROF_DUMP_ON=none",
                               entries,
                               NULL};
    const char *args[] = {"--child-stall", st->tmpdir, NULL};
    char *out = run_child(st, true, env, args);
    double without[REPS], with[REPS], blocked[REPS], took[REPS], ratio[REPS], share[REPS];
    char *p = out;
    for (int r = 0; r < REPS; r++) {
        double *fields[] = {&without[r], &with[r], &blocked[r], &took[r]};
        for (int k = 0; k < 4; k++) {
            char *end;
            *fields[k] = strtod(p, &end);
            if (end == p) {
                fprintf(stderr, "bench_shim: bad stall output: %s\n", out);
                exit(1);
            }
            p = end;
        }
        ratio[r] = with[r] / without[r];
        share[r] = blocked[r] / took[r];
    }
    free(out);
    double mtook = median(took, REPS);
    printf("shim_dump_time_100k: %.1f ms\n", mtook / 1e6);
    printf("shim_dump_stall_100k: %.3f ms (%.2fx max_gap_without_dump)\n", median(with, REPS) / 1e6,
           median(ratio, REPS));
    printf("shim_max_gap_without_dump: %.3f ms (1.00x max_gap_without_dump)\n",
           median(without, REPS) / 1e6);
    /* Issue 5's gate for the stall is a share of the whole dump (at most 0.05). */
    printf("shim_dump_blocked_100k: %.3f ms (%.3fx dump_time_100k)\n", median(blocked, REPS) / 1e6,
           median(share, REPS));
    fflush(stdout);
}

/* Launches as NVIDIA's runtime makes them: through the cuLaunchKernel that cuGetProcAddress_v2
 * (found with dlsym on libcuda.so.1) hands out, cuprof's wrapper under the shim; prints the ns a
 * launch of nothing takes (the null driver's launch returns at once). */
static int
child_launches(long n)
{
    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    void *gpa_sym = driver != NULL ? dlsym(driver, "cuGetProcAddress_v2") : NULL;
    PFN_cuGetProcAddress_v12000 gpa = NULL;
    PFN_cuInit_v2000 init = NULL;
    PFN_cuLaunchKernel_v4000 launch = NULL;
    void *fn = NULL;
    if (gpa_sym == NULL)
        die("dlsym cuGetProcAddress_v2", 0);
    memcpy(&gpa, &gpa_sym, sizeof gpa);
    if (gpa("cuInit", &fn, 2000, 0, NULL) != CUDA_SUCCESS || fn == NULL)
        die("cuInit lookup", 0);
    memcpy(&init, &fn, sizeof init);
    if (init(0) != CUDA_SUCCESS || gpa("cuLaunchKernel", &fn, 4000, 0, NULL) != CUDA_SUCCESS ||
        fn == NULL)
        die("cuLaunchKernel lookup", 0);
    memcpy(&launch, &fn, sizeof launch);
    PFN_cuLaunchKernel_v4000 volatile call = launch;
    for (int i = 0; i < WARMUP; i++)
        if (call(NULL, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS)
            die("warm-up launch", 0);
    double t0 = now_ns();
    for (long i = 0; i < n; i++)
        (void)call(NULL, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
    printf("%.3f\n", (now_ns() - t0) / (double)n);
    return 0;
}

/* A launch through the shim (cache mode, the defaults but for quiet logs, no dumps, no control
 * socket) against the null driver's own launch, alternated over REPS children each. */
static void
launch_figure(const struct setup *st)
{
    struct setup null = *st;
    null.sim_path = BENCH_NULL_CUDA_PATH;
    const char *const env[] = {"CUPROF_LOG=quiet", "CUPROF_DUMP_ON=none", "CUPROF_CONTROL=off",
                               NULL};
    const char *const raw_env[] = {NULL};
    const char *args[] = {"--child-launches", "2000000", NULL};
    double raw[REPS], ns[REPS], ratio[REPS];
    for (int r = 0; r < REPS; r++) {
        char *out = run_child(&null, false, raw_env, args);
        raw[r] = strtod(out, NULL);
        free(out);
        out = run_child(&null, true, env, args);
        ns[r] = strtod(out, NULL);
        free(out);
        ratio[r] = ns[r] / raw[r];
    }
    double m = median(ns, REPS), mraw = median(raw, REPS);
    printf("shim_launch_null_driver: %.1f ns (%.2fx null_driver_launch)\n", m, median(ratio, REPS));
    printf("shim_launch_null_driver_added: %.1f ns\n", m - mraw);
    printf("null_driver_launch: %.1f ns (1.00x null_driver_launch)\n", mraw);
    fflush(stdout);
}

#define D32 "CUPROF_STACK_DEPTH=32"
#define ENV_COMMON                                                                                 \
    "SIMCUDA_MALLOC_US=0", "SIMCUDA_FREE_US=0", "CUPROF_LOG=quiet", "CUPROF_DUMP_ON=none"

int
main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--child-pairs") == 0)
        return child_pairs(strtoull(argv[2], NULL, 10), strtol(argv[3], NULL, 10));
    if (argc == 4 && strcmp(argv[1], "--child-null-pairs") == 0)
        return child_null_pairs(strtoull(argv[2], NULL, 10), strtol(argv[3], NULL, 10));
    if (argc == 4 && strcmp(argv[1], "--child-off-same-process") == 0)
        return child_off_same_process(strtoull(argv[2], NULL, 10), strtol(argv[3], NULL, 10));
    if (argc == 3 && strcmp(argv[1], "--child-launches") == 0)
        return child_launches(strtol(argv[2], NULL, 10));
    if (argc == 3 && strcmp(argv[1], "--child-stall") == 0)
        return child_stall(argv[2]);
    if (argc == 5 && strcmp(argv[1], "--child-flood") == 0)
        return child_flood(strtoull(argv[2], NULL, 10), strtol(argv[3], NULL, 10),
                           strcmp(argv[4], "1") == 0);
    struct setup st = {BENCH_LIBCUPROF, BENCH_SIM_PATH, NULL};
    long pairs = 0; /* 0: every figure, 100000 pairs a child */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--lib") == 0 && i + 1 < argc) {
            st.lib = argv[++i];
        } else if (strcmp(argv[i], "--sim-path") == 0 && i + 1 < argc) {
            st.sim_path = argv[++i];
        } else if (strcmp(argv[i], "--pairs") == 0 && i + 1 < argc && atol(argv[i + 1]) > 0) {
            pairs = atol(argv[++i]);
        } else {
            fprintf(stderr, "usage: bench_shim [--lib PATH/libcuprof.so] [--sim-path DIRS] "
                            "[--pairs N]\n");
            return 64;
        }
    }
    char tmpdir[] = "/tmp/bench_shim.XXXXXX";
    if (mkdtemp(tmpdir) == NULL)
        die("mkdtemp", errno);
    st.tmpdir = tmpdir;

    const char *const alloc_env[] = {ENV_COMMON, "CUPROF_MODE=cache", "CUPROF_STACKS=alloc", D32,
                                     NULL};
    const char *const none_env[] = {ENV_COMMON, "CUPROF_MODE=cache", "CUPROF_STACKS=none", NULL};
    const char *const trace_env[] = {ENV_COMMON, "CUPROF_MODE=trace", "CUPROF_STACKS=alloc", D32,
                                     NULL};
    const char *const off_env[] = {ENV_COMMON, "CUPROF_MODE=off", NULL};
    const struct {
        const char *name;
        size_t size;
        long n;
    } sizes[] = {{"4k", 4 * KIB, pairs > 0 ? pairs : 100000},
                 {"32m", 32 * MIB, pairs > 0 ? (pairs + 9) / 10 : 100000}};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char name[64];
        snprintf(name, sizeof(name), "raw_pair_%s", sizes[i].name);
        raw_figure(&st, name, sizes[i].size, sizes[i].n);
        snprintf(name, sizeof(name), "pair_%s_cache_stacks_alloc_d32", sizes[i].name);
        pair_figure(&st, name, alloc_env, sizes[i].size, sizes[i].n);
        snprintf(name, sizeof(name), "pair_%s_cache_stacks_none", sizes[i].name);
        pair_figure(&st, name, none_env, sizes[i].size, sizes[i].n);
        snprintf(name, sizeof(name), "pair_%s_trace_stacks_alloc_d32", sizes[i].name);
        pair_figure(&st, name, trace_env, sizes[i].size, sizes[i].n);
        snprintf(name, sizeof(name), "pair_%s_off", sizes[i].name);
        pair_figure(&st, name, off_env, sizes[i].size, sizes[i].n);
    }
    unwinder_figure(&st, "pair_4k_cache_stacks_alloc_d32", 4 * KIB, sizes[0].n);
    char sockets[4200];
    snprintf(sockets, sizeof(sockets), "%s/cuprof", tmpdir);
    if (pairs > 0) {
        rmdir(sockets);
        rmdir(tmpdir);
        return 0;
    }
    off_same_process_figure(&st, "4k", 4 * KIB, 100000);
    off_same_process_figure(&st, "32m", 32 * MIB, 100000);
    null_runtime_figures(&st, 4 * KIB, "4k");
    /* 32 MiB: only off mode (glibc serves 32 MiB with mmap, no baseline for a cached pair). */
    struct setup null = st;
    null.sim_path = BENCH_NULL_CUDA_PATH;
    /* The default configuration's pair again where the runtime costs nearly nothing: the
     * simulated driver's locks (its context synchronize behind every cudaFree) are not cuprof's
     * cost, and on a slow VM they alone take a few hundred ns (issue 30's 1 us a pair). */
    unwinder_figure(&null, "pair_4k_cache_stacks_alloc_d32_null_runtime", 4 * KIB, 200000);
    const char *const null_off_env[] = {"CUPROF_LOG=quiet", "CUPROF_MODE=off", NULL};
    pair_figure(&null, "pair_32m_off_null_runtime", null_off_env, 32 * MIB, 200000);
    off_same_process_figure(&null, "4k_null_runtime", 4 * KIB, 200000);
    off_same_process_figure(&null, "32m_null_runtime", 32 * MIB, 200000);
    launch_figure(&st);
    stall_figure(&st);
    flood_figure(&st);
    rmdir(sockets);
    rmdir(tmpdir);
    return 0;
}
