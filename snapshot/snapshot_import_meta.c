/* snapshot_import_meta.c: allocator_settings and cuprof's own section of a snapshot file: only
 * shown, so a value that cannot be used is ignored (with its warning line). */
#include "snapshot/snapshot_import_meta.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/cuprof_errors.h"
#include "snapshot/snapshot_import.h"
#include "snapshot/snapshot_oom.h"
#include "snapshot/snapshot_usage.h"

/* PyTorch writes SIZE_MAX ("no limit") as -1; Python code may write it as 2^64-1. */
static int
size_max_field(struct snapshot_fields *f, const char *where, const char *key, const struct sval *v,
               int64_t *out)
{
    if (v != NULL && v->type == SVAL_UINT && v->u.u == UINT64_MAX) {
        *out = -1;
        return FIELD_OK;
    }
    return snapshot_field_i64_value(f, where, key, v, -1, INT64_MAX, "ignored", out);
}

int
snapshot_import_settings(struct snapshot_fields *f, const struct sval *a)
{
    const char *w = "allocator_settings";
    if (a->type != SVAL_DICT) {
        int rc = snapshot_field_warn(f, "snapshot", w, a, "not a dict", "ignored");
        return rc < 0 ? rc : 0;
    }
    struct snap_allocator_settings *s = &f->snap->allocator_settings;
    f->snap->has_allocator_settings = true;
    int64_t v = 0;
    int rc;
    if ((rc = snapshot_field_str(f, w, a, "PYTORCH_CUDA_ALLOC_CONF", "ignored", &s->alloc_conf)) <
            0 ||
        (rc = size_max_field(f, w, "max_split_size", sval_get(a, "max_split_size"),
                             &s->max_split_size)) < 0 ||
        (rc = snapshot_field_i64(f, w, a, "pinned_num_register_threads", 0, INT32_MAX, "ignored",
                                 &s->pinned_num_register_threads)) < 0 ||
        (rc = snapshot_field_bool(f, w, a, "expandable_segments", &s->expandable_segments)) < 0 ||
        (rc = snapshot_field_bool(f, w, a, "release_lock_on_cudamalloc",
                                  &s->release_lock_on_cudamalloc)) < 0 ||
        (rc = snapshot_field_bool(f, w, a, "pinned_use_cuda_host_register",
                                  &s->pinned_use_cuda_host_register)) < 0)
        return rc;
    const struct sval *g = sval_get(a, "garbage_collection_threshold");
    if (g != NULL && g->type == SVAL_FLOAT && isfinite(g->u.f))
        s->garbage_collection_threshold = g->u.f;
    else if (g != NULL && g->type == SVAL_INT)
        s->garbage_collection_threshold = (double)g->u.i;
    else if (g != NULL && (rc = snapshot_field_warn(f, w, "garbage_collection_threshold", g,
                                                    "not a number", "ignored")) < 0)
        return rc;
    const struct sval *r = sval_get(a, "roundup_power2_divisions");
    for (int i = 0; i < 16 && r != NULL && r->type == SVAL_DICT; i++) {
        char key[8];
        snprintf(key, sizeof(key), "%d", 1 << i);
        if ((rc = snapshot_field_i64(f, w, r, key, 0, UINT32_MAX, "ignored", &v)) < 0)
            return rc;
        if (rc == FIELD_OK)
            s->roundup_power2_divisions[i] = (uint32_t)v;
    }
    return 0;
}

/* One device's memory_stats: counters are never negative, except max_split_size's -1. */
static int
import_stats(struct snapshot_fields *f, size_t d, const struct sval *st)
{
    char w[48];
    snprintf(w, sizeof(w), "cuprof.stats[%zu]", d);
    if (st->type != SVAL_DICT) {
        int rc = snapshot_field_warn(f, "snapshot", "cuprof.stats", st, "not a dict", "ignored");
        return rc < 0 ? rc : 0;
    }
    size_t n = st->u.seq->len, used = 0;
    struct snap_stat *kv = n ? calloc(n, sizeof(*kv)) : NULL;
    if (n && kv == NULL)
        return -CUPROF_EHOSTMEM;
    int rc = 0;
    for (size_t i = 0; i < n && rc >= 0; i++) {
        const struct sval *k = &st->u.seq->items[2 * i];
        int64_t v = 0;
        if (k->type != SVAL_STR)
            continue;
        if (strcmp(k->u.s, "max_split_size") == 0)
            rc = size_max_field(f, w, k->u.s, k + 1, &v);
        else
            rc = snapshot_field_i64_value(f, w, k->u.s, k + 1, 0, INT64_MAX, "ignored", &v);
        if (rc == FIELD_OK)
            kv[used++] = (struct snap_stat){k->u.s, v};
    }
    if (rc >= 0 && snapshot_set_stats(f->snap, d, kv, used) != 0)
        rc = -CUPROF_EHOSTMEM;
    free(kv);
    return rc < 0 ? rc : 0;
}

