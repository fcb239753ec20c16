/* pickle_reader.h: a pickle virtual machine for the data subset snapshots use (protocols 2-5:
 *   what cuprof writes and what CPython's pickle writes for PyTorch's `_dump_snapshot`), building
 *   a value tree from memory or from a file read a window at a time; hostile input gives a
 *   one-line error, never a crash. With a stream consumer, the records of a snapshot's two big
 *   lists go to the consumer as they are read instead of into the tree.
 * Locking: none: one reading thread.
 * Hot path: no. */
#ifndef CUPROF_PICKLE_READER_H
#define CUPROF_PICKLE_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapshot/sval.h"

struct snapshot;
struct snapshot_arena;

/* Limits against hostile input. */
#define PICKLE_MAX_MARKS 64 /* open MARKs at once: nesting PyTorch's layout never comes near */

/* The lists whose items may be streamed: root["segments"] (or a bare root list: PyTorch 1.13)
 * and root["device_traces"][d]. */
enum pickle_list { PICKLE_SEGMENTS = 0, PICKLE_TRACE = 1 };

struct pickle_stream {
    /* Items just appended to `list` (the d-th trace when `which` is PICKLE_TRACE), in order.
     * Returns 0 when it took them (they are not kept in the tree, and the consumer must not keep
     * pointers to them or into them, except to containers with SVAL_MEMO), 1 when it declines
     * (they are kept), or a negative error with its one line already in the reader's err. Which
     * list is which is a guess from where it was built: the consumer checks the finished tree. */
    int (*take)(void *ctx, enum pickle_list which, uint32_t d, const struct sval_seq *list,
                const struct sval *items, size_t n);
    /* Optional: one plain record (pickle_data_record's items: n values, key and value in turn,
     * none of them a container the reader placed) on its way into the d-th trace, handed over
     * as soon as it is read, never built as a dict nor pushed: cuprof's own entries. Same
     * returns and rules as `take`; on 1 the record is built and goes to `take` with its batch.
     * A list's items reach the two in its order: items read before a plain record go to `take`
     * first, as a batch of their own. */
    int (*take_record)(void *ctx, uint32_t d, const struct sval_seq *list, const struct sval *items,
                       size_t n);
    void *ctx;
    bool shared; /* set by the reader when streaming may have misread: a list given to `take`
                  * was fetched from the memo (referred to twice: the tree lacks its items), so
                  * was the root or device_traces, or a container was filled through the memo
                  * (records taken before may have seen it unfinished) */
};

/* Where the pickle is: memory (fd < 0), or `fd` from its current offset, of `len` bytes (a
 * regular file's size: bytes past it are not read; SIZE_MAX for a stream read to its end), its
 * first `head_len` bytes already read from it into data[]. */
struct pickle_input {
    const unsigned char *data;
    size_t len;
    int fd;
    size_t head_len;
};

/* Runs the pickle in data[0..len). Containers go to `tree` (an arena the caller frees), strings
 * are interned in `strings`' arena. On success *out is the unpickled object and 0 is returned;
 * otherwise -CUPROF_EFORMAT (or -CUPROF_EHOSTMEM) and one line in err (no file name). */
__attribute__((warn_unused_result)) int pickle_read(const unsigned char *data, size_t len,
                                                    struct snapshot_arena *tree,
                                                    struct snapshot *strings, struct sval *out,
                                                    char *err, size_t err_len);
/* The same from `in`, with `stream` (NULL: everything goes into the tree). A file that cannot be
 * read gives -CUPROF_EIO. */
__attribute__((warn_unused_result)) int
pickle_read_input(const struct pickle_input *in, struct snapshot_arena *tree,
                  struct snapshot *strings, struct pickle_stream *stream, struct sval *out,
                  char *err, size_t err_len);

#endif
