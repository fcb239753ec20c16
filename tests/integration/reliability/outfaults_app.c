/* outfaults_app: a program whose snapshots cuprof fails to write (or writes many of at once) for
 *   test_output_faults.py. Arguments are key=value:
 *   dir=D      where the snapshots go (for wait=1)
 *   pre=N      cuprof_dump_snapshot(NULL) N times before the fault phase (plus path= once)
 *   api=N      cuprof_dump_snapshot(NULL) N times in the fault phase, split over two threads
 *   storm=N    a third thread sends the process SIGUSR1 N times during the fault phase
 *   limit=B    RLIMIT_FSIZE (soft) of B bytes for the fault phase (after CUDA is up: the
 *              simulated device sizes a memfd at start-up)
 *   xfsz=1     handle SIGXFSZ and, after the fault phase, write past the limit to own=FILE
 *   path=P     also cuprof_dump_snapshot(P) in each phase (explicit path, replaced atomically)
 *   own=FILE   the program's own file for xfsz=1
 *   wait=1     with cuprof loaded: after the fault phase, wait until dir= holds more files than
 *              the program's own dumps, so a signal dump surely happened
 * Between the phases it prints "phase1" and reads one line from stdin (EOF: go on).
 * stdout holds only the program's own results (the same with or without cuprof); the dump return
 * codes go to stderr as "app: <phase> dump rc=R".
 * Lock: none of its own (results joined). Hot path: n/a (test program). */
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "preload/cuprof.h"

#define APP_BLOCKS 8

struct app_args {
    const char *dir, *path, *own;
    long pre, api, storm, limit;
    int xfsz, wait;
};

static atomic_long app_usr1;
static atomic_long app_xfsz;

static void
app_on_usr1(int sig)
{
    (void)sig;
    atomic_fetch_add(&app_usr1, 1);
}

static void
app_on_xfsz(int sig)
{
    (void)sig;
    atomic_fetch_add(&app_xfsz, 1);
}

static void
app_parse(int argc, char **argv, struct app_args *a)
{
    for (int i = 1; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (eq == NULL) {
            fprintf(stderr, "app: bad argument %s\n", argv[i]);
            exit(64);
        }
        *eq = '\0';
        const char *k = argv[i], *v = eq + 1;
        if (strcmp(k, "dir") == 0)
            a->dir = v;
        else if (strcmp(k, "path") == 0)
            a->path = v;
        else if (strcmp(k, "own") == 0)
            a->own = v;
        else if (strcmp(k, "pre") == 0)
            a->pre = atol(v);
        else if (strcmp(k, "api") == 0)
            a->api = atol(v);
        else if (strcmp(k, "storm") == 0)
            a->storm = atol(v);
        else if (strcmp(k, "limit") == 0)
            a->limit = atol(v);
        else if (strcmp(k, "xfsz") == 0)
            a->xfsz = atoi(v);
        else if (strcmp(k, "wait") == 0)
            a->wait = atoi(v);
        else {
            fprintf(stderr, "app: unknown key %s\n", k);
            exit(64);
        }
    }
}

static void
app_dump(const char *phase, const char *path)
{
    int rc = cuprof_dump_snapshot(path);
    fprintf(stderr, "app: %s dump rc=%d\n", phase, rc);
}

/* A few device blocks with known contents; returns their checksum read back. */
static unsigned long
app_work(void **blocks, int salt)
{
    unsigned long sum = 0;
    for (int i = 0; i < APP_BLOCKS; i++) {
        size_t size = (size_t)(1000 + 4096 * i);
        unsigned char *host = malloc(size);
        if (host == NULL || cudaMalloc(&blocks[i], size) != cudaSuccess ||
            cudaMemset(blocks[i], (i * 37 + salt) & 0xff, size) != cudaSuccess ||
            cudaMemcpy(host, blocks[i], size, cudaMemcpyDeviceToHost) != cudaSuccess) {
            fprintf(stderr, "app: device work failed\n");
            exit(1);
        }
        for (size_t j = 0; j < size; j++)
            sum = sum * 31 + host[j];
        free(host);
    }
    return sum;
}

