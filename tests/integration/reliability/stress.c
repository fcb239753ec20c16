/* stress: an unmodified CUDA program that hammers an allocator from many threads: random sizes
 * (1 B .. 256 MiB, log-uniform), two devices, several streams per thread, async frees, frees on a
 * thread other than the allocating one, one cudaDeviceReset at a quiescent point, SIGUSR1 every
 * few milliseconds (when a handler is installed, i.e. under the shim), and a fork() from a worker
 * while the others allocate (the child allocates host memory and exits through exit()).
 * Every block gets a pattern (its id at the head, a byte elsewhere) that is verified before the
 * block is freed, so two live blocks that overlap are caught.
 * Usage: stress THREADS OPS SEED [BUDGET_MIB_PER_DEVICE=512] [noreset]
 * Output (one line): stress: threads=T ops=N allocs=A frees=F async_frees=X cross_frees=C
 *   reset_dropped=R resets=1|0 signals=S forks=K child_status=0 verified=V live=0
 * Lock: one mutex over the shared slot table; counters are per thread. Hot path: n/a (test). */
#include "tests/apps/app_common.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define APP        "stress"
#define NSLOTS     256
#define MAX_DEV    2
#define NSTREAMS   3
#define FULL_FILL  ((size_t)4 << 20)  /* blocks up to this size are filled entirely */
#define EDGE       ((size_t)1 << 20)  /* bigger ones: head and tail ... */
#define STRIPE     ((size_t)64 << 10) /* ... and 16 stripes of this size */
#define NSTRIPES   16
#define SAMPLE     64
#define MAX_SIZE   ((size_t)256 << 20)
#define MAX_THREAD 64
#define RESERVED   ((unsigned char *)1) /* slot taken by a thread that is allocating */

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        APP_CHECK(APP, e_ == cudaSuccess, #call, e_);                                              \
    } while (0)

struct slot {
    unsigned char *ptr; /* NULL = empty */
    size_t size;
    uint64_t id;
    int device;
    int owner; /* thread that allocated it */
    int async; /* from cudaMallocAsync */
};

struct worker {
    pthread_t tid;
    int id;
    uint64_t rng;
    cudaStream_t streams[MAX_DEV][NSTREAMS];
    unsigned long long allocs, frees, async_frees, cross_frees, verified;
};

static struct slot slots[NSLOTS];  /* protected by table_lock */
static size_t live_bytes[MAX_DEV]; /* protected by table_lock */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t reset_barrier;
static int ndev, nthreads;
static int do_reset = 1;
static long ops_per_thread;
static size_t budget;
static atomic_ullong next_id = 1;
static atomic_int stop_signals;
static atomic_ullong signals_sent;
static unsigned long long reset_dropped, forks;
static int child_status = -1;
static volatile int in_child;

/* LeakSanitizer's documented opt-out hook: in a child forked from a threaded process it sees the
 * parent's threads as running-but-unsuspendable and reports false leaks, so the child opts out. */
int __lsan_is_turned_off(void);
__attribute__((visibility("default"))) int
__lsan_is_turned_off(void)
{
    return in_child;
}

static unsigned char
block_byte(uint64_t id)
{
    return (unsigned char)(1 + (id * 0x9Du) % 255);
}

/* Regions of a block that carry the pattern: [off, off+len) pairs; returns how many. */
static int
block_regions(size_t n, size_t off[NSTRIPES + 2], size_t len[NSTRIPES + 2])
{
    if (n <= FULL_FILL) {
        off[0] = 0;
        len[0] = n;
        return 1;
    }
    int k = 0;
    off[k] = 0;
    len[k++] = EDGE;
    off[k] = n - EDGE;
    len[k++] = EDGE;
    size_t step = (n - 2 * EDGE) / NSTRIPES;
    for (int i = 0; i < NSTRIPES; i++) {
        off[k] = EDGE + (size_t)i * step;
        len[k++] = step < STRIPE ? step : STRIPE;
    }
    return k;
}

