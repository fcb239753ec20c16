/* diff_app: a small training-shaped run for `cuprof diff`, `cuprof check` and the annotations of
 * `cuprof summary`: two 8 MiB parameters, then STEPS steps, each marked with cuprof_annotate
 * ("forward", then "backward"), allocating three activations (4, 16 and 30 MiB) and, in step 1
 * when EXTRA_MIB > 0, a workspace of EXTRA_MIB MiB, all freed before the step ends; then, when
 * LEAK is 1, a 1 MiB buffer never freed. Lines marked `@name` are where frames point.
 * Usage: diff_app [EXTRA_MIB=0] [STEPS=3] [LEAK=1]
 * Output (one line): diff_app: extra=E steps=S leaked=L peak=P (bytes requested) */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#include "preload/cuprof.h"

#define MIB ((size_t)1 << 20)

static size_t live, peak;

static void *
alloc(size_t n)
{
    void *p = NULL;
    if (cudaMalloc(&p, n) != cudaSuccess) {
        printf("diff_app: FAIL cudaMalloc(%zu)\n", n);
        exit(1);
    }
    live += n;
    peak = live > peak ? live : peak;
    return p;
}

static void
release(void *p, size_t n)
{
    if (cudaFree(p) != cudaSuccess) {
        printf("diff_app: FAIL cudaFree\n");
        exit(1);
    }
    live -= n;
}

__attribute__((noinline)) static void *
workspace(size_t n)
{
    return alloc(n); /* @extra */
}

__attribute__((noinline)) static void
step(int i, size_t extra)
{
    static const size_t act_n[3] = {4 * MIB, 16 * MIB, 30 * MIB};
    void *act[3], *ws = NULL;
    cuprof_annotate("forward");
    for (int k = 0; k < 3; k++)
        act[k] = alloc(act_n[k]); /* @acts */
    if (i == 1 && extra > 0)
        ws = workspace(extra);
    cuprof_annotate("backward");
    if (ws != NULL)
        release(ws, extra);
    for (int k = 2; k >= 0; k--)
        release(act[k], act_n[k]);
}

int
main(int argc, char **argv)
{
    size_t extra = (argc > 1 ? (size_t)atol(argv[1]) : 0) * MIB;
    int steps = argc > 2 ? atoi(argv[2]) : 3;
    int leak = argc > 3 ? atoi(argv[3]) : 1;
    void *params[2];
    for (int k = 0; k < 2; k++)
        params[k] = alloc(8 * MIB); /* @params */
    for (int i = 0; i < steps; i++)
        step(i, extra); /* @step */
    if (leak)
        (void)alloc(MIB); /* @leak */
    for (int k = 0; k < 2; k++)
        release(params[k], 8 * MIB);
    printf("diff_app: extra=%zu steps=%d leaked=%zu peak=%zu\n", extra, steps, leak ? MIB : 0,
           peak);
    return 0;
}
