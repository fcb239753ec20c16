/* snapshot_read.h: reads a snapshot file (pickle or JSON, detected from its first bytes; any
 *   PyTorch layout from 1.13 on, or cuprof's) into a snapshot model, looking at the first bytes
 *   before reading on.
 * Locking: none: one reading thread.
 * Hot path: no (the command line and tests). */
#ifndef CUPROF_SNAPSHOT_READ_H
#define CUPROF_SNAPSHOT_READ_H

#include <stddef.h>

#include "snapshot/snapshot_model.h"

/* On success *out is a new model (free with snapshot_free) and 0 is returned. On failure returns
 * -CUPROF_EIO, -CUPROF_EFORMAT or -CUPROF_EHOSTMEM and writes one line naming the file and the
 * problem into err, e.g. `run.pickle: byte 1234: truncated pickle (string of 99 bytes)`; callers
 * print it after "cuprof: ". A file is refused only for its bytes or its shape (a segment that
 * is not a dict); a field whose value cannot be used (a size past 2^57, a negative counter, an
 * int past 64 bits where cuprof needs one) is named once in (*out)->warnings, and only the record
 * that needs it is dropped. Python ints of any size are read. Only a regular file is read: a
 * device, FIFO or directory is refused at once (-CUPROF_EIO), and so is a file whose first bytes
 * are neither a pickle's nor JSON's (-CUPROF_EFORMAT), whatever its size; a file is read up to
 * the size it had when opened. */
__attribute__((warn_unused_result)) int snapshot_read_file(const char *path, struct snapshot **out,
                                                           char *err, size_t err_len);
/* The same from an open descriptor (standard input), which stays the caller's: a regular file
 * from its current offset, anything else but a directory as a stream read once, its first bytes
 * checked before more is read, and a JSON stream checked as it comes (a stream's memory grows
 * only with a snapshot's content). `name` stands for it in messages. */
__attribute__((warn_unused_result)) int
snapshot_read_fd(int fd, const char *name, struct snapshot **out, char *err, size_t err_len);
/* The same from memory; `name` stands for the file in messages. */
__attribute__((warn_unused_result)) int snapshot_read_mem(const void *data, size_t len,
                                                          const char *name, struct snapshot **out,
                                                          char *err, size_t err_len);

#endif
