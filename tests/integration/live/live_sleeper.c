/* live_sleeper.c: a program to watch while it runs. Allocates three blocks (1 MiB, 3 MiB and
 * 1000 bytes), prints "ready PID", then sleeps SECONDS in 100 ms nanosleep steps without retrying
 * a step a signal cut short (as many real programs sleep), and prints how long it slept and how
 * many steps were cut short. With "fork", a child allocates 2 MiB of its own and sleeps too; the
 * fork waits until cuprof's control socket is up and its thread has settled, because GCC 12's
 * AddressSanitizer does not lock its allocator across fork(): a child forked while another
 * thread allocates inherits that lock held and hangs at its first malloc (seen in CI).
 * LIVE_EXTRA_MIB=N allocates N MiB more from a call site of its own (and keeps it). */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void *
live_alloc(size_t size)
{
    void *p = NULL;
    if (cudaMalloc(&p, size) != cudaSuccess) {
        fprintf(stderr, "live_sleeper: cudaMalloc(%zu) failed\n", size);
        exit(1);
    }
    return p;
}

/* Its own function, so that its allocation is a call site of its own. */
__attribute__((noinline)) static void *
extra_alloc(size_t size)
{
    return live_alloc(size);
}

static double
now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void
sleep_in_steps(const char *who, double seconds)
{
    int steps = (int)(seconds * 10), cut = 0;
    double t0 = now_ms();
    for (int i = 0; i < steps; i++) {
        struct timespec step = {0, 100 * 1000 * 1000};
        if (nanosleep(&step, NULL) != 0 && errno == EINTR)
            cut++;
    }
    printf("%s: slept %.0f ms, %d steps cut short\n", who, now_ms() - t0, cut);
    fflush(stdout);
}

/* Until cuprof's control socket for this process exists (cuprof's socket directory: the tests'
 * XDG_RUNTIME_DIR/cuprof, else /tmp/cuprof-UID), at most 10 s, then 300 ms more for its thread
 * to finish starting. Without cuprof nothing appears: only the time limit passes. */
static void
wait_for_control_thread(void)
{
    char path[4096];
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    if (xdg != NULL && xdg[0] == '/')
        snprintf(path, sizeof(path), "%s/cuprof/%ld.sock", xdg, (long)getpid());
    else
        snprintf(path, sizeof(path), "/tmp/cuprof-%ld/%ld.sock", (long)geteuid(), (long)getpid());
    struct stat st;
    for (int i = 0; i < 200 && stat(path, &st) != 0; i++) {
        struct timespec step = {0, 50 * 1000 * 1000};
        nanosleep(&step, NULL);
    }
    struct timespec settle = {0, 300 * 1000 * 1000};
    nanosleep(&settle, NULL);
}

int
main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: live_sleeper SECONDS [fork]\n");
        return 2;
    }
    double seconds = atof(argv[1]);
    void *a = live_alloc(1 << 20);
    void *b = live_alloc(3 << 20);
    void *c = live_alloc(1000);
    /* LIVE_EXTRA_MIB: a rank that holds more than the others (the cross-rank tests). */
    const char *extra_mib = getenv("LIVE_EXTRA_MIB");
    if (extra_mib != NULL && atoi(extra_mib) > 0)
        (void)extra_alloc((size_t)atoi(extra_mib) << 20);
    pid_t child = -1;
    if (argc > 2 && strcmp(argv[2], "fork") == 0) {
        wait_for_control_thread();
        fflush(stdout);
        child = fork();
        if (child == 0) {
            void *d = live_alloc(2 << 20);
            printf("child ready %ld\n", (long)getpid());
            fflush(stdout);
            sleep_in_steps("child", seconds);
            cudaFree(d);
            return 0;
        }
    }
    printf("ready %ld\n", (long)getpid());
    fflush(stdout);
    sleep_in_steps("parent", seconds);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    if (child > 0) {
        int status = 0;
        waitpid(child, &status, 0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    }
    return 0;
}
