/* tune.c: the settings grid, its replays and their ranking (see tune.h). */
#include "cli/tune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/alloc_config.h"
#include "allocator/trace_sink.h"
#include "cli/analysis.h"
#include "cli/replay.h"
#include "cli/replay_run.h"
#include "snapshot/snapshot_usage.h"

/* The grid: every max_split_size_mb value with every rounding; expandable segments with a few
 * roundings; more per-size lists; garbage collection thresholds (they need a fraction). */
static const char *const split_values[] = {NULL, "32", "64", "128", "256", "512", "1024"};
static const char *const roundings[] = {NULL, "2", "4", "8", "[256:1,512:2,>:8]"};
static const char *const expandable_roundings[] = {NULL, "4", "8"};
static const char *const more_lists[] = {"[32:2,256:4,>:8]", "[1:1,64:4,>:8]"};
static const char *const gc_values[] = {"0.6", "0.7", "0.8", "0.9"};
/* The fraction a GC candidate sets when the recording set none: close to the whole card (1.0
 * turns the limit, and so GC, off in PyTorch 2.5 and later). */
#define TUNE_GC_FRACTION "0.99"

/* The keys a candidate chooses: taken out of the recorded settings before it sets its own. */
static const char *const chosen_keys[] = {"max_split_size_mb", "roundup_power2_divisions",
                                          "expandable_segments", "garbage_collection_threshold"};
/* cuprof's keys PyTorch's PYTORCH_CUDA_ALLOC_CONF does not take (a fraction is a call there). */
static const char *const cuprof_only_keys[] = {"per_process_memory_fraction",
                                               "release_threshold_mb", "free_sync"};

#define TUNE_MAX_ROWS 64

struct grid {
    struct tune *t;
    char base[512]; /* the recorded settings less chosen_keys */
    struct alloc_config recorded;
};

/* The lines to paste for row r (its conf set). */
static void
paste_lines(struct tune_row *r)
{
    char tmp[512];
    snprintf(r->pytorch, sizeof r->pytorch, "%s", r->conf);
    for (size_t k = 0; k < sizeof cuprof_only_keys / sizeof cuprof_only_keys[0]; k++) {
        replay_conf_with(r->pytorch, cuprof_only_keys[k], NULL, tmp, sizeof tmp);
        snprintf(r->pytorch, sizeof r->pytorch, "%s", tmp);
    }
    struct alloc_config c;
    char err[ALLOC_CONFIG_ERR_LEN];
    r->fraction =
        alloc_config_parse(r->conf, &c, err, sizeof err) == 0 ? c.per_process_memory_fraction : 0.0;
}

/* Whether two settings replay alike (the keys a candidate chooses, and the fraction). */
static bool
same_setting(const char *a, const char *b)
{
    struct alloc_config x, y;
    char err[ALLOC_CONFIG_ERR_LEN];
    if (alloc_config_parse(a, &x, err, sizeof err) != 0 ||
        alloc_config_parse(b, &y, err, sizeof err) != 0)
        return false;
    return x.max_split_size == y.max_split_size &&
           memcmp(x.roundup_power2_divisions, y.roundup_power2_divisions,
                  sizeof x.roundup_power2_divisions) == 0 &&
           x.expandable_segments == y.expandable_segments &&
           x.garbage_collection_threshold == y.garbage_collection_threshold &&
           x.per_process_memory_fraction == y.per_process_memory_fraction &&
           x.max_non_split_rounding_size == y.max_non_split_rounding_size;
}

/* Adds the candidate base + the (key, value) pairs given (values NULL: left out). */
static void
add(struct grid *g, const char *const kv[8], size_t n)
{
    struct tune *t = g->t;
    if (t->nrows >= TUNE_MAX_ROWS)
        return;
    struct tune_row *r = &t->rows[t->nrows];
    char conf[512], tmp[512];
    snprintf(conf, sizeof conf, "%s", g->base);
    r->label[0] = '\0';
    for (size_t i = 0; i + 1 < n; i += 2) {
        if (kv[i + 1] == NULL)
            continue;
        replay_conf_with(conf, kv[i], kv[i + 1], tmp, sizeof tmp);
        snprintf(conf, sizeof conf, "%s", tmp);
        size_t len = strlen(r->label);
        snprintf(r->label + len, sizeof r->label - len, "%s%s:%s", len ? "," : "", kv[i],
                 kv[i + 1]);
    }
    for (size_t k = 0; k < t->nrows; k++)
        if (same_setting(t->rows[k].conf, conf))
            return;
    if (r->label[0] == '\0')
        snprintf(r->label, sizeof r->label, "PyTorch's defaults");
    snprintf(r->conf, sizeof r->conf, "%s", conf);
    paste_lines(r);
    t->nrows++;
}