static void
fill(struct worker *w, const struct slot *s, cudaStream_t st)
{
    size_t off[NSTRIPES + 2], len[NSTRIPES + 2];
    int k = block_regions(s->size, off, len);
    for (int i = 0; i < k; i++)
        CK(cudaMemsetAsync(s->ptr + off[i], block_byte(s->id), len[i], st));
    if (s->size >= sizeof(s->id))
        CK(cudaMemcpyAsync(s->ptr, &s->id, sizeof(s->id), cudaMemcpyHostToDevice, st));
    CK(cudaStreamSynchronize(st));
    (void)w;
}

/* Reads the head, the tail and random samples back and checks them against the pattern. */
static void
verify(struct worker *w, const struct slot *s, cudaStream_t st)
{
    unsigned char buf[SAMPLE];
    size_t off[NSTRIPES + 2], len[NSTRIPES + 2];
    int k = block_regions(s->size, off, len);
    unsigned char b = block_byte(s->id);
    for (int probe = 0; probe < 6; probe++) {
        int r = probe == 0 ? 0 : probe == 1 ? (k > 1 ? 1 : 0) : (int)(app_rand(&w->rng) % k);
        size_t n = len[r] < SAMPLE ? len[r] : SAMPLE;
        size_t at = off[r];
        if (probe == 1 && k == 1)
            at = off[0] + len[0] - n; /* tail of a fully filled block */
        else if (probe > 1)
            at = off[r] + app_rand(&w->rng) % (len[r] - n + 1);
        CK(cudaMemcpyAsync(buf, s->ptr + at, n, cudaMemcpyDeviceToHost, st));
        CK(cudaStreamSynchronize(st));
        for (size_t i = 0; i < n; i++) {
            size_t pos = at + i;
            unsigned char want = b;
            if (s->size >= sizeof(s->id) && pos < sizeof(s->id))
                want = (unsigned char)(s->id >> (8 * pos)); /* little-endian id at the head */
            if (buf[i] != want) {
                printf("%s: FAIL block %llu (%zu bytes at %p, dev %d) byte %zu is %u, want %u\n",
                       APP, (unsigned long long)s->id, s->size, (void *)s->ptr, s->device, pos,
                       buf[i], want);
                exit(1);
            }
        }
    }
    w->verified++;
}

static size_t
random_size(uint64_t r)
{
    unsigned e = (unsigned)(r % 29); /* 2^0 .. 2^28 */
    size_t base = (size_t)1 << e;
    size_t n = base + (size_t)((r >> 8) % base);
    return n > MAX_SIZE ? MAX_SIZE : n;
}

static void
free_slot(struct worker *w, struct slot *s)
{
    CK(cudaSetDevice(s->device));
    cudaStream_t st = w->streams[s->device][app_rand(&w->rng) % NSTREAMS];
    verify(w, s, st);
    if (s->async) {
        CK(cudaFreeAsync(s->ptr, st));
        w->async_frees++;
    } else {
        CK(cudaFree(s->ptr));
    }
    w->frees++;
    w->cross_frees += (unsigned long long)(s->owner != w->id);
}

static void
one_op(struct worker *w)
{
    uint64_t r = app_rand(&w->rng);
    int k = (int)(r % NSLOTS);
    struct slot s;
    pthread_mutex_lock(&table_lock);
    s = slots[k];
    if (s.ptr == RESERVED) { /* another thread is allocating into this slot */
        pthread_mutex_unlock(&table_lock);
        return;
    }
    if (s.ptr) {
        slots[k].ptr = NULL;
        live_bytes[s.device] -= s.size;
    } else {
        s.device = (int)((r >> 12) % (uint64_t)ndev);
        s.size = random_size(app_rand(&w->rng));
        if (live_bytes[s.device] + s.size > budget) {
            pthread_mutex_unlock(&table_lock);
            return;
        }
        live_bytes[s.device] += s.size;
        slots[k].ptr = RESERVED;
        slots[k].size = s.size;
        slots[k].device = s.device;
    }
    pthread_mutex_unlock(&table_lock);

    if (s.ptr) {
        free_slot(w, &s);
        return;
    }
    s.id = atomic_fetch_add(&next_id, 1);
    s.owner = w->id;
    s.async = (int)((r >> 20) & 1);
    CK(cudaSetDevice(s.device));
    cudaStream_t st = w->streams[s.device][(r >> 24) % NSTREAMS];
    void *p = NULL;
    if (s.async)
        CK(cudaMallocAsync(&p, s.size, st));
    else
        CK(cudaMalloc(&p, s.size));
    APP_CHECK(APP, p != NULL, "non-NULL pointer", s.size);
    s.ptr = p;
    fill(w, &s, st);
    w->allocs++;
    pthread_mutex_lock(&table_lock);
    slots[k] = s;
    pthread_mutex_unlock(&table_lock);
}

