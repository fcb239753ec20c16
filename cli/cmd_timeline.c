/* cmd_timeline.c: `cuprof timeline FILE -o trace.json`: Chrome trace-event JSON (Perfetto,
 *   chrome://tracing): allocated and reserved counter tracks per device, OOM and segment events. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/trace_sink.h"
#include "cli/analysis.h"
#include "cli/cli_commands.h"
#include "cli/cli_options.h"
#include "cli/cli_util.h"
#include "cli/out_file.h"
#include "cli/ranges.h"
#include "cli/span_map.h"

static const char timeline_text[] =
    "usage: cuprof timeline [-o trace.json] FILE...\n\n"
    "Writes the history of each FILE as Chrome trace-event JSON, which ui.perfetto.dev and\n"
    "chrome://tracing open: per device a counter track of allocated bytes (live requested\n"
    "sizes) and one of reserved bytes (segments), instant events for every OOM and every\n"
    "segment_alloc/segment_free, and annotations: marks as instants, ranges (NVTX ranges) as\n"
    "async slices from their start to their end (category nvtx, one id per range; a range\n"
    "still open at the end of the history has no end). Times are microseconds since the first\n"
    "entry; a history without times uses the entry number as the time. Several files (a job's\n"
    "ranks) each get a process track of their own, named by rank, host and pid, aligned on\n"
    "wall-clock time: the earliest entry of all the files is time 0.\n\n";

static const struct cli_option timeline_options[] = {
    {"output", 'o', "FILE",
     "where to write (default and -: standard output). A file is replaced only once the whole "
     "trace is written",
     0},
    {0},
};

static int
timeline_option(void *ctx, int key, const char *value)
{
    if (key == 'o')
        *(const char **)ctx = value;
    return CLI_OK;
}

const struct cli_command cmd_timeline_command = {
    .name = "timeline",
    .text = timeline_text,
    .options = timeline_options,
    .unknown = "unknown option or missing value",
    .operands = CLI_ONE_OR_MORE,
    .operands_error = "expected at least one snapshot FILE",
    .option = timeline_option,
};

struct tl_writer {
    struct emitter *e; /* inside the "traceEvents" list */
    int64_t pid;
    bool shared_clock; /* every file has times: t0 is the earliest of them all */
    int64_t t0;
};

/* An event's dict, opened with its name, phase and pid (its tid when tid >= 0). */
static void
event_begin(struct tl_writer *w, const char *name, const char *ph, int64_t tid)
{
    emitter_begin_dict(w->e);
    cli_json_key_string(w->e, "name", name);
    cli_json_key_string(w->e, "ph", ph);
    cli_json_key_int(w->e, "pid", w->pid);
    if (tid >= 0)
        cli_json_key_int(w->e, "tid", tid);
}

static void
counter(struct tl_writer *w, const char *name, size_t device, double ts, uint64_t bytes)
{
    char track[64];
    snprintf(track, sizeof(track), "%s (device %zu)", name, device);
    event_begin(w, track, "C", (int64_t)device);
    emitter_key(w->e, "ts");
    emitter_float(w->e, ts);
    emitter_key(w->e, "args");
    emitter_begin_dict(w->e);
    cli_json_key_u64(w->e, "bytes", bytes);
    emitter_end(w->e);
    emitter_end(w->e);
}

/* An instant event: an OOM (process-wide), a segment alloc or free, an annotation. */
static void
instant(struct tl_writer *w, const struct snap_device_trace *t, size_t device, double ts, size_t i)
{
    const struct snap_entry *e = &t->entries[i];
    const char *label = e->action == TRACE_ANNOTATE ? snapshot_entry_label(t, i) : NULL;
    event_begin(w, label != NULL ? label : cli_action_name(e->action), "i", -1);
    cli_json_key_string(w->e, "s", e->action == TRACE_OOM ? "p" : "t");
    cli_json_key_u64(w->e, "tid", device);
    emitter_key(w->e, "ts");
    emitter_float(w->e, ts);
    emitter_key(w->e, "args");
    emitter_begin_dict(w->e);
    cli_json_key_u64(w->e, "entry", i);
    cli_json_key_u64(w->e, "size", e->size);
    if (e->action == TRACE_OOM) {
        cli_json_key_u64(w->e, "device_free", e->device_free);
    } else {
        char addr[24];
        snprintf(addr, sizeof(addr), "0x%" PRIx64, e->addr);
        cli_json_key_string(w->e, "addr", addr);
    }
    cli_json_key_u64(w->e, "stream", e->stream);
    emitter_end(w->e);
    emitter_end(w->e);
}

