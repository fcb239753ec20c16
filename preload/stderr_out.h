/* stderr_out.h: cuprof's lines go to the standard error the process started with, and nowhere
 *   else: a program that closed descriptor 2 and got that number back for a file of its own (or
 *   pointed it elsewhere) never finds cuprof's lines in that file; they are dropped instead.
 * Locking: none (the identity is published once with an atomic store).
 * Hot path: no (log lines); async-signal-safe (fstat and write only). */
#ifndef CUPROF_STDERR_OUT_H
#define CUPROF_STDERR_OUT_H

#include <stdbool.h>
#include <stddef.h>

/* Notes which file descriptor 2 is (or that it is closed). Runs from a constructor before the
 * program's main; a write before that notes it first. Later calls change nothing. */
void stderr_out_remember(void);

/* Writes line[0..len) to descriptor 2 with one write(2) when it is still the file it was at
 * start; false when the line was dropped (descriptor 2 closed, reused or failing). errno is
 * left as it was. */
bool stderr_out_write(const char *line, size_t len);

#endif
