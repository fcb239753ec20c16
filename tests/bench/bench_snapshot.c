/* bench_snapshot.c: snapshot write/read speed and size: pickle and JSON write rates at 10^5 and
 * 10^6 entries (memcpy of the same bytes is the baseline; JSON into a sink that keeps nothing,
 * into memory, and into a file as snapshot_write_file writes it, against write(2) of its bytes),
 * pickle read rates from a file, in wall and in CPU time (read(2) of the same file is the
 * baseline), 100k entries with 10k distinct stacks, bytes per entry in the file and in the model,
 * and the reading process's peak memory against the file's size. `bench_snapshot --10m` adds the
 * time to open a 10^7-entry history (about 40 s and 2 GB here to build). Lines: `name: value unit
 * (ratio× baseline)`. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

/* The process's CPU time, user and system: what a read costs when no other program waits for
 * the same cores (on a loaded machine the wall time also counts the waits for a core). */
static double
cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
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

static int
discard(void *ctx, const void *buf, size_t len)
{
    (void)ctx;
    (void)buf;
    (void)len;
    return 0;
}

/* The JSON writer's own work: the text goes through its buffer to a sink that keeps nothing
 * (into fresh memory, page faults would dominate on these VMs: 0.1-0.3 GB/s first touch). Best
 * of `reps`. */
static double
time_json(const struct snapshot *s, int reps, size_t *bytes)
{
    double best = 1e9;
    for (int r = 0; r < reps; r++) {
        struct emitter *e = json_emitter_create_cached(discard, NULL, s->stack_count);
        if (e == NULL)
            exit(1);
        double t0 = now();
        int rc = snapshot_emit(s, e);
        if (rc != 0 || emitter_finish(e) != 0)
            exit(1);
        double t = now() - t0;
        *bytes = (size_t)e->bytes_written;
        emitter_destroy(e);
        best = t < best ? t : best;
    }
    return best;
}

/* memcpy of `bytes` bytes between two buffers of at most `chunk` bytes, touched beforehand. */
static double
time_memcpy_in(size_t bytes, size_t chunk)
{
    chunk = bytes < chunk ? bytes : chunk;
    unsigned char *a = malloc(chunk), *b = malloc(chunk);
    if (a == NULL || b == NULL)
        exit(1);
    memset(a, 1, chunk);
    memset(b, 2, chunk); /* not 0: malloc+memset(0) may become an untouched calloc */
    double t0 = now();
    for (size_t done = 0; done < bytes; done += chunk)
        memcpy(b, a, bytes - done < chunk ? bytes - done : chunk);
    double t = now() - t0;
    volatile unsigned char sink = b[chunk / 2];
    (void)sink;
    free(a);
    free(b);
    return t > 1e-9 ? t : 1e-9;
}

static double
time_memcpy(size_t bytes)
{
    return time_memcpy_in(bytes, 256u << 20);
}

