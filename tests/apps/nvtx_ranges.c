/* nvtx_ranges: a program that marks its phases with NVTX (the toolkit's header-only nvtx3), the way
 * training code does, around device allocations: a range opened before the first CUDA call, a
 * mark, nested push/pop ranges, a wide-character message, a domain of its own with a registered
 * string and event attributes, a start/end range ended on another thread, workers on several
 * threads one after another, then four at once, and a range left open at exit. Without a tool
 * every NVTX call is a no-op (a push returns -2); under cuprof each is an annotation.
 * Usage: nvtx_ranges [oom]: with `oom`, "forward" also asks for 1 TiB (refused: `oom=2`).
 * Output: one `name=value` line per NVTX return value, then `nvtx_ranges: ok`. */
#include "app_common.h"

#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <string.h>

#define APP "nvtx_ranges"
#define MIB ((size_t)1 << 20)

static void *
alloc(size_t size)
{
    void *p = NULL;
    cudaError_t rc = cudaMalloc(&p, size);
    APP_CHECK(APP, rc == cudaSuccess, "cudaMalloc", rc);
    return p;
}

static void
release(void *p)
{
    cudaError_t rc = cudaFree(p);
    APP_CHECK(APP, rc == cudaSuccess, "cudaFree", rc);
}

/* Nested ranges on a thread of its own: "worker K" > "step" around an allocation. */
static void *
worker(void *arg)
{
    int k = (int)(intptr_t)arg;
    char name[32];
    snprintf(name, sizeof name, "worker %d", k);
    nvtxRangePushA(name);
    nvtxRangePushA("step");
    void *p = alloc((size_t)(k + 1) * MIB);
    nvtxRangePop();
    release(p);
    nvtxRangePop();
    return NULL;
}

static void *
parallel(void *arg)
{
    (void)arg;
    nvtxRangePushA("parallel");
    release(alloc(MIB / 2));
    nvtxRangePop();
    return NULL;
}

static void *
end_range(void *arg)
{
    nvtxRangeEnd(*(nvtxRangeId_t *)arg);
    return NULL;
}

static void
run_threads(void *(*fn)(void *), int count, int at_once)
{
    pthread_t t[8];
    for (int k = 0; k < count; k++) {
        pthread_create(&t[k], NULL, fn, (void *)(intptr_t)k);
        if (!at_once)
            pthread_join(t[k], NULL);
    }
    for (int k = 0; at_once && k < count; k++)
        pthread_join(t[k], NULL);
}

/* A domain of its own, a registered string as the message: the range "mylib:kernel". */
static void
library_call(void)
{
    nvtxDomainHandle_t domain = nvtxDomainCreateA("mylib");
    nvtxStringHandle_t kernel = nvtxDomainRegisterStringA(domain, "kernel");
    nvtxEventAttributes_t attr;
    memset(&attr, 0, sizeof attr);
    attr.version = NVTX_VERSION;
    attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attr.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    attr.message.registered = kernel;
    printf("domain_push=%d\n", nvtxDomainRangePushEx(domain, &attr));
    void *scratch = alloc(2 * MIB);
    release(scratch);
    attr.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attr.message.ascii = "launched";
    nvtxDomainMarkEx(domain, &attr);
    printf("domain_pop=%d\n", nvtxDomainRangePop(domain));
    printf("domain_pop_empty=%d\n", nvtxDomainRangePop(domain));
    nvtxDomainDestroy(domain);
}

int
main(int argc, char **argv)
{
    printf("push_train=%d\n", nvtxRangePushA("train")); /* before any CUDA call */
    void *weights = alloc(4 * MIB);
    nvtxMarkA("loaded");
    printf("push_forward=%d\n", nvtxRangePushA("forward"));
    void *activations = alloc(8 * MIB);
    if (argc > 1 && strcmp(argv[1], "oom") == 0) {
        void *huge = NULL;
        printf("oom=%d\n", (int)cudaMalloc(&huge, MIB << 20));
    }
    printf("pop_forward=%d\n", nvtxRangePop());
    nvtxRangePushW(L"backward \u2202");
    release(activations);
    nvtxRangePop();
    library_call();
    nvtxRangeId_t io = nvtxRangeStartA("io");
    pthread_t ender;
    pthread_create(&ender, NULL, end_range, &io);
    pthread_join(ender, NULL);
    run_threads(worker, 3, 0);
    nvtxMarkA("parallel begins");
    run_threads(parallel, 4, 1);
    nvtxMarkA("parallel ends");
    printf("pop_train=%d\n", nvtxRangePop());
    printf("pop_empty=%d\n", nvtxRangePop());
    nvtxRangePushA("teardown"); /* never popped: open at exit */
    release(weights);
    printf("%s: ok\n", APP);
    return 0;
}
