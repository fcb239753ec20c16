/* snapshot_oom.c: cuprof.oom_messages (see snapshot_oom.h). */
#include "snapshot/snapshot_oom.h"

#include <stdio.h>
#include <stdlib.h>

#include "allocator/cuprof_errors.h"
#include "snapshot/snapshot_arena.h"

int
snapshot_set_oom_messages(struct snapshot *snap, const struct snap_oom_message *rows, size_t count)
{
    struct snap_oom_message *copy = NULL;
    if (count > 0) {
        if (count > SIZE_MAX / sizeof(*copy))
            return -CUPROF_EHOSTMEM;
        copy = snapshot_arena_alloc(snap->arena, count * sizeof(*copy));
        if (copy == NULL)
            return -CUPROF_EHOSTMEM;
    }
    for (size_t i = 0; i < count; i++) {
        copy[i] = rows[i];
        copy[i].message = snapshot_intern(snap, rows[i].message != NULL ? rows[i].message : "");
        if (copy[i].message == NULL)
            return -CUPROF_EHOSTMEM;
    }
    snap->cuprof.oom_messages = copy;
    snap->cuprof.oom_message_count = count;
    if (count > 0)
        snap->cuprof.present = true;
    return 0;
}

const char *
snapshot_oom_message_of(const struct snapshot *snap, size_t device, size_t index)
{
    const struct snap_cuprof *c = &snap->cuprof;
    const struct snap_entry *e =
        device < snap->device_count && index < snap->device_traces[device].count
            ? &snap->device_traces[device].entries[index]
            : NULL;
    for (size_t i = 0; i < c->oom_message_count; i++)
        if ((size_t)c->oom_messages[i].device == device &&
            c->oom_messages[i].trace_index == (int64_t)index)
            return c->oom_messages[i].message;
    /* A file whose rows name no index (another writer, an edited file): matched by time. */
    for (size_t i = 0; e != NULL && e->has_time && i < c->oom_message_count; i++)
        if ((size_t)c->oom_messages[i].device == device && c->oom_messages[i].trace_index < 0 &&
            c->oom_messages[i].time_us == e->time_us)
            return c->oom_messages[i].message;
    return NULL;
}

void
snapshot_oom_emit(const struct snapshot *snap, struct emitter *e)
{
    const struct snap_cuprof *c = &snap->cuprof;
    if (c->oom_message_count == 0)
        return;
    emitter_key(e, "oom_messages");
    emitter_begin_list(e);
    for (size_t i = 0; i < c->oom_message_count; i++) {
        const struct snap_oom_message *m = &c->oom_messages[i];
        emitter_begin_dict(e);
        emitter_key(e, "device");
        emitter_int(e, m->device);
        emitter_key(e, "trace_index");
        emitter_int(e, m->trace_index);
        emitter_key(e, "time_us");
        emitter_int(e, m->time_us);
        emitter_key(e, "message");
        emitter_string(e, m->message != NULL ? m->message : "");
        emitter_end(e);
    }
    emitter_end(e);
}

/* One row; 1 when it cannot be used (skipped, warned). */
static int
import_row(struct snapshot_fields *f, const char *where, const struct sval *v,
           struct snap_oom_message *row)
{
    const char *skip = "message skipped";
    if (v->type != SVAL_DICT) {
        int rc = snapshot_field_warn(f, "cuprof", "oom_messages[]", v, "not a dict", skip);
        return rc < 0 ? rc : 1;
    }
    int64_t device = 0;
    *row = (struct snap_oom_message){.trace_index = -1};
    int rc = snapshot_field_i64(f, where, v, "device", 0, INT32_MAX, skip, &device);
    if (rc != FIELD_OK)
        return rc < 0 ? rc : 1;
    row->device = (int32_t)device;
    if ((rc = snapshot_field_i64(f, where, v, "trace_index", -1, INT64_MAX, "read as unknown",
                                 &row->trace_index)) < 0 ||
        (rc = snapshot_field_i64(f, where, v, "time_us", INT64_MIN, INT64_MAX, "read as 0",
                                 &row->time_us)) < 0)
        return rc;
    if ((rc = snapshot_field_str(f, where, v, "message", skip, &row->message)) < 0)
        return rc;
    return row->message == NULL ? 1 : 0;
}

int
snapshot_oom_import(struct snapshot_fields *f, const struct sval *cuprof)
{
    const struct sval *list = sval_get(cuprof, "oom_messages");
    size_t n = sval_len(list), used = 0;
    if (n == 0)
        return 0;
    struct snap_oom_message *rows = calloc(n, sizeof(*rows));
    if (rows == NULL)
        return -CUPROF_EHOSTMEM;
    int rc = 0;
    for (size_t i = 0; i < n && rc >= 0; i++) {
        char where[48];
        snprintf(where, sizeof where, "cuprof.oom_messages[%zu]", i);
        rc = import_row(f, where, sval_at(list, i), &rows[used]);
        used += rc == 0;
    }
    if (rc >= 0 && used > 0)
        rc = snapshot_set_oom_messages(f->snap, rows, used);
    free(rows);
    return rc < 0 ? rc : 0;
}
