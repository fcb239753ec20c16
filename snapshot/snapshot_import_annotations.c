/* snapshot_import_annotations.c: PyTorch's external_annotations into the traces. */
#include "snapshot/snapshot_import_annotations.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/cuprof_errors.h"
#include "allocator/trace_sink.h"
#include "snapshot/snapshot_import.h"

#define SKIP "annotation skipped"

/* Whether a trace already holds a range's annotation (the file is cuprof's own). */
static bool
has_ranges(const struct snapshot *snap)
{
    for (size_t d = 0; d < snap->device_count; d++) {
        const struct snap_device_trace *t = &snap->device_traces[d];
        for (size_t k = 0; k < t->label_count; k++)
            if (t->labels[k].stage != SNAP_STAGE_MARK &&
                t->entries[t->labels[k].entry].action == TRACE_ANNOTATE)
                return true;
    }
    return false;
}

/* One record: 0 (read into *a and *device), 1 (skipped: warned) or a negative error. */
static int
read_one(struct snapshot_fields *f, size_t i, const struct sval *v, struct snap_annotation *a,
         size_t *device)
{
    char where[64];
    snprintf(where, sizeof where, "external_annotations[%zu]", i);
    if (v->type != SVAL_DICT) {
        int rc = snapshot_field_warn(f, where, "external_annotations[]", v, "not a dict", SKIP);
        return rc < 0 ? rc : 1;
    }
    const char *stage = NULL;
    int64_t dev = 0;
    int rc;
    *a = (struct snap_annotation){0};
    if ((rc = snapshot_field_str(f, where, v, "name", SKIP, &a->name)) < 0 ||
        (rc = snapshot_field_str(f, where, v, "stage", SKIP, &stage)) < 0)
        return rc;
    if (a->name == NULL || stage == NULL)
        return 1; /* another kind of annotation: not a range */
    a->stage = strcmp(stage, "START") == 0 ? SNAP_STAGE_START
               : strcmp(stage, "END") == 0 ? SNAP_STAGE_END
                                           : SNAP_STAGE_MARK;
    if (a->stage == SNAP_STAGE_MARK)
        return 1;
    if ((rc = snapshot_field_i64(f, where, v, "device", 0, SNAPSHOT_MAX_DEVICES - 1, SKIP, &dev)) <
            0 ||
        (rc == FIELD_OK && (rc = snapshot_field_i64(f, where, v, "time_us", INT64_MIN / 4,
                                                    INT64_MAX / 4, SKIP, &a->time_us)) < 0))
        return rc;
    if (rc != FIELD_OK)
        return 1;
    *device = (size_t)dev;
    return 0;
}

int
snapshot_import_annotations(struct snapshot_fields *f, const struct sval *list)
{
    if (list == NULL || list->type != SVAL_LIST || sval_len(list) == 0 || has_ranges(f->snap))
        return 0;
    size_t n = sval_len(list);
    struct snap_annotation *ann = malloc(n * sizeof(*ann));
    size_t *dev = malloc(n * sizeof(*dev));
    int rc = ann != NULL && dev != NULL ? 0 : -CUPROF_EHOSTMEM;
    size_t kept = 0, devices = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        int one = read_one(f, i, sval_at(list, i), &ann[kept], &dev[kept]);
        if (one < 0)
            rc = one;
        else if (one == 0 && dev[kept] + 1 > devices)
            devices = dev[kept++] + 1;
        else if (one == 0)
            kept++;
    }
    /* Device by device: each its own records, in file order (the merge sorts them by time). */
    struct snap_annotation *mine = rc == 0 ? malloc((kept + 1) * sizeof(*mine)) : NULL;
    if (rc == 0 && mine == NULL)
        rc = -CUPROF_EHOSTMEM;
    for (size_t d = 0; rc == 0 && d < devices; d++) {
        size_t m = 0;
        for (size_t k = 0; k < kept; k++)
            if (dev[k] == d)
                mine[m++] = ann[k];
        rc = snapshot_merge_annotations(f->snap, d, mine, m);
    }
    free(mine);
    free(ann);
    free(dev);
    return rc;
}
