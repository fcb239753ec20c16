/* sites_app: allocations whose stacks differ only in frames that reports hide, shaped as
 * PyTorch's: user code reaches cudaMalloc through functions named as PyTorch's allocator (C has
 * no namespaces: asm labels give them PyTorch's mangled names, which the snapshot demangles), by
 * two routes from one line; and a Python-shaped route: a frame filed under train.py
 * (sites_train.c) between C frames named as the interpreter's.
 * Usage: sites_app A   (A: a snapshot dumped after the weights; the exit snapshot follows)
 * Output: sites_app: weights=N weight_bytes=W step_bytes=S call_bytes=C (requested bytes; every
 * allocation is left allocated, so `cuprof leaks` sees them all). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#include "preload/cuprof.h"
#include "tests/integration/cli/sites_app.h"

#define N_WEIGHTS 4

static void
check(int ok, const char *what)
{
    if (!ok) {
        printf("sites_app: FAIL %s\n", what);
        exit(1);
    }
}

/* PyTorch's allocator and tensor factory, by name. */
void *raw_alloc(size_t size) __asm__("_ZN3c104cuda20CUDACachingAllocator9raw_allocEm");
void *empty_cuda(size_t size) __asm__("_ZN2at6detail10empty_cudaEm");
void *at_empty(size_t size, int via_detail) __asm__("_ZN2at5emptyEmi");

void *
raw_alloc(size_t size)
{
    void *p = NULL;
    check(cudaMalloc(&p, size) == cudaSuccess, "cudaMalloc");
    return p;
}

void *
empty_cuda(size_t size)
{
    void *p = raw_alloc(size);
    return p;
}

void *
at_empty(size_t size, int via_detail)
{
    void *p = via_detail ? empty_cuda(size) : raw_alloc(size);
    return p;
}

/* The interpreter's C frames, by name: a C function called from Python code, and the call. */
void *
cfunction_call(size_t size)
{
    void *p = at_empty(size, 0);
    return p;
}

void *
_PyObject_MakeTpCall(size_t size, int route)
{
    void *p = route ? cfunction_call(size) : at_empty(size, 1);
    return p;
}

static size_t
_PyEval_EvalFrameDefault(void)
{
    size_t bytes = train_step();
    return bytes;
}

static size_t
Py_BytesMain(void)
{
    size_t bytes = _PyEval_EvalFrameDefault();
    return bytes;
}

static size_t
load_weights(void)
{
    size_t bytes = 0;
    for (int i = 0; i < N_WEIGHTS; i++) {
        size_t n = ((size_t)1 << 20) + (size_t)i * 4096;
        check(at_empty(n, i % 2) != NULL, "weight"); /* sites_app: the weights' line */
        bytes += n;
    }
    return bytes;
}

int
main(int argc, char **argv)
{
    check(argc == 2, "usage: sites_app A");
    size_t weight_bytes = load_weights(); /* sites_app: load_weights from main */
    check(cuprof_dump_snapshot(argv[1]) == CUPROF_SUCCESS, "cuprof_dump_snapshot");
    size_t step_bytes = Py_BytesMain(); /* sites_app: the interpreter from main */
    size_t call_bytes = 3 << 20;
    check(cfunction_call(call_bytes) != NULL, "call"); /* sites_app: a C call, no Python */
    printf("sites_app: weights=%d weight_bytes=%zu step_bytes=%zu call_bytes=%zu\n", N_WEIGHTS,
           weight_bytes, step_bytes, call_bytes);
    return 0;
}
