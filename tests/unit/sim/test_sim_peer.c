/* Unit tests of the simulated driver's peer access and per-device VMM access:
 * cuDeviceCanAccessPeer, cuCtxEnablePeerAccess / cuCtxDisablePeerAccess with the driver's error
 * codes (already enabled, the same context or device, too many peers, not enabled, a destroyed
 * context), cuMemSetAccess with several descriptors, cuMemGetAccess, and a copy run by a device a
 * mapping gives no access to (it faults). Group `peer` runs with SIMCUDA_DEVICES=10,
 * SIMCUDA_MEM=64M and SIMCUDA_VMM_LOG (see meson.build). */
#include <stdlib.h>

#include "sim_test.h"

static void
test_can_access_peer(void **state)
{
    (void)state;
    int can = -1;
    assert_int_equal(cuDeviceCanAccessPeer(&can, 0, 1), CUDA_ERROR_NOT_INITIALIZED);
    assert_int_equal(cuInit(0), CUDA_SUCCESS);
    assert_int_equal(cuDeviceCanAccessPeer(&can, 0, 1), CUDA_SUCCESS);
    assert_int_equal(can, 1);
    assert_int_equal(cuDeviceCanAccessPeer(&can, 1, 1), CUDA_SUCCESS);
    assert_int_equal(can, 0);
    assert_int_equal(cuDeviceCanAccessPeer(&can, 0, 10), CUDA_ERROR_INVALID_DEVICE);
    assert_int_equal(cuDeviceCanAccessPeer(NULL, 0, 1), CUDA_ERROR_INVALID_VALUE);
}

