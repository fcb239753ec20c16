/* cross_rank.h: a job's ranks side by side. Each file is reduced to one row (rank, host, pid,
 *   peak allocated and reserved, OOMs, fragmentation at the live peak) and its live bytes by call
 *   site at the end; files are read by a few threads at once, one snapshot per thread in memory.
 *   Prints the table, the spread (max/min) and the outlier ranks, then the call sites whose live
 *   bytes differ most between ranks.
 * Locking: the workers share only an atomic file counter; each writes its own row.
 * Hot path: no. */
#ifndef CUPROF_CLI_CROSS_RANK_H
#define CUPROF_CLI_CROSS_RANK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "snapshot/emitter.h"

/* `jobs` 0 picks the number of online CPUs (at most 16). Files that cannot be read are reported
 * on stderr and left out. Returns 0, 1 when some file could not be read, -1 when out of memory. */
int cross_rank_print(FILE *out, char *const *paths, size_t count, bool all_frames, size_t top,
                     unsigned jobs);

/* The same view for the report page, as one JSON dict: every readable file's row (file, rank,
 * host, pid, peaks, OOMs, fragmentation, how far each peak is from the ranks' median and whether
 * that makes it an outlier, and each device's allocated and reserved series cut to 400 bucket
 * maxima), "unreadable" paths, the medians, and the `top` call sites that differ most with their
 * live bytes at the end in every row. Returns as cross_rank_print. */
int cross_rank_emit(struct emitter *e, char *const *paths, size_t count, bool all_frames,
                    size_t top, unsigned jobs);

#endif
