/* snapshot_usage.c: cuprof.libraries and cuprof.device_footprint (see snapshot_usage.h). */
#include "snapshot/snapshot_usage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/cuprof_errors.h"
#include "snapshot/snapshot_arena.h"

/* The byte counters of a library row, in the order they are written. */
#define LIBRARY_COUNTERS(X)                                                                        \
    X(cache_requested, "cache_requested_bytes")                                                    \
    X(cache_requested_peak, "cache_requested_bytes_peak")                                          \
    X(cache_reserved, "cache_reserved_bytes")                                                      \
    X(cache_reserved_peak, "cache_reserved_bytes_peak")                                            \
    X(passthrough, "passthrough_bytes")                                                            \
    X(passthrough_peak, "passthrough_bytes_peak")                                                  \
    X(device_bytes, "device_bytes")                                                                \
    X(device_bytes_peak, "device_bytes_peak")

int
snapshot_set_libraries(struct snapshot *snap, const struct snap_library *rows, size_t count)
{
    struct snap_library *copy = NULL;
    if (count > 0) {
        if (count > SIZE_MAX / sizeof(*copy))
            return -CUPROF_EHOSTMEM;
        copy = snapshot_arena_alloc(snap->arena, count * sizeof(*copy));
        if (copy == NULL)
            return -CUPROF_EHOSTMEM;
    }
    for (size_t i = 0; i < count; i++) {
        copy[i] = rows[i];
        copy[i].path = snapshot_intern(snap, rows[i].path != NULL ? rows[i].path : "");
        if (copy[i].path == NULL)
            return -CUPROF_EHOSTMEM;
    }
    snap->cuprof.libraries = copy;
    snap->cuprof.library_count = count;
    snap->cuprof.present = true;
    return 0;
}

int
snapshot_set_footprints(struct snapshot *snap, const struct snap_footprint *rows, size_t count)
{
    struct snap_footprint *copy = NULL;
    if (count > 0) {
        if (count > SIZE_MAX / sizeof(*copy))
            return -CUPROF_EHOSTMEM;
        copy = snapshot_arena_alloc(snap->arena, count * sizeof(*copy));
        if (copy == NULL)
            return -CUPROF_EHOSTMEM;
        memcpy(copy, rows, count * sizeof(*copy));
    }
    snap->cuprof.footprints = copy;
    snap->cuprof.footprint_count = count;
    snap->cuprof.present = true;
    return 0;
}

const char *
snapshot_library_name(const struct snap_library *row)
{
    if (row->path == NULL || row->path[0] == '\0')
        return "(unknown)";
    const char *slash = strrchr(row->path, '/');
    return slash != NULL && slash[1] != '\0' ? slash + 1 : row->path;
}

void
snapshot_usage_emit(const struct snapshot *snap, struct emitter *e)
{
    const struct snap_cuprof *c = &snap->cuprof;
    emitter_key(e, "libraries");
    emitter_begin_list(e);
    for (size_t i = 0; i < c->library_count; i++) {
        const struct snap_library *r = &c->libraries[i];
        emitter_begin_dict(e);
        emitter_key(e, "device");
        emitter_int(e, r->device);
        emitter_key(e, "library");
        emitter_string(e, snapshot_library_name(r));
        emitter_key(e, "path");
        emitter_string(e, r->path != NULL ? r->path : "");
        emitter_key(e, "is_program");
        emitter_bool(e, r->is_program);
#define EMIT_COUNTER(field, key)                                                                   \
    emitter_key(e, key);                                                                           \
    emitter_uint(e, r->field);
        LIBRARY_COUNTERS(EMIT_COUNTER)
#undef EMIT_COUNTER
        emitter_end(e);
    }
    emitter_end(e);
    emitter_key(e, "device_footprint");
    emitter_begin_list(e);
    for (size_t i = 0; i < c->footprint_count; i++) {
        const struct snap_footprint *fp = &c->footprints[i];
        emitter_begin_dict(e);
        emitter_key(e, "device");
        emitter_int(e, fp->device);
        emitter_key(e, "total_bytes");
        emitter_int(e, fp->total);
        emitter_key(e, "used_bytes_at_start");
        emitter_int(e, fp->used_at_start);
        emitter_key(e, "used_bytes_at_dump");
        emitter_int(e, fp->used_at_dump);
        emitter_key(e, "graph_reserved_bytes_at_dump");
        emitter_int(e, fp->graph_reserved_at_dump);
        emitter_end(e);
    }
    emitter_end(e);
}

