/* fuzz_snapshot: libFuzzer target for the snapshot readers (built twice: FUZZ_PICKLE for the
 * pickle reader, FUZZ_JSON for the JSON reader, each skipping inputs of the other format).
 * Oracle: no crash or sanitizer report; a refusal is one line naming the input; a model that
 * was accepted writes out, reads back, and writes out again to the same bytes.
 * Lock: none. Hot path: n/a (fuzzing). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot/snapshot_read.h"
#include "snapshot/snapshot_write.h"

#if defined(FUZZ_PICKLE)
#define FUZZ_FORMAT SNAPSHOT_FORMAT_PICKLE
#elif defined(FUZZ_JSON)
#define FUZZ_FORMAT SNAPSHOT_FORMAT_JSON
#else
#error "define FUZZ_PICKLE or FUZZ_JSON"
#endif

static int
wanted(const uint8_t *data, size_t size)
{
#if defined(FUZZ_PICKLE)
    return size > 0 && data[0] == 0x80;
#else
    size_t i = 0;
    while (i < size && (data[i] == ' ' || data[i] == '\n' || data[i] == '\t' || data[i] == '\r'))
        i++;
    return i < size && (data[i] == '{' || data[i] == '[');
#endif
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!wanted(data, size))
        return 0;
    struct snapshot *snap = NULL;
    char err[512] = "";
    if (snapshot_read_mem(data, size, "fuzz", &snap, err, sizeof err) != 0) {
        if (strncmp(err, "fuzz: ", 6) != 0 || strchr(err, '\n') != NULL || strlen(err) < 7) {
            fprintf(stderr, "fuzz_snapshot: bad message \"%s\"\n", err);
            abort();
        }
        return 0;
    }
    /* Round trip: what was accepted must serialize, load again and serialize identically. */
    unsigned char *out1 = NULL, *out2 = NULL;
    size_t len1 = 0, len2 = 0;
    if (snapshot_write_mem(snap, FUZZ_FORMAT, &out1, &len1) != 0) {
        fprintf(stderr, "fuzz_snapshot: an accepted snapshot does not write\n");
        abort();
    }
    struct snapshot *again = NULL;
    if (snapshot_read_mem(out1, len1, "rewritten", &again, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_snapshot: a written snapshot does not read back: %s\n", err);
        abort();
    }
    if (snapshot_write_mem(again, FUZZ_FORMAT, &out2, &len2) != 0 || len1 != len2 ||
        memcmp(out1, out2, len1) != 0) {
        fprintf(stderr, "fuzz_snapshot: write-read-write changed the bytes (%zu vs %zu)\n", len1,
                len2);
        abort();
    }
    free(out1);
    free(out2);
    snapshot_free(again);
    snapshot_free(snap);
    return 0;
}
