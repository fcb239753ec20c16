/* cross_rank.c: rows of a job's files, made in parallel, and the comparisons between them. A call
 * site is compared across files by its shown frames (name, file, line), since stack indices mean
 * nothing outside their own file. */
#include "cli/cross_rank.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/analysis.h"
#include "cli/cli_util.h"
#include "cli/frame_filter.h"
#include "snapshot/snapshot_oom.h"

#define OUTLIER_PERCENT   10 /* a rank this far above or below the median peak is an outlier */
#define SITE_KEY_MAX      2048
#define SITE_NAME_FRAMES  3   /* frames that name a site in the comparison */
#define CROSS_RANK_POINTS 400 /* points of each rank's timeline on the report page */

struct rank_site {
    char *key;  /* the site's frames as text: equal across files for the same code path */
    char *name; /* its first frame, for display */
    uint64_t bytes;
};

/* One device's allocated and reserved bytes over its history, cut to CROSS_RANK_POINTS bucket
 * maxima (for the report page only). */
struct rank_timeline {
    size_t device, count, points;
    uint64_t *live, *reserved;
};

struct rank_row {
    const char *path;
    bool ok;
    int64_t rank, pid;
    char host[64];
    uint64_t peak_allocated, peak_reserved, fragmentation;
    size_t ooms, devices;
    struct rank_site *sites;
    size_t site_count;
    struct rank_timeline *timelines; /* when asked for */
    size_t timeline_count;
};

struct work {
    char *const *paths;
    struct rank_row *rows;
    size_t count;
    bool all_frames, timelines;
    _Atomic size_t next;
};

static int
site_by_key(const void *a, const void *b)
{
    return strcmp(((const struct rank_site *)a)->key, ((const struct rank_site *)b)->key);
}

/* The site of stack `stack` as a key (every frame) and a name (the first one). */
static int
site_text(const struct snapshot *snap, uint32_t stack, struct rank_site *site)
{
    char key[SITE_KEY_MAX], frame[512];
    size_t used = 0;
    key[0] = '\0';
    const struct snap_stack *st = &snap->stacks[stack];
    for (uint32_t i = 0; i < st->count && used + 1 < sizeof(key); i++) {
        cli_frame_text(snap, snap->stack_frames[st->first + i], frame, sizeof(frame));
        int n = snprintf(key + used, sizeof(key) - used, "%s\n", frame);
        if (n < 0 || (size_t)n >= sizeof(key) - used)
            break;
        used += (size_t)n;
    }
    /* Named by its first frames: a site's first frame alone is often a wrapper every site
     * shares (a project's own alloc helper). */
    char name[3 * 512 + 8];
    cli_site_name(snap, stack, SITE_NAME_FRAMES, name, sizeof name);
    site->key = strdup(key);
    site->name = strdup(name);
    return site->key != NULL && site->name != NULL ? 0 : -1;
}

/* Keeps device a->device's series, cut to bucket maxima. */
static int
add_timeline(struct rank_row *row, const struct device_analysis *a)
{
    struct rank_timeline *grown =
        realloc(row->timelines, (row->timeline_count + 1) * sizeof(*grown));
    if (grown == NULL)
        return -1;
    row->timelines = grown;
    struct rank_timeline *t = &row->timelines[row->timeline_count];
    size_t n = a->count + 1, points = n < CROSS_RANK_POINTS ? n : CROSS_RANK_POINTS;
    *t = (struct rank_timeline){a->device, a->count, 0, malloc(points * sizeof(uint64_t)),
                                malloc(points * sizeof(uint64_t))};
    row->timeline_count++;
    if (t->live == NULL || t->reserved == NULL)
        return -1;
    t->points = analysis_downsample(a->live_series, n, points, t->live);
    (void)analysis_downsample(a->reserved_series, n, points, t->reserved);
    return 0;
}

