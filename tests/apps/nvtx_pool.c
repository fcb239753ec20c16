/* nvtx_pool: a program with a device memory pool of its own, annotated for tools the way NVIDIA's
 * NVTX suballocation samples do (nvToolsExtMem.h): one cudaMalloc is the heap, regions are
 * carved from it, resized, named (an ASCII name, a registered string), unregistered, the heap is
 * reset, then unregistered and freed. Without a tool every NVTX call is a no-op.
 * Usage: nvtx_pool [full|leak|free_registered] [SNAPSHOT]
 *   full: the whole life; with SNAPSHOT, cuprof_dump_snapshot(SNAPSHOT) while weights,
 *     activations (resized 16 -> 12 MiB) and grads are live and scratch was unregistered;
 *   leak: after the reset, "kv cache" is registered and never unregistered, nor the heap, nor
 *     the pool freed;
 *   free_registered: the pool is freed while the heap and "weights" are still registered, then
 *     64 MiB are allocated again (the same address, from cuprof's cache) and kept.
 * Output: `offset name size` per live region at the dump point, then `nvtx_pool: ok`. */
#include "app_common.h"

#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExtMem.h>
#include <string.h>

#include "preload/cuprof.h"

#define APP "nvtx_pool"
#define MIB ((size_t)1 << 20)

/* The pool: a bump allocator over one device allocation, its regions told to NVTX. */
struct pool {
    nvtxDomainHandle_t domain;
    nvtxMemHeapHandle_t heap;
    char *base;
    size_t size, used;
};

static void
pool_create(struct pool *p, size_t size)
{
    memset(p, 0, sizeof *p);
    cudaError_t rc = cudaMalloc((void **)&p->base, size);
    APP_CHECK(APP, rc == cudaSuccess, "cudaMalloc", rc);
    p->size = size;
    p->domain = nvtxDomainCreateA("mypool");
    nvtxMemVirtualRangeDesc_t range = {.size = size, .ptr = p->base};
    nvtxMemHeapDesc_t desc;
    memset(&desc, 0, sizeof desc);
    desc.extCompatID = NVTX_EXT_COMPATID_MEM;
    desc.structSize = sizeof desc;
    desc.usage = NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR;
    desc.type = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    desc.typeSpecificDescSize = sizeof range;
    desc.typeSpecificDesc = &range;
    p->heap = nvtxMemHeapRegister(p->domain, &desc);
}

static void *
pool_alloc(struct pool *p, size_t size)
{
    APP_CHECK(APP, p->used + size <= p->size, "pool full", p->used);
    void *ptr = p->base + p->used;
    p->used += size;
    nvtxMemVirtualRangeDesc_t range = {.size = size, .ptr = ptr};
    nvtxMemRegionsRegisterBatch_t batch;
    memset(&batch, 0, sizeof batch);
    batch.extCompatID = NVTX_EXT_COMPATID_MEM;
    batch.structSize = sizeof batch;
    batch.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    batch.heap = p->heap;
    batch.regionCount = 1;
    batch.regionDescElementSize = sizeof range;
    batch.regionDescElements = &range;
    nvtxMemRegionsRegister(p->domain, &batch);
    return ptr;
}

static void
pool_resize(struct pool *p, void *ptr, size_t size)
{
    nvtxMemVirtualRangeDesc_t range = {.size = size, .ptr = ptr};
    nvtxMemRegionsResizeBatch_t batch;
    memset(&batch, 0, sizeof batch);
    batch.extCompatID = NVTX_EXT_COMPATID_MEM;
    batch.structSize = sizeof batch;
    batch.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
    batch.regionDescCount = 1;
    batch.regionDescElementSize = sizeof range;
    batch.regionDescElements = &range;
    nvtxMemRegionsResize(p->domain, &batch);
}

