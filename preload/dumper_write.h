/* dumper_write.h: one snapshot of the live state into one file: gathers the cuprof section
 *   (mode, every setting, pid, rank, host, argv) and hands over to snapshot_dump_live.
 * Locking: takes each allocator device lock briefly (inside snapshot_dump_live); call it with the
 *   dump lock held and no allocator lock.
 * Hot path: no. */
#ifndef CUPROF_DUMPER_WRITE_H
#define CUPROF_DUMPER_WRITE_H

#include <stddef.h>

#include "snapshot/file_publish.h"

struct cuprof_runtime;

/* Writes the snapshot to `path` (format from its extension) through an exclusive temporary
 * file published by `mode` (snapshot/file_publish.h); the name used goes into chosen (may be
 * NULL). Returns 0 or a negative -CUPROF_E* code (errno tells the I/O reason). No device call. */
__attribute__((warn_unused_result)) int dumper_write_snapshot(struct cuprof_runtime *rt,
                                                              const char *path,
                                                              enum file_publish_mode mode,
                                                              char *chosen, size_t chosen_len);

/* The same snapshot as pickle bytes in a malloc'd buffer (*out, *len): _snapshot(). */
__attribute__((warn_unused_result)) int dumper_write_memory(struct cuprof_runtime *rt,
                                                            unsigned char **out, size_t *len);

/* From now on, the dumps leave the device footprint out (no driver call): set for the exit dump
 * of exit() in a signal handler, which may have interrupted a driver call holding the driver's
 * own locks. */
void dumper_write_without_device_calls(void);

#endif