/* One file's row: peaks and OOMs over its devices, its live bytes by site at the end. */
static int
make_row(struct rank_row *row, const char *path, bool all_frames, bool timelines)
{
    struct snapshot *snap;
    row->path = path;
    if (frame_filter_load(path, all_frames, &snap) != CLI_OK)
        return 0; /* reported; row->ok stays false */
    row->rank = snap->cuprof.present ? snap->cuprof.rank : -1;
    row->pid = snap->cuprof.present ? snap->cuprof.pid : 0;
    char safe[sizeof(row->host)];
    snprintf(row->host, sizeof(row->host), "%s",
             snap->cuprof.present && snap->cuprof.host
                 ? cli_term(snap->cuprof.host, safe, sizeof safe)
                 : "-");
    int rc = 0;
    row->devices = analysis_device_count(snap);
    size_t cap = 0;
    for (size_t d = 0; d < row->devices && rc == 0; d++) {
        if (!analysis_device_present(snap, d))
            continue;
        struct device_analysis a;
        if (analysis_run(snap, d, timelines, &a) != 0) {
            rc = -1;
            break;
        }
        if (timelines && add_timeline(row, &a) != 0)
            rc = -1;
        row->peak_allocated += a.peak_live;
        row->peak_reserved += a.peak_reserved;
        /* A refusal of the driver's own call is an OOM the program got as well. */
        row->ooms += a.oom_count + snapshot_driver_oom_count(snap, d);
        row->fragmentation +=
            a.reserved_at_peak_live > a.peak_live ? a.reserved_at_peak_live - a.peak_live : 0;
        struct site_total *sites = NULL;
        size_t n = 0;
        if (analysis_sites_at(snap, d, a.count, &sites, &n) != 0)
            rc = -1;
        for (size_t i = 0; rc == 0 && i < n; i++) {
            if (row->site_count == cap) {
                cap = cap ? cap * 2 : 64;
                struct rank_site *grown = realloc(row->sites, cap * sizeof(*grown));
                if (grown == NULL) {
                    rc = -1;
                    break;
                }
                row->sites = grown;
            }
            struct rank_site *s = &row->sites[row->site_count];
            if (site_text(snap, sites[i].stack, s) != 0) {
                free(s->key);
                free(s->name);
                rc = -1;
                break;
            }
            s->bytes = sites[i].bytes;
            row->site_count++;
        }
        free(sites);
        analysis_free(&a);
    }
    snapshot_free(snap);
    if (rc != 0)
        return -1;
    /* One entry per key (two devices, or two stacks that print the same). */
    if (row->site_count > 1)
        qsort(row->sites, row->site_count, sizeof(*row->sites), site_by_key);
    size_t out = 0;
    for (size_t i = 0; i < row->site_count; i++) {
        if (out > 0 && strcmp(row->sites[out - 1].key, row->sites[i].key) == 0) {
            row->sites[out - 1].bytes += row->sites[i].bytes;
            free(row->sites[i].key);
            free(row->sites[i].name);
        } else {
            row->sites[out++] = row->sites[i];
        }
    }
    row->site_count = out;
    row->ok = true;
    return 0;
}

static void *
worker(void *arg)
{
    struct work *w = arg;
    for (;;) {
        size_t i = atomic_fetch_add(&w->next, 1);
        if (i >= w->count)
            return NULL;
        char safe[1024];
        if (make_row(&w->rows[i], w->paths[i], w->all_frames, w->timelines) != 0)
            fprintf(stderr, "cuprof: %s: out of memory\n",
                    cli_term(w->paths[i], safe, sizeof safe));
    }
}

static int
by_rank(const void *a, const void *b)
{
    const struct rank_row *x = a, *y = b;
    if (x->ok != y->ok)
        return x->ok ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return strcmp(x->path, y->path);
}