static void
test_enable_disable(void **state)
{
    (void)state;
    CUcontext c1 = sim_test_primary(1), c0 = sim_test_primary(0), created = NULL;
    assert_int_equal(cuCtxEnablePeerAccess(c1, 1), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuCtxEnablePeerAccess(NULL, 0), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(cuCtxEnablePeerAccess(c0, 0), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(cuCtxEnablePeerAccess((CUcontext)&created, 0), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(cuCtxDisablePeerAccess(c1), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    assert_int_equal(cuCtxEnablePeerAccess(c1, 0), CUDA_SUCCESS);
    assert_int_equal(cuCtxEnablePeerAccess(c1, 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    /* One way only: device 1 has not enabled access to device 0. */
    assert_int_equal(cuCtxSetCurrent(c1), CUDA_SUCCESS);
    assert_int_equal(cuCtxDisablePeerAccess(c0), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    assert_int_equal(cuCtxEnablePeerAccess(c0, 0), CUDA_SUCCESS);
    /* Another context on the same device: cuDeviceCanAccessPeer says no. */
    CUctxCreateParams params = {0};
    assert_int_equal(cuCtxCreate_v4(&created, &params, 0, 1), CUDA_SUCCESS);
    assert_int_equal(cuCtxEnablePeerAccess(c1, 0), CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
    /* A destroyed context: its peer access goes with it, both ways. */
    assert_int_equal(cuCtxEnablePeerAccess(c0, 0), CUDA_SUCCESS);
    assert_int_equal(cuCtxSetCurrent(c0), CUDA_SUCCESS);
    assert_int_equal(cuCtxEnablePeerAccess(created, 0), CUDA_SUCCESS);
    assert_int_equal(cuCtxDestroy(created), CUDA_SUCCESS);
    assert_int_equal(cuCtxEnablePeerAccess(created, 0), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(cuCtxDisablePeerAccess(c1), CUDA_SUCCESS);
    assert_int_equal(cuCtxDisablePeerAccess(c1), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    /* A reset primary context loses its peers: device 1 may enable access to 0 again. */
    assert_int_equal(cuDevicePrimaryCtxReset(1), CUDA_SUCCESS);
    assert_int_equal(cuCtxSetCurrent(c1), CUDA_SUCCESS);
    assert_int_equal(cuCtxEnablePeerAccess(c0, 0), CUDA_SUCCESS);
    assert_int_equal(cuCtxDisablePeerAccess(c0), CUDA_SUCCESS);
}

static void
test_too_many_peers(void **state)
{
    (void)state;
    CUcontext peer[10];
    for (int d = 9; d >= 0; d--)
        peer[d] = sim_test_primary(d);
    for (int d = 1; d <= 8; d++)
        assert_int_equal(cuCtxEnablePeerAccess(peer[d], 0), CUDA_SUCCESS);
    assert_int_equal(cuCtxEnablePeerAccess(peer[9], 0), CUDA_ERROR_TOO_MANY_PEERS);
    assert_int_equal(cuCtxDisablePeerAccess(peer[4]), CUDA_SUCCESS);
    assert_int_equal(cuCtxEnablePeerAccess(peer[9], 0), CUDA_SUCCESS);
}

/* One 4 MiB mapping of device 0's memory, two handles of 2 MiB: device 0 gets access first,
 * then devices 1 and 2 in one call of two descriptors (read-write and read-only). */
static void
test_set_and_get_access(void **state)
{
    (void)state;
    CUcontext c1 = sim_test_primary(1), c0 = sim_test_primary(0);
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemGenericAllocationHandle h[2];
    CUdeviceptr va, other;
    assert_int_equal(cuMemAddressReserve(&va, 4 * MiB, 0, 0, 0), CUDA_SUCCESS);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(cuMemCreate(&h[i], 2 * MiB, &prop, 0), CUDA_SUCCESS);
        assert_int_equal(cuMemMap(va + (size_t)i * 2 * MiB, 2 * MiB, 0, h[i], 0), CUDA_SUCCESS);
        assert_int_equal(cuMemRelease(h[i]), CUDA_SUCCESS);
    }
    CUmemLocation loc[3] = {{CU_MEM_LOCATION_TYPE_DEVICE, 0},
                            {CU_MEM_LOCATION_TYPE_DEVICE, 1},
                            {CU_MEM_LOCATION_TYPE_DEVICE, 2}};
    unsigned long long flags = 99;
    assert_int_equal(cuMemGetAccess(&flags, &loc[0], va), CUDA_SUCCESS);
    assert_int_equal(flags, CU_MEM_ACCESS_FLAGS_PROT_NONE);
    CUmemAccessDesc own = {.location = loc[0], .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    assert_int_equal(cuMemSetAccess(va, 4 * MiB, &own, 1), CUDA_SUCCESS);
    const char msg[] = "device 0 wrote this";
    assert_int_equal(cuMemcpyHtoD(va + 2 * MiB, msg, sizeof(msg)), CUDA_SUCCESS);
    /* Device 1's stream runs the copy: no access yet, so it faults. */
    assert_int_equal(cuCtxSetCurrent(c1), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc(&other, 2 * MiB), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoD(other, va + 2 * MiB, sizeof(msg)), CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_int_equal(cuMemsetD8(va, 0, 16), CUDA_ERROR_ILLEGAL_ADDRESS);
    CUmemAccessDesc peers[2] = {{.location = loc[1], .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE},
                                {.location = loc[2], .flags = CU_MEM_ACCESS_FLAGS_PROT_READ}};
    CUmemAccessDesc bad = {.location = {CU_MEM_LOCATION_TYPE_DEVICE, 10},
                           .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    assert_int_equal(cuMemSetAccess(va, 4 * MiB, &bad, 1), CUDA_ERROR_INVALID_DEVICE);
    assert_int_equal(cuMemSetAccess(va, 6 * MiB, peers, 2), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemSetAccess(va, 4 * MiB, peers, 2), CUDA_SUCCESS);
    for (size_t off = 0; off < 4 * MiB; off += 2 * MiB) {
        static const unsigned long long want[3] = {CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
                                                   CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
                                                   CU_MEM_ACCESS_FLAGS_PROT_READ};
        for (int d = 0; d < 3; d++) {
            assert_int_equal(cuMemGetAccess(&flags, &loc[d], va + off), CUDA_SUCCESS);
            assert_int_equal(flags, want[d]);
        }
    }
    char back[sizeof(msg)] = {0};
    assert_int_equal(cuMemcpyDtoD(other, va + 2 * MiB, sizeof(msg)), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoH(back, other, sizeof(msg)), CUDA_SUCCESS);
    assert_string_equal(back, msg);
    /* Device 2 may read, not write. */
    CUcontext c2 = sim_test_primary(2);
    (void)c2;
    assert_int_equal(cuMemcpyDtoH(back, va, 8), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD8(va, 0, 16), CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_int_equal(cuMemGetAccess(&flags, &loc[0], va + 4 * MiB), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemGetAccess(NULL, &loc[0], va), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuCtxSetCurrent(c0), CUDA_SUCCESS);
    assert_int_equal(cuMemUnmap(va, 4 * MiB), CUDA_SUCCESS);
    assert_int_equal(cuMemAddressFree(va, 4 * MiB), CUDA_SUCCESS);
    assert_int_equal(cuMemFree(other), CUDA_SUCCESS);
}

int
main(int argc, char **argv)
{
    static const struct CMUnitTest peer[] = {
        cmocka_unit_test(test_can_access_peer),
        cmocka_unit_test(test_enable_disable),
        cmocka_unit_test(test_too_many_peers),
        cmocka_unit_test(test_set_and_get_access),
    };
    static const struct sim_test_group groups[] = {
        {"peer", peer, sizeof(peer) / sizeof(peer[0])},
    };
    return sim_test_main(argc, argv, groups, sizeof(groups) / sizeof(groups[0]));
}
