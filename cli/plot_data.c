/* plot_data.c: the report page's data (see plot_data.h and viewer/DATA.md). */
#include "cli/plot_data.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/trace_sink.h"
#include "cli/analysis.h"
#include "cli/cli_util.h"
#include "cli/frame_filter.h"
#include "cli/library_report.h"
#include "cli/phases.h"
#include "cli/ranges.h"
#include "cli/plot_history.h"
#include "snapshot/snapshot_oom.h"

#define PLOT_OVERVIEW_POINTS 1000 /* points of a device's allocated and reserved overview */

int
plot_page_begin(struct plot_page *p, FILE *out, const char *template_text)
{
    memset(p, 0, sizeof(*p));
    const char *split = strstr(template_text, PLOT_DATA_MARKER);
    if (split == NULL) {
        fprintf(stderr, "cuprof: the built-in report template has no data marker: a bad build\n");
        return -1;
    }
    p->out = out;
    p->tail = split + strlen(PLOT_DATA_MARKER);
    if (strstr(template_text, "CUPROF_VIEWER_FALLBACK") != NULL)
        fprintf(stderr, "cuprof: note: this cuprof was built without its report viewer (node or "
                        "viewer/node_modules was missing: run scripts/setup, then rebuild): the "
                        "page holds the data but shows only the main figures\n");
    plot_blob_init(&p->blobs);
    fwrite(template_text, 1, (size_t)(split - template_text), out);
    fputs("<script id=\"cuprof-data\" type=\"application/json\">", out);
    p->e = cli_json_open(out);
    return p->e != NULL ? 0 : -1;
}

bool
plot_page_end(struct plot_page *p, const char *extra_id, const char *extra_json)
{
    bool ok = cli_json_close(p->e) && !p->blobs.failed;
    fputs("</script>\n", p->out);
    if (extra_json != NULL)
        fprintf(p->out, "<script id=\"cuprof-%s\" type=\"application/json\">%s</script>\n",
                extra_id, extra_json);
    fputs("<script id=\"cuprof-blobs\" type=\"application/octet-stream\">", p->out);
    ok = plot_blob_base64(p->out, p->blobs.data, p->blobs.len) && ok;
    fputs("</script>", p->out);
    fputs(p->tail, p->out);
    plot_blob_free(&p->blobs);
    return ok;
}

void
plot_data_header(struct plot_page *p, const char *kind, const char *mode, const char *file)
{
    cli_json_key_int(p->e, "cuprof_report", PLOT_DATA_SCHEMA);
    cli_json_key_string(p->e, "kind", kind);
    cli_json_key_string(p->e, "mode", mode);
    cli_json_key_string(p->e, "generator", "cuprof " CUPROF_VERSION);
    cli_json_key_string(p->e, "file", file);
    /* The tables hold action numbers: their names, from the one list (trace_actions.def). */
    emitter_key(p->e, "actions");
    emitter_begin_list(p->e);
    for (unsigned k = 0; k < TRACE_ACTION_COUNT; k++)
        emitter_string(p->e, cli_action_name(k));
    emitter_end(p->e);
}

/* A table of `count` rows: its field names and where its bytes are in the binary part. */
static void
emit_table(struct plot_page *p, const char *key, const char *const *fields, size_t nfields,
           size_t count, const struct plot_blob *b)
{
    emitter_key(p->e, key);
    emitter_begin_dict(p->e);
    cli_json_key_u64(p->e, "count", count);
    emitter_key(p->e, "fields");
    emitter_begin_list(p->e);
    for (size_t i = 0; i < nfields; i++)
        emitter_string(p->e, fields[i]);
    emitter_end(p->e);
    emitter_key(p->e, "at");
    emitter_begin_list(p->e);
    emitter_u64(p->e, p->blobs.len);
    emitter_u64(p->e, b->len);
    emitter_end(p->e);
    emitter_end(p->e);
    plot_blob_append(&p->blobs, b);
}

