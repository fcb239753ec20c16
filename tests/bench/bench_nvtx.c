/* bench_nvtx.c: what an NVTX call costs with cuprof as the tool (NVTX_INJECTION64_PATH and
 * LD_PRELOAD naming libcuprof.so, default settings, one simulated device, the program's CUDA up)
 * against NVTX with no tool attached: an nvtxRangePushA/nvtxRangePop pair and an nvtxMarkA, per
 * call, on one thread and on two at once; and the allocator's cached 4 KiB pair under the tool
 * while another thread emits NVTX ranges, against the pair while that thread only spins (an
 * annotation shares no lock with the allocator). The program re-executes itself: a child without
 * the tool measures the baseline and a child under it the candidate, back to back in every
 * repetition. Prints `name: value unit (ratio× baseline)`; figures are medians of REPS runs.
 * Usage: bench_nvtx  (the shim and the simulated device of the build tree) */
#define NVTX_AS_SYSTEM_HEADER
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_clock.h"

#define REPS  7
#define CALLS 200000L

extern char **environ;

enum what { PUSH_POP, MARK, PUSH_POP_2T, PAIR_NVTX_NEIGHBOUR, PAIR_BUSY_NEIGHBOUR };

static atomic_bool neighbour_stop;

/* The other thread of the pair figures: NVTX ranges, or a spin that calls nothing. */
static void *
neighbour(void *arg)
{
    bool nvtx = *(bool *)arg;
    volatile unsigned long spins = 0;
    while (!atomic_load_explicit(&neighbour_stop, memory_order_relaxed)) {
        if (nvtx) {
            nvtxRangePushA("forward");
            nvtxRangePop();
        } else {
            spins++;
        }
    }
    return NULL;
}

/* ns per cached cudaMalloc+cudaFree of 4 KiB while `neighbour` runs. */
static double
pairs_beside(bool nvtx)
{
    pthread_t t;
    atomic_store(&neighbour_stop, false);
    if (pthread_create(&t, NULL, neighbour, &nvtx) != 0)
        exit(1);
    void *q = NULL;
    for (int i = 0; i < 2000; i++)
        if (cudaMalloc(&q, 4096) != cudaSuccess || cudaFree(q) != cudaSuccess)
            exit(1);
    double t0 = now_ns();
    for (long i = 0; i < CALLS; i++)
        if (cudaMalloc(&q, 4096) != cudaSuccess || cudaFree(q) != cudaSuccess)
            exit(1);
    double ns = (now_ns() - t0) / (double)CALLS;
    atomic_store(&neighbour_stop, true);
    pthread_join(t, NULL);
    return ns;
}

static void *
push_pop(void *arg)
{
    long n = *(long *)arg;
    for (long i = 0; i < n; i++) {
        nvtxRangePushA("forward");
        nvtxRangePop();
    }
    return NULL;
}

/* Child: ns per NVTX call of `what`, after warming up NVTX, the label and the trace. */
static double
child(enum what what)
{
    void *p = NULL;
    if (cudaMalloc(&p, 4096) != cudaSuccess) /* cuprof's trace exists before the timing */
        exit(1);
    long warm = 2000, n = CALLS;
    push_pop(&warm);
    nvtxMarkA("step");
    if (what == PAIR_NVTX_NEIGHBOUR || what == PAIR_BUSY_NEIGHBOUR) {
        double ns = pairs_beside(what == PAIR_NVTX_NEIGHBOUR);
        cudaFree(p);
        return ns;
    }
    double t0 = now_ns();
    if (what == MARK) {
        for (long i = 0; i < 2 * n; i++)
            nvtxMarkA("step");
    } else if (what == PUSH_POP) {
        push_pop(&n);
    } else {
        pthread_t t;
        pthread_create(&t, NULL, push_pop, &n);
        push_pop(&n);
        pthread_join(t, NULL);
    }
    double ns = (now_ns() - t0) / (double)(2 * n); /* two calls per pair, per thread */
    cudaFree(p);
    return ns;
}

/* Runs `self --child WHAT` with or without the tool; returns its figure. */
static double
run_child(const char *self, enum what what, int tool)
{
    static const char *const names[] = {"0", "1", "2", "3", "4"};
    char *argv[] = {(char *)self, "--child", (char *)names[what], NULL};
    char *env[8], lib[4096 + 32], nvtx[4096 + 32], path[4096 + 32];
    int k = 0;
    snprintf(path, sizeof path, "LD_LIBRARY_PATH=%s", BENCH_SIM_PATH);
    env[k++] = path;
    env[k++] = "CUPROF_LOG=quiet";
    env[k++] = "CUPROF_DUMP_ON=none";
    if (tool) {
        snprintf(lib, sizeof lib, "LD_PRELOAD=%s", BENCH_LIBCUPROF);
        snprintf(nvtx, sizeof nvtx, "NVTX_INJECTION64_PATH=%s", BENCH_LIBCUPROF);
        env[k++] = lib;
        env[k++] = nvtx;
    }
    env[k] = NULL;
    int fds[2];
    if (pipe(fds) != 0)
        exit(1);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    pid_t pid;
    if (posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, env) != 0)
        exit(1);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    char out[64] = "";
    ssize_t got = read(fds[0], out, sizeof out - 1);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (got <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench_nvtx: child %d (tool %d) failed\n", (int)what, tool);
        exit(1);
    }
    return atof(out);
}

int
main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--child") == 0) {
        printf("%.3f\n", child((enum what)atoi(argv[2])));
        return 0;
    }
    static const char *const figures[] = {"nvtx_push_pop_cuprof_ns", "nvtx_mark_cuprof_ns",
                                          "nvtx_push_pop_2threads_cuprof_ns"};
    static const char *const baselines[] = {"nvtx_push_pop_no_tool_ns", "nvtx_mark_no_tool_ns",
                                            "nvtx_push_pop_2threads_no_tool_ns"};
    for (int w = PUSH_POP; w <= PUSH_POP_2T; w++) {
        double base[REPS], tool[REPS];
        for (int r = 0; r < REPS; r++) {
            base[r] = run_child(argv[0], (enum what)w, 0);
            tool[r] = run_child(argv[0], (enum what)w, 1);
        }
        double b = median(base, REPS), t = median(tool, REPS);
        printf("%s: %.1f ns (%.2fx %s)\n", figures[w], t, b > 0 ? t / b : 0.0, baselines[w]);
    }
    /* Both under the tool: the neighbour's NVTX against a neighbour that only spins. */
    double busy[REPS], beside[REPS], ratio[REPS];
    for (int r = 0; r < REPS; r++) {
        busy[r] = run_child(argv[0], PAIR_BUSY_NEIGHBOUR, 1);
        beside[r] = run_child(argv[0], PAIR_NVTX_NEIGHBOUR, 1);
        ratio[r] = busy[r] > 0 ? beside[r] / busy[r] : 0.0;
    }
    printf("shim_pair_4k_nvtx_neighbour_ns: %.1f ns (%.2fx shim_pair_4k_busy_neighbour_ns)\n",
           median(beside, REPS), median(ratio, REPS));
    printf("shim_pair_4k_busy_neighbour_ns: %.1f ns (1.00x shim_pair_4k_busy_neighbour_ns)\n",
           median(busy, REPS));
    return 0;
}