static void
streams_create(struct worker *w, int dev)
{
    CK(cudaSetDevice(dev));
    for (int i = 0; i < NSTREAMS; i++)
        CK(cudaStreamCreateWithFlags(&w->streams[dev][i], cudaStreamNonBlocking));
}

static void
streams_destroy(struct worker *w, int dev)
{
    CK(cudaSetDevice(dev));
    for (int i = 0; i < NSTREAMS; i++) {
        CK(cudaStreamSynchronize(w->streams[dev][i]));
        CK(cudaStreamDestroy(w->streams[dev][i]));
    }
}

/* Quiescent point: every worker waits; worker 0 verifies device 0's blocks, frees half of them,
 * and resets the device (which frees the rest: the program must forget those pointers). */
static void
device_reset(struct worker *w)
{
    streams_destroy(w, 0);
    pthread_barrier_wait(&reset_barrier);
    if (w->id == 0) {
        CK(cudaSetDevice(0));
        CK(cudaDeviceSynchronize());
        streams_create(w, 0);
        for (int k = 0; k < NSLOTS; k++) {
            struct slot *s = &slots[k];
            if (!s->ptr || s->device != 0)
                continue;
            if (k % 2) {
                free_slot(w, s);
            } else {
                verify(w, s, w->streams[0][0]);
                reset_dropped++;
            }
            live_bytes[0] -= s->size;
            s->ptr = NULL;
        }
        streams_destroy(w, 0);
        CK(cudaSetDevice(0));
        CK(cudaDeviceReset());
    }
    pthread_barrier_wait(&reset_barrier);
    streams_create(w, 0);
}

static void
fork_child(void)
{
    pid_t pid = fork();
    APP_CHECK(APP, pid >= 0, "fork", pid);
    if (pid == 0) {
        in_child = 1;
        alarm(30);
        /* The child does host work only: CUDA is not usable in a forked child on a real GPU. */
        uint64_t h = APP_FNV_OFFSET;
        for (int i = 0; i < 200; i++) {
            size_t n = 1 + (size_t)i * 977;
            unsigned char *p = malloc(n);
            if (!p)
                _exit(3);
            memset(p, i, n);
            h = app_fnv(h, p, n < 16 ? n : 16);
            free(p);
        }
        exit(h == 0 ? 4 : 0); /* exit(): the shim's exit path runs in the child */
    }
    int st = 0;
    APP_CHECK(APP, waitpid(pid, &st, 0) == pid, "waitpid", pid);
    child_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    forks++;
}

static void *
worker_main(void *arg)
{
    struct worker *w = arg;
    for (int d = 0; d < ndev; d++)
        streams_create(w, d);
    for (long i = 0; i < ops_per_thread; i++) {
        if (do_reset && i == ops_per_thread / 2)
            device_reset(w);
        if (w->id == nthreads - 1 && i == ops_per_thread / 3)
            fork_child();
        one_op(w);
    }
    for (int d = 0; d < ndev; d++)
        streams_destroy(w, d);
    return NULL;
}

/* Whether the kernel has a handler for SIGUSR1 (/proc/self/status SigCgt): cuprof's reads back
 * through sigaction as the default it stands in for, as if it were not there. */
static bool
signal_handled(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    if (f == NULL)
        return false;
    char line[256];
    unsigned long long caught = 0;
    bool found = false;
    while (!found && fgets(line, sizeof line, f) != NULL)
        found = sscanf(line, "SigCgt: %llx", &caught) == 1;
    fclose(f);
    return found && (caught & (1ull << (SIGUSR1 - 1))) != 0;
}