static void
app_release(void **blocks)
{
    for (int i = 0; i < APP_BLOCKS; i++)
        if (cudaFree(blocks[i]) != cudaSuccess)
            exit(1);
}

struct app_worker {
    pthread_t thread;
    long dumps;
    int salt;
    unsigned long sum;
};

static void *
app_dumper(void *arg)
{
    struct app_worker *w = arg;
    void *blocks[APP_BLOCKS];
    for (long i = 0; i < w->dumps; i++) {
        w->sum += app_work(blocks, w->salt + (int)i);
        app_dump("fault", NULL);
        app_release(blocks);
    }
    return NULL;
}

static void *
app_storm(void *arg)
{
    long n = *(const long *)arg;
    const struct timespec pause = {0, 200000};
    for (long i = 0; i < n; i++) {
        kill(getpid(), SIGUSR1);
        nanosleep(&pause, NULL);
    }
    return NULL;
}

static long
app_count_snapshots(const char *dir)
{
    long n = 0;
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* With wait=1 and cuprof loaded: waits (at most 60 s, signalling again) until the dumper thread
 * has written a signal dump, so the test can require one. */
static void
app_wait_signal_dump(const struct app_args *a, long own_dumps)
{
    if (cuprof_version() == NULL || a->dir == NULL || !a->wait)
        return;
    const struct timespec pause = {0, 10000000};
    for (int i = 0; i < 6000 && app_count_snapshots(a->dir) <= own_dumps; i++) {
        kill(getpid(), SIGUSR1);
        nanosleep(&pause, NULL);
    }
}

/* Writes past RLIMIT_FSIZE itself: SIGXFSZ must reach the program's handler as before. */
static void
app_own_write(const struct app_args *a)
{
    int fd = open(a->own, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "app: open %s: %s\n", a->own, strerror(errno));
        exit(1);
    }
    char buf[4096];
    memset(buf, 'x', sizeof buf);
    long total = 0;
    for (int i = 0; i < 64; i++) {
        ssize_t n = write(fd, buf, sizeof buf);
        if (n <= 0)
            break;
        total += n;
    }
    close(fd);
    printf("own_written=%ld own_xfsz=%ld\n", total, atomic_load(&app_xfsz));
}

int
main(int argc, char **argv)
{
    struct app_args a = {0};
    app_parse(argc, argv, &a);
    signal(SIGUSR1, app_on_usr1); /* the program survives its storm without cuprof too */
    if (a.xfsz)
        signal(SIGXFSZ, app_on_xfsz);
    void *blocks[APP_BLOCKS];
    unsigned long sum = app_work(blocks, 0);

    for (long i = 0; i < a.pre; i++)
        app_dump("pre", NULL);
    if (a.path != NULL)
        app_dump("pre", a.path);
    printf("phase1\n");
    fflush(stdout);
    char line[64];
    if (fgets(line, sizeof line, stdin) == NULL)
        clearerr(stdin);

    if (a.limit > 0) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_FSIZE, &rl) != 0)
            return 1;
        rl.rlim_cur = (rlim_t)a.limit;
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
            return 1;
    }
    struct app_worker workers[2] = {{.dumps = a.api / 2, .salt = 1},
                                    {.dumps = a.api - a.api / 2, .salt = 2}};
    pthread_t storm;
    if (pthread_create(&storm, NULL, app_storm, &a.storm) != 0)
        return 1;
    for (int i = 0; i < 2; i++)
        if (pthread_create(&workers[i].thread, NULL, app_dumper, &workers[i]) != 0)
            return 1;
    if (a.path != NULL)
        app_dump("fault", a.path);
    for (int i = 0; i < 2; i++) {
        pthread_join(workers[i].thread, NULL);
        sum += workers[i].sum;
    }
    pthread_join(storm, NULL);
    app_wait_signal_dump(&a, a.pre + a.api + (a.path != NULL));
    if (a.xfsz)
        app_own_write(&a);

    app_release(blocks);
    printf("checksum=%lu usr1_seen=%s xfsz=%ld\n", sum, app_usr1 > 0 || a.storm == 0 ? "yes" : "no",
           atomic_load(&app_xfsz));
    return 0;
}
