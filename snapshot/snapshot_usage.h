/* snapshot_usage.h: cuprof's device memory by library and the device's own footprint
 *   (cuprof.libraries, cuprof.device_footprint): the model's records, their emission and reading.
 * Locking: none: a model belongs to one thread.
 * Hot path: no (dump time and the command line). */
#ifndef CUPROF_SNAPSHOT_USAGE_H
#define CUPROF_SNAPSHOT_USAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapshot/emitter.h"
#include "snapshot/snapshot_field.h"
#include "snapshot/snapshot_model.h"

/* One library's device memory on one device. "Cache" is cuprof's caching allocator: the bytes
 * the library asked for, and the segments cuprof reserved from the driver to serve its requests;
 * "pass-through" is what went to the driver unchanged (managed, VMM, the driver's pools, every
 * request in trace mode). device = cache reserved + pass-through; its peak is the peak of that
 * sum, not the sum of the peaks. */
struct snap_library {
    int32_t device;
    const char *path; /* the shared object, or the program; "" for "(unknown)" */
    bool is_program;
    uint64_t cache_requested, cache_requested_peak;
    uint64_t cache_reserved, cache_reserved_peak;
    uint64_t passthrough, passthrough_peak;
    uint64_t device_bytes, device_bytes_peak;
};

/* What the driver says the device holds (cuMemGetInfo: total - free), every process and every
 * context included. -1 where unknown. */
struct snap_footprint {
    int32_t device;
    int64_t total;
    int64_t used_at_start; /* when cuprof first saw a call on the device */
    int64_t used_at_dump;
    /* What CUDA graphs' allocator held at the dump (cuDeviceGetGraphMemAttribute's reserved
     * bytes): graph memory nodes, which no allocation call reports at each launch. */
    int64_t graph_reserved_at_dump;
};

/* Replace the model's rows (strings and arrays are copied into its arena). 0 or -CUPROF_E*. */
__attribute__((warn_unused_result)) int
snapshot_set_libraries(struct snapshot *snap, const struct snap_library *rows, size_t count);
__attribute__((warn_unused_result)) int
snapshot_set_footprints(struct snapshot *snap, const struct snap_footprint *rows, size_t count);

/* The row's short name: the path's last component, or "(unknown)". */
const char *snapshot_library_name(const struct snap_library *row);

/* Emits "libraries" and "device_footprint" keys into the open cuprof dict. */
void snapshot_usage_emit(const struct snapshot *snap, struct emitter *e);

/* Reads both keys of a cuprof dict; a bad row is skipped with one warning per field name.
 * 0 or -CUPROF_EHOSTMEM. */
__attribute__((warn_unused_result)) int snapshot_usage_import(struct snapshot_fields *f,
                                                              const struct sval *cuprof);

#endif
