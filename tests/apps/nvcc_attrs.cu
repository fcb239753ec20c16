// nvcc_attrs: every pointer attribute, alone and all at once, and cudaPointerGetAttributes, for
// a live allocation, the byte past it, a freed one and addresses where nothing ever was.
// Compared with tests/integration/nvcc/real/nvcc_attrs.out.
#include <cstdio>
#include <cstring>
#include <cuda.h>
#include <cuda_runtime.h>
static const char *
cu(CUresult r)
{
    const char *s = nullptr;
    cuGetErrorName(r, &s);
    return s ? s : "?";
}
static const CUpointer_attribute A[] = {CU_POINTER_ATTRIBUTE_CONTEXT,
                                        CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                        CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
                                        CU_POINTER_ATTRIBUTE_HOST_POINTER,
                                        CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
                                        CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                        CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                        CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                        CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
                                        CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                        CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                        CU_POINTER_ATTRIBUTE_MAPPED,
                                        CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE};
static const char *N[] = {"ctx",     "type", "devptr", "hostptr", "syncmemops", "bufid", "managed",
                          "ordinal", "ipc",  "start",  "size",    "mapped",     "pool"};
enum { NA = sizeof(A) / sizeof(A[0]) };
static void
show(const char *what, CUdeviceptr p, CUdeviceptr rel)
{
    printf("%s singular:", what);
    for (int i = 0; i < NA; i++) {
        unsigned long long v = 0x5a5a5a5a5a5a5a5aull;
        CUresult r = cuPointerGetAttribute(&v, A[i], p);
        if (r != CUDA_SUCCESS)
            printf(" %s=%s", N[i], cu(r));
        else if (i == 0 || i == 5 || i == 12)
            printf(" %s=%s", N[i], v == 0 ? "0" : v == 0x5a5a5a5a5a5a5a5aull ? "untouched" : "set");
        else if (i == 2 || i == 3 || i == 9)
            printf(" %s=%s", N[i], v == 0 ? "0" : v == rel ? "base" : v == p ? "ptr" : "other");
        else
            printf(" %s=%llx", N[i], v);
    }
    unsigned long long vals[NA];
    void *data[NA];
    for (int i = 0; i < NA; i++) {
        vals[i] = 0x5a5a5a5a5a5a5a5aull;
        data[i] = &vals[i];
    }
    CUresult r = cuPointerGetAttributes(NA, (CUpointer_attribute *)A, data, p);
    printf("\n%s plural=%s:", what, cu(r));
    for (int i = 0; i < NA; i++) {
        unsigned long long v = vals[i];
        if (v == 0x5a5a5a5a5a5a5a5aull)
            printf(" %s=untouched", N[i]);
        else if (i == 0 || i == 5 || i == 12)
            printf(" %s=%s", N[i], v == 0 ? "0" : "set");
        else if (i == 2 || i == 3 || i == 9)
            printf(" %s=%s", N[i], v == 0 ? "0" : v == rel ? "base" : v == p ? "ptr" : "other");
        else
            printf(" %s=%llx", N[i], v & (i == 4 || i == 6 || i == 8 || i == 11 ? 0xff : ~0ull));
    }
    cudaPointerAttributes pa;
    memset(&pa, 0x5a, sizeof pa);
    cudaError_t e = cudaPointerGetAttributes(&pa, (void *)p);
    printf("\n%s runtime=%s type=%d device=%d devptr=%s\n", what, cudaGetErrorName(e), (int)pa.type,
           pa.device,
           pa.devicePointer == nullptr          ? "0"
           : (CUdeviceptr)pa.devicePointer == p ? "ptr"
                                                : "other");
    cudaGetLastError();
}
int
main()
{
    cudaFree(0);
    void *keep, *a, *gone;
    cudaMalloc(&keep, 1000);
    cudaMalloc(&a, 3000);
    cudaMalloc(&gone, 2000);
    cudaFree(gone);
    show("live+100", (CUdeviceptr)a + 100, (CUdeviceptr)a);
    show("past_end", (CUdeviceptr)a + 3000, (CUdeviceptr)a);
    show("freed", (CUdeviceptr)gone, (CUdeviceptr)gone);
    show("addr_1", 1, 0);
    show("addr_0x1000", 0x1000, 0);
    show("addr_0", 0, 0);
    cudaFree(a);
    cudaFree(keep);
    return 0;
}
