/* snapshot_place.h: where a snapshot of the CUPROF_SNAPSHOT template goes when the template's
 *   folder cannot take it (missing, read-only, full, not ours): the same name in the fallback
 *   folder ($TMPDIR, else /tmp), so that a long job's snapshot is never lost to a typo or a
 *   read-only working directory. The start-up check says so at once.
 * Locking: none (the template is anchored and the fallback folder read once, at start, before any
 *   dump).
 * Hot path: no (start-up and dump time only). */
#ifndef CUPROF_SNAPSHOT_PLACE_H
#define CUPROF_SNAPSHOT_PLACE_H

#include <stdbool.h>
#include <stddef.h>

/* A relative template made absolute against the working directory now (`tmpl` holds
 * `tmpl_len` bytes; a '%' of the folder's name escaped): called at start, so that a program that
 * changes directory (Hydra's outputs/DATE/TIME, a script's os.chdir) still writes its snapshots
 * where it was started, where `cuprof run` and its user look. Left as it is when the working
 * directory is unknown or the result does not fit. */
void snapshot_place_anchor(char *tmpl, size_t tmpl_len);

/* Notes the fallback folder ($TMPDIR when absolute, else /tmp) and checks that the folder of
 * the template's first name can be written in; when not, one line names CUPROF_SNAPSHOT, the
 * folder, why, and where snapshots go instead. */
void snapshot_place_start(const char *tmpl);

/* True when a failed write's errno is about the folder (another folder may take the file). */
bool snapshot_place_folder_error(int err);

/* The fallback name of `path` (its last component in the fallback folder) into out; false when
 * it does not fit or `path` is in the fallback folder already. */
bool snapshot_place_fallback(const char *path, char *out, size_t out_len);

#endif
