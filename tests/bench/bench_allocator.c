/* bench_allocator.c: ns per cached malloc+free pair (small: an exact fit, and with split and
 * merge; large with split and merge; 1 and 2 threads, same and different devices) and RMM's
 * random_allocations workload, each against a glibc malloc+free baseline measured in the same
 * run. Prints `name: value unit (ratio× base)`.
 * Pair figures are medians of REPS repetitions, each timing the glibc baseline right before the
 * candidate, so that a loaded machine slows both sides of a ratio alike.
 * `bench_allocator pairs KIND N` runs N untimed pairs of one kind (glibc, small, small_split,
 * large) after the usual set-up, for instruction counts that load cannot disturb: the
 * difference of two runs under valgrind --tool=callgrind (N and 0), divided by N, is one
 * pair's count (`scripts/bench --instructions` does this). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_clock.h"
#include "allocator/allocator.h"

#define MIB    ((size_t)1 << 20)
#define REPS   7
#define WARMUP 1000

struct bump {
    _Atomic uint64_t next[2];
};

static int
b_alloc(void *ctx, int device, size_t size, uint64_t *addr)
{
    struct bump *b = ctx;
    *addr = atomic_fetch_add(&b->next[device], (size + (2 * MIB - 1)) & ~(2 * MIB - 1));
    return 0;
}

static int
b_free(void *ctx, int device, uint64_t addr, size_t size)
{
    (void)ctx, (void)device, (void)addr, (void)size;
    return 0;
}

static int
b_info(void *ctx, int device, size_t *f, size_t *t)
{
    (void)ctx, (void)device;
    *f = *t = (size_t)1 << 40;
    return 0;
}

static int
b_ev_create(void *ctx, int device, void **ev)
{
    (void)ctx, (void)device;
    *ev = NULL;
    return 1;
}

static int
b_ev(void *ctx, void *ev)
{
    (void)ctx, (void)ev;
    return 0;
}

static int
b_ev_query(void *ctx, void *ev, bool *complete)
{
    (void)ctx, (void)ev;
    *complete = true;
    return 0;
}

static int
b_ev_rec(void *ctx, void *ev, uint64_t s)
{
    (void)ctx, (void)ev, (void)s;
    return 0;
}

static int
b_sync(void *ctx, int device)
{
    (void)ctx, (void)device;
    return 0;
}

static struct allocator *
make(struct bump *b, int devices)
{
    static struct device_ops ops;
    struct alloc_config cfg;
    alloc_config_defaults(&cfg);
    ops = (struct device_ops){.ctx = b,
                              .segment_alloc = b_alloc,
                              .segment_free = b_free,
                              .mem_info = b_info,
                              .event_create = b_ev_create,
                              .event_record = b_ev_rec,
                              .event_query = b_ev_query,
                              .event_synchronize = b_ev,
                              .event_destroy = b_ev,
                              .synchronize = b_sync};
    atomic_store(&b->next[0], 0x7f0000000000ULL);
    atomic_store(&b->next[1], 0x7f0000000000ULL + (1ULL << 40));
    return allocator_create(&cfg, &ops, NULL, devices);
}

/* How a pair meets the cache: PyTorch's two steady states for a repeated request. */
enum pair_kind {
    PAIR_EXACT_FIT, /* a cached block of exactly the size between live ones: no split, no merge */
    PAIR_SPLIT,     /* the free rest of a segment: every malloc splits, every free merges */
};

struct pair_job {
    struct allocator *alloc;
    int device;
    size_t size;
    enum pair_kind kind;
    long n;
    double ns;
};

/* Sets up the cache for j's kind: a live block before the cached one; for an exact fit also one
 * after it, so that the freed block has no free neighbour to merge with. */
