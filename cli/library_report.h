/* library_report.h: the "device memory by library" section of `summary` and `plot`: per library,
 *   live and peak bytes in cuprof's cache and in pass-through pools, and beside them the device's
 *   own footprint (cuMemGetInfo at start and at the dump, device-wide).
 * Locking: none (the command line). Hot path: no. */
#ifndef CUPROF_LIBRARY_REPORT_H
#define CUPROF_LIBRARY_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "snapshot/emitter.h"
#include "snapshot/snapshot_model.h"

/* True when the snapshot has something to say about `device` (cuprof wrote it with rows or a
 * footprint for that device); PyTorch's snapshots have neither. */
bool library_report_has(const struct snapshot *snap, size_t device);

/* Writes the section for `device`; nothing when library_report_has is false. */
void library_report_print(FILE *out, const struct snapshot *snap, size_t device);

/* The same text in a malloc'ed string (NULL when there is nothing, or out of memory). */
char *library_report_text(const struct snapshot *snap, size_t device);

/* The same figures for the report page, as keys of the open dict: "libraries" (one dict per
 * library: name, path, is_program, and each live / _peak byte count) and "footprint" (total,
 * used_at_start, used_at_dump, graph_reserved_at_dump: -1 where unknown; with reserved and
 * passthrough, cuprof's live totals). Nothing when library_report_has is false. */
void library_report_emit(struct emitter *e, const struct snapshot *snap, size_t device);

#endif
