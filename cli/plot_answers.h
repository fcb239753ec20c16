/* plot_answers.h: the answers `cuprof explain` and `cuprof diff` give, written into the report
 *   page's data (the hooks of plot_data.h's struct plot_extras): each OOM's verdict and what
 *   would have avoided it, and two runs' diff, in the words the commands print.
 * Locking: none (single-threaded command).
 * Hot path: no; each verdict replays the history a few times (explain's what-ifs). */
#ifndef CUPROF_CLI_PLOT_ANSWERS_H
#define CUPROF_CLI_PLOT_ANSWERS_H

#include "cli/plot_data.h"

/* The first OOMs of each device explained (the page shows the verdict at their markers). */
#define PLOT_ANSWERS_OOMS_MAX 4

/* The extras `cuprof plot` passes to plot_data_run and calls for two runs. */
extern const struct plot_extras plot_answers;

#endif