static void
emit_hex(struct emitter *e, uint64_t v)
{
    char text[24];
    snprintf(text, sizeof text, "0x%" PRIx64, v);
    emitter_string(e, text);
}

/* ---- One device. */

/* Bytes and counts by call site: end, peak and over the run. A site is a stack's filtered twin. */
enum { ROW_SITE, ROW_END, ROW_END_N, ROW_PEAK, ROW_PEAK_N, ROW_TOTAL, ROW_TOTAL_N, ROW_FIELDS };
static const char *const site_fields[ROW_FIELDS] = {
    "site", "end_bytes", "end_count", "peak_bytes", "peak_count", "total_bytes", "total_count"};

struct site_rows {
    struct span_map index; /* site + 1 -> row (size field) */
    uint64_t (*v)[ROW_FIELDS];
    size_t n, cap;
    const uint32_t *site_of; /* stack -> its site, for the first `mapped` stacks; NULL: itself */
    size_t mapped;
};

static uint32_t
site_of(const struct site_rows *r, uint32_t stack)
{
    return r->site_of != NULL && stack < r->mapped ? r->site_of[stack] : stack;
}

static int
site_rows_add(struct site_rows *r, const struct site_total *t, size_t n, int column)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t site = site_of(r, t[i].stack);
        struct span_map_item *it = span_map_get(&r->index, (uint64_t)site + 1);
        size_t row = it != NULL ? (size_t)it->size : r->n;
        if (it == NULL) {
            if (r->n == r->cap) {
                size_t cap = r->cap ? 2 * r->cap : 64;
                uint64_t(*v)[ROW_FIELDS] = realloc(r->v, cap * sizeof(*v));
                if (v == NULL)
                    return -1;
                r->v = v;
                r->cap = cap;
            }
            memset(r->v[r->n], 0, sizeof(r->v[0]));
            r->v[r->n][ROW_SITE] = site;
            if (span_map_put(&r->index, (uint64_t)site + 1, r->n++, 0) != 0)
                return -1;
        }
        r->v[row][column] += t[i].bytes;
        r->v[row][column + 1] += t[i].count;
    }
    return 0;
}

static int
cmp_row(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    for (int k = ROW_END; k <= ROW_TOTAL; k += 2)
        if (x[k] != y[k])
            return x[k] < y[k] ? 1 : -1;
    return (x[ROW_SITE] > y[ROW_SITE]) - (x[ROW_SITE] < y[ROW_SITE]);
}

/* "sites": one row per call site holding bytes at the end or at the live peak, or that
 * allocated during the history, largest at the end first. */
static int
emit_sites(struct plot_page *p, const struct snapshot *snap, size_t device,
           const struct device_analysis *a, struct site_rows *r)
{
    int rc = 0;
    for (int column = ROW_END; column <= ROW_TOTAL && rc == 0; column += 2) {
        struct site_total *t = NULL;
        size_t n = 0;
        if (column == ROW_TOTAL)
            rc = analysis_sites_allocated(snap, device, &t, &n);
        else
            rc = analysis_sites_at(snap, device, column == ROW_END ? a->count : a->peak_live_at, &t,
                                   &n);
        if (rc == 0)
            rc = site_rows_add(r, t, n, column);
        free(t);
    }
    if (rc != 0)
        return -1;
    if (r->n > 1)
        qsort(r->v, r->n, sizeof(r->v[0]), cmp_row);
    emitter_key(p->e, "site_fields");
    emitter_begin_list(p->e);
    for (int k = 0; k < ROW_FIELDS; k++)
        emitter_string(p->e, site_fields[k]);
    emitter_end(p->e);
    emitter_key(p->e, "sites");
    emitter_begin_list(p->e);
    for (size_t i = 0; i < r->n; i++) {
        emitter_begin_list(p->e);
        for (int k = 0; k < ROW_FIELDS; k++)
            emitter_u64(p->e, r->v[i][k]);
        emitter_end(p->e);
    }
    emitter_end(p->e);
    return 0;
}