/* A range's start or end: an async slice ("b"/"e") of category nvtx, id = the range's index. */
static void
range_event(struct tl_writer *w, const struct snap_device_trace *t, size_t device, double ts,
            size_t i, uint64_t range)
{
    const char *label = snapshot_entry_label(t, i);
    bool start = snapshot_entry_stage(t, i) == SNAP_STAGE_START;
    event_begin(w, label != NULL ? label : "", start ? "b" : "e", (int64_t)device);
    cli_json_key_string(w->e, "cat", "nvtx");
    cli_json_key_u64(w->e, "id", range);
    emitter_key(w->e, "ts");
    emitter_float(w->e, ts);
    emitter_key(w->e, "args");
    emitter_begin_dict(w->e);
    cli_json_key_u64(w->e, "entry", i);
    emitter_end(w->e);
    emitter_end(w->e);
}

/* Entry index + 1 -> range index, for every START and END the phases matched. */
static int
range_entries(const struct snapshot *snap, size_t device, const struct device_analysis *a,
              struct span_map *by_entry)
{
    struct device_ranges p;
    span_map_init(by_entry);
    if (ranges_run(snap, device, a, &p) != 0)
        return -1;
    int rc = 0;
    for (size_t r = 0; rc == 0 && r < p.range_count; r++) {
        if (!p.ranges[r].start_unknown)
            rc = span_map_put(by_entry, (uint64_t)p.ranges[r].start + 1, r, 0);
        if (rc == 0 && p.ranges[r].end != RANGE_OPEN)
            rc = span_map_put(by_entry, (uint64_t)p.ranges[r].end + 1, r, 0);
    }
    ranges_free(&p);
    return rc;
}

static int
device_events(struct tl_writer *w, const struct snapshot *snap, size_t device)
{
    struct device_analysis a;
    if (analysis_run(snap, device, true, &a) != 0)
        return -1;
    struct span_map ranges;
    if (range_entries(snap, device, &a, &ranges) != 0) {
        span_map_free(&ranges);
        analysis_free(&a);
        return -1;
    }
    const struct snap_device_trace *t =
        device < snap->device_count ? &snap->device_traces[device] : NULL;
    int64_t t0 = w->t0;
    for (size_t i = 0; !w->shared_clock && t != NULL && i < t->count; i++)
        if (t->entries[i].has_time) {
            t0 = t->entries[i].time_us;
            break;
        }
    char name[32];
    snprintf(name, sizeof(name), "device %zu", device);
    event_begin(w, "thread_name", "M", (int64_t)device);
    emitter_key(w->e, "args");
    emitter_begin_dict(w->e);
    cli_json_key_string(w->e, "name", name);
    emitter_end(w->e);
    emitter_end(w->e);
    /* On a shared clock a device's tracks start at its own first entry. */
    double last_ts = 0;
    for (size_t i = 0; w->shared_clock && t != NULL && i < t->count; i++)
        if (t->entries[i].has_time) {
            last_ts = (double)(t->entries[i].time_us - t0);
            break;
        }
    counter(w, "allocated", device, last_ts, a.live_series[0]);
    counter(w, "reserved", device, last_ts, a.reserved_series[0]);
    for (size_t i = 0; t != NULL && i < t->count; i++) {
        const struct snap_entry *e = &t->entries[i];
        double ts = a.has_time ? (e->has_time ? (double)(e->time_us - t0) : last_ts) : (double)i;
        if (ts < last_ts)
            ts = last_ts; /* clocks of different threads: keep the track monotonic */
        last_ts = ts;
        if (a.live_series[i + 1] != a.live_series[i])
            counter(w, "allocated", device, ts, a.live_series[i + 1]);
        if (a.reserved_series[i + 1] != a.reserved_series[i])
            counter(w, "reserved", device, ts, a.reserved_series[i + 1]);
        const struct span_map_item *range =
            e->action == TRACE_ANNOTATE ? span_map_get(&ranges, (uint64_t)i + 1) : NULL;
        if (range != NULL)
            range_event(w, t, device, ts, i, range->size);
        else if (e->action == TRACE_OOM || e->action == TRACE_SEGMENT_ALLOC ||
                 e->action == TRACE_SEGMENT_FREE || e->action == TRACE_ANNOTATE)
            instant(w, t, device, ts, i);
    }
    span_map_free(&ranges);
    analysis_free(&a);
    return 0;
}

/* The earliest entry time of a snapshot, or INT64_MAX when it has none. */
static int64_t
first_time(const struct snapshot *snap)
{
    int64_t t = INT64_MAX;
    for (size_t d = 0; d < snap->device_count; d++)
        for (size_t i = 0; i < snap->device_traces[d].count; i++)
            if (snap->device_traces[d].entries[i].has_time) {
                if (snap->device_traces[d].entries[i].time_us < t)
                    t = snap->device_traces[d].entries[i].time_us;
                break;
            }
    return t;
}