static void
write_all(const char *path, const unsigned char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

/* The same bytes put in place with snapshot_write_file's I/O, as if formatting were free:
 * write(2) EMITTER_BUFFER bytes at a time, the writeback of every 8 MiB started early, fsync,
 * rename from a temporary name. */
static double
time_write_bytes_file(const char *path, const unsigned char *data, size_t len)
{
    char tmp[4096 + 8];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    double t0 = now();
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    size_t done = 0, started = 0;
    ssize_t n = 0;
    while (fd >= 0 && done < len &&
           (n = write(fd, data + done, len - done < EMITTER_BUFFER ? len - done : EMITTER_BUFFER)) >
               0) {
        done += (size_t)n;
        if (done - started >= (8u << 20)) {
            (void)sync_file_range(fd, (off_t)started, (off_t)(done - started),
                                  SYNC_FILE_RANGE_WRITE);
            started = done;
        }
    }
    if (fd < 0 || done != len || fsync(fd) != 0 || close(fd) != 0 || rename(tmp, path) != 0) {
        perror(tmp);
        exit(1);
    }
    return now() - t0;
}

/* json_write_file_rate_100k: a JSON snapshot file written by snapshot_write_file, as the dump
 * and `cuprof` write one, against write_same_bytes_to_file (time_write_bytes_file). Best of 3,
 * the two interleaved; the previous file is removed untimed (dropping 154 MB of page cache
 * costs about what writing it does). */
static void
bench_json_file(const struct snapshot *s, size_t n, const char *path)
{
    char json[4096];
    snprintf(json, sizeof(json), "%s.json", path);
    unsigned char *data;
    size_t len;
    if (snapshot_write_mem(s, SNAPSHOT_FORMAT_JSON, &data, &len) != 0)
        exit(1);
    double best = 1e9, base = 1e9;
    for (int r = 0; r < 3; r++) {
        unlink(json);
        double t0 = now();
        if (snapshot_write_file(json, s, SNAPSHOT_FORMAT_JSON, FILE_PUBLISH_REPLACE, NULL, 0) !=
            0) {
            perror(json);
            exit(1);
        }
        double t = now() - t0;
        best = t < best ? t : best;
        unlink(json);
        t = time_write_bytes_file(json, data, len);
        base = t < base ? t : base;
    }
    unlink(json);
    free(data);
    printf("json_write_file_rate_%zuk: %.0f entries/s (%.2fx write_same_bytes_to_file)\n", n / 1000,
           (double)n / best, best / base);
}

/* The baseline of a read: the file's bytes into memory with read(2) (page cache warm). */
static double
time_read_bytes(const char *path, size_t len, double *cpu)
{
    unsigned char *buf = malloc(len + 1);
    int fd = open(path, O_RDONLY);
    if (buf == NULL || fd < 0)
        exit(1);
    double t0 = now(), c0 = cpu_now();
    size_t got = 0;
    ssize_t n;
    while ((n = read(fd, buf + got, len + 1 - got)) > 0)
        got += (size_t)n;
    double t = now() - t0;
    *cpu = cpu_now() - c0;
    *cpu = *cpu > 1e-9 ? *cpu : 1e-9;
    close(fd);
    free(buf);
    return t > 1e-9 ? t : 1e-9;
}

/* Best of `reps` reads of the file as a snapshot: wall time, and CPU time in *cpu. */
static double
time_read_snapshot(const char *path, int reps, double *cpu)
{
    double best = 1e9;
    *cpu = 1e9;
    for (int r = 0; r < reps; r++) {
        struct snapshot *snap = NULL;
        char err[256];
        double t0 = now(), c0 = cpu_now();
        if (snapshot_read_file(path, &snap, err, sizeof(err)) != 0) {
            fprintf(stderr, "%s\n", err);
            exit(1);
        }
        double t = now() - t0, c = cpu_now() - c0;
        snapshot_free(snap);
        best = t < best ? t : best;
        *cpu = c < *cpu ? c : *cpu;
    }
    return best;
}

/* Peak resident memory of a fresh process (this program, re-run) that reads the file: with
 * `raw`, only into a buffer, else as a snapshot. KiB, from the child's VmHWM (rusage would count
 * the parent's pages the child had before its exec). */
static long
peak_rss_kib(const char *path, bool raw)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    int fds[2];
    if (n <= 0 || pipe(fds) != 0)
        exit(1);
    self[n] = '\0';
    pid_t pid = fork();
    if (pid < 0)
        exit(1);
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        execl(self, "bench_snapshot", raw ? "--rss-raw" : "--rss-read", path, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char buf[64] = "";
    ssize_t got = read(fds[0], buf, sizeof(buf) - 1);
    close(fds[0]);
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
        got <= 0) {
        fprintf(stderr, "bench_snapshot: the peak-memory child failed\n");
        exit(1);
    }
    return atol(buf);
}

static long
vm_hwm_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
            break;
    if (f != NULL)
        fclose(f);
    return kib;
}