/* One row of cuprof.libraries; 1 when it cannot be used (skipped, warned). */
static int
import_library(struct snapshot_fields *f, const char *where, const struct sval *v,
               struct snap_library *row)
{
    const char *skip = "library row skipped";
    if (v->type != SVAL_DICT) {
        int rc = snapshot_field_warn(f, "cuprof", "libraries[]", v, "not a dict", skip);
        return rc < 0 ? rc : 1;
    }
    int64_t device = 0;
    int rc = snapshot_field_i64(f, where, v, "device", 0, INT32_MAX, skip, &device);
    if (rc != FIELD_OK)
        return rc < 0 ? rc : 1;
    *row = (struct snap_library){.device = (int32_t)device, .path = ""};
    if ((rc = snapshot_field_str(f, where, v, "path", "read as unknown", &row->path)) < 0 ||
        (rc = snapshot_field_bool(f, where, v, "is_program", &row->is_program)) < 0)
        return rc;
    if (row->path == NULL)
        row->path = "";
#define IMPORT_COUNTER(field, key)                                                                 \
    if ((rc = snapshot_field_u64(f, where, v, key, FIELD_BYTES, skip, &row->field)) < 0)           \
        return rc;                                                                                 \
    if (rc == FIELD_BAD)                                                                           \
        return 1;
    LIBRARY_COUNTERS(IMPORT_COUNTER)
#undef IMPORT_COUNTER
    return 0;
}

/* One row of cuprof.device_footprint; 1 when it cannot be used. A bad byte count reads as
 * unknown (-1): the row still says what is known. */
static int
import_footprint(struct snapshot_fields *f, const char *where, const struct sval *v,
                 struct snap_footprint *row)
{
    if (v->type != SVAL_DICT) {
        int rc = snapshot_field_warn(f, "cuprof", "device_footprint[]", v, "not a dict",
                                     "footprint row skipped");
        return rc < 0 ? rc : 1;
    }
    int64_t device = 0;
    int rc =
        snapshot_field_i64(f, where, v, "device", 0, INT32_MAX, "footprint row skipped", &device);
    if (rc != FIELD_OK)
        return rc < 0 ? rc : 1;
    *row = (struct snap_footprint){.device = (int32_t)device,
                                   .total = -1,
                                   .used_at_start = -1,
                                   .used_at_dump = -1,
                                   .graph_reserved_at_dump = -1};
    const int64_t most = (int64_t)SNAP_MAX_BYTES;
    if ((rc = snapshot_field_i64(f, where, v, "total_bytes", -1, most, "read as unknown",
                                 &row->total)) < 0 ||
        (rc = snapshot_field_i64(f, where, v, "used_bytes_at_start", -1, most, "read as unknown",
                                 &row->used_at_start)) < 0 ||
        (rc = snapshot_field_i64(f, where, v, "used_bytes_at_dump", -1, most, "read as unknown",
                                 &row->used_at_dump)) < 0 ||
        (rc = snapshot_field_i64(f, where, v, "graph_reserved_bytes_at_dump", -1, most,
                                 "read as unknown", &row->graph_reserved_at_dump)) < 0)
        return rc;
    return 0;
}

int
snapshot_usage_import(struct snapshot_fields *f, const struct sval *cuprof)
{
    const struct sval *libs = sval_get(cuprof, "libraries");
    size_t n = sval_len(libs), used = 0;
    struct snap_library *rows = n > 0 ? calloc(n, sizeof(*rows)) : NULL;
    if (n > 0 && rows == NULL)
        return -CUPROF_EHOSTMEM;
    int rc = 0;
    for (size_t i = 0; i < n && rc >= 0; i++) {
        char where[48];
        snprintf(where, sizeof where, "cuprof.libraries[%zu]", i);
        rc = import_library(f, where, sval_at(libs, i), &rows[used]);
        used += rc == 0;
    }
    if (rc >= 0 && used > 0)
        rc = snapshot_set_libraries(f->snap, rows, used);
    free(rows);
    if (rc < 0)
        return rc;

    const struct sval *fps = sval_get(cuprof, "device_footprint");
    n = sval_len(fps);
    used = 0;
    struct snap_footprint *fp = n > 0 ? calloc(n, sizeof(*fp)) : NULL;
    if (n > 0 && fp == NULL)
        return -CUPROF_EHOSTMEM;
    for (size_t i = 0; i < n && rc >= 0; i++) {
        char where[48];
        snprintf(where, sizeof where, "cuprof.device_footprint[%zu]", i);
        rc = import_footprint(f, where, sval_at(fps, i), &fp[used]);
        used += rc == 0;
    }
    if (rc >= 0 && used > 0)
        rc = snapshot_set_footprints(f->snap, fp, used);
    free(fp);
    return rc < 0 ? rc : 0;
}
