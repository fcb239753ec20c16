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
        copy[i].api = rows[i].api != NULL ? snapshot_intern(snap, rows[i].api) : NULL;
        if (copy[i].message == NULL || (rows[i].api != NULL && copy[i].api == NULL))
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
    /* A driver's own call's row (api) belongs to no entry, though its index may match one. */
    for (size_t i = 0; i < c->oom_message_count; i++)
        if ((size_t)c->oom_messages[i].device == device && c->oom_messages[i].api == NULL &&
            c->oom_messages[i].trace_index == (int64_t)index)
            return c->oom_messages[i].message;
    /* A file whose rows name no index (another writer, an edited file): matched by time. */
    for (size_t i = 0; e != NULL && e->has_time && i < c->oom_message_count; i++)
        if ((size_t)c->oom_messages[i].device == device && c->oom_messages[i].api == NULL &&
            c->oom_messages[i].trace_index < 0 && c->oom_messages[i].time_us == e->time_us)
            return c->oom_messages[i].message;
    return NULL;
}

const struct snap_oom_message *
snapshot_driver_oom_first(const struct snapshot *snap, size_t device)
{
    const struct snap_cuprof *c = &snap->cuprof;
    size_t count = device < snap->device_count ? snap->device_traces[device].count : 0;
    const struct snap_oom_message *first = NULL;
    for (size_t i = 0; i < c->oom_message_count; i++) {
        const struct snap_oom_message *m = &c->oom_messages[i];
        if ((size_t)m->device == device && m->api != NULL && m->trace_index >= 0 &&
            (uint64_t)m->trace_index <= count &&
            (first == NULL || m->trace_index < first->trace_index))
            first = m;
    }
    return first;
}

size_t
snapshot_driver_oom_count(const struct snapshot *snap, size_t device)
{
    size_t n = 0;
    for (size_t i = 0; i < snap->cuprof.oom_message_count; i++)
        n += (size_t)snap->cuprof.oom_messages[i].device == device &&
             snap->cuprof.oom_messages[i].api != NULL;
    return n;
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
        if (m->api != NULL) { /* absent for an allocation: files stay as they were */
            emitter_key(e, "api");
            emitter_string(e, m->api);
        }
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
    if ((rc = snapshot_field_str(f, where, v, "api", "read as an allocation's", &row->api)) < 0)
        return rc;
    if (row->api != NULL && row->api[0] == '\0')
        row->api = NULL;
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