static void
pool_name(struct pool *p, void *ptr, int32_t type, nvtxMessageValue_t name)
{
    nvtxMemRegionNameDesc_t one;
    memset(&one, 0, sizeof one);
    one.regionRefType = NVTX_MEM_REGION_REF_TYPE_POINTER;
    one.nameType = (uint32_t)type;
    one.region.pointer = ptr;
    one.name = name;
    nvtxMemRegionsNameBatch_t batch;
    memset(&batch, 0, sizeof batch);
    batch.extCompatID = NVTX_EXT_COMPATID_MEM;
    batch.structSize = sizeof batch;
    batch.regionCount = 1;
    batch.regionElementSize = sizeof one;
    batch.regionElements = &one;
    nvtxMemRegionsName(p->domain, &batch);
}

static void
pool_free(struct pool *p, void *ptr)
{
    nvtxMemRegionRef_t ref = {.pointer = ptr};
    nvtxMemRegionsUnregisterBatch_t batch;
    memset(&batch, 0, sizeof batch);
    batch.extCompatID = NVTX_EXT_COMPATID_MEM;
    batch.structSize = sizeof batch;
    batch.refType = NVTX_MEM_REGION_REF_TYPE_POINTER;
    batch.refCount = 1;
    batch.refElementSize = sizeof ref;
    batch.refElements = &ref;
    nvtxMemRegionsUnregister(p->domain, &batch);
}

static void
pool_reset(struct pool *p)
{
    nvtxMemHeapReset(p->domain, p->heap);
    p->used = 0;
}

static void
pool_destroy(struct pool *p)
{
    nvtxMemHeapUnregister(p->domain, p->heap);
    cudaError_t rc = cudaFree(p->base);
    APP_CHECK(APP, rc == cudaSuccess, "cudaFree", rc);
}

static void
named(struct pool *p, void *ptr, const char *name)
{
    nvtxMessageValue_t v = {.ascii = name};
    pool_name(p, ptr, NVTX_MESSAGE_TYPE_ASCII, v);
}

int
main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "full";
    struct pool p;
    pool_create(&p, 64 * MIB);
    void *weights = pool_alloc(&p, 8 * MIB);
    named(&p, weights, "weights");
    if (strcmp(mode, "free_registered") == 0) {
        cudaError_t rc = cudaFree(p.base); /* heap and region still registered */
        APP_CHECK(APP, rc == cudaSuccess, "cudaFree", rc);
        void *again = NULL; /* (cached: the same address) a plain allocation, no heap */
        rc = cudaMalloc(&again, 64 * MIB);
        APP_CHECK(APP, rc == cudaSuccess, "cudaMalloc", rc);
        printf("same_address=%d\n", again == (void *)p.base);
        printf("%s: ok\n", APP);
        return 0;
    }
    void *activations = pool_alloc(&p, 16 * MIB);
    named(&p, activations, "activations");
    void *scratch = pool_alloc(&p, 4 * MIB);
    named(&p, scratch, "scratch");
    void *grads = pool_alloc(&p, 8 * MIB);
    nvtxMessageValue_t reg = {.registered = nvtxDomainRegisterStringA(p.domain, "grads")};
    pool_name(&p, grads, NVTX_MESSAGE_TYPE_REGISTERED, reg);
    pool_resize(&p, activations, 12 * MIB);
    pool_free(&p, scratch);
    printf("0 weights %zu\n%zu activations %zu\n%zu grads %zu\n", 8 * MIB, 8 * MIB, 12 * MIB,
           32 * MIB, 8 * MIB);
    if (argc > 2)
        printf("dump=%d\n", cuprof_dump_snapshot(argv[2]));
    pool_reset(&p);
    if (strcmp(mode, "leak") == 0) {
        void *kv = pool_alloc(&p, 2 * MIB); /* never unregistered */
        named(&p, kv, "kv cache");
        printf("%s: ok\n", APP);
        return 0;
    }
    pool_destroy(&p);
    printf("%s: ok\n", APP);
    return 0;
}
