/* buffer_id_app.c: CU_POINTER_ATTRIBUTE_BUFFER_ID, which cuda.h guarantees "unique within the
 * process". Two live cudaMalloc blocks (in cache mode cut from one segment), an address inside
 * one and the plural call, a new allocation where a freed one was (cache mode: the same cached
 * block), and memory the driver allocates itself (managed, page-locked host, stream-ordered):
 * every allocation has its own ID, kept while it lives and never handed to another. The last
 * line says whether a cudaMalloc block's ID has its top bit set, where cuprof's cache numbers
 * its blocks. Prints one line per check. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>

static unsigned long long
id_of(const void *p)
{
    unsigned long long id = 0;
    CUresult r =
        cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, (CUdeviceptr)(uintptr_t)p);
    return r == CUDA_SUCCESS ? id : 0;
}

static unsigned long long
plural_id_of(const void *p)
{
    unsigned long long id = 0;
    int type = 0;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                   CU_POINTER_ATTRIBUTE_BUFFER_ID};
    void *data[] = {&type, &id};
    CUresult r = cuPointerGetAttributes(2, attrs, data, (CUdeviceptr)(uintptr_t)p);
    return r == CUDA_SUCCESS ? id : 0;
}

/* True when the n IDs are all set and pairwise different. */
static int
all_distinct(const unsigned long long *ids, int n)
{
    for (int i = 0; i < n; i++) {
        if (ids[i] == 0)
            return 0;
        for (int j = 0; j < i; j++)
            if (ids[i] == ids[j])
                return 0;
    }
    return 1;
}

int
main(void)
{
    void *a = NULL, *b = NULL, *c = NULL, *m = NULL, *h = NULL, *x = NULL;
    cudaStream_t s;
    if (cudaMalloc(&a, 1000) != cudaSuccess || cudaMalloc(&b, 1000) != cudaSuccess) {
        printf("buffer_id_app: allocation failed\n");
        return 1;
    }
    unsigned long long ia = id_of(a), ib = id_of(b);
    unsigned long long pair[] = {ia, ib};
    printf("live distinct=%d inside_same=%d plural_same=%d\n", all_distinct(pair, 2),
           id_of((char *)b + 999) == ib, plural_id_of((char *)b + 1) == ib);
    if (cudaFree(a) != cudaSuccess || cudaMalloc(&c, 1000) != cudaSuccess) {
        printf("buffer_id_app: reallocation failed\n");
        return 1;
    }
    unsigned long long ic = id_of(c);
    unsigned long long three[] = {ia, ib, ic};
    printf("reuse same_address=%d new_id=%d b_kept=%d\n", c == a, all_distinct(three, 3),
           id_of(b) == ib);
    if (cudaMallocManaged(&m, 1000, cudaMemAttachGlobal) != cudaSuccess ||
        cudaMallocHost(&h, 1000) != cudaSuccess ||
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
        cudaMallocAsync(&x, 1000, s) != cudaSuccess || cudaStreamSynchronize(s) != cudaSuccess) {
        printf("buffer_id_app: other allocations failed\n");
        return 1;
    }
    unsigned long long all[] = {ia, ib, ic, id_of(m), id_of(h), id_of(x)};
    printf("others distinct=%d\n", all_distinct(all, 6));
    printf("top_bit=%d\n", (int)(ib >> 63));
    cudaFreeAsync(x, s);
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
    cudaFreeHost(h);
    cudaFree(m);
    cudaFree(c);
    cudaFree(b);
    return 0;
}