static void
build_grid(struct grid *g, const char *recorded_conf)
{
    struct tune *t = g->t;
    char tmp[512];
    snprintf(g->base, sizeof g->base, "%s", recorded_conf);
    for (size_t k = 0; k < sizeof chosen_keys / sizeof chosen_keys[0]; k++) {
        replay_conf_with(g->base, chosen_keys[k], NULL, tmp, sizeof tmp);
        snprintf(g->base, sizeof g->base, "%s", tmp);
    }
    struct tune_row *rec = &t->rows[t->nrows++];
    snprintf(rec->label, sizeof rec->label, "recorded settings");
    snprintf(rec->conf, sizeof rec->conf, "%s", recorded_conf);
    rec->recorded = true;
    paste_lines(rec);
    for (size_t s = 0; s < sizeof split_values / sizeof split_values[0]; s++)
        for (size_t r = 0; r < sizeof roundings / sizeof roundings[0]; r++)
            add(g,
                (const char *const[8]){"max_split_size_mb", split_values[s],
                                       "roundup_power2_divisions", roundings[r]},
                4);
    for (size_t r = 0; r < sizeof expandable_roundings / sizeof expandable_roundings[0]; r++)
        add(g,
            (const char *const[8]){"expandable_segments", "True", "roundup_power2_divisions",
                                   expandable_roundings[r]},
            4);
    for (size_t r = 0; r < sizeof more_lists / sizeof more_lists[0]; r++)
        add(g, (const char *const[8]){"roundup_power2_divisions", more_lists[r]}, 2);
    const char *fraction = g->recorded.per_process_memory_fraction > 0.0 ? NULL : TUNE_GC_FRACTION;
    for (size_t k = 0; k < sizeof gc_values / sizeof gc_values[0]; k++)
        add(g,
            (const char *const[8]){"garbage_collection_threshold", gc_values[k],
                                   "per_process_memory_fraction", fraction},
            4);
}

/* The capacity OOMs are counted against. */
static uint64_t
choose_capacity(const struct snapshot *snap, const struct tune_request *req, struct tune *t)
{
    if (req->memory > 0) {
        t->capacity_from = TUNE_CAPACITY_OPTION;
        return req->memory;
    }
    uint64_t c = replay_capacity_from_ooms(snap, req->device);
    if (c < REPLAY_UNLIMITED) {
        t->capacity_from = TUNE_CAPACITY_OOM;
        return c;
    }
    for (size_t i = 0; i < snap->cuprof.footprint_count; i++) {
        const struct snap_footprint *fp = &snap->cuprof.footprints[i];
        if ((size_t)fp->device == req->device && fp->total > 0) {
            t->capacity_from = TUNE_CAPACITY_FOOTPRINT;
            int64_t before = fp->used_at_start > 0 ? fp->used_at_start : 0;
            return (uint64_t)(fp->total > before ? fp->total - before : fp->total);
        }
    }
    t->capacity_from = TUNE_CAPACITY_UNKNOWN;
    return REPLAY_UNLIMITED;
}

double
tune_calls_ratio(const struct tune *t, const struct tune_row *row)
{
    uint64_t base = t->rows[0].device_allocs + t->rows[0].device_frees;
    uint64_t calls = row->device_allocs + row->device_frees;
    return base == 0 ? (calls == 0 ? 1.0 : (double)calls) : (double)calls / (double)base;
}