static void
pair_prepare(const struct pair_job *j, uint64_t keep[2])
{
    uint64_t p = 0;
    keep[0] = keep[1] = 0;
    if (allocator_malloc(j->alloc, j->device, j->size, 0, 0, &keep[0]) != 0)
        abort();
    if (j->kind == PAIR_EXACT_FIT &&
        (allocator_malloc(j->alloc, j->device, j->size, 0, 0, &p) != 0 ||
         allocator_malloc(j->alloc, j->device, j->size, 0, 0, &keep[1]) != 0 ||
         allocator_free(j->alloc, p, 0) != 0))
        abort();
    for (int i = 0; i < WARMUP; i++) { /* warm-up: caches and branches trained */
        if (allocator_malloc(j->alloc, j->device, j->size, 0, 0, &p) != 0 ||
            allocator_free(j->alloc, p, 0) != 0)
            abort();
    }
}

static void
pair_release(const struct pair_job *j, const uint64_t keep[2])
{
    for (int k = 0; k < 2; k++)
        if (keep[k] != 0 && allocator_free(j->alloc, keep[k], 0) != 0)
            abort();
}

static void *
pair_loop(void *arg)
{
    struct pair_job *j = arg;
    uint64_t keep[2], p = 0;
    pair_prepare(j, keep);
    double t0 = now_ns();
    for (long i = 0; i < j->n; i++) {
        if (allocator_malloc(j->alloc, j->device, j->size, 0, 0, &p) != 0 ||
            allocator_free(j->alloc, p, 0) != 0)
            abort();
    }
    j->ns = (now_ns() - t0) / (double)j->n;
    pair_release(j, keep);
    return NULL;
}

static int
double_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The 50th and 99th percentiles of n pairs timed one by one, less the cost of reading the clock
 * twice. */
static void
pair_percentiles(const struct pair_job *j, long n, double *p50, double *p99)
{
    double *lat = malloc((size_t)n * sizeof(*lat));
    if (lat == NULL)
        abort();
    double clock_cost[REPS];
    for (int r = 0; r < REPS; r++) {
        double t0 = now_ns();
        clock_cost[r] = now_ns() - t0;
    }
    qsort(clock_cost, REPS, sizeof(double), double_cmp);
    uint64_t keep[2], p = 0;
    pair_prepare(j, keep);
    for (long i = 0; i < n; i++) {
        double t0 = now_ns();
        if (allocator_malloc(j->alloc, j->device, j->size, 0, 0, &p) != 0 ||
            allocator_free(j->alloc, p, 0) != 0)
            abort();
        lat[i] = now_ns() - t0 - clock_cost[REPS / 2];
    }
    pair_release(j, keep);
    qsort(lat, (size_t)n, sizeof(*lat), double_cmp);
    *p50 = lat[n / 2];
    *p99 = lat[n * 99 / 100];
    free(lat);
}

static double
glibc_pairs(size_t size, long n)
{
    void *volatile keep = malloc(size);
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        void *volatile p = malloc(size);
        free(p);
    }
    double ns = (now_ns() - t0) / (double)n;
    free(keep);
    return ns;
}

static double
run_pairs(int threads, bool two_devices, size_t size, enum pair_kind kind, long n)
{
    struct bump b;
    struct allocator *a = make(&b, 2);
    pthread_t tid[2];
    struct pair_job job[2];
    for (int t = 0; t < threads; t++) {
        job[t] = (struct pair_job){a, two_devices ? t : 0, size, kind, n, 0};
        pthread_create(&tid[t], NULL, pair_loop, &job[t]);
    }
    double worst = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(tid[t], NULL);
        worst = job[t].ns > worst ? job[t].ns : worst;
    }
    allocator_destroy(a);
    return worst;
}

/* The floor under two threads sharing one device: a cache line passed from one core to the
 * other and back (two threads flipping one flag), in ns a round trip. What it costs depends on
 * where the VM's two vCPUs sit (same core complex or not), so the two-thread figure is also
 * quoted against it, measured in the same run. */
static _Atomic int line_flag;

