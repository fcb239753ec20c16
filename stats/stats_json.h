/* stats_json.h: one device's memory_stats as a JSON object with PyTorch's flat keys, sorted.
 * Locking: none; works on a copy of the counters, never under a device lock.
 * Hot path: no; formats text with snprintf. */
#ifndef CUPROF_STATS_JSON_H
#define CUPROF_STATS_JSON_H

#include <stddef.h>

#include "stats/memory_stats.h"

/* Writes {"active.all.allocated": 0, ...} the way Python's json.dumps(torch.cuda.memory_stats())
 * prints it (", " and ": " separators, keys sorted, exact integers) into buf, NUL-terminated when
 * len > 0. Returns the full length without the NUL, like snprintf: >= len means it was cut. */
size_t stats_json(const struct memory_stats *stats, char *buf, size_t len);

/* A JSON list of the objects of devices 0 .. count-1 ("[{...}, {...}]"). Same return. */
size_t stats_json_devices(const struct memory_stats *stats, int count, char *buf, size_t len);

#endif