static int
rss_child(const char *mode, const char *path)
{
    if (strcmp(mode, "--rss-raw") == 0) {
        FILE *f = fopen(path, "rb");
        if (f == NULL || fseek(f, 0, SEEK_END) != 0)
            return 1;
        long len = ftell(f);
        unsigned char *buf = malloc((size_t)len + 1);
        rewind(f);
        if (buf == NULL || fread(buf, 1, (size_t)len, f) != (size_t)len)
            return 1;
        fclose(f);
        printf("%ld\n", vm_hwm_kib());
        free(buf);
        return 0;
    }
    struct snapshot *snap = NULL;
    char err[256];
    if (snapshot_read_file(path, &snap, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    printf("%ld\n", vm_hwm_kib());
    snapshot_free(snap);
    return 0;
}

/* pickle_read_rate_<n>k: the model written as a pickle file, then read back. */
static void
bench_read(const struct snapshot *s, size_t n, const char *path, bool peak)
{
    unsigned char *data;
    size_t len;
    if (snapshot_write_mem(s, SNAPSHOT_FORMAT_PICKLE, &data, &len) != 0)
        exit(1);
    write_all(path, data, len);
    free(data);
    double cpu, raw_cpu, t = time_read_snapshot(path, n >= 1000000 ? 2 : 3, &cpu);
    double raw = time_read_bytes(path, len, &raw_cpu);
    printf("pickle_read_rate_%zuk: %.0f entries/s (%.2fx read_same_file)\n", n / 1000,
           (double)n / t, t / raw);
    printf("pickle_read_cpu_rate_%zuk: %.0f entries/s (%.2fx read_same_file_cpu)\n", n / 1000,
           (double)n / cpu, cpu / raw_cpu);
    if (peak) {
        long raw = peak_rss_kib(path, true), rss = peak_rss_kib(path, false);
        printf("pickle_read_peak_rss_%zuk: %.1f MiB (%.2fx file_size)\n", n / 1000,
               (double)rss / 1024.0, (double)rss * 1024.0 / (double)len);
        printf("pickle_read_peak_rss_raw_read_%zuk: %.1f MiB (%.2fx file_size)\n", n / 1000,
               (double)raw / 1024.0, (double)raw * 1024.0 / (double)len);
    }
}

static void
bench_10m(const char *path)
{
    size_t n = 10000000;
    struct snapshot *s = make_model(n, 10000);
    unsigned char *data;
    size_t len;
    if (snapshot_write_mem(s, SNAPSHOT_FORMAT_PICKLE, &data, &len) != 0)
        exit(1);
    snapshot_free(s);
    write_all(path, data, len);
    free(data);
    double cpu, t = time_read_snapshot(path, 1, &cpu);
    printf("pickle_read_10m_entries: %.2f s (%.2fx target_2s)\n", t, t / 2.0);
    printf("pickle_read_10m_entries_cpu: %.2f s (%.2fx target_2s)\n", cpu, cpu / 2.0);
    long rss = peak_rss_kib(path, false);
    printf("pickle_read_peak_rss_10m: %.1f MiB (%.2fx file_size)\n", (double)rss / 1024.0,
           (double)rss * 1024.0 / (double)len);
}

int
main(int argc, char **argv)
{
    if (argc == 3 && strncmp(argv[1], "--rss-", 6) == 0)
        return rss_child(argv[1], argv[2]);
    bool ten_m = argc == 2 && strcmp(argv[1], "--10m") == 0;
    char path[] = "/tmp/cuprof_bench_snapshot_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return 1;
    close(fd);
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
        /* JSON repeats every frame list in full (no memo): 1.5 kB an entry here. The baseline
         * copies the same bytes through a buffer of the writer's size. */
        t = time_json(s, 3, &bytes);
        printf("json_write_rate_%zuk: %.0f entries/s (%.2fx memcpy_same_bytes_%uk_chunks)\n",
               n / 1000, (double)n / t, t / time_memcpy_in(bytes, EMITTER_BUFFER),
               EMITTER_BUFFER / 1024);
        if (n == 100000) {
            printf("json_bytes_per_entry_100k: %.1f bytes\n", (double)bytes / (double)n);
            /* Into memory that has to be faulted in: what snapshot_write_mem costs here. */
            t = time_write(s, SNAPSHOT_FORMAT_JSON, 3, &bytes);
            printf("json_write_mem_rate_100k: %.0f entries/s (%.2fx memcpy_same_bytes)\n",
                   (double)n / t, t / time_memcpy(bytes));
            bench_json_file(s, n, path);
        }
        bench_read(s, n, path, n == 1000000);
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
    t = now() - t0;
    printf("pickle_read_100k_entries_10k_stacks: %.1f ms (%.2fx target_20ms)\n", t * 1e3,
           t * 1e3 / 20.0);
    snapshot_free(r);
    free(data);
    snapshot_free(s);
    if (ten_m)
        bench_10m(path);
    unlink(path);
    return 0;
}