static void
where_text(char *buf, size_t len, const struct snapshot *snap, size_t device, size_t at)
{
    int64_t t0;
    bool known = analysis_time_at(snap, device, 1, &t0);
    analysis_where(buf, len, snap, device, at, known ? &t0 : NULL);
}

/* The device's figures, as `cuprof summary` prints them, and their sizes as text. */
static void
emit_figures(struct plot_page *p, const struct snapshot *snap, const struct device_analysis *a)
{
    struct emitter *e = p->e;
    const char *keys[] = {
        "count",     "dropped",      "oom_count",     "start_live",       "start_reserved",
        "peak_live", "peak_live_at", "peak_reserved", "peak_reserved_at", "reserved_at_peak_live",
        "end_live",  "end_reserved", "free_total",    "largest_free",     "segments",
        "blocks"};
    uint64_t values[] = {a->count,
                         a->dropped,
                         a->oom_count,
                         a->start_live,
                         a->start_reserved,
                         a->peak_live,
                         a->peak_live_at,
                         a->peak_reserved,
                         a->peak_reserved_at,
                         a->reserved_at_peak_live,
                         a->end_live,
                         a->table_reserved,
                         a->free_total,
                         a->largest_free,
                         a->segments,
                         a->blocks};
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
        cli_json_key_u64(e, keys[k], values[k]);
    emitter_key(e, "mid_run");
    emitter_bool(e, a->mid_run);
    emitter_key(e, "has_time");
    emitter_bool(e, a->has_time);
    char where[160], text[32];
    where_text(where, sizeof where, snap, a->device, a->peak_reserved_at);
    cli_json_key_string(e, "peak_reserved_where", where);
    where_text(where, sizeof where, snap, a->device, a->peak_live_at);
    cli_json_key_string(e, "peak_live_where", where);
    const char *tkeys[] = {"peak_reserved", "peak_live",  "end_reserved",
                           "end_live",      "free_total", "largest_free"};
    uint64_t tvalues[] = {a->peak_reserved, a->peak_live,  a->table_reserved,
                          a->end_live,      a->free_total, a->largest_free};
    emitter_key(e, "text");
    emitter_begin_dict(e);
    for (size_t k = 0; k < sizeof(tkeys) / sizeof(tkeys[0]); k++)
        cli_json_key_string(e, tkeys[k], cli_size(tvalues[k], text, sizeof text));
    emitter_end(e);
}

/* Allocated and reserved over the history, cut to bucket maxima (the whole run at a glance). */
static int
emit_overview(struct plot_page *p, const struct device_analysis *a)
{
    size_t n = a->count + 1;
    uint64_t *v = malloc((n < PLOT_OVERVIEW_POINTS ? n : PLOT_OVERVIEW_POINTS) * sizeof(*v));
    if (v == NULL)
        return -1;
    emitter_key(p->e, "overview");
    emitter_begin_dict(p->e);
    const uint64_t *series[] = {a->live_series, a->reserved_series};
    const char *keys[] = {"live", "reserved"};
    for (int k = 0; k < 2; k++) {
        size_t m = analysis_downsample(series[k], n, PLOT_OVERVIEW_POINTS, v);
        emitter_key(p->e, keys[k]);
        emitter_begin_list(p->e);
        for (size_t i = 0; i < m; i++)
            emitter_u64(p->e, v[i]);
        emitter_end(p->e);
    }
    emitter_end(p->e);
    free(v);
    return 0;
}