static int
u64_order(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static const char *
rank_text(const struct rank_row *r, char *buf, size_t len)
{
    if (r->rank >= 0)
        snprintf(buf, len, "%" PRId64, r->rank);
    else
        snprintf(buf, len, "-");
    return buf;
}

/* How the comparisons name a file: "rank 3", or its path where no rank is known (two runs of a
 * program without a rank variable, PyTorch's snapshots). */
static const char *
row_label(const struct rank_row *r, char *buf, size_t len)
{
    char safe[1024];
    if (r->rank >= 0)
        snprintf(buf, len, "rank %" PRId64, r->rank);
    else
        snprintf(buf, len, "%s", cli_term(r->path, safe, sizeof safe));
    return buf;
}

/* "max/min 1.50x (rank 3: 6.00 MiB, rank 0: 4.00 MiB)" for one column. */
static void
print_spread(FILE *out, const char *what, const struct rank_row *rows, size_t n,
             uint64_t (*get)(const struct rank_row *))
{
    size_t hi = 0, lo = 0;
    for (size_t i = 1; i < n; i++) {
        if (get(&rows[i]) > get(&rows[hi]))
            hi = i;
        if (get(&rows[i]) < get(&rows[lo]))
            lo = i;
    }
    char a[32], b[32], ra[1024], rb[1024];
    fprintf(out, "spread of %s: ", what);
    if (get(&rows[lo]) > 0)
        fprintf(out, "max/min %.2fx", (double)get(&rows[hi]) / (double)get(&rows[lo]));
    else
        fprintf(out, "max/min -");
    fprintf(out, " (highest %s: %s, lowest %s: %s)\n", row_label(&rows[hi], ra, sizeof ra),
            cli_size(get(&rows[hi]), a, 32), row_label(&rows[lo], rb, sizeof rb),
            cli_size(get(&rows[lo]), b, 32));
}

static uint64_t
get_allocated(const struct rank_row *r)
{
    return r->peak_allocated;
}

static uint64_t
get_reserved(const struct rank_row *r)
{
    return r->peak_reserved;
}

/* The ranks' median peak (of `get`); -1 when host memory runs out. */
static int
median_of(const struct rank_row *rows, size_t n, uint64_t (*get)(const struct rank_row *),
          uint64_t *median)
{
    uint64_t *peaks = malloc(n * sizeof(*peaks));
    if (peaks == NULL)
        return -1;
    for (size_t i = 0; i < n; i++)
        peaks[i] = get(&rows[i]);
    qsort(peaks, n, sizeof(*peaks), u64_order);
    *median = peaks[n / 2];
    free(peaks);
    return 0;
}

/* How far (percent) a value is from the median; an outlier is more than OUTLIER_PERCENT away. */
static double
off_median(uint64_t value, uint64_t median)
{
    return median > 0 ? 100.0 * ((double)value - (double)median) / (double)median : 0.0;
}

static bool
is_outlier(double off)
{
    return off > OUTLIER_PERCENT || off < -OUTLIER_PERCENT;
}

/* Ranks whose peak (of `what`) is more than OUTLIER_PERCENT away from the ranks' median. */
static int
print_outliers(FILE *out, const char *what, const struct rank_row *rows, size_t n,
               uint64_t (*get)(const struct rank_row *))
{
    uint64_t median;
    if (median_of(rows, n, get, &median) != 0)
        return -1;
    char m[32], v[32], r[1024];
    fprintf(out, "outliers of %s (more than %d%% from the median %s):", what, OUTLIER_PERCENT,
            cli_size(median, m, sizeof(m)));
    size_t shown = 0;
    for (size_t i = 0; i < n; i++) {
        double off = off_median(get(&rows[i]), median);
        if (is_outlier(off)) {
            fprintf(out, "%s %s %s (%+.0f%%)", shown ? "," : "", row_label(&rows[i], r, sizeof r),
                    cli_size(get(&rows[i]), v, sizeof(v)), off);
            shown++;
        }
    }
    fprintf(out, "%s\n", shown ? "" : " none");
    return 0;
}

struct site_spread {
    const char *key, *name;
    uint64_t max, min;
    size_t max_row, min_row;
};

static int
by_difference(const void *a, const void *b)
{
    const struct site_spread *x = a, *y = b;
    uint64_t dx = x->max - x->min, dy = y->max - y->min;
    if (dx != dy)
        return dx > dy ? -1 : 1;
    return strcmp(x->key, y->key);
}

/* Every site of every row, merged by key: its highest and lowest live bytes over the rows (a
 * row without the site holds 0 there), most different first. Rows' site arrays are sorted by
 * key: one merge walk. *out is malloc'd; -1 when host memory runs out. */
static int
site_spreads(const struct rank_row *rows, size_t n, struct site_spread **out, size_t *nout)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += rows[i].site_count;
    struct site_spread *all = total ? calloc(total, sizeof(*all)) : NULL;
    size_t *at = calloc(n, sizeof(*at));
    if ((total && all == NULL) || at == NULL) {
        free(all);
        free(at);
        return -1;
    }
    size_t count = 0;
    for (;;) {
        const char *key = NULL;
        for (size_t i = 0; i < n; i++)
            if (at[i] < rows[i].site_count &&
                (key == NULL || strcmp(rows[i].sites[at[i]].key, key) < 0))
                key = rows[i].sites[at[i]].key;
        if (key == NULL)
            break;
        struct site_spread *s = &all[count++];
        *s = (struct site_spread){.key = key};
        for (size_t i = 0; i < n; i++) {
            uint64_t bytes = 0;
            if (at[i] < rows[i].site_count && strcmp(rows[i].sites[at[i]].key, key) == 0) {
                bytes = rows[i].sites[at[i]].bytes;
                s->name = rows[i].sites[at[i]].name;
                at[i]++;
            }
            if (i == 0 || bytes > s->max) {
                s->max = bytes;
                s->max_row = i;
            }
            if (i == 0 || bytes < s->min) {
                s->min = bytes;
                s->min_row = i;
            }
        }
    }
    free(at);
    if (count > 1)
        qsort(all, count, sizeof(*all), by_difference);
    *out = all;
    *nout = count;
    return 0;
}

