/* json_reader.h: reads a JSON snapshot (the same structure as the pickle) into the readers' value
 *   tree: integers of any size, Python's NaN/Infinity; hostile input gives a one-line error.
 * Locking: none: one reading thread.
 * Hot path: no. */
#ifndef CUPROF_JSON_READER_H
#define CUPROF_JSON_READER_H

#include <stddef.h>

#include "snapshot/sval.h"

struct snapshot;
struct snapshot_arena;

#define JSON_READER_MAX_DEPTH 64

/* Like pickle_read: containers in `tree`, strings interned in `strings`; 0, or -CUPROF_EFORMAT /
 * -CUPROF_EHOSTMEM with one line in err (line and column of a syntax error; no file name). */
__attribute__((warn_unused_result)) int json_read(const unsigned char *data, size_t len,
                                                  struct snapshot_arena *tree,
                                                  struct snapshot *strings, struct sval *out,
                                                  char *err, size_t err_len);

#endif
