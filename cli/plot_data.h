/* plot_data.h: the report page's data, which viewer/ draws: JSON values (figures, call sites,
 *   frames, the numbers of the charts) and one binary part (stacks and history tables,
 *   plot_blob.h), written into the page template compiled into cuprof (report_html.h).
 *   viewer/DATA.md is the layout. The figures come from analysis.c, library_report.c and
 *   cross_rank.c: the page draws them and never computes one of its own.
 * Locking: none (single-threaded command).
 * Hot path: no. */
#ifndef CUPROF_CLI_PLOT_DATA_H
#define CUPROF_CLI_PLOT_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "cli/plot_blob.h"
#include "snapshot/emitter.h"
#include "snapshot/snapshot_model.h"

/* The layout's version, the "cuprof_report" key: the page refuses data of another. */
#define PLOT_DATA_SCHEMA 1

/* What cuprof plot writes where the template says <!--CUPROF_DATA-->; a template without it is
 * not a report page. */
#define PLOT_DATA_MARKER "<!--CUPROF_DATA-->"

struct plot_page {
    FILE *out;
    const char *tail;       /* the template after its marker */
    struct emitter *e;      /* the main JSON value, written as it goes */
    struct plot_blob blobs; /* the binary part, written last */
};

struct plot_run_options {
    bool history;     /* the trace tables (false: --no-history, and flamegraph pages) */
    bool all_frames;  /* a call site is a whole stack */
    const char *name; /* the run's label on the page ("A", "rank 3") */
    long device;      /* only this device, or -1 for every device */
};

/* Analyses the page shows when they exist. Nothing fills them yet: they are the hooks where
 * `cuprof explain` (an OOM's verdict) and the run-to-run `cuprof diff` plug in, each writing its
 * key into the open dict (viewer/DATA.md: "oom_verdicts", "diff"). NULL: nothing to show. */
struct plot_extras {
    /* Inside a run's dict: "oom_verdicts": [{"device", "entry", "verdict", "text"}]. */
    int (*oom_verdicts)(struct emitter *e, const struct snapshot *snap);
    /* Inside the top dict of a two-run page: "diff": {"summary": text, ...}, for the files A and
     * B (paths[0], paths[1]), read as `cuprof diff` reads them. */
    int (*diff)(struct emitter *e, char *const *paths, bool all_frames);
};

/* Writes the template up to its marker and opens the main JSON value (a script element). Returns
 * 0, or -1 after one line (no marker: a bad build; out of memory). */
__attribute__((warn_unused_result)) int plot_page_begin(struct plot_page *p, FILE *out,
                                                        const char *template_text);
/* Ends the main value, writes `extra_json` (a JSON value already made, e.g. the cross-rank view)
 * as its own script element "cuprof-<extra_id>" when not NULL, then the binary part and the
 * template's rest. false when a write failed or a value was left unbalanced. Frees p. */
bool plot_page_end(struct plot_page *p, const char *extra_id, const char *extra_json);

/* The top dict's first keys: schema, kind ("report" or "flamegraph"), mode ("single", "ranks",
 * "compare"), generator and the first file's path. The caller opened the dict. */
void plot_data_header(struct plot_page *p, const char *kind, const char *mode, const char *file);

/* One file's dict, a member of "runs": its header, frames, stacks and every device present
 * (with opt->history, the tables the timeline and the allocator's state are drawn from). The
 * snapshot gains the filtered twins of its stacks (frame_filter_map), nothing else changes.
 * Returns 0, or -1 when host memory runs out (said on stderr). */
__attribute__((warn_unused_result)) int plot_data_run(struct plot_page *p, struct snapshot *snap,
                                                      const char *path,
                                                      const struct plot_run_options *opt,
                                                      const struct plot_extras *extras);

#endif
