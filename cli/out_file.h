/* out_file.h: where a command's output goes, never destroying what it fails to replace: a
 *   regular file (or a symbolic link to one) is written as a new temporary file beside it and
 *   renamed over it only when the whole output was written; a device or FIFO is written as it is,
 *   never created, truncated, renamed or unlinked; `-` (and /dev/stdout) is standard output,
 *   /dev/fd/N the open descriptor N. Every failure is one line `cuprof: FILE: REASON` on stderr.
 * Locking: none (single-threaded command).
 * Hot path: no. */
#ifndef CUPROF_CLI_OUT_FILE_H
#define CUPROF_CLI_OUT_FILE_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

/* What standard output is called in messages. */
#define OUT_FILE_STDOUT_NAME "standard output"

struct out_file {
    FILE *f;          /* write the output here */
    const char *path; /* as given ("-": standard output), for messages */
    char *dest;       /* the file the temporary replaces (a link's target), malloc'd; or NULL */
    char *tmp;        /* the temporary file, malloc'd; NULL when written in place */
    int fd;           /* f's descriptor, or -1 for standard output */
    int error;        /* errno of the first failed write, or 0 */
    mode_t mode;      /* the temporary's mode once renamed */
    uid_t uid;        /* the replaced file's owner, kept where permitted */
    gid_t gid;
    bool replacing; /* dest existed: its owner is kept */
};

/* Opens `path` for output: NULL or "-" is standard output. A missing file or a regular one (also
 * through a symbolic link: the link stays, its target is replaced) gets a temporary file,
 * created exclusively (O_EXCL, not following links, mode 0600 until done) in its directory; a
 * character device or FIFO is opened for writing as it is; /dev/stdout, /dev/stderr, /dev/fd/N
 * and /proc/self/fd/N are written through the descriptor they name, never reopened (a `>> log`
 * appends); a directory, a block device, a socket and a dangling link are refused. Returns 0,
 * or -1 after one line naming the file. */
__attribute__((warn_unused_result)) int out_file_open(struct out_file *o, const char *path);

/* Finishes the output: flushed, and for a temporary file synced, given the mode a new file
 * gets (0666 less the umask) or the replaced file's mode and owner, and renamed over the
 * destination. Returns 0; or -1 after one line naming the file and the reason, the temporary
 * unlinked (the destination as it was). Frees `o` either way. */
__attribute__((warn_unused_result)) int out_file_commit(struct out_file *o);

/* Gives up the output (the command failed and said why): the temporary file is unlinked; a
 * destination that existed is untouched. Frees `o`. */
void out_file_abort(struct out_file *o);

/* out_file_commit when `ok` (the command succeeded) or when a write failed (its line says why);
 * out_file_abort otherwise. Returns 0 when the output was committed. */
__attribute__((warn_unused_result)) int out_file_end(struct out_file *o, bool ok);

/* At the start of the program: standard output becomes a stream over descriptor 1 that keeps
 * the errno of the first write that failed, for out_file_stdout_done's line. */
void out_file_stdout_begin(void);

/* At the end of a command: flushes standard output and says, in one line, when anything written
 * to it was lost (`cuprof: standard output: write failed: No space left on device`). Returns 0,
 * or -1 after that line. */
__attribute__((warn_unused_result)) int out_file_stdout_done(void);

#endif
