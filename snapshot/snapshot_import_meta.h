/* snapshot_import_meta.h: reads a snapshot file's allocator_settings and cuprof sections (the
 *   value tree's) into the model; a value that cannot be used is a warning, never an error.
 * Locking: none: one reading thread.
 * Hot path: no. */
#ifndef CUPROF_SNAPSHOT_IMPORT_META_H
#define CUPROF_SNAPSHOT_IMPORT_META_H

#include "snapshot/snapshot_field.h"
#include "snapshot/sval.h"

/* Into f->snap. 0 or -CUPROF_EHOSTMEM. */
__attribute__((warn_unused_result)) int snapshot_import_settings(struct snapshot_fields *f,
                                                                 const struct sval *a);
__attribute__((warn_unused_result)) int snapshot_import_cuprof(struct snapshot_fields *f,
                                                               const struct sval *c);

#endif
