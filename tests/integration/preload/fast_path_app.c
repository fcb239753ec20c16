/* fast_path_app.c: runtime-API calls that cuprof answers at the runtime's export (a cached block
 * fits; a block it handed out is freed) and calls that must reach the runtime (a new segment,
 * size 0, cudaFree(NULL), a stale pointer, managed memory), each from a function of its own so
 * that stacks name it. Prints one line per call: its result and what the program can see, never
 * an address (cuprof's and the simulator's differ). Links with the simulated libcudart. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

static int failures;

static void
expect(const char *what, cudaError_t got, cudaError_t want)
{
    printf("%s: %d\n", what, (int)got);
    if (got != want)
        failures++;
}

__attribute__((noinline)) static cudaError_t
fast_path_alloc(void **p, size_t size)
{
    cudaError_t r = cudaMalloc(p, size);
    __asm__ volatile("" ::: "memory"); /* no tail call: the frame stays on the stack */
    return r;
}

__attribute__((noinline)) static cudaError_t
fast_path_free(void *p)
{
    cudaError_t r = cudaFree(p);
    __asm__ volatile("" ::: "memory");
    return r;
}

/* `sticky`: then an event query that the simulator fails with an illegal address (run with
 * SIMCUDA_FAIL=event_query:nth=1), a sticky error every later runtime call returns, cached block
 * or not. */
static void
after_sticky_error(void)
{
    void *live = NULL, *again = NULL;
    cudaEvent_t event;
    expect("live 4096", fast_path_alloc(&live, 4096), cudaSuccess);
    expect("event", cudaEventCreate(&event), cudaSuccess);
    expect("event query", cudaEventQuery(event), cudaErrorIllegalAddress);
    expect("4096 after the sticky error", fast_path_alloc(&again, 4096), cudaErrorIllegalAddress);
    expect("free after the sticky error", fast_path_free(live), cudaErrorIllegalAddress);
}

int
main(int argc, char **argv)
{
    void *a = NULL, *b = NULL, *c = NULL, *z = (void *)1, *m = NULL;
    expect("first 4096", fast_path_alloc(&a, 4096), cudaSuccess);
    expect("free first", fast_path_free(a), cudaSuccess);
    expect("second 4096", fast_path_alloc(&b, 4096), cudaSuccess);
    printf("second reuses the first: %d\n", a == b);
    expect("free second", fast_path_free(b), cudaSuccess);
    expect("3 MiB", fast_path_alloc(&c, 3 << 20), cudaSuccess);
    expect("free 3 MiB", fast_path_free(c), cudaSuccess);
    expect("size 0", fast_path_alloc(&z, 0), cudaSuccess);
    printf("size 0 gives NULL: %d\n", z == NULL);
    expect("free NULL", fast_path_free(NULL), cudaSuccess);
    /* The freed second block again: the driver's answer to a pointer it no longer holds. */
    expect("free stale", fast_path_free(b), cudaErrorInvalidValue);
    expect("last error after stale", cudaGetLastError(), cudaErrorInvalidValue);
    expect("managed", cudaMallocManaged(&m, 8192, cudaMemAttachGlobal), cudaSuccess);
    expect("free managed", fast_path_free(m), cudaSuccess);
    expect("last error", cudaGetLastError(), cudaSuccess);
    if (argc > 1 && strcmp(argv[1], "sticky") == 0)
        after_sticky_error();
    printf("failures: %d\n", failures);
    return failures != 0;
}
