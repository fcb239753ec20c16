/* peer_app.c: two devices and peer access, for cuprof's expandable segments (PyTorch gives every
 * device that enabled access to a device's memory access to each page its expandable segments
 * map). Device 1 reads device 0's memory, device 0 reads device 1's:
 *   1. `early`: device 1 enables access to device 0 (cudaDeviceEnablePeerAccess) before any
 *      allocation; `late`: after A (30 MiB on device 0) was made, and a copy of A run by device
 *      1 before it is reported (under cuprof's expandable segments it faults: no access yet).
 *   2. Enabling again reports cudaErrorPeerAccessAlreadyEnabled; a device and itself
 *      cudaErrorInvalidDevice.
 *   3. B (50 MiB on device 0) is made after the enabling: its pages grow the segment.
 *   4. Device 1 copies A and B (both ends) into its own memory and checks the bytes; every 2 MiB
 *      of A and B is read-write for device 1 (cuMemGetAccess).
 *   5. Device 0 enables access to device 1's memory with cuCtxEnablePeerAccess (C, 8 MiB on
 *      device 1, made before), reads C and checks each 2 MiB of it.
 * Usage: peer_app early|late. Output (one line):
 *   peer_app: copy_before=E enable=E again=E self=E access_a=N/M access_b=N/M access_c=N/M
 *   copies=OK|BAD */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#define MIB  ((size_t)1 << 20)
#define GRAN (2 * MIB)

#define CK(call)                                                                                   \
    do {                                                                                           \
        int e_ = (int)(call);                                                                      \
        if (e_ != 0) {                                                                             \
            printf("peer_app: %s failed: %d\n", #call, e_);                                        \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

/* Every 2 MiB of [p, p + n) that `device` may read and write. */
static int
count_rw(const void *p, size_t n, int device, int *total)
{
    CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device};
    uintptr_t first = (uintptr_t)p & ~(uintptr_t)(GRAN - 1), end = (uintptr_t)p + n;
    int rw = 0;
    *total = 0;
    for (uintptr_t a = first; a < end; a += GRAN) {
        unsigned long long flags = 0;
        (*total)++;
        rw += cuMemGetAccess(&flags, &loc, (CUdeviceptr)a) == CUDA_SUCCESS &&
              flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    }
    return rw;
}

/* The current device copies both ends of src (filled with `byte`) into dst; 0 or its error. */
static int
copy_check(void *dst, const void *src, size_t n, unsigned char byte, int *same)
{
    unsigned char host[64];
    for (int end = 0; end < 2; end++) {
        size_t off = end ? n - sizeof(host) : 0;
        CUresult r = cuMemcpyDtoD((CUdeviceptr)dst, (CUdeviceptr)src + off, sizeof(host));
        if (r != CUDA_SUCCESS)
            return (int)r;
        if (cuMemcpyDtoH(host, (CUdeviceptr)dst, sizeof(host)) != CUDA_SUCCESS)
            return -1;
        for (size_t i = 0; i < sizeof(host); i++)
            *same &= host[i] == byte;
    }
    return 0;
}

int
main(int argc, char **argv)
{
    int early = argc > 1 && strcmp(argv[1], "early") == 0;
    size_t a_n = 30 * MIB, b_n = 50 * MIB, c_n = 8 * MIB;
    void *a = NULL, *b = NULL, *c = NULL, *scratch = NULL, *scratch0 = NULL;
    int copy_before = -1, enable = -1, again = -1, self = -1, same = 1, at, bt, ct;

    CK(cudaSetDevice(1));
    CK(cudaMalloc(&c, c_n));
    CK(cudaMemset(c, 0xC3, c_n));
    CK(cudaMalloc(&scratch, MIB));
    if (early)
        enable = (int)cudaDeviceEnablePeerAccess(0, 0);
    CK(cudaSetDevice(0));
    CK(cudaMalloc(&a, a_n));
    CK(cudaMemset(a, 0xA1, a_n));
    CK(cudaDeviceSynchronize());
    CK(cudaSetDevice(1));
    if (!early) {
        int ignored = 1;
        copy_before = copy_check(scratch, a, a_n, 0xA1, &ignored);
        enable = (int)cudaDeviceEnablePeerAccess(0, 0);
    }
    again = (int)cudaDeviceEnablePeerAccess(0, 0);
    (void)cudaGetLastError(); /* PyTorch clears "already enabled" too */
    self = (int)cudaDeviceEnablePeerAccess(1, 0);
    (void)cudaGetLastError();

    CK(cudaSetDevice(0));
    CK(cudaMalloc(&b, b_n));
    CK(cudaMemset(b, 0xB2, b_n));
    CK(cudaDeviceSynchronize());

    CK(cudaSetDevice(1));
    int copies = copy_check(scratch, a, a_n, 0xA1, &same);
    if (copies == 0)
        copies = copy_check(scratch, b, b_n, 0xB2, &same);
    int access_a = count_rw(a, a_n, 1, &at), access_b = count_rw(b, b_n, 1, &bt);

    /* Device 0 reads device 1's memory, enabled through the driver API. */
    CUcontext ctx1 = NULL;
    CK(cuCtxGetCurrent(&ctx1));
    CK(cudaSetDevice(0));
    CK(cuCtxEnablePeerAccess(ctx1, 0));
    CK(cudaMalloc(&scratch0, MIB));
    if (copies == 0)
        copies = copy_check(scratch0, c, c_n, 0xC3, &same);
    int access_c = count_rw(c, c_n, 0, &ct);

    printf("peer_app: copy_before=%d enable=%d again=%d self=%d access_a=%d/%d access_b=%d/%d "
           "access_c=%d/%d copies=%s\n",
           copy_before, enable, again, self, access_a, at, access_b, bt, access_c, ct,
           copies == 0 && same ? "OK" : "BAD");
    CK(cudaFree(scratch0));
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaSetDevice(1));
    CK(cudaFree(c));
    CK(cudaFree(scratch));
    return 0;
}
