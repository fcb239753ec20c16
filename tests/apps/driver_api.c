/* driver_api: the driver API only, linked with -lcuda: cuInit, the primary context, then rounds
 * of cuMemAlloc_v2 (varied sizes), cuMemsetD8_v2, cuMemcpyHtoD_v2/DtoD_v2/DtoH_v2 with a data
 * check, and cuMemFree_v2. Usage: driver_api [ROUNDS=20]. Output (one line, deterministic):
 *   driver_api: rounds=R allocs=A frees=F bytes=B checksum=C */
#include "app_common.h"

#include <cuda.h>
#include <string.h>

#define APP       "driver_api"
#define PER_ROUND 6
#define SAMPLE    256

#define CK(call)                                                                                   \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        APP_CHECK(APP, r_ == CUDA_SUCCESS, #call, r_);                                             \
    } while (0)

int
main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 20;
    APP_CHECK(APP, rounds >= 0, "rounds >= 0", rounds);
    CUdevice dev;
    CUcontext ctx;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));

    uint64_t rng = 0xD41Aull, checksum = APP_FNV_OFFSET;
    unsigned long long allocs = 0, frees = 0, bytes = 0;
    unsigned char host[SAMPLE], back[SAMPLE];
    for (int round = 0; round < rounds; round++) {
        CUdeviceptr p[PER_ROUND];
        size_t n[PER_ROUND];
        for (int i = 0; i < PER_ROUND; i++) {
            uint64_t r = app_rand(&rng);
            size_t base = (size_t)1024 << (r % 13); /* 1 KiB .. ~6 MiB */
            n[i] = base + (size_t)((r >> 16) % (base / 2));
            CK(cuMemAlloc(&p[i], n[i]));
            allocs++;
            bytes += n[i];
            CK(cuMemsetD8(p[i], (unsigned char)(r >> 56), n[i]));
        }
        for (int i = 0; i < SAMPLE; i += 8) {
            uint64_t r = app_rand(&rng);
            memcpy(host + i, &r, 8);
        }
        CK(cuMemcpyHtoD(p[0], host, SAMPLE));
        CK(cuMemcpyDtoD(p[PER_ROUND - 1], p[0], SAMPLE));
        CK(cuMemcpyDtoH(back, p[PER_ROUND - 1], SAMPLE));
        APP_CHECK(APP, memcmp(host, back, SAMPLE) == 0, "HtoD/DtoD/DtoH round trip", round);
        checksum = app_fnv(checksum, back, SAMPLE);
        /* The tail of the second buffer still holds its memset byte. */
        CK(cuMemcpyDtoH(back, p[1] + n[1] - SAMPLE, SAMPLE));
        checksum = app_fnv(checksum, back, SAMPLE);
        for (int i = 0; i < PER_ROUND; i++) {
            CK(cuMemFree(p[i]));
            frees++;
        }
    }
    CK(cuDevicePrimaryCtxRelease(dev));
    printf(APP ": rounds=%d allocs=%llu frees=%llu bytes=%llu checksum=%016llx\n", rounds, allocs,
           frees, bytes, (unsigned long long)checksum);
    return 0;
}
