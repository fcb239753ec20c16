/* snapshot_write.h: writes a snapshot model as PyTorch 2.x's `_snapshot()` dict (plus cuprof's
 *   section) through an emitter, to memory or atomically to a file (temp name, fsync, rename).
 * Locking: none: the caller owns the model; never called under an allocator lock.
 * Hot path: no (dump time and the command line). */
#ifndef CUPROF_SNAPSHOT_WRITE_H
#define CUPROF_SNAPSHOT_WRITE_H

#include <stddef.h>

#include "snapshot/emitter.h"
#include "snapshot/file_publish.h"
#include "snapshot/snapshot_model.h"

enum snapshot_format {
    SNAPSHOT_FORMAT_AUTO = 0, /* from the file name: .json is JSON, anything else pickle */
    SNAPSHOT_FORMAT_PICKLE = 1,
    SNAPSHOT_FORMAT_JSON = 2,
};

/* The format a path's extension asks for (.json → JSON; .pickle, .pkl and the rest → pickle). */
enum snapshot_format snapshot_format_for_path(const char *path);

/* PyTorch's action, block-state and cuprof pool names (NULL when out of range). */
const char *snapshot_action_name(unsigned action);
const char *snapshot_state_name(unsigned state);
const char *snapshot_pool_name(unsigned pool);

/* Walks the model once through `e` (the emitter is not finished). Returns the emitter's error. */
__attribute__((warn_unused_result)) int snapshot_emit(const struct snapshot *snap,
                                                      struct emitter *e);

/* Serializes into a malloc'd buffer (*out, *len); the caller frees it. 0 or -CUPROF_E*. */
__attribute__((warn_unused_result)) int snapshot_write_mem(const struct snapshot *snap,
                                                           enum snapshot_format format,
                                                           unsigned char **out, size_t *len);

/* Writes an exclusive temporary file next to `path` (snapshot/file_publish.h: unpredictable
 * name, mode 0600), fsyncs it and publishes it by `mode`: FILE_PUBLISH_NEW_NAME takes the first
 * free of `path`, `path.1.ext`... and never replaces anything; FILE_PUBLISH_REPLACE replaces
 * `path` when it is a regular file (or a link's entry). A reader never sees half a file. A file
 * of more than two buffers is written by a short-lived thread (`cuprof-writer`, every signal
 * blocked) while the rest is formatted (snapshot/file_writer.h). The name used goes into chosen
 * (may be NULL). On failure the temporary file is removed, nothing else is touched, errno tells
 * why and -CUPROF_EIO (or -CUPROF_EHOSTMEM) is returned: the caller logs one line. */
__attribute__((warn_unused_result)) int
snapshot_write_file(const char *path, const struct snapshot *snap, enum snapshot_format format,
                    enum file_publish_mode mode, char *chosen, size_t chosen_len);

#endif
