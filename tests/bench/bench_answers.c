/* bench_answers.c: `cuprof explain` and `cuprof tune` on histories of 10^5 and 10^6 entries,
 * each against one `cuprof replay` of the recorded settings on the same file, timed in the same
 * run. The histories are real: a training-shaped workload (parameters kept, activations of
 * log-spread sizes made and freed each step, a few kept across steps) through cuprof's own
 * allocator on an in-process device of 16 GiB, recorded by the trace ring and written by the
 * live dump, ending in a request too large for the device (the OOM explain explains).
 * Lines: `name: value unit (ratio× baseline)`. BENCH_ANSWERS_SIZES=100000 picks sizes;
 * BENCH_ANSWERS_WRITE=PATH only writes the first size's history to PATH (to look at by hand). */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "allocator/allocator.h"
#include "allocator/cuprof_errors.h"
#include "snapshot/file_publish.h"
#include "snapshot/snapshot_dump.h"
#include "snapshot/snapshot_write.h"
#include "snapshot/stacks.h"
#include "snapshot/trace_ring.h"

#define MIB      ((uint64_t)1 << 20)
#define CAPACITY ((uint64_t)16 << 30)

extern char **environ;

/* ---- The device: bump-pointer segments, a capacity, events complete at once. */
struct bdev {
    uint64_t next, used;
};

static int
b_alloc(void *ctx, int device, size_t size, uint64_t *addr)
{
    struct bdev *d = ctx;
    (void)device;
    if (d->used + size > CAPACITY)
        return -CUPROF_ENOMEM;
    *addr = d->next;
    d->next += (size + 2 * MIB - 1) / (2 * MIB) * (2 * MIB);
    d->used += size;
    return 0;
}

static int
b_free(void *ctx, int device, uint64_t addr, size_t size)
{
    struct bdev *d = ctx;
    (void)device;
    (void)addr;
    d->used -= size;
    return 0;
}

static int
b_info(void *ctx, int device, size_t *free_bytes, size_t *total)
{
    struct bdev *d = ctx;
    (void)device;
    *free_bytes = CAPACITY - d->used;
    *total = CAPACITY;
    return 0;
}

static int
b_sync(void *ctx, int device)
{
    (void)ctx;
    (void)device;
    return 0;
}

static uint64_t
rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A size spread over 512 B .. 256 MiB, small ones more often. */
static size_t
act_size(uint64_t *s)
{
    unsigned bits = 9 + (unsigned)(rnd(s) % 20); /* 2^9 .. 2^28 */
    return (size_t)((1ull << bits) + rnd(s) % (1ull << bits));
}

static void
must(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "bench_answers: %s failed (%d)\n", what, rc);
        exit(1);
    }
}

/* Records about `entries` trace entries and writes them to path. */
static void
record(size_t entries, const char *path)
{
    struct bdev dev = {.next = 0x7f0000000000ull};
    struct device_ops ops = {.ctx = &dev,
                             .segment_alloc = b_alloc,
                             .segment_free = b_free,
                             .mem_info = b_info,
                             .synchronize = b_sync};
    struct trace_ring *ring = trace_ring_create(1, entries + 10000, HISTORY_ALL);
    struct trace_sink sink = trace_ring_sink(ring);
    struct alloc_config config;
    alloc_config_defaults(&config);
    config.free_sync = FREE_SYNC_NONE;
    struct allocator *a = allocator_create(&config, &ops, &sink, 1);
    if (ring == NULL || a == NULL)
        must(-1, "setup");
    uintptr_t ips[3][2] = {{0x401000, 0x402000}, {0x401100, 0x402000}, {0x401200, 0x402000}};
    uint32_t param = stacks_intern(ips[0], 2), act = stacks_intern(ips[1], 2),
             kept_site = stacks_intern(ips[2], 2);
    uint64_t seed = 27, p[64], acts[48], kept[8] = {0};
    for (int i = 0; i < 64; i++)
        must(allocator_malloc(a, 0, (1 + rnd(&seed) % 64) * MIB, 0, param, &p[i]), "param");
    for (size_t step = 0; trace_ring_end(ring, 0) + 200 < entries; step++) {
        for (int i = 0; i < 48; i++)
            must(allocator_malloc(a, 0, act_size(&seed), step % 3 == 2 ? 7 : 0, act, &acts[i]),
                 "activation");
        int k = (int)(step % 8);
        if (kept[k] != 0)
            must(allocator_free(a, kept[k], 0), "kept free");
        must(allocator_malloc(a, 0, act_size(&seed), 0, kept_site, &kept[k]), "kept");
        for (int i = 47; i >= 0; i--)
            must(allocator_free(a, acts[i], 0), "activation free");
    }
    uint64_t none = 0;
    if (allocator_malloc(a, 0, 2 * CAPACITY, 0, act, &none) != -CUPROF_ENOMEM)
        must(-1, "the final request");
    struct dump_info info = {.mode = "cache", .rank = -1, .alloc_config = &config};
    char chosen[4096];
    must(snapshot_dump_live(a, ring, &info, path, FILE_PUBLISH_REPLACE, chosen, sizeof chosen),
         "dump");
    allocator_destroy(a);
    trace_ring_destroy(ring);
}