static void *
line_bouncer(void *arg)
{
    long n = *(const long *)arg;
    for (long i = 0; i < n; i++) {
        while (atomic_load_explicit(&line_flag, memory_order_acquire) != 1) {
        }
        atomic_store_explicit(&line_flag, 0, memory_order_release);
    }
    return NULL;
}

static double
line_round_trip(long n)
{
    pthread_t t;
    atomic_store(&line_flag, 0);
    pthread_create(&t, NULL, line_bouncer, &n);
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        atomic_store_explicit(&line_flag, 1, memory_order_release);
        while (atomic_load_explicit(&line_flag, memory_order_acquire) != 0) {
        }
    }
    double ns = (now_ns() - t0) / (double)n;
    pthread_join(t, NULL);
    return ns;
}

/* RMM's random_allocations: n allocations of random sizes up to 1 MiB, each live allocation
 * freed at a random later point; returns ns per operation (malloc or free). */
static double
random_allocations(struct allocator *a, long n, uint64_t seed)
{
    uint64_t *live = calloc((size_t)n, sizeof(*live));
    void **host = a ? NULL : calloc((size_t)n, sizeof(*host));
    long count = 0, made = 0, ops = 0;
    double t0 = now_ns();
    while (made < n || count > 0) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        bool do_alloc = made < n && (count == 0 || (seed & 1));
        if (do_alloc) {
            size_t size = 1 + (size_t)((seed >> 8) % MIB);
            if (a) {
                if (allocator_malloc(a, 0, size, 0, 0, &live[count]) != 0)
                    abort();
            } else {
                host[count] = malloc(size);
            }
            count++;
            made++;
        } else {
            long i = (long)((seed >> 8) % (uint64_t)count);
            if (a) {
                if (allocator_free(a, live[i], 0) != 0)
                    abort();
                live[i] = live[--count];
            } else {
                free(host[i]);
                host[i] = host[--count];
            }
        }
        ops++;
    }
    double ns = (now_ns() - t0) / (double)ops;
    free(live);
    free(host);
    return ns;
}

static void
line(const char *name, double ns, double base, const char *base_name)
{
    printf("%s: %.1f ns (%.2fx %s)\n", name, ns, ns / base, base_name);
}

/* Median over REPS of (glibc pair, candidate pair) measured back to back; prints the candidate's
 * median ns and the median of the per-repetition ratios. */
static void
pair_figure(const char *name, int threads, bool two_devices, size_t size, enum pair_kind kind,
            long n)
{
    double ns[REPS], ratio[REPS];
    for (int r = 0; r < REPS; r++) {
        double base = glibc_pairs(512, n);
        ns[r] = run_pairs(threads, two_devices, size, kind, n);
        ratio[r] = ns[r] / base;
    }
    printf("%s: %.1f ns (%.2fx glibc_malloc_free)\n", name, median(ns, REPS), median(ratio, REPS));
}

