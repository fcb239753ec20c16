/* phases.h: a device's history cut at its annotations into phases: each annotation
 *   (cuprof_annotate's `annotate` entries, and changes of PyTorch's user_metadata, which PyTorch
 *   sets on every entry after torch.cuda.memory._set_memory_metadata) up to the next one, with
 *   the bytes at its start, its peaks and its growth; and the same summed up per label.
 * Locking: none (single-threaded command).
 * Hot path: no; O(entries) over analysis.h's series. */
#ifndef CUPROF_CLI_PHASES_H
#define CUPROF_CLI_PHASES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/analysis.h"
#include "snapshot/snapshot_model.h"

/* One annotation and the phase it opens. States are analysis.h's: after k entries. */
struct phase_mark {
    size_t entry;      /* the annotation's entry */
    const char *label; /* the snapshot's text; NULL where PyTorch's metadata was cleared */
    bool has_time;
    int64_t time_us;
    uint64_t live, reserved;           /* at its start (the state before its entry) */
    uint64_t peak_live, peak_reserved; /* after each of its entries (its first included) */
    size_t peak_live_at;               /* the state of the live peak (entry peak_live_at - 1) */
    int64_t growth; /* live bytes at its end (the next annotation, or the end) - at start */
};

/* Every phase of one label, summed up. */
struct phase_label {
    const char *label;  /* NULL: metadata cleared */
    size_t first_entry; /* its first annotation's entry */
    size_t count;
    uint64_t peak_live, peak_reserved; /* the highest over its phases */
    size_t peak_live_at;
    int64_t growth; /* the sum of its phases' growth */
};

/* The marks of `device`, oldest first, from `a` made with series. *out is malloc'd (NULL when
 * none). Returns 0, or -1 when host memory runs out. */
__attribute__((warn_unused_result)) int phases_marks(const struct snapshot *snap, size_t device,
                                                     const struct device_analysis *a,
                                                     struct phase_mark **out, size_t *n);

/* The marks summed per label, in the order each label first appears. Returns 0, or -1. */
__attribute__((warn_unused_result)) int phases_by_label(const struct phase_mark *marks, size_t n,
                                                        struct phase_label **out, size_t *nl);

#endif
