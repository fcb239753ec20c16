/* check_report.h: the results of `cuprof check` in words, kept while each snapshot is read, then
 *   written three ways from the same lines: text (one line per budget crossed and a last line),
 *   JSON, and JUnit XML for CI systems (through out_file.h).
 * Locking: none (single-threaded command).
 * Hot path: no. */
#ifndef CUPROF_CLI_CHECK_REPORT_H
#define CUPROF_CLI_CHECK_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "cli/check_budget.h"
#include "snapshot/snapshot_model.h"

struct check_entry {
    size_t file;     /* index into paths */
    bool unreadable; /* the file could not be read: r and the texts are unset */
    struct check_result r;
    char *message; /* what was found, after "FILE: device N: " (escaped for a terminal) */
    char *site;    /* the call site named, or NULL */
};

struct check_report {
    struct check_budgets budgets;
    const char *baseline; /* its path, or NULL */
    char *const *paths;
    size_t count;
    struct check_entry *v;
    size_t n, cap;
    size_t crossed, unreadable;
};

void check_report_init(struct check_report *rep, const struct check_budgets *budgets,
                       const char *baseline, char *const *paths, size_t count);
/* One result of file `file`, worded while its snapshot (`snap`) is read. 0, or -1 when host
 * memory runs out. */
__attribute__((warn_unused_result)) int check_report_add(struct check_report *rep, size_t file,
                                                         const struct snapshot *snap,
                                                         const struct check_result *r);
/* File `file` could not be read (its reader said why on stderr). 0, or -1 out of memory. */
__attribute__((warn_unused_result)) int check_report_unreadable(struct check_report *rep,
                                                                size_t file);

/* The text: `FILE: device N: message` per budget crossed, then one line summing up. False when a
 * write failed. */
bool check_report_text(const struct check_report *rep, FILE *out);
/* The JSON object of `cuprof check --json`. False when a write failed. */
bool check_report_json(const struct check_report *rep, FILE *out);
/* JUnit XML at `path` (out_file.h: replaced only once whole; "-" is standard output). 0, or -1
 * after one line naming the file. */
__attribute__((warn_unused_result)) int check_report_junit(const struct check_report *rep,
                                                           const char *path);

void check_report_free(struct check_report *rep);

#endif