/* Labelled entries (annotations, PyTorch's user_metadata) and OOMs, for the timeline. */
static int
emit_marks(struct plot_page *p, const struct snapshot *snap, size_t device,
           struct plot_streams *streams)
{
    static const struct snap_device_trace none = {0};
    const struct snap_device_trace *t =
        device < snap->device_count ? &snap->device_traces[device] : &none;
    emitter_key(p->e, "annotations");
    emitter_begin_list(p->e);
    for (size_t k = 0; k < t->label_count; k++) {
        if (snapshot_entry_stage(t, t->labels[k].entry) != SNAP_STAGE_MARK)
            continue; /* a range's start or end: under "ranges" (emit_ranges) */
        emitter_begin_dict(p->e);
        cli_json_key_u64(p->e, "entry", t->labels[k].entry);
        cli_json_key_string(p->e, "action", cli_action_name(t->entries[t->labels[k].entry].action));
        cli_json_key_string(p->e, "text", t->labels[k].text);
        emitter_end(p->e);
    }
    emitter_end(p->e);
    emitter_key(p->e, "ooms");
    emitter_begin_list(p->e);
    for (size_t i = 0; i < t->count; i++) {
        const struct snap_entry *e = &t->entries[i];
        if (e->action != TRACE_OOM)
            continue;
        long stream = plot_streams_number(streams, e->stream);
        if (stream < 0)
            return -1;
        emitter_begin_dict(p->e);
        cli_json_key_u64(p->e, "entry", i);
        cli_json_key_u64(p->e, "size", e->size);
        cli_json_key_u64(p->e, "device_free", e->device_free);
        cli_json_key_u64(p->e, "stream", (uint64_t)stream);
        cli_json_key_u64(p->e, "stack", e->stack);
        emitter_end(p->e);
    }
    emitter_end(p->e);
    /* The driver's own calls refused for lack of memory: no entry, the state they met. */
    emitter_key(p->e, "driver_ooms");
    emitter_begin_list(p->e);
    for (size_t r = 0; r < snap->cuprof.oom_message_count; r++) {
        const struct snap_oom_message *m = &snap->cuprof.oom_messages[r];
        if (m->api == NULL || (size_t)m->device != device || m->trace_index < 0 ||
            (size_t)m->trace_index > t->count)
            continue;
        emitter_begin_dict(p->e);
        cli_json_key_u64(p->e, "at", (uint64_t)m->trace_index);
        cli_json_key_string(p->e, "call", m->api);
        cli_json_key_string(p->e, "message", m->message);
        emitter_end(p->e);
    }
    emitter_end(p->e);
    return 0;
}

static int
emit_history(struct plot_page *p, const struct snapshot *snap, size_t device,
             struct plot_streams *streams)
{
    static const char *const alloc_fields[] = {PLOT_ALLOC_FIELDS};
    static const char *const event_fields[] = {PLOT_EVENT_FIELDS};
    static const char *const segment_fields[] = {PLOT_SEGMENT_FIELDS};
    static const char *const time_fields[] = {PLOT_TIME_FIELDS};
    struct plot_history h;
    if (plot_history_build(snap, device, streams, &h) != 0)
        return -1;
    emitter_key(p->e, "history");
    emitter_begin_dict(p->e);
    emit_table(p, "allocs", alloc_fields, sizeof alloc_fields / sizeof *alloc_fields, h.alloc_count,
               &h.allocs);
    emit_table(p, "events", event_fields, sizeof event_fields / sizeof *event_fields, h.event_count,
               &h.events);
    emit_table(p, "segments", segment_fields, sizeof segment_fields / sizeof *segment_fields,
               h.segment_count, &h.segments);
    if (h.has_time) {
        cli_json_key_int(p->e, "t0_us", h.t0_us);
        size_t count = device < snap->device_count ? snap->device_traces[device].count : 0;
        emit_table(p, "times", time_fields, 1, count, &h.times);
    }
    emitter_end(p->e);
    plot_history_free(&h);
    return 0;
}

/* Each annotation's phase (up to the next one) with summary's figures: bytes at its start, its
 * peaks and growth (cli/phases.h, the arithmetic summary prints). */
