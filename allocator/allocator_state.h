/* allocator_state.h: the allocator object shared by allocator.c (API) and allocator_inspect.c
 *   (copies for snapshots, the invariant walker).
 * Locking: config/ops/sink/device_count are read-only after create; each device has its lock,
 *   which also protects its pointer map.
 * Hot path: the struct is; nothing here is a function. */
#ifndef CUPROF_ALLOCATOR_STATE_H
#define CUPROF_ALLOCATOR_STATE_H

#include "allocator/alloc_device.h"
#include "allocator/allocator.h"

struct allocator {
    struct alloc_config config; /* read-only */
    struct device_ops ops;      /* read-only */
    struct trace_sink sink;     /* read-only */
    bool has_sink;
    bool sync_on_free; /* caching with free_sync:device: allocator_free synchronizes first */
    int device_count;
    struct alloc_device *devices; /* [device_count] */
};

#endif