static void *
signaller_main(void *arg)
{
    (void)arg;
    uint64_t rng = 0x5161;
    while (!atomic_load(&stop_signals)) {
        struct timespec ts = {0, (long)(2000000 + app_rand(&rng) % 3000000)};
        nanosleep(&ts, NULL);
        /* Only once a handler is there (the shim installs it on its first allocation): the
         * default action would end the program. */
        if (signal_handled() && kill(getpid(), SIGUSR1) == 0)
            atomic_fetch_add(&signals_sent, 1);
    }
    return NULL;
}

int
main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s THREADS OPS SEED [BUDGET_MIB_PER_DEVICE]\n", argv[0]);
        return 2;
    }
    nthreads = atoi(argv[1]);
    ops_per_thread = atol(argv[2]);
    uint64_t seed = strtoull(argv[3], NULL, 0);
    budget = (size_t)(argc > 4 ? atol(argv[4]) : 512) << 20;
    do_reset = !(argc > 5 && strcmp(argv[5], "noreset") == 0);
    APP_CHECK(APP, nthreads >= 1 && nthreads <= MAX_THREAD, "thread count", nthreads);
    CK(cudaGetDeviceCount(&ndev));
    ndev = ndev > MAX_DEV ? MAX_DEV : ndev;
    APP_CHECK(APP, ndev >= 1, "device count", ndev);

    pthread_t sig_tid;
    APP_CHECK(APP, pthread_create(&sig_tid, NULL, signaller_main, NULL) == 0, "signaller", 0);
    APP_CHECK(APP, pthread_barrier_init(&reset_barrier, NULL, (unsigned)nthreads) == 0, "barrier",
              0);
    struct worker *ws = calloc((size_t)nthreads, sizeof(*ws));
    APP_CHECK(APP, ws != NULL, "calloc", 0);
    for (int i = 0; i < nthreads; i++) {
        ws[i].id = i;
        ws[i].rng = seed * 1000003u + (uint64_t)i;
        APP_CHECK(APP, pthread_create(&ws[i].tid, NULL, worker_main, &ws[i]) == 0, "thread", i);
    }
    unsigned long long allocs = 0, frees = 0, async_frees = 0, cross = 0, verified = 0;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(ws[i].tid, NULL);
        allocs += ws[i].allocs;
        frees += ws[i].frees;
        async_frees += ws[i].async_frees;
        cross += ws[i].cross_frees;
        verified += ws[i].verified;
    }
    atomic_store(&stop_signals, 1);
    pthread_join(sig_tid, NULL);

    /* Free what is left from the main thread (a thread that allocated none of it). */
    struct worker mw = {.id = -1, .rng = seed};
    for (int d = 0; d < ndev; d++)
        streams_create(&mw, d);
    unsigned long long live = 0;
    for (int k = 0; k < NSLOTS; k++) {
        if (slots[k].ptr) {
            free_slot(&mw, &slots[k]);
            live_bytes[slots[k].device] -= slots[k].size;
            slots[k].ptr = NULL;
        }
    }
    for (int d = 0; d < ndev; d++) {
        streams_destroy(&mw, d);
        CK(cudaSetDevice(d));
        CK(cudaDeviceSynchronize());
        live += live_bytes[d];
    }
    frees += mw.frees;
    async_frees += mw.async_frees;
    cross += mw.cross_frees;
    verified += mw.verified;
    printf("%s: threads=%d ops=%ld allocs=%llu frees=%llu async_frees=%llu cross_frees=%llu "
           "reset_dropped=%llu resets=%d signals=%llu forks=%llu child_status=%d verified=%llu "
           "devices=%d live=%llu\n",
           APP, nthreads, ops_per_thread * nthreads, allocs, frees, async_frees, cross,
           reset_dropped, do_reset, (unsigned long long)atomic_load(&signals_sent), forks,
           child_status, verified, ndev, live);
    free(ws);
    pthread_barrier_destroy(&reset_barrier);
    return 0;
}
