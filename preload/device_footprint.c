/* device_footprint.c: cuMemGetInfo at a device's first call and at each dump (see
 * device_footprint.h). */
#include "preload/device_footprint.h"

#include <cuda.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "preload/real_cuda.h"
#include "snapshot/snapshot_usage.h"

enum { NOT_SEEN, RECORDING, RECORDED };

struct device_start {
    atomic_int state;
    int64_t total; /* written before state becomes RECORDED */
    int64_t used;  /* written before state becomes RECORDED; -1: the query failed */
};

static struct device_start *starts; /* set once by device_footprint_init */
static int start_count;

bool
device_footprint_init(int device_count)
{
    if (device_count <= 0)
        return false;
    starts = calloc((size_t)device_count, sizeof(*starts));
    start_count = starts != NULL ? device_count : 0;
    return starts != NULL;
}

_Thread_local int device_footprint_seen __attribute__((tls_model("initial-exec")));

/* cuMemGetInfo through the current context; -1 for both when the driver cannot say. */
static void
query_current(const struct real_cuda *real, int64_t *used, int64_t *total)
{
    size_t free_b = 0, total_b = 0;
    *used = *total = -1;
    if (real->cuMemGetInfo_v2 == NULL || real->cuMemGetInfo_v2(&free_b, &total_b) != CUDA_SUCCESS ||
        free_b > total_b)
        return;
    *total = (int64_t)total_b;
    *used = (int64_t)(total_b - free_b);
}

/* The bytes CUDA graphs' allocator holds on `device` (its memory nodes' pool, kept between
 * launches until cuDeviceGraphMemTrim); -1 when the driver cannot say. */
static int64_t
query_graph_reserved(const struct real_cuda *real, int device)
{
    CUdevice dev;
    cuuint64_t bytes = 0;
    if (real->cuDeviceGetGraphMemAttribute == NULL || real->cuDeviceGet == NULL ||
        real->cuDeviceGet(&dev, device) != CUDA_SUCCESS ||
        real->cuDeviceGetGraphMemAttribute(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &bytes) !=
            CUDA_SUCCESS ||
        bytes > INT64_MAX)
        return -1;
    return (int64_t)bytes;
}

void
device_footprint_note_start_slow(int device)
{
    if (device < 0 || device >= start_count)
        return;
    struct device_start *s = &starts[device];
    int state = atomic_load_explicit(&s->state, memory_order_acquire);
    if (state == RECORDED)
        device_footprint_seen = device + 1;
    if (state != NOT_SEEN)
        return;
    int expected = NOT_SEEN;
    if (!atomic_compare_exchange_strong(&s->state, &expected, RECORDING))
        return;
    const struct real_cuda *real = real_cuda_get();
    s->used = s->total = -1;
    if (real != NULL)
        query_current(real, &s->used, &s->total);
    atomic_store_explicit(&s->state, RECORDED, memory_order_release);
}

/* The footprint of `device` now, through a context that already exists. */
static void
query_device(const struct real_cuda *real, int device, int64_t *used, int64_t *total)
{
    *used = *total = -1;
    CUdevice current, dev;
    if (real->cuCtxGetDevice != NULL && real->cuCtxGetDevice(&current) == CUDA_SUCCESS &&
        current == device) {
        query_current(real, used, total);
        return;
    }
    unsigned flags = 0;
    int active = 0;
    CUcontext ctx = NULL;
    if (real->cuDeviceGet == NULL || real->cuDevicePrimaryCtxGetState == NULL ||
        real->cuDevicePrimaryCtxRetain == NULL || real->cuDeviceGet(&dev, device) != CUDA_SUCCESS ||
        real->cuDevicePrimaryCtxGetState(dev, &flags, &active) != CUDA_SUCCESS || !active ||
        real->cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS)
        return;
    if (real->cuCtxPushCurrent_v2(ctx) == CUDA_SUCCESS) {
        query_current(real, used, total);
        CUcontext popped;
        (void)real->cuCtxPopCurrent_v2(&popped);
    }
    (void)real->cuDevicePrimaryCtxRelease_v2(dev);
}

size_t
device_footprint_collect(struct snap_footprint *out, size_t cap)
{
    const struct real_cuda *real = real_cuda_get();
    size_t n = 0;
    for (int d = 0; d < start_count && n < cap; d++) {
        const struct device_start *s = &starts[d];
        if (atomic_load_explicit(&s->state, memory_order_acquire) != RECORDED)
            continue;
        struct snap_footprint *fp = &out[n++];
        *fp = (struct snap_footprint){.device = d,
                                      .total = s->total,
                                      .used_at_start = s->used,
                                      .used_at_dump = -1,
                                      .graph_reserved_at_dump = -1};
        int64_t total = -1;
        if (real != NULL) {
            query_device(real, d, &fp->used_at_dump, &total);
            fp->graph_reserved_at_dump = query_graph_reserved(real, d);
        }
        if (total >= 0)
            fp->total = total;
    }
    return n;
}