static int
emit_phases(struct plot_page *p, const struct snapshot *snap, size_t device,
            const struct device_analysis *a)
{
    struct phase_mark *marks = NULL;
    size_t n = 0;
    if (phases_marks(snap, device, a, &marks, &n) != 0)
        return -1;
    emitter_key(p->e, "phases");
    emitter_begin_list(p->e);
    for (size_t i = 0; i < n; i++) {
        const struct phase_mark *m = &marks[i];
        emitter_begin_dict(p->e);
        cli_json_key_u64(p->e, "entry", m->entry);
        emitter_key(p->e, "label");
        if (m->label != NULL)
            cli_json_string(p->e, m->label);
        else
            emitter_none(p->e);
        if (m->has_time) {
            emitter_key(p->e, "time_us");
            emitter_int(p->e, m->time_us);
        }
        cli_json_key_u64(p->e, "live", m->live);
        cli_json_key_u64(p->e, "reserved", m->reserved);
        cli_json_key_u64(p->e, "peak_live", m->peak_live);
        cli_json_key_u64(p->e, "peak_live_at", m->peak_live_at);
        cli_json_key_u64(p->e, "peak_reserved", m->peak_reserved);
        emitter_key(p->e, "growth");
        emitter_int(p->e, m->growth);
        emitter_end(p->e);
    }
    emitter_end(p->e);
    free(marks);
    return 0;
}

/* NVTX ranges (and PyTorch's record_function ranges) matched start to end, with summary's
 * section (cli/ranges.h). */
static int
emit_ranges(struct plot_page *p, const struct snapshot *snap, size_t device,
            const struct device_analysis *a)
{
    struct device_ranges r;
    if (ranges_run(snap, device, a, &r) != 0)
        return -1;
    ranges_emit(p->e, snap, device, a, &r);
    ranges_free(&r);
    return 0;
}

static int
emit_device(struct plot_page *p, struct snapshot *snap, size_t device,
            const struct plot_run_options *opt, struct site_rows *rows)
{
    struct device_analysis a;
    if (analysis_run(snap, device, true, &a) != 0)
        return -1;
    struct plot_streams streams;
    plot_streams_init(&streams);
    emitter_begin_dict(p->e);
    cli_json_key_u64(p->e, "device", device);
    emit_figures(p, snap, &a);
    int rc = emit_sites(p, snap, device, &a, rows);
    library_report_emit(p->e, snap, device);
    if (rc == 0)
        rc = emit_overview(p, &a);
    if (rc == 0)
        rc = emit_marks(p, snap, device, &streams);
    if (rc == 0)
        rc = emit_phases(p, snap, device, &a);
    if (rc == 0)
        rc = emit_ranges(p, snap, device, &a);
    if (rc == 0 && opt->history)
        rc = emit_history(p, snap, device, &streams);
    emitter_key(p->e, "streams");
    emitter_begin_list(p->e);
    for (size_t i = 0; i < streams.count; i++)
        emit_hex(p->e, streams.values[i]);
    emitter_end(p->e);
    emitter_end(p->e);
    plot_streams_free(&streams);
    analysis_free(&a);
    return rc;
}

/* ---- One file. */

static void
emit_run_header(struct plot_page *p, const struct snapshot *snap, const char *path,
                const struct plot_run_options *opt)
{
    struct emitter *e = p->e;
    cli_json_key_string(e, "file", path);
    cli_json_key_string(e, "name", opt->name);
    char meta[512] = "written by PyTorch (no cuprof section)";
    const struct snap_cuprof *c = &snap->cuprof;
    if (c->present)
        snprintf(meta, sizeof(meta),
                 "cuprof %s, mode %s, pid %" PRId64 ", rank %" PRId64 ", host %s",
                 c->version ? c->version : "?", c->mode ? c->mode : "?", c->pid, c->rank,
                 c->host ? c->host : "?");
    cli_json_key_string(e, "meta", meta);
    emitter_key(e, "cuprof");
    if (!c->present) {
        emitter_none(e);
    } else {
        emitter_begin_dict(e);
        cli_json_key_int(e, "rank", c->rank);
        cli_json_key_int(e, "pid", c->pid);
        cli_json_key_string(e, "host", c->host);
        cli_json_key_string(e, "mode", c->mode);
        cli_json_key_string(e, "version", c->version);
        emitter_end(e);
    }
    emitter_key(e, "all_frames");
    emitter_bool(e, opt->all_frames);
    emitter_key(e, "warnings");
    emitter_begin_list(e);
    for (size_t i = 0; i < snap->warning_count; i++)
        cli_json_string(e, snap->warnings[i]);
    emitter_end(e);
}