/* The ranking: OOMs first, then the objective, then the other figure, then grid order. */
static int
rank_cmp(const void *pa, const void *pb, void *ctx)
{
    const struct tune *rank_of = ctx;
    const struct tune_row *a = &rank_of->rows[*(const size_t *)pa];
    const struct tune_row *b = &rank_of->rows[*(const size_t *)pb];
    if (a->ok != b->ok)
        return a->ok ? -1 : 1;
    if (a->ooms != b->ooms)
        return a->ooms < b->ooms ? -1 : 1;
    /* As many OOMs, but at requests the recording served: worse than the recording's own. */
    if (a->new_ooms != b->new_ooms)
        return a->new_ooms < b->new_ooms ? -1 : 1;
    uint64_t ca = a->device_allocs + a->device_frees, cb = b->device_allocs + b->device_frees;
    uint64_t k1a = rank_of->objective == TUNE_OBJECTIVE_CALLS ? ca : a->peak_reserved;
    uint64_t k1b = rank_of->objective == TUNE_OBJECTIVE_CALLS ? cb : b->peak_reserved;
    uint64_t k2a = rank_of->objective == TUNE_OBJECTIVE_CALLS ? a->peak_reserved : ca;
    uint64_t k2b = rank_of->objective == TUNE_OBJECTIVE_CALLS ? b->peak_reserved : cb;
    if (k1a != k1b)
        return k1a < k1b ? -1 : 1;
    if (k2a != k2b)
        return k2a < k2b ? -1 : 1;
    size_t ia = *(const size_t *)pa, ib = *(const size_t *)pb;
    return (ia > ib) - (ia < ib);
}

static void
rank(struct tune *t)
{
    for (size_t i = 0; i < t->nrows; i++)
        t->order[i] = i;
    qsort_r(t->order, t->nrows, sizeof(*t->order), rank_cmp, t);
    t->best = t->order[0];
}

static void
fill_rows(struct tune *t, const struct replay_result *res)
{
    for (size_t i = 0; i < t->nrows; i++) {
        struct tune_row *r = &t->rows[i];
        r->ok = res[i].ok;
        r->ooms = res[i].ooms;
        r->new_ooms = res[i].new_ooms;
        r->peak_reserved = res[i].peak_reserved;
        r->peak_allocated = (uint64_t)res[i].stats.allocated_bytes[STAT_ALL].peak;
        r->free_at_peak = res[i].free_at_peak;
        r->device_allocs = res[i].device_allocs;
        r->device_frees = res[i].device_frees;
    }
    t->checked = res[0].checked;
    t->reproduced = res[0].reproduced;
    t->start_misses = res[0].prelude_misses;
}

static int
run_grid(const struct snapshot *snap, const struct tune_request *req, struct tune *t,
         const char *recorded_conf)
{
    struct replay_plan plan;
    if (replay_plan_init(&plan, snap, req->device, recorded_conf, t->capacity) != 0) {
        replay_plan_free(&plan);
        return -1;
    }
    struct replay_opts *opts = calloc(t->nrows, sizeof(*opts));
    struct replay_result *res = calloc(t->nrows, sizeof(*res));
    int rc = opts != NULL && res != NULL ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < t->nrows; i++)
        opts[i] =
            (struct replay_opts){.conf = t->rows[i].conf, .recorded = i == 0, .check = i == 0};
    if (rc == 0)
        rc = replay_settings(&plan, opts, res, t->nrows, req->threads, req->progress);
    if (res != NULL)
        fill_rows(t, res);
    free(opts);
    free(res);
    replay_plan_free(&plan);
    return rc;
}

int
tune_compute(const struct snapshot *snap, const struct tune_request *req, struct tune *t, char *err,
             size_t errlen)
{
    memset(t, 0, sizeof(*t));
    t->device = req->device;
    t->objective = req->objective;
    struct device_analysis a;
    if (analysis_run(snap, req->device, false, &a) != 0) {
        snprintf(err, errlen, "out of host memory");
        return -1;
    }
    t->entries = a.count;
    t->mid_run = a.mid_run;
    t->dropped = a.dropped;
    analysis_free(&a);
    const char *recorded_conf = replay_recorded_conf(snap, req->path);
    t->capacity = choose_capacity(snap, req, t);
    t->rows = calloc(TUNE_MAX_ROWS, sizeof(*t->rows));
    t->order = calloc(TUNE_MAX_ROWS, sizeof(*t->order));
    if (t->rows == NULL || t->order == NULL) {
        snprintf(err, errlen, "out of host memory");
        tune_free(t);
        return -1;
    }
    struct grid g = {.t = t};
    char perr[ALLOC_CONFIG_ERR_LEN];
    if (alloc_config_parse(recorded_conf, &g.recorded, perr, sizeof perr) != 0)
        alloc_config_defaults(&g.recorded);
    build_grid(&g, recorded_conf);
    if (run_grid(snap, req, t, recorded_conf) != 0) {
        snprintf(err, errlen, "a replay failed");
        tune_free(t);
        return -1;
    }
    rank(t);
    return 0;
}

void
tune_free(struct tune *t)
{
    free(t->rows);
    free(t->order);
    t->rows = NULL;
    t->order = NULL;
}
