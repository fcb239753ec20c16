/* file_publish.h: how a snapshot file comes into being without harming what is already there: an
 *   exclusive temporary file with an unpredictable name (mode 0600) in the destination's
 *   directory, then one atomic step that gives it its name. A new name never replaces anything
 *   (renameat2 RENAME_NOREPLACE, else link(2)); an exact name replaces only a regular file or a
 *   symbolic link's entry, never what the link points at, a device node or a FIFO.
 * Locking: none (plain functions over paths and descriptors).
 * Hot path: no (dump time). */
#ifndef CUPROF_FILE_PUBLISH_H
#define CUPROF_FILE_PUBLISH_H

#include <stdbool.h>
#include <stddef.h>

enum file_publish_mode {
    FILE_PUBLISH_NEW_NAME, /* the first free of `path`, `path` with .1, .2 ... before the extension
                            */
    FILE_PUBLISH_REPLACE,  /* `path` itself, replacing a regular file (PyTorch's _dump_snapshot) */
};

/* The n-th alternative name of `path` (n >= 1): ".n" inserted before the extension of the last
 * component ("a/b.pickle" -> "a/b.2.pickle"); n == 0 copies path. 0, or -CUPROF_EINVAL when it
 * does not fit. */
__attribute__((warn_unused_result)) int file_publish_variant(const char *path, unsigned n,
                                                             char *out, size_t out_len);

/* Creates `<dir of final>/.cuprof-<pid>-XXXXXX.tmp` exclusively (O_EXCL: never an existing file,
 * link or FIFO; close-on-exec; mode 0600) and writes its name into temp. Returns the descriptor,
 * or -1 with errno (ENAMETOOLONG when the name does not fit). */
int file_publish_open_temp(const char *final, char *temp, size_t temp_len);

/* The folder that takes a snapshot its own folder cannot (missing, read-only, full): $TMPDIR
 * when it is an absolute path to a folder, else /tmp (secure_getenv: a set-user-ID program's
 * TMPDIR is not ours to follow). Reads the environment: call it at start, not at a dump. */
void file_publish_fallback_folder(char *out, size_t out_len);

/* `folder`/ and the last component of `path` into out; false when it does not fit or `path`
 * ends in '/'. */
bool file_publish_in_folder(const char *folder, const char *path, char *out, size_t out_len);

/* Removes a temporary file of file_publish_open_temp that will not be published. */
void file_publish_discard(const char *temp);

/* Async-signal-safe: removes the newest temporary file that is neither published nor discarded
 * yet, for a program that ends while a snapshot is written (its descriptor stays valid). */
void file_publish_remove_unfinished(void);

/* Gives the finished temporary file its name by `mode`; the name used goes into chosen (may be
 * NULL). On success the temporary name is gone. 0, or -CUPROF_EIO with errno (EEXIST: no free
 * name, or an exact name held by something that is not a regular file) and the temporary file
 * left for the caller to remove. */
__attribute__((warn_unused_result)) int file_publish(const char *temp, const char *final,
                                                     enum file_publish_mode mode, char *chosen,
                                                     size_t chosen_len);

#endif
