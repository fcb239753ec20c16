/* live_guest.c: a program to watch while it runs, for the control thread's guest manners.
 *   live_guest SECONDS [spike] [sites N]: allocates 1 MiB and 2 MiB through one helper from two
 *   callers (two stacks that `top` shows as one call site), prints "ready PID" and sleeps
 *   SECONDS in all. With "spike", 1.5 s after ready it allocates 256 MiB and frees it at once
 *   (between two of `top`'s one-second samples) and prints "spiked". With "sites N", N blocks of
 *   512 bytes more, each from a stack of its own (recursion depths 1..N: run it with a deep
 *   CUPROF_STACK_DEPTH), so that a TOP reply is large.
 * Locking: none.
 * Hot path: no (a test program). */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void *
guest_alloc(size_t size)
{
    void *p = NULL;
    if (cudaMalloc(&p, size) != cudaSuccess) {
        fprintf(stderr, "live_guest: cudaMalloc(%zu) failed\n", size);
        exit(1);
    }
    return p;
}

/* The one helper both callers go through: its frame is the site `top` names. */
__attribute__((noinline)) static void *
helper(size_t size)
{
    void *p = guest_alloc(size);
    __asm__ volatile("" ::: "memory"); /* not a tail call: every caller stays on the stack */
    return p;
}

__attribute__((noinline)) static void *
caller_a(void)
{
    void *p = helper(1 << 20);
    __asm__ volatile("" ::: "memory");
    return p;
}

__attribute__((noinline)) static void *
caller_b(void)
{
    void *p = helper(2 << 20);
    __asm__ volatile("" ::: "memory");
    return p;
}

/* One 512-byte block at recursion depth `depth`: a stack of its own for each depth. */
__attribute__((noinline)) static void *
deep(int depth)
{
    void *p = depth <= 1 ? guest_alloc(512) : deep(depth - 1);
    __asm__ volatile("" ::: "memory");
    return p;
}

static void
sleep_s(double seconds)
{
    if (seconds <= 0)
        return;
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int
main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: live_guest SECONDS [spike] [sites N]\n");
        return 2;
    }
    double seconds = atof(argv[1]);
    int spike = 0, sites = 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "spike") == 0)
            spike = 1;
        else if (strcmp(argv[i], "sites") == 0 && i + 1 < argc)
            sites = atoi(argv[++i]);
    }
    void *a = caller_a();
    void *b = caller_b();
    for (int d = 1; d <= sites; d++)
        (void)deep(d);
    printf("ready %ld\n", (long)getpid());
    fflush(stdout);
    if (spike) {
        sleep_s(1.5);
        void *big = guest_alloc((size_t)256 << 20);
        cudaFree(big);
        printf("spiked\n");
        fflush(stdout);
        seconds -= 1.5;
    }
    sleep_s(seconds);
    cudaFree(a);
    cudaFree(b);
    return 0;
}
