/* explain_print.h: `cuprof explain`'s outputs of one computed struct explain: a screen of text,
 *   or one JSON object. They only print: every figure is explain.c's.
 * Locking: none (single-threaded command).
 * Hot path: no. */
#ifndef CUPROF_CLI_EXPLAIN_PRINT_H
#define CUPROF_CLI_EXPLAIN_PRINT_H

#include <stdbool.h>
#include <stdio.h>

#include "cli/explain.h"

void explain_print_text(FILE *out, const char *path, const struct explain *x);

/* The answer alone: the verdict and what would have avoided it (the report page's OOM marker). */
void explain_print_answer(FILE *out, const struct explain *x);
/* False when the JSON could not be written (host memory, a failed write). */
bool explain_print_json(FILE *out, const char *path, const struct explain *x);

#endif