/* The process track's name: "cuprof rank R (host) pid P", or the file's name. */
static void
process_name(struct tl_writer *w, const struct snapshot *snap, const char *path)
{
    char name[512];
    if (snap->cuprof.present && snap->cuprof.rank >= 0)
        snprintf(name, sizeof(name), "cuprof rank %" PRId64 " (%s) pid %" PRId64, snap->cuprof.rank,
                 snap->cuprof.host ? snap->cuprof.host : "?", snap->cuprof.pid);
    else
        snprintf(name, sizeof(name), "%s", path);
    event_begin(w, "process_name", "M", -1);
    emitter_key(w->e, "args");
    emitter_begin_dict(w->e);
    cli_json_key_string(w->e, "name", name);
    emitter_end(w->e);
    emitter_end(w->e);
    if (snap->cuprof.present && snap->cuprof.rank >= 0) {
        event_begin(w, "process_sort_index", "M", -1); /* Perfetto orders process tracks by this */
        emitter_key(w->e, "args");
        emitter_begin_dict(w->e);
        cli_json_key_int(w->e, "sort_index", snap->cuprof.rank);
        emitter_end(w->e);
        emitter_end(w->e);
    }
}

/* Every file read and checked before the output is touched, one in memory at a time; and the
 * earliest time of them all, so ranks line up on the wall clock (INT64_MAX when one has none).
 * A single file stays read in *only. */
static int
check_inputs(char **paths, size_t count, int64_t *t0, struct snapshot **only)
{
    *t0 = INT64_MAX;
    *only = NULL;
    bool all_timed = true;
    for (size_t f = 0; f < count; f++) {
        struct snapshot *snap;
        int rc = cli_load(paths[f], &snap);
        if (rc != CLI_OK)
            return rc;
        int64_t first = first_time(snap);
        if (count == 1)
            *only = snap;
        else
            snapshot_free(snap);
        all_timed = all_timed && first != INT64_MAX;
        *t0 = first < *t0 ? first : *t0;
    }
    if (!all_timed || count == 1)
        *t0 = INT64_MAX;
    return CLI_OK;
}

/* Every file's tracks, one file in memory at a time (`only`: the one file, already read). */
static int
write_files(struct tl_writer *w, char **paths, size_t count, struct snapshot *only)
{
    int status = CLI_OK;
    int64_t *pids = calloc(count, sizeof(*pids));
    for (size_t f = 0; f < count && status == CLI_OK; f++) {
        struct snapshot *snap = only;
        if (snap == NULL && (status = cli_load(paths[f], &snap)) != CLI_OK)
            break;
        /* A track per file: the process's pid, unless another file (another host) had it. */
        w->pid = snap->cuprof.present ? snap->cuprof.pid : 0;
        for (size_t k = 0; pids != NULL && k < f; k++)
            if (pids[k] == w->pid)
                w->pid = -(int64_t)f - 1;
        if (pids != NULL)
            pids[f] = w->pid;
        process_name(w, snap, paths[f]);
        size_t ndev = analysis_device_count(snap);
        for (size_t d = 0; d < ndev; d++)
            if (analysis_device_present(snap, d) && device_events(w, snap, d) != 0) {
                char safe[1024];
                fprintf(stderr, "cuprof: %s: out of memory\n",
                        cli_term(paths[f], safe, sizeof safe));
                status = CLI_BADUSE;
                break;
            }
        if (snap != only)
            snapshot_free(snap);
    }
    free(pids);
    return status;
}

int
cmd_timeline(int argc, char **argv)
{
    const char *output = NULL;
    struct cli_input in;
    if (!cli_parse(&cmd_timeline_command, argc, argv, &output, &in))
        return in.status;
    int64_t t0;
    struct snapshot *only;
    int status = check_inputs(in.paths, in.count, &t0, &only);
    struct out_file out;
    if (status == CLI_OK && out_file_open(&out, output) != 0)
        status = CLI_BADUSE;
    if (status != CLI_OK) {
        snapshot_free(only);
        return status;
    }
    bool shared_clock = t0 != INT64_MAX;
    struct emitter *e = cli_json_open(out.f);
    status = CLI_BADUSE;
    if (e != NULL) {
        emitter_begin_dict(e);
        cli_json_key_string(e, "displayTimeUnit", "ms");
        emitter_key(e, "traceEvents");
        emitter_begin_list(e);
        struct tl_writer w = {e, 0, shared_clock, shared_clock ? t0 : 0};
        status = write_files(&w, in.paths, in.count, only);
        emitter_end(e);
        emitter_end(e);
    }
    if (!cli_json_close(e))
        status = CLI_BADUSE;
    if (out_file_end(&out, status == CLI_OK) != 0)
        status = CLI_BADUSE;
    snapshot_free(only);
    return status;
}
