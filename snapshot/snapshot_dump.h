/* snapshot_dump.h: a snapshot of the live allocator: per device, the block table and the trace
 *   ring are copied under the device lock (buffers allocated before locking), then stacks are
 *   symbolized, the model is built and the file is written atomically, all outside the lock.
 * Locking: takes each device's allocator lock in turn, briefly; call with no cuprof lock held.
 * Hot path: no (the dumper thread, exit, OOM, cuprof_dump_snapshot). */
#ifndef CUPROF_SNAPSHOT_DUMP_H
#define CUPROF_SNAPSHOT_DUMP_H

#include <stddef.h>
#include <stdint.h>

#include "allocator/alloc_config.h"
#include "snapshot/file_publish.h"
#include "snapshot/snapshot_model.h"

struct allocator;
struct program_pools;
struct trace_ring;
struct symbolizer;

/* One "key": "value" pair of cuprof.config (every effective CUPROF_* setting, as text). */
struct dump_setting {
    const char *key;
    const char *value;
};

/* An out-of-memory error's message, with the history position of its `oom` entry
 * (trace_ring_end's numbering; UINT64_MAX when unknown): the dump turns it into an index. For a
 * refusal of one of the driver's own calls (`api` set), the position the next entry would have
 * taken: the index is the count of entries before it. */
struct dump_oom_message {
    int32_t device;
    uint64_t position;
    int64_t time_us;
    const char *message;
    const char *api; /* the driver's own call refused, or NULL (an allocation) */
};

/* What the caller (preload/) knows about the process; every pointer may be NULL. */
struct dump_info {
    const char *mode; /* "cache", "trace" or "off" */
    const struct dump_setting *config;
    size_t config_count;
    int64_t pid;
    int64_t rank; /* -1 when no rank variable is set */
    const char *host;
    const char *const *argv;
    size_t argc;
    const struct alloc_config *alloc_config; /* allocator_settings; NULL: PyTorch's defaults */
    bool fit_segment_on_oom;       /* the allocator takes that step (cuprof.fit_segment_on_oom) */
    struct symbolizer *symbolizer; /* reused across dumps (its cache); NULL: one per dump */
    const struct snap_library *libraries; /* cuprof.libraries (snapshot_usage.h) */
    size_t library_count;
    const struct snap_footprint *footprints; /* cuprof.device_footprint */
    size_t footprint_count;
    const struct dump_oom_message *oom_messages; /* cuprof.oom_messages, oldest first */
    size_t oom_message_count;
    struct program_pools *pools; /* NVTX heaps: their blocks are shown as their regions */
};

/* Builds the model of the live state: segments and blocks of every device, each device's trace
 * (oldest first) and dropped count, frames for every stack, allocator_settings and the cuprof
 * section (stats from allocator_get_stats, read right after the copy). Records a TRACE_SNAPSHOT
 * event (size = active bytes) in each device's ring right after copying it, so, as in PyTorch,
 * a dump's own `snapshot` event appears in the next dump. `ring` may be NULL (no history).
 * Returns 0 or -CUPROF_EHOSTMEM. */
__attribute__((warn_unused_result)) int snapshot_dump_build(struct allocator *alloc,
                                                            struct trace_ring *ring,
                                                            const struct dump_info *info,
                                                            struct snapshot **out);

/* snapshot_dump_build, then snapshot_write_file(path, mode) (format from the extension: .json
 * is JSON, anything else pickle; exclusive temporary file, fsync, publication by `mode`, the name
 * used into chosen). Returns 0, -CUPROF_EHOSTMEM or -CUPROF_EIO with errno saying why; the
 * program is left untouched and the caller logs one line. */
__attribute__((warn_unused_result)) int
snapshot_dump_live(struct allocator *alloc, struct trace_ring *ring, const struct dump_info *info,
                   const char *path, enum file_publish_mode mode, char *chosen, size_t chosen_len);

#endif
