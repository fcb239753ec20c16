/* gpa_probe.c: walks the driver-lookup paths a program can take and prints, for each pointer it
 * gets, whether it lies in libcuprof ("C") or elsewhere ("-"), then allocates and frees through
 * the pointers it was given. The test runs it with and without the shim and checks the letters. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef CUresult (*gpa_v2_fn)(const char *, void **, int, cuuint64_t,
                              CUdriverProcAddressQueryResult *);
typedef CUresult (*gpa_v1_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);
typedef CUresult (*init_fn)(unsigned int);
typedef CUresult (*retain_fn)(CUcontext *, CUdevice);
typedef CUresult (*set_fn)(CUcontext);

#define TO_FN(dst, src) memcpy(&(dst), &(src), sizeof(dst))

static char
where(void *p)
{
    Dl_info info;
    if (p == NULL)
        return '0';
    if (dladdr(p, &info) == 0 || info.dli_fname == NULL)
        return '?';
    return strstr(info.dli_fname, "libcuprof") ? 'C' : '-';
}

int
main(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (lib == NULL) {
        printf("gpa_probe: no driver\n");
        return 1;
    }
    void *p_v2 = dlsym(lib, "cuGetProcAddress_v2");
    gpa_v2_fn gpa;
    TO_FN(gpa, p_v2);
    void *self11 = NULL, *self12 = NULL, *alloc = NULL, *alloc_old = NULL, *free_p = NULL;
    void *dev2000 = NULL, *dev13000 = NULL, *async0 = NULL, *async2 = NULL, *init = NULL;
    void *retain = NULL, *setctx = NULL, *v1free = NULL;
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    CUresult r11 = gpa("cuGetProcAddress", &self11, 11030, 0, NULL);
    CUresult r12 = gpa("cuGetProcAddress", &self12, 12000, 0, &status);
    gpa_v2_fn gpa12;
    gpa_v1_fn gpa11;
    TO_FN(gpa12, self12);
    TO_FN(gpa11, self11);
    /* Everything below goes through the pointer returned for 12000, like cudart. */
    gpa12("cuInit", &init, 2000, 0, NULL);
    gpa12("cuDevicePrimaryCtxRetain", &retain, 7000, 0, NULL);
    gpa12("cuCtxSetCurrent", &setctx, 4000, 0, NULL);
    gpa12("cuMemAlloc", &alloc, 3020, 0, NULL);
    CUresult r_old = gpa12("cuMemAlloc", &alloc_old, 2000, 0, NULL);
    gpa12("cuCtxGetDevice", &dev2000, 2000, 0, NULL);
    gpa12("cuCtxGetDevice", &dev13000, 13000, 0, NULL);
    gpa12("cuMemAllocAsync", &async0, 11020, 0, NULL);
    gpa12("cuMemAllocAsync", &async2, 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL);
    gpa11("cuMemFree", &v1free, 3020, 0);
    void *unknown = (void *)1;
    CUdriverProcAddressQueryResult status_unknown = CU_GET_PROC_ADDRESS_SUCCESS;
    CUresult r_unknown = gpa12("cuNoSuchFunction", &unknown, 12000, 0, &status_unknown);
    /* The versioned names of cudart's fallback path, and the unsuffixed 32-bit one. */
    void *by_name_v2 = dlsym(lib, "cuMemAlloc_v2");
    void *by_name_plain = dlsym(lib, "cuMemAlloc");
    void *by_name_ptsz = dlsym(lib, "cuMemFreeAsync_ptsz");
    void *by_name_other = dlsym(lib, "cuCtxGetDevice");
    /* The driver was opened RTLD_LOCAL: the global scope does not have it, with or without us. */
    void *global = dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
    free_p = v1free;

    init_fn cu_init;
    retain_fn cu_retain;
    set_fn cu_set;
    alloc_fn cu_alloc;
    free_fn cu_free;
    TO_FN(cu_init, init);
    TO_FN(cu_retain, retain);
    TO_FN(cu_set, setctx);
    TO_FN(cu_alloc, alloc);
    TO_FN(cu_free, free_p);
    CUcontext ctx = NULL;
    CUdeviceptr ptr = 0;
    CUresult ra = cu_init(0);
    if (ra == CUDA_SUCCESS)
        ra = cu_retain(&ctx, 0);
    if (ra == CUDA_SUCCESS)
        ra = cu_set(ctx);
    if (ra == CUDA_SUCCESS)
        ra = cu_alloc(&ptr, 4096);
    CUresult rf = ra == CUDA_SUCCESS ? cu_free(ptr) : ra;
    CUresult rf2 = cu_free(ptr); /* the driver's answer to a second free */

    printf("gpa_probe: self11=%d%c self12=%d%c status=%d init=%c alloc=%c alloc2000=%d%c "
           "free_v1abi=%c dev2000=%c dev13000=%c dev_same=%d async0=%c async2=%c async_same=%d "
           "unknown=%d%c/%d name_v2=%c name_plain=%c name_ptsz=%c name_other=%c global=%c "
           "alloc_rc=%d free_rc=%d free_again_rc=%d\n",
           r11, where(self11), r12, where(self12), status, where(init), where(alloc), r_old,
           where(alloc_old), where(v1free), where(dev2000), where(dev13000), dev2000 == dev13000,
           where(async0), where(async2), async0 == async2, r_unknown, where(unknown),
           status_unknown, where(by_name_v2), where(by_name_plain), where(by_name_ptsz),
           where(by_name_other), where(global), ra, rf, rf2);
    return 0;
}
