/* plot_blob.h: the report page's binary tables: rows of unsigned LEB128 and zigzag varints
 *   appended to a growable byte buffer, and the base64 that carries them inside the HTML page
 *   (a 10^6-entry history is a few MB this way, where JSON objects per entry would be hundreds).
 * Locking: none: a blob belongs to one command thread.
 * Hot path: no (the command line), O(1) per value. */
#ifndef CUPROF_CLI_PLOT_BLOB_H
#define CUPROF_CLI_PLOT_BLOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct plot_blob {
    uint8_t *data;
    size_t len, cap;
    bool failed; /* host memory ran out: later appends do nothing */
};

void plot_blob_init(struct plot_blob *b);
void plot_blob_free(struct plot_blob *b);
/* Appends v as unsigned LEB128: 7 bits a byte, low bits first, the high bit set on all but the
 * last byte (values below 128 take one byte). */
void plot_blob_uint(struct plot_blob *b, uint64_t v);
/* Appends v zigzag-coded ((v << 1) ^ (v >> 63): small magnitudes of either sign stay short). */
void plot_blob_sint(struct plot_blob *b, int64_t v);
/* The zigzag code of the difference a - b, computed without signed overflow. */
uint64_t plot_blob_delta(uint64_t a, uint64_t b);
/* Appends another blob's bytes. */
void plot_blob_append(struct plot_blob *b, const struct plot_blob *other);

/* Writes len bytes as base64 (RFC 4648, padded, no line breaks). false when a write failed. */
bool plot_blob_base64(FILE *out, const uint8_t *data, size_t len);

#endif