/* The call sites whose live bytes at the end differ most between the rows. */
static int
print_site_differences(FILE *out, const struct rank_row *rows, size_t n, size_t top)
{
    struct site_spread *all;
    size_t count;
    if (site_spreads(rows, n, &all, &count) != 0)
        return -1;
    fprintf(out, "call sites whose live bytes at the end differ most between ranks:\n");
    size_t shown = 0;
    for (size_t i = 0; i < count && shown < top; i++) {
        if (all[i].max == all[i].min)
            break; /* the same everywhere: nothing more to tell */
        char d[32], hi[32], lo[32], rh[1024], rl[1024];
        fprintf(out, "  %s more on %s (%s) than on %s (%s): %s\n",
                cli_size(all[i].max - all[i].min, d, 32),
                row_label(&rows[all[i].max_row], rh, sizeof rh), cli_size(all[i].max, hi, 32),
                row_label(&rows[all[i].min_row], rl, sizeof rl), cli_size(all[i].min, lo, 32),
                all[i].name ? all[i].name : "?");
        shown++;
    }
    if (shown == 0)
        fprintf(out, "  none: every call site holds the same bytes on every rank\n");
    free(all);
    return 0;
}

static void
rows_free(struct rank_row *rows, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        for (size_t k = 0; k < rows[i].site_count; k++) {
            free(rows[i].sites[k].key);
            free(rows[i].sites[k].name);
        }
        free(rows[i].sites);
        for (size_t k = 0; k < rows[i].timeline_count; k++) {
            free(rows[i].timelines[k].live);
            free(rows[i].timelines[k].reserved);
        }
        free(rows[i].timelines);
    }
    free(rows);
}