/* cuprof.python: the interpreter cuprof found and whether its frames are in the stacks. */
static int
import_python(struct snapshot_fields *f, const struct sval *py)
{
    if (py == NULL || py->type != SVAL_DICT)
        return 0;
    struct snap_python *p = &f->snap->cuprof.python;
    const char *pw = "cuprof.python";
    int rc;
    p->present = true;
    if ((rc = snapshot_field_str(f, pw, py, "interpreter", "ignored", &p->interpreter)) < 0 ||
        (rc = snapshot_field_str(f, pw, py, "frames", "ignored", &p->frames)) < 0 ||
        (rc = snapshot_field_i64(f, pw, py, "captures_gil_held", 0, INT64_MAX, "ignored",
                                 &p->captures_gil_held)) < 0 ||
        (rc = snapshot_field_i64(f, pw, py, "captures_gil_released", 0, INT64_MAX, "ignored",
                                 &p->captures_gil_released)) < 0)
        return rc;
    return 0;
}

int
snapshot_import_cuprof(struct snapshot_fields *f, const struct sval *c)
{
    const char *w = "cuprof";
    struct snapshot *snap = f->snap;
    if (c->type != SVAL_DICT) {
        int rc = snapshot_field_warn(f, "snapshot", w, c, "not a dict", "ignored");
        return rc < 0 ? rc : 0;
    }
    snap->cuprof.present = true;
    int rc;
    if ((rc = snapshot_field_str(f, w, c, "version", "ignored", &snap->cuprof.version)) < 0 ||
        (rc = snapshot_field_str(f, w, c, "mode", "ignored", &snap->cuprof.mode)) < 0 ||
        (rc = snapshot_field_str(f, w, c, "host", "ignored", &snap->cuprof.host)) < 0 ||
        (rc = snapshot_field_i64(f, w, c, "pid", INT64_MIN, INT64_MAX, "ignored",
                                 &snap->cuprof.pid)) < 0 ||
        (rc = snapshot_field_i64(f, w, c, "rank", -1, INT64_MAX, "ignored", &snap->cuprof.rank)) <
            0 ||
        (rc = snapshot_field_bool(f, w, c, "fit_segment_on_oom",
                                  &snap->cuprof.fit_segment_on_oom)) < 0)
        return rc;
    if ((rc = import_python(f, sval_get(c, "python"))) < 0)
        return rc;
    const struct sval *cfg = sval_get(c, "config");
    for (uint32_t i = 0; cfg != NULL && cfg->type == SVAL_DICT && i < cfg->u.seq->len; i++) {
        const struct sval *k = &cfg->u.seq->items[2 * i], *v = k + 1;
        if (k->type != SVAL_STR || v->type != SVAL_STR) {
            if ((rc = snapshot_field_warn(f, w, "config", v, "not a dict of strings",
                                          "entry ignored")) < 0)
                return rc;
            continue;
        }
        if (snapshot_add_config(snap, k->u.s, v->u.s) != 0)
            return -CUPROF_EHOSTMEM;
    }
    const struct sval *argv = sval_get(c, "argv");
    size_t argc = sval_len(argv), used = 0;
    const char **args = argc ? calloc(argc, sizeof(*args)) : NULL;
    if (argc && args == NULL)
        return -CUPROF_EHOSTMEM;
    for (size_t i = 0; i < argc; i++) {
        if (sval_at(argv, i)->type == SVAL_STR)
            args[used++] = sval_at(argv, i)->u.s;
        else if ((rc = snapshot_field_warn(f, w, "argv", sval_at(argv, i), "not a string",
                                           "ignored")) < 0)
            break;
    }
    rc = rc < 0 ? rc : snapshot_set_argv(snap, args, used) != 0 ? -CUPROF_EHOSTMEM : 0;
    free(args);
    if (rc < 0)
        return rc;
    const struct sval *stats = sval_get(c, "stats");
    for (size_t d = 0; d < sval_len(stats) && d < SNAPSHOT_MAX_DEVICES; d++)
        if ((rc = import_stats(f, d, sval_at(stats, d))) < 0)
            return rc;
    const struct sval *drops = sval_get(c, "dropped_entries");
    for (size_t d = 0; d < sval_len(drops) && d < SNAPSHOT_MAX_DEVICES; d++) {
        const struct sval *v = sval_at(drops, d);
        bool neg = false;
        uint64_t n = 0;
        const char *why = "negative";
        if (!snapshot_field_integer(v, &neg, &n, &why) || neg || n > INT64_MAX) {
            why = neg ? "negative" : n > INT64_MAX ? "out of range" : why;
            if ((rc = snapshot_field_warn(f, w, "dropped_entries", v, why, "read as 0")) < 0)
                return rc;
            n = 0;
        }
        if (snapshot_set_device_count(snap, d + 1) != 0)
            return -CUPROF_EHOSTMEM;
        snap->device_traces[d].dropped = n;
        snap->cuprof.dropped_entries[d] = n;
    }
    if ((rc = snapshot_oom_import(f, c)) < 0)
        return rc;
    return snapshot_usage_import(f, c);
}
