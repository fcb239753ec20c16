/* pickle_data.h: decoding of pickle data that needs no VM state: Python ints of any size
 *   (LONG1/LONG4), and the plain records cuprof writes, decoded in one go.
 * Locking: none (pure functions).
 * Hot path: no (the readers), but per entry of a 10^7-entry history. */
#ifndef CUPROF_PICKLE_DATA_H
#define CUPROF_PICKLE_DATA_H

#include <stddef.h>

#include "snapshot/sval.h"

#define PICKLE_DATA_TEXT         176 /* room for the text of an int wider than 64 bits */
#define PICKLE_DATA_RECORD_ITEMS 32  /* a plain record has at most 16 keys */

/* The little-endian two's-complement int p[0..n) (CPython's encode_long; `avail` >= n bytes
 * are readable at p). Fits int64: SVAL_INT; [2^63, 2^64): SVAL_UINT (PyTorch writes an unknown
 * size_t line as 2^64-1); wider: SVAL_BIGINT with its decimal text (or its size) in `text`, for
 * the caller to intern into u.s: readable, refused later only by the field that holds it. */
void pickle_data_long(const unsigned char *p, size_t n, size_t avail, struct sval *out, char *text,
                      size_t text_len);

/* After a record's EMPTY_DICT at p (bytes up to `end`): `MARK key value ... SETITEMS` whose
 * opcodes are all memo fetches (of set slots holding no container the reader has placed), ints
 * (LONG1 up to 8 bytes), None: cuprof's own entries. Returns the items (2 a pair, at most
 * PICKLE_DATA_RECORD_ITEMS) with *after past the SETITEMS, or 0: anything else, or a record not
 * whole before `end`, is for the opcode loop. */
size_t pickle_data_record(const unsigned char *p, const unsigned char *end, const struct sval *memo,
                          size_t memo_cap, struct sval *items, const unsigned char **after);

#endif
