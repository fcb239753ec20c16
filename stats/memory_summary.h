/* memory_summary.h: the text table torch.cuda.memory_summary() prints, from one device's counters.
 * Locking: none; works on a copy of the counters (allocator_get_stats), never under a device lock.
 * Hot path: no; formats text with snprintf. */
#ifndef CUPROF_MEMORY_SUMMARY_H
#define CUPROF_MEMORY_SUMMARY_H

#include <stdbool.h>
#include <stddef.h>

#include "stats/memory_stats.h"

/* Writes PyTorch's table for `device` into buf (NUL-terminated when len > 0; cut short when too
 * small). abbreviated drops the "from large pool"/"from small pool" rows, as PyTorch's flag does.
 * Returns the full table's length without the NUL, like snprintf: >= len means it was cut. */
size_t memory_summary(const struct memory_stats *stats, int device, bool abbreviated, char *buf,
                      size_t len);

/* The tables of devices 0 .. count-1 one after the other (stats[d] is device d). Same return. */
size_t memory_summary_devices(const struct memory_stats *stats, int count, bool abbreviated,
                              char *buf, size_t len);

#endif