/* Seconds one `cuprof ARGS... FILE` takes (its output thrown away), and the CPU seconds its
 * threads used (*cpu: user + system, which load on a shared machine does not inflate). */
static double
timed(const char *const *args, const char *file, double *cpu)
{
    const char *argv[16];
    size_t n = 0;
    argv[n++] = BENCH_CUPROF;
    for (; args[n - 1] != NULL; n++)
        argv[n] = args[n - 1];
    argv[n++] = file;
    argv[n] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid;
    int status = 0;
    struct rusage ru;
    if (posix_spawn(&pid, BENCH_CUPROF, &fa, NULL, (char *const *)argv, environ) != 0 ||
        wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status) > 1)
        must(-1, args[0]);
    *cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    posix_spawn_file_actions_destroy(&fa);
    return (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
}

static void
bench(size_t entries)
{
    char path[] = "/tmp/bench_answers_XXXXXX.pickle";
    int fd = mkstemps(path, 7);
    if (fd < 0)
        must(-1, "a temporary file");
    close(fd);
    record(entries, path);
    size_t k = entries / 1000;
    double rc, ec, tc;
    double replay = timed((const char *const[]){"replay", NULL}, path, &rc);
    double explain = timed((const char *const[]){"explain", NULL}, path, &ec);
    double tune = timed((const char *const[]){"tune", NULL}, path, &tc);
    printf("replay_recorded_%zuk: %.2f s\n", k, replay);
    printf("explain_%zuk: %.2f s (%.2fx replay_recorded_%zuk)\n", k, explain, explain / replay, k);
    printf("tune_%zuk: %.2f s (%.2fx replay_recorded_%zuk)\n", k, tune, tune / replay, k);
    printf("replay_recorded_%zuk_cpu: %.2f s\n", k, rc);
    printf("explain_%zuk_cpu: %.2f s (%.2fx replay_recorded_%zuk_cpu)\n", k, ec, ec / rc, k);
    printf("tune_%zuk_cpu: %.2f s (%.2fx replay_recorded_%zuk_cpu)\n", k, tc, tc / rc, k);
    if (entries >= 1000000)
        printf("tune_%zuk_against_target: %.2f s (%.2fx target_60s)\n", k, tune, tune / 60.0);
    fflush(stdout);
    unlink(path);
}

int
main(void)
{
    const char *sizes = getenv("BENCH_ANSWERS_SIZES");
    if (sizes == NULL)
        sizes = "100000,1000000";
    const char *write = getenv("BENCH_ANSWERS_WRITE");
    if (write != NULL) {
        record((size_t)strtoull(sizes, NULL, 10), write);
        return 0;
    }
    for (const char *p = sizes; *p != '\0';) {
        char *end;
        unsigned long long n = strtoull(p, &end, 10);
        if (end == p || n < 1000)
            must(-1, "BENCH_ANSWERS_SIZES");
        bench((size_t)n);
        p = *end == ',' ? end + 1 : end;
        if (*end != ',' && *end != '\0')
            must(-1, "BENCH_ANSWERS_SIZES");
    }
    return 0;
}
