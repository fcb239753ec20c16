/* bench_snapshot.c: snapshot write/read speed and size: pickle write rate at 10^5 and 10^6
 * entries, 100k entries with 10k distinct stacks, JSON for comparison, bytes per entry in the
 * file and in the model; raw memcpy of the same bytes is the baseline.
 * Lines: `name: value unit (ratio× baseline)`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "allocator/trace_sink.h"
#include "snapshot/snapshot_arena.h"
#include "snapshot/snapshot_read.h"
#include "snapshot/snapshot_write.h"

#define DEPTH 16

static double
now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* `entries` trace entries on one device over `stacks` distinct stacks of DEPTH frames. */
static struct snapshot *
make_model(size_t entries, size_t stacks)
{
    struct snapshot *s = snapshot_create(1);
    if (s == NULL || snapshot_reserve_entries(s, 0, entries) != 0)
        exit(1);
    uint32_t *ids = malloc(stacks * sizeof(*ids));
    uint32_t f[DEPTH];
    char name[64];
    for (size_t k = 0; k < stacks; k++) {
        for (size_t d = 0; d < DEPTH; d++) {
            /* Shared outer frames, distinct innermost ones: like real call trees. */
            snprintf(name, sizeof(name), "function_%zu_%zu", d, d < 2 ? k : k % 50);
            if (snapshot_add_frame(s, name, "/home/user/project/src/model/layers.cpp",
                                   (int64_t)(100 + d), &f[d]) != 0)
                exit(1);
        }
        if (snapshot_add_stack(s, f, DEPTH, &ids[k]) != 0)
            exit(1);
    }
    for (size_t i = 0; i < entries; i++) {
        struct snap_entry e = {.action = (uint8_t)(i % 2 ? TRACE_FREE_COMPLETED : TRACE_ALLOC),
                               .addr = 0x7f3a00000000ull + 512 * (i % 4096),
                               .size = 512 + i % 100000,
                               .stream = 0,
                               .stack = ids[(i / 2) % stacks],
                               .has_time = true,
                               .time_us = 1700000000000000 + (int64_t)i};
        if (snapshot_add_entry(s, 0, &e) != 0)
            exit(1);
    }
    free(ids);
    return s;
}

/* Best of `reps` runs. */
static double
time_write(const struct snapshot *s, enum snapshot_format fmt, int reps, size_t *bytes)
{
    double best = 1e9;
    for (int r = 0; r < reps; r++) {
        unsigned char *out;
        double t0 = now();
        if (snapshot_write_mem(s, fmt, &out, bytes) != 0)
            exit(1);
        double t = now() - t0;
        free(out);
        best = t < best ? t : best;
    }
    return best;
}

static double
time_memcpy(size_t bytes)
{
    unsigned char *a = malloc(bytes), *b = malloc(bytes);
    memset(a, 1, bytes);
    memset(b, 0, bytes);
    double t0 = now();
    memcpy(b, a, bytes);
    double t = now() - t0;
    volatile unsigned char sink = b[bytes / 2];
    (void)sink;
    free(a);
    free(b);
    return t > 1e-9 ? t : 1e-9;
}

int
main(void)
{
    size_t bytes = 0;
    for (size_t n = 100000; n <= 1000000; n *= 10) {
        struct snapshot *s = make_model(n, 1000);
        double t = time_write(s, SNAPSHOT_FORMAT_PICKLE, 3, &bytes);
        printf("pickle_write_rate_%zuk: %.0f entries/s (%.2fx memcpy_same_bytes)\n", n / 1000,
               (double)n / t, t / time_memcpy(bytes));
        printf("pickle_bytes_per_entry_%zuk: %.1f bytes\n", n / 1000, (double)bytes / (double)n);
        if (n == 1000000)
            printf("model_bytes_per_entry: %.1f bytes\n",
                   (double)(n * sizeof(struct snap_entry) + snapshot_arena_bytes(s->arena)) /
                       (double)n);
        if (n == 100000) {
            /* JSON repeats every frame list in full (no memo): sized at 10^5 only. */
            t = time_write(s, SNAPSHOT_FORMAT_JSON, 1, &bytes);
            printf("json_write_rate_100k: %.0f entries/s\n", (double)n / t);
            printf("json_bytes_per_entry_100k: %.1f bytes\n", (double)bytes / (double)n);
        }
        snapshot_free(s);
    }
    struct snapshot *s = make_model(100000, 10000);
    double t = time_write(s, SNAPSHOT_FORMAT_PICKLE, 3, &bytes);
    printf("pickle_write_100k_entries_10k_stacks: %.1f ms (%.2fx target_100ms)\n", t * 1e3,
           t * 1e3 / 100.0);
    unsigned char *data;
    size_t len;
    if (snapshot_write_mem(s, SNAPSHOT_FORMAT_PICKLE, &data, &len) != 0)
        return 1;
    struct snapshot *r = NULL;
    char err[256];
    double t0 = now();
    if (snapshot_read_mem(data, len, "bench", &r, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    printf("pickle_read_100k_entries_10k_stacks: %.1f ms\n", (now() - t0) * 1e3);
    snapshot_free(r);
    free(data);
    snapshot_free(s);
    return 0;
}
