/* pickle_reader.h: a pickle virtual machine for the data subset snapshots use (protocols 2-5:
 *   what cuprof writes and what CPython's pickle writes for PyTorch's `_dump_snapshot`), building
 *   a value tree; hostile input gives a one-line error, never a crash.
 * Locking: none: one reading thread.
 * Hot path: no. */
#ifndef CUPROF_PICKLE_READER_H
#define CUPROF_PICKLE_READER_H

#include <stddef.h>

#include "snapshot/sval.h"

struct snapshot;
struct snapshot_arena;

/* Limits against hostile input. */
#define PICKLE_MAX_MARKS 64 /* open MARKs at once: nesting PyTorch's layout never comes near */

/* Runs the pickle in data[0..len). Containers go to `tree` (an arena the caller frees), strings
 * are interned in `strings`' arena. On success *out is the unpickled object and 0 is returned;
 * otherwise -CUPROF_EFORMAT (or -CUPROF_EHOSTMEM) and one line in err (no file name). */
__attribute__((warn_unused_result)) int pickle_read(const unsigned char *data, size_t len,
                                                    struct snapshot_arena *tree,
                                                    struct snapshot *strings, struct sval *out,
                                                    char *err, size_t err_len);

#endif