/* "frames" (each frame's text) and the tables "stacks" (per stack: its frame count, then its
 * frames, innermost first) and "site_of" (per stack: the stack that is its call site). */
static int
emit_stacks(struct plot_page *p, const struct snapshot *snap, const uint32_t *map, size_t mapped)
{
    static const char *const stack_fields[] = {"count", "frame..."};
    static const char *const site_fields_of[] = {"site"};
    char text[1024];
    emitter_key(p->e, "frames");
    emitter_begin_list(p->e);
    for (size_t i = 0; i < snap->frame_count; i++) {
        cli_frame_text(snap, (uint32_t)i, text, sizeof text);
        cli_json_string(p->e, text);
    }
    emitter_end(p->e);
    struct plot_blob stacks, sites;
    plot_blob_init(&stacks);
    plot_blob_init(&sites);
    for (size_t s = 0; s < snap->stack_count; s++) {
        const struct snap_stack *st = &snap->stacks[s];
        plot_blob_uint(&stacks, st->count);
        for (uint32_t k = 0; k < st->count; k++)
            plot_blob_uint(&stacks, snap->stack_frames[st->first + k]);
        plot_blob_uint(&sites, map != NULL && s < mapped ? map[s] : s);
    }
    int rc = stacks.failed || sites.failed ? -1 : 0;
    emit_table(p, "stacks", stack_fields, 2, snap->stack_count, &stacks);
    emit_table(p, "site_of", site_fields_of, 1, snap->stack_count, &sites);
    plot_blob_free(&stacks);
    plot_blob_free(&sites);
    return rc;
}

static int
emit_devices(struct plot_page *p, struct snapshot *snap, const struct plot_run_options *opt,
             const uint32_t *map, size_t mapped)
{
    int rc = 0;
    emitter_key(p->e, "devices");
    emitter_begin_list(p->e);
    size_t ndev = analysis_device_count(snap);
    for (size_t d = 0; d < ndev && rc == 0; d++) {
        if (!analysis_device_present(snap, d) || (opt->device >= 0 && (size_t)opt->device != d))
            continue;
        struct site_rows rows = {.site_of = map, .mapped = mapped};
        span_map_init(&rows.index);
        rc = emit_device(p, snap, d, opt, &rows);
        span_map_free(&rows.index);
        free(rows.v);
    }
    emitter_end(p->e);
    return rc;
}

int
plot_data_run(struct plot_page *p, struct snapshot *snap, const char *path,
              const struct plot_run_options *opt, const struct plot_extras *extras)
{
    uint32_t *map = NULL;
    size_t mapped = 0;
    int rc = opt->all_frames ? 0 : frame_filter_map(snap, &map, &mapped);
    emitter_begin_dict(p->e);
    emit_run_header(p, snap, path, opt);
    if (rc == 0)
        rc = emit_stacks(p, snap, map, mapped);
    if (rc == 0)
        rc = emit_devices(p, snap, opt, map, mapped);
    if (rc == 0 && extras != NULL && extras->oom_verdicts != NULL)
        rc = extras->oom_verdicts(p->e, snap);
    emitter_end(p->e);
    free(map);
    if (rc != 0) {
        char safe[1024];
        fprintf(stderr, "cuprof: %s: out of memory\n", cli_term(path, safe, sizeof safe));
    }
    return rc;
}
