/* report_html.h: the HTML report template (cli/report.html), compiled into the binary at build
 *   time by cli/embed_file.py so that `cuprof plot` needs no file or network at run time.
 * Locking: none (constant data).
 * Hot path: no. */
#ifndef CUPROF_CLI_REPORT_HTML_H
#define CUPROF_CLI_REPORT_HTML_H

#include <stddef.h>

/* The template, NUL-terminated; the data goes where it says CUPROF_DATA in a comment. */
extern const char report_html[];
extern const size_t report_html_len;

#endif
