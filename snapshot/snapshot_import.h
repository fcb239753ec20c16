/* snapshot_import.h: turns a value tree read from a snapshot file (PyTorch 1.13's bare segment
 *   list, 2.0, 2.1, later 2.x, or cuprof's own with its `cuprof` section) into a snapshot model.
 * Locking: none: one reading thread.
 * Hot path: no. */
#ifndef CUPROF_SNAPSHOT_IMPORT_H
#define CUPROF_SNAPSHOT_IMPORT_H

#include <stddef.h>

#include "snapshot/pickle_reader.h"
#include "snapshot/snapshot_model.h"
#include "snapshot/sval.h"

#define SNAPSHOT_MAX_DEVICES 4096

/* Fills `snap` (fresh from snapshot_create(0); strings in `root` must live in its arena) from
 * `root`. Older layouts are completed as PyTorch's viewers do: block addresses from the segment
 * address plus earlier block sizes, requested sizes from `history[0].real_size` or the size,
 * segment sums from the blocks. A field whose value cannot be used adds one line to
 * snap->warnings (once per field name, starting with `name`) and costs only the record that
 * needs it: the segment for a block's size, the entry for an address; trace entries with an
 * action cuprof does not know are skipped the same way. Returns 0, or -CUPROF_EFORMAT (a
 * wrong shape, e.g. a segment that is not a dict) / -CUPROF_EHOSTMEM with one line in err. */
__attribute__((warn_unused_result)) int snapshot_import(struct snapshot *snap,
                                                        const struct sval *root, const char *name,
                                                        char *err, size_t err_len);

/* The same in steps, so that the pickle reader can hand over segments and trace entries as it
 * reads them (snapshot_import_take is a pickle_stream.take). _begin: NULL on OOM. _end imports
 * the rest of the finished tree and returns what snapshot_import returns, or
 * SNAPSHOT_IMPORT_AGAIN when what was handed over is not where the tree has it (or `shared`, the
 * reader's pickle_stream.shared, is set): the model is then wrong and the file must be read
 * again without streaming. Free with _free whatever _end returned. */
#define SNAPSHOT_IMPORT_AGAIN 2
struct snapshot_importer;
struct snapshot_importer *snapshot_import_begin(struct snapshot *snap, const char *name, char *err,
                                                size_t err_len);
int snapshot_import_take(void *importer, enum pickle_list which, uint32_t d,
                         const struct sval_seq *list, const struct sval *items, size_t n);
/* A pickle_stream.take_record: one trace entry. */
int snapshot_import_take_record(void *importer, uint32_t d, const struct sval_seq *list,
                                const struct sval *items, size_t n);
__attribute__((warn_unused_result)) int snapshot_import_end(struct snapshot_importer *im,
                                                            const struct sval *root, bool shared);
void snapshot_import_free(struct snapshot_importer *im);

#endif
