/* cmd_timeline.c: `cuprof timeline FILE -o trace.json`: Chrome trace-event JSON (Perfetto,
 *   chrome://tracing): allocated and reserved counter tracks per device, OOM and segment events. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/trace_sink.h"
#include "cli/analysis.h"
#include "cli/cli_commands.h"
#include "cli/cli_util.h"

static const char usage_text[] =
    "usage: cuprof timeline [-o trace.json] FILE\n\n"
    "Writes FILE's history as Chrome trace-event JSON, which ui.perfetto.dev and\n"
    "chrome://tracing open: per device a counter track of allocated bytes (live requested\n"
    "sizes) and one of reserved bytes (segments), instant events for every OOM and every\n"
    "segment_alloc/segment_free, and annotations. Times are microseconds since the first\n"
    "entry; a history without times uses the entry number as the time.\n\n"
    "  -o, --output FILE  where to write (default: standard output)\n"
    "  -h, --help         this text\n";

struct tl_writer {
    FILE *out;
    bool first;
    int64_t pid;
};

static void
event_begin(struct tl_writer *w)
{
    fputs(w->first ? "\n" : ",\n", w->out);
    w->first = false;
}

static void
counter(struct tl_writer *w, const char *name, size_t device, double ts, uint64_t bytes)
{
    event_begin(w);
    fprintf(w->out,
            "{\"name\": \"%s (device %zu)\", \"ph\": \"C\", \"pid\": %" PRId64
            ", \"tid\": %zu, \"ts\": %.3f, \"args\": {\"bytes\": %" PRIu64 "}}",
            name, device, w->pid, device, ts, bytes);
}

static int
device_events(struct tl_writer *w, const struct snapshot *snap, size_t device)
{
    struct device_analysis a;
    if (analysis_run(snap, device, true, &a) != 0)
        return -1;
    const struct snap_device_trace *t =
        device < snap->device_count ? &snap->device_traces[device] : NULL;
    int64_t t0 = 0;
    for (size_t i = 0; t != NULL && i < t->count; i++)
        if (t->entries[i].has_time) {
            t0 = t->entries[i].time_us;
            break;
        }
    event_begin(w);
    fprintf(w->out,
            "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %" PRId64
            ", \"tid\": %zu, \"args\": {\"name\": \"device %zu\"}}",
            w->pid, device, device);
    counter(w, "allocated", device, 0, a.live_series[0]);
    counter(w, "reserved", device, 0, a.reserved_series[0]);
    double last_ts = 0;
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
        if (e->action == TRACE_OOM || e->action == TRACE_SEGMENT_ALLOC ||
            e->action == TRACE_SEGMENT_FREE || e->action == TRACE_ANNOTATE) {
            event_begin(w);
            fprintf(w->out, "{\"name\": ");
            if (e->action == TRACE_ANNOTATE && e->label != NULL)
                cli_json_string(w->out, e->label);
            else
                fprintf(w->out, "\"%s\"", cli_action_name(e->action));
            fprintf(w->out,
                    ", \"ph\": \"i\", \"s\": \"%s\", \"pid\": %" PRId64
                    ", \"tid\": %zu, \"ts\": %.3f, \"args\": {\"entry\": %zu, \"size\": %" PRIu64,
                    e->action == TRACE_OOM ? "p" : "t", w->pid, device, ts, i, e->size);
            if (e->action == TRACE_OOM)
                fprintf(w->out, ", \"device_free\": %" PRIu64, e->device_free);
            else
                fprintf(w->out, ", \"addr\": \"0x%" PRIx64 "\"", e->addr);
            fprintf(w->out, ", \"stream\": %" PRIu64 "}}", e->stream);
        }
    }
    analysis_free(&a);
    return 0;
}

int
cmd_timeline(int argc, char **argv)
{
    static const struct option options[] = {
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *output = NULL;
    struct cli_options o = {.cmd = "timeline",
                            .usage = usage_text,
                            .shortopts = "o:h",
                            .longopts = options,
                            .unknown = "unknown option or missing value",
                            .operands = 1,
                            .operands_error = "expected one snapshot FILE"};
    int c;
    while ((c = cli_next_option(&o, argc, argv)) != -1) {
        switch (c) {
        case 'o':
            output = optarg;
            break;
        }
    }
    if (o.finished)
        return o.status;
    struct snapshot *snap;
    int rc = cli_load(argv[optind], &snap);
    if (rc != CLI_OK)
        return rc;
    FILE *out = output ? fopen(output, "w") : stdout;
    if (out == NULL) {
        fprintf(stderr, "cuprof: %s: %s\n", output, strerror(errno));
        snapshot_free(snap);
        return CLI_BADUSE;
    }
    struct tl_writer w = {out, true, snap->cuprof.present ? snap->cuprof.pid : 0};
    fprintf(out, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [");
    event_begin(&w);
    fprintf(out,
            "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %" PRId64
            ", \"args\": {\"name\": ",
            w.pid);
    char name[256];
    if (snap->cuprof.present && snap->cuprof.rank >= 0)
        snprintf(name, sizeof(name), "cuprof rank %" PRId64 " pid %" PRId64, snap->cuprof.rank,
                 snap->cuprof.pid);
    else
        snprintf(name, sizeof(name), "%s", argv[optind]);
    cli_json_string(out, name);
    fprintf(out, "}}");
    int status = CLI_OK;
    size_t ndev = analysis_device_count(snap);
    for (size_t d = 0; d < ndev; d++)
        if (device_events(&w, snap, d) != 0) {
            fprintf(stderr, "cuprof: %s: out of memory\n", argv[optind]);
            status = CLI_BADUSE;
            break;
        }
    fprintf(out, "\n]}\n");
    if (output != NULL && fclose(out) != 0) {
        fprintf(stderr, "cuprof: %s: %s\n", output, strerror(errno));
        status = CLI_BADUSE;
    }
    snapshot_free(snap);
    return status;
}