int
main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "pairs") == 0) {
        long pairs = atol(argv[3]);
        if (strcmp(argv[2], "glibc") == 0) {
            glibc_pairs(512, pairs);
            return 0;
        }
        struct pair_job job = {NULL, 0, 512, PAIR_EXACT_FIT, pairs, 0};
        if (strcmp(argv[2], "small_split") == 0) {
            job.kind = PAIR_SPLIT;
        } else if (strcmp(argv[2], "large") == 0) {
            job.size = 5 * MIB;
            job.kind = PAIR_SPLIT;
        } else if (strcmp(argv[2], "small") != 0) {
            fprintf(stderr, "bench_allocator: pairs KIND N: KIND is glibc, small, small_split "
                            "or large\n");
            return 64;
        }
        struct bump b;
        job.alloc = make(&b, 1);
        pair_loop(&job);
        allocator_destroy(job.alloc);
        return 0;
    }
    const long n = 200000;
    double base[REPS];
    for (int r = 0; r < REPS; r++)
        base[r] = glibc_pairs(512, n);
    printf("glibc_malloc_free: %.1f ns (1.00x glibc_malloc_free)\n", median(base, REPS));
    pair_figure("alloc_pair_small_1t", 1, false, 512, PAIR_EXACT_FIT, n);
    pair_figure("alloc_pair_small_split_1t", 1, false, 512, PAIR_SPLIT, n);
    pair_figure("alloc_pair_large_1t", 1, false, 5 * MIB, PAIR_SPLIT, n);
    pair_figure("alloc_pair_small_2t_same_device", 2, false, 512, PAIR_EXACT_FIT, n / 2);
    {
        /* Two threads each making n/2 pairs one after the other, with no cost for sharing,
         * would each see twice the one-thread pair: the floor a lock can reach. */
        double serial[REPS];
        for (int r = 0; r < REPS; r++) {
            double one = run_pairs(1, false, 512, PAIR_EXACT_FIT, n);
            double two = run_pairs(2, false, 512, PAIR_EXACT_FIT, n / 2);
            serial[r] = two / (2 * one);
        }
        printf("alloc_pair_small_2t_same_device_vs_serial: %.2f ratio (%.2fx "
               "two alloc_pair_small_1t)\n",
               median(serial, REPS), median(serial, REPS));
    }
    {
        double trip[REPS], ratio[REPS];
        for (int r = 0; r < REPS; r++) {
            trip[r] = line_round_trip(n / 4);
            ratio[r] = run_pairs(2, false, 512, PAIR_EXACT_FIT, n / 2) / trip[r];
        }
        printf("cache_line_round_trip_2t: %.1f ns (1.00x cache_line_round_trip_2t)\n",
               median(trip, REPS));
        printf("alloc_pair_small_2t_same_device_vs_line: %.2f ratio (%.2fx "
               "cache_line_round_trip_2t)\n",
               median(ratio, REPS), median(ratio, REPS));
    }
    pair_figure("alloc_pair_small_2t_two_devices", 2, true, 512, PAIR_EXACT_FIT, n / 2);
    pair_figure("alloc_pair_large_2t_two_devices", 2, true, 5 * MIB, PAIR_SPLIT, n / 2);
    /* Single pairs timed one by one: the absolute targets are per pair and at the 99th
     * percentile (a tail of lock waits or page faults would show here, not in a mean). */
    {
        struct bump b;
        struct pair_job job = {make(&b, 1), 0, 512, PAIR_EXACT_FIT, 0, 0};
        double p50, p99;
        pair_percentiles(&job, 100000, &p50, &p99);
        line("alloc_pair_small_p50", p50, median(base, REPS), "glibc_malloc_free");
        line("alloc_pair_small_p99", p99, p50, "alloc_pair_small_p50");
        allocator_destroy(job.alloc);
    }
    double per_op_1k = 0;
    const long sizes[] = {1000, 10000, 100000};
    for (int i = 0; i < 3; i++) {
        struct bump b;
        struct allocator *a = make(&b, 1);
        long reps = 300000 / sizes[i];
        double ours = 0, base = 0;
        for (long r = 0; r < reps; r++) {
            ours += random_allocations(a, sizes[i], 88172645463325252ULL + (uint64_t)r);
            base += random_allocations(NULL, sizes[i], 88172645463325252ULL + (uint64_t)r);
        }
        ours /= (double)reps;
        base /= (double)reps;
        char name[64], base_name[64];
        snprintf(name, sizeof(name), "random_allocations_%ldk_per_op", sizes[i] / 1000);
        snprintf(base_name, sizeof(base_name), "glibc_random_allocations_%ldk", sizes[i] / 1000);
        line(name, ours, base, base_name);
        if (i == 0)
            per_op_1k = ours;
        else
            printf("random_allocations_%ldk_vs_1k: %.2f ratio (%.2fx random_allocations_1k)\n",
                   sizes[i] / 1000, ours / per_op_1k, ours / per_op_1k);
        allocator_destroy(a);
    }
    return 0;
}
