/* static_style: links to neither libcuda nor libcudart. Like a statically linked cudart it
 * dlopen()s libcuda.so.1, dlsym()s cuGetProcAddress_v2 and resolves every driver entry point
 * through it with an explicit (name, version, flags), then allocates, copies and frees.
 * Usage: static_style [ROUNDS=10]. Output (one line, deterministic):
 *   static_style: rounds=R allocs=A frees=F bytes=B checksum=C */
#include "app_common.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <string.h>

#define APP       "static_style"
#define PER_ROUND 4
#define SAMPLE    128

#define CK(call)                                                                                   \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        APP_CHECK(APP, r_ == CUDA_SUCCESS, #call, r_);                                             \
    } while (0)

static PFN_cuGetProcAddress_v12000 get_proc;

/* One lookup; fails the program if the driver lacks the entry. */
static void *
lookup(const char *name, int version)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = get_proc(name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &st);
    if (r != CUDA_SUCCESS || fn == NULL || st != CU_GET_PROC_ADDRESS_SUCCESS) {
        printf(APP ": FAIL cuGetProcAddress(%s, %d) = %d status %d\n", name, version, (int)r,
               (int)st);
        exit(1);
    }
    return fn;
}

#define LOOKUP(var, name, version)                                                                 \
    do {                                                                                           \
        void *fn_ = lookup(name, version);                                                         \
        memcpy(&var, &fn_, sizeof var);                                                            \
    } while (0)

int
main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 10;
    APP_CHECK(APP, rounds >= 0, "rounds >= 0", rounds);
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    APP_CHECK(APP, h != NULL, "dlopen(libcuda.so.1)", 0);
    void *sym = dlsym(h, "cuGetProcAddress_v2");
    APP_CHECK(APP, sym != NULL, "dlsym(cuGetProcAddress_v2)", 0);
    memcpy(&get_proc, &sym, sizeof sym);
    /* Like cudart: switch to the pointer the driver returns for cuGetProcAddress@12000. */
    LOOKUP(get_proc, "cuGetProcAddress", 12000);

    PFN_cuInit_v2000 p_init;
    PFN_cuDeviceGet_v2000 p_device_get;
    PFN_cuDevicePrimaryCtxRetain_v7000 p_retain;
    PFN_cuCtxSetCurrent_v4000 p_set_current;
    PFN_cuMemAlloc_v3020 p_alloc;
    PFN_cuMemFree_v3020 p_free;
    PFN_cuMemcpyHtoD_v3020 p_htod;
    PFN_cuMemcpyDtoH_v3020 p_dtoh;
    LOOKUP(p_init, "cuInit", 2000);
    LOOKUP(p_device_get, "cuDeviceGet", 2000);
    LOOKUP(p_retain, "cuDevicePrimaryCtxRetain", 7000);
    LOOKUP(p_set_current, "cuCtxSetCurrent", 4000);
    LOOKUP(p_alloc, "cuMemAlloc", 3020);
    LOOKUP(p_free, "cuMemFree", 3020);
    LOOKUP(p_htod, "cuMemcpyHtoD", 3020);
    LOOKUP(p_dtoh, "cuMemcpyDtoH", 3020);

    CUdevice dev;
    CUcontext ctx;
    CK(p_init(0));
    CK(p_device_get(&dev, 0));
    CK(p_retain(&ctx, dev));
    CK(p_set_current(ctx));

    uint64_t rng = 0x57A7ull, checksum = APP_FNV_OFFSET;
    unsigned long long allocs = 0, frees = 0, bytes = 0;
    unsigned char host[SAMPLE], back[SAMPLE];
    for (int round = 0; round < rounds; round++) {
        CUdeviceptr p[PER_ROUND];
        for (int i = 0; i < PER_ROUND; i++) {
            uint64_t r = app_rand(&rng);
            size_t base = (size_t)2048 << (r % 12); /* 2 KiB .. ~6 MiB */
            size_t n = base + (size_t)((r >> 16) % (base / 2));
            CK(p_alloc(&p[i], n));
            allocs++;
            bytes += n;
            for (int j = 0; j < SAMPLE; j += 8) {
                uint64_t v = app_rand(&rng);
                memcpy(host + j, &v, 8);
            }
            CK(p_htod(p[i] + n - SAMPLE, host, SAMPLE));
            CK(p_dtoh(back, p[i] + n - SAMPLE, SAMPLE));
            APP_CHECK(APP, memcmp(host, back, SAMPLE) == 0, "HtoD/DtoH round trip", round);
            checksum = app_fnv(checksum, back, SAMPLE);
        }
        for (int i = 0; i < PER_ROUND; i++) {
            CK(p_free(p[i]));
            frees++;
        }
    }
    printf(APP ": rounds=%d allocs=%llu frees=%llu bytes=%llu checksum=%016llx\n", rounds, allocs,
           frees, bytes, (unsigned long long)checksum);
    return 0;
}