/* Every file's row, read by `jobs` threads, sorted by rank (the readable ones first: *ok of
 * them). NULL when host memory runs out. */
static struct rank_row *
collect_rows(char *const *paths, size_t count, bool all_frames, bool timelines, unsigned jobs,
             size_t *ok)
{
    struct rank_row *rows = calloc(count, sizeof(*rows));
    if (rows == NULL)
        return NULL;
    if (jobs == 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        jobs = cpus < 1 ? 1 : cpus > 16 ? 16 : (unsigned)cpus;
    }
    if (jobs > count)
        jobs = (unsigned)count;
    struct work w = {.paths = paths,
                     .rows = rows,
                     .count = count,
                     .all_frames = all_frames,
                     .timelines = timelines};
    pthread_t threads[16];
    unsigned started = 0;
    for (; started + 1 < jobs && started < 16; started++)
        if (pthread_create(&threads[started], NULL, worker, &w) != 0)
            break;
    worker(&w); /* this thread works too */
    for (unsigned i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    qsort(rows, count, sizeof(*rows), by_rank);
    *ok = 0;
    while (*ok < count && rows[*ok].ok)
        (*ok)++;
    return rows;
}

int
cross_rank_print(FILE *out, char *const *paths, size_t count, bool all_frames, size_t top,
                 unsigned jobs)
{
    size_t ok;
    struct rank_row *rows = collect_rows(paths, count, all_frames, false, jobs, &ok);
    if (rows == NULL)
        return -1;
    int rc = ok < count ? 1 : 0;
    fprintf(out, "== cross-rank view: %zu file%s", ok, ok == 1 ? "" : "s");
    if (ok < count)
        fprintf(out, " (%zu could not be read)", count - ok);
    fprintf(out, "\n%-6s %-16s %-8s %-14s %-14s %-5s %-22s %s\n", "RANK", "HOST", "PID",
            "PEAK ALLOC", "PEAK RESERVED", "OOMS", "FRAGMENTATION AT PEAK", "FILE");
    for (size_t i = 0; i < ok; i++) {
        char a[32], b[32], c[32], r[24], path[1024];
        fprintf(out, "%-6s %-16.16s %-8" PRId64 " %-14s %-14s %-5zu %-22s %s\n",
                rank_text(&rows[i], r, 24), rows[i].host, rows[i].pid,
                cli_size(rows[i].peak_allocated, a, 32), cli_size(rows[i].peak_reserved, b, 32),
                rows[i].ooms, cli_size(rows[i].fragmentation, c, 32),
                cli_term(rows[i].path, path, sizeof path));
    }
    if (ok > 0) {
        print_spread(out, "peak allocated", rows, ok, get_allocated);
        print_spread(out, "peak reserved", rows, ok, get_reserved);
        if (print_outliers(out, "peak allocated", rows, ok, get_allocated) != 0 ||
            print_outliers(out, "peak reserved", rows, ok, get_reserved) != 0 ||
            print_site_differences(out, rows, ok, top) != 0)
            rc = -1;
    }
    rows_free(rows, count);
    return rc;
}

/* ---- The same for the report page (JSON). */

static void
emit_u64_list(struct emitter *e, const char *key, const uint64_t *v, size_t n)
{
    emitter_key(e, key);
    emitter_begin_list(e);
    for (size_t i = 0; i < n; i++)
        emitter_u64(e, v[i]);
    emitter_end(e);
}

static void
emit_row(struct emitter *e, const struct rank_row *r, uint64_t median_allocated,
         uint64_t median_reserved)
{
    emitter_begin_dict(e);
    cli_json_key_string(e, "file", r->path);
    cli_json_key_int(e, "rank", r->rank);
    cli_json_key_string(e, "host", r->host);
    cli_json_key_int(e, "pid", r->pid);
    cli_json_key_u64(e, "peak_allocated", r->peak_allocated);
    cli_json_key_u64(e, "peak_reserved", r->peak_reserved);
    cli_json_key_u64(e, "ooms", r->ooms);
    cli_json_key_u64(e, "fragmentation", r->fragmentation);
    double off_a = off_median(r->peak_allocated, median_allocated);
    double off_r = off_median(r->peak_reserved, median_reserved);
    emitter_key(e, "off_median_allocated");
    emitter_float(e, off_a);
    emitter_key(e, "off_median_reserved");
    emitter_float(e, off_r);
    emitter_key(e, "outlier_allocated");
    emitter_bool(e, is_outlier(off_a));
    emitter_key(e, "outlier_reserved");
    emitter_bool(e, is_outlier(off_r));
    emitter_key(e, "timelines");
    emitter_begin_list(e);
    for (size_t k = 0; k < r->timeline_count; k++) {
        const struct rank_timeline *t = &r->timelines[k];
        emitter_begin_dict(e);
        cli_json_key_u64(e, "device", t->device);
        cli_json_key_u64(e, "count", t->count);
        emit_u64_list(e, "live", t->live, t->points);
        emit_u64_list(e, "reserved", t->reserved, t->points);
        emitter_end(e);
    }
    emitter_end(e);
    emitter_end(e);
}

static uint64_t
row_site_bytes(const struct rank_row *r, const char *key)
{
    size_t lo = 0, hi = r->site_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(r->sites[mid].key, key);
        if (c == 0)
            return r->sites[mid].bytes;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

/* The `top` sites that differ most, each with its bytes in every row (rows' order). */
static int
emit_site_differences(struct emitter *e, const struct rank_row *rows, size_t n, size_t top)
{
    struct site_spread *all;
    size_t count;
    if (site_spreads(rows, n, &all, &count) != 0)
        return -1;
    emitter_key(e, "sites");
    emitter_begin_list(e);
    for (size_t i = 0; i < count && i < top && all[i].max != all[i].min; i++) {
        emitter_begin_dict(e);
        cli_json_key_string(e, "name", all[i].name ? all[i].name : "?");
        cli_json_key_string(e, "frames", all[i].key);
        emitter_key(e, "bytes");
        emitter_begin_list(e);
        for (size_t r = 0; r < n; r++)
            emitter_u64(e, row_site_bytes(&rows[r], all[i].key));
        emitter_end(e);
        emitter_end(e);
    }
    emitter_end(e);
    free(all);
    return 0;
}

int
cross_rank_emit(struct emitter *e, char *const *paths, size_t count, bool all_frames, size_t top,
                unsigned jobs)
{
    size_t ok;
    struct rank_row *rows = collect_rows(paths, count, all_frames, true, jobs, &ok);
    if (rows == NULL)
        return -1;
    int rc = ok < count ? 1 : 0;
    uint64_t median_allocated = 0, median_reserved = 0;
    if (ok > 0 && (median_of(rows, ok, get_allocated, &median_allocated) != 0 ||
                   median_of(rows, ok, get_reserved, &median_reserved) != 0))
        rc = -1;
    emitter_begin_dict(e);
    cli_json_key_u64(e, "outlier_percent", OUTLIER_PERCENT);
    cli_json_key_u64(e, "median_allocated", median_allocated);
    cli_json_key_u64(e, "median_reserved", median_reserved);
    emitter_key(e, "rows");
    emitter_begin_list(e);
    for (size_t i = 0; i < ok; i++)
        emit_row(e, &rows[i], median_allocated, median_reserved);
    emitter_end(e);
    emitter_key(e, "unreadable");
    emitter_begin_list(e);
    for (size_t i = ok; i < count; i++)
        cli_json_string(e, rows[i].path);
    emitter_end(e);
    if (rc >= 0 && emit_site_differences(e, rows, ok, top) != 0)
        rc = -1;
    emitter_end(e);
    rows_free(rows, count);
    return rc;
}
