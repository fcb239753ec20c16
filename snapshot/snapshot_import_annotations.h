/* snapshot_import_annotations.h: PyTorch's external_annotations (its record_function ranges:
 *   {"name", "stage": "START"/"END", "device", "time_us"}) read into the device traces as range
 *   annotations where their times fall, so a PyTorch snapshot's ranges are phases too; a
 *   snapshot whose traces already carry them (cuprof's, "stage" on annotate entries) is left as
 *   it is. A record that cannot be used is a warning, never an error.
 * Locking: none: one reading thread.
 * Hot path: no. */
#ifndef CUPROF_SNAPSHOT_IMPORT_ANNOTATIONS_H
#define CUPROF_SNAPSHOT_IMPORT_ANNOTATIONS_H

#include "snapshot/snapshot_field.h"
#include "snapshot/sval.h"

/* list: root["external_annotations"] (NULL: none). Into f->snap. 0 or -CUPROF_EHOSTMEM. */
__attribute__((warn_unused_result)) int snapshot_import_annotations(struct snapshot_fields *f,
                                                                    const struct sval *list);

#endif
