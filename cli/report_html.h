/* report_html.h: the report page's template, built by viewer/ (esbuild bundles the web
 *   application into one HTML file; viewer/fallback.html when node was missing at build time)
 *   and compiled into the binary by cli/embed_file.py, so that `cuprof plot` and `cuprof
 *   flamegraph --html` need no file, node or network at run time.
 * Locking: none (constant data).
 * Hot path: no. */
#ifndef CUPROF_CLI_REPORT_HTML_H
#define CUPROF_CLI_REPORT_HTML_H

#include <stddef.h>

/* The template, NUL-terminated; the data goes where it says PLOT_DATA_MARKER (plot_data.h). */
extern const char report_html[];
extern const size_t report_html_len;

#endif
