/* oom_repeat: a program that catches its out-of-memory errors and goes on: asks BURST times for
 * more than the device holds, sleeps PAUSE_MS, then asks AFTER more times (each request 1 TiB;
 * every one fails, none is sticky). Arguments: BURST PAUSE_MS AFTER (default 12 1500 1).
 * Output: oom_repeat: failed=N */
#include "app_common.h"

#include <cuda_runtime_api.h>
#include <time.h>

#define APP "oom_repeat"

static int
ask(void)
{
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, (size_t)1 << 40);
    APP_CHECK(APP, e == cudaErrorMemoryAllocation, "cudaMalloc of 1 TiB", e);
    (void)cudaGetLastError();
    return 1;
}

int
main(int argc, char **argv)
{
    int burst = argc > 1 ? atoi(argv[1]) : 12;
    long pause_ms = argc > 2 ? atol(argv[2]) : 1500;
    int after = argc > 3 ? atoi(argv[3]) : 1;
    int failed = 0;
    for (int i = 0; i < burst; i++)
        failed += ask();
    struct timespec ts = {pause_ms / 1000, (pause_ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
    for (int i = 0; i < after; i++)
        failed += ask();
    printf(APP ": failed=%d\n", failed);
    return 0;
}
