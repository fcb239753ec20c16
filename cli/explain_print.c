/* explain_print.c: `cuprof explain` as text and as JSON (see explain_print.h). */
#include "cli/explain_print.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/trace_sink.h"
#include "cli/analysis.h"
#include "cli/cli_util.h"
#include "snapshot/snapshot_oom.h"

/* The width of the device lines' labels. */
#define LABEL_WIDTH 44

static const char *
instant_name(const struct explain *x)
{
    if (x->chosen == EXPLAIN_AT_OOM)
        return "the first OOM";
    if (x->chosen == EXPLAIN_AT_PEAK)
        return "the peak of reserved memory";
    return x->is_oom ? "an OOM" : "a chosen entry";
}

static void
print_heading(FILE *out, const char *path, const struct explain *x)
{
    char where[128];
    int64_t t0 = 0;
    const struct snap_device_trace *t = &x->snap->device_traces[x->device];
    bool timed = t->count > 0 && t->entries[0].has_time;
    if (timed)
        t0 = t->entries[0].time_us;
    if (x->is_oom) {
        snprintf(where, sizeof where, "entry %zu (oom)", x->at);
        if (timed && t->entries[x->at].has_time)
            snprintf(where + strlen(where), sizeof where - strlen(where), ", t=+%.6f s",
                     (double)(t->entries[x->at].time_us - t0) / 1e6);
    } else if (x->driver_call != NULL) {
        /* Its own time: the entry before it may be much older. */
        int n = snprintf(where, sizeof where, "in %s (the driver's own memory) after %zu entr%s",
                         x->driver_call, x->at, x->at == 1 ? "y" : "ies");
        if (timed && n > 0 && (size_t)n < sizeof where)
            snprintf(where + n, sizeof where - (size_t)n, ", t=+%.6f s",
                     (double)(x->driver_time_us - t0) / 1e6);
    } else {
        analysis_where(where, sizeof where, x->snap, x->device, x->at, timed ? &t0 : NULL);
    }
    fputs("explain: ", out);
    cli_fputs_term(path, out);
    fprintf(out, ", device %zu: %s, %s of %zu entries\n", x->device, instant_name(x), where,
            x->count);
    const char *not_kept = analysis_history_not_kept(x->snap);
    if (not_kept != NULL && !x->is_oom)
        fprintf(out,
                "note: recorded with CUPROF_HISTORY=%s, which keeps at most the last entry: this "
                "is the state around it, not the run's peak; record with CUPROF_HISTORY=all to "
                "explain that\n",
                not_kept);
}

/* The kind of memory a passed-through request asked for, in words. */
static const char *
passed_kind(uint8_t pool)
{
    switch (pool) {
    case TRACE_POOL_MANAGED:
        return "managed memory";
    case TRACE_POOL_VMM:
        return "physical memory for VMM (cuMemCreate)";
    case TRACE_POOL_ASYNC:
        return "stream-ordered memory of the driver's pool";
    default:
        return "device memory";
    }
}

/* A driver's own call's message. */
static void
print_driver_call(FILE *out, const struct explain *x)
{
    fputs("request: none the driver names: ", out);
    cli_fputs_term(x->driver_call, out);
    fputs(" takes device memory for the driver itself (" SNAP_DRIVER_OWN_MEMORY
          "), outside every allocation, and does not say how much\n",
          out);
    if (x->message != NULL) {
        fputs("  message: ", out);
        cli_fputs_term(x->message, out);
        fputc('\n', out);
    }
}

static void
print_request(FILE *out, const struct explain *x)
{
    char s1[32], s2[32], s3[32];
    if (x->driver_call != NULL)
        print_driver_call(out, x);
    if (!x->is_oom)
        return;
    if (explain_request_passed(x))
        fprintf(out,
                "request: %s on stream %" PRIu64 " (%s, passed through to the driver, which "
                "refused it); the driver said %s was free\n",
                cli_size(x->request_size, s1, 32), x->request_stream, passed_kind(x->request_pool),
                cli_size(x->device_free, s3, 32));
    else
        fprintf(out,
                "request: %s on stream %" PRIu64 " (a new segment would take %s); the driver "
                "said %s was free\n",
                cli_size(x->request_size, s1, 32), x->request_stream,
                cli_size(x->request_segment, s2, 32), cli_size(x->device_free, s3, 32));
    cli_print_stack(out, x->snap, x->request_stack, 4, 6);
    if (x->message != NULL) {
        fputs("  message: ", out);
        cli_fputs_term(x->message, out);
        fputc('\n', out);
    }
}

static void
line(FILE *out, int indent, const char *label, uint64_t bytes, const char *note)
{
    char s[32];
    fprintf(out, "%*s%-*s %12s%s%s\n", indent, "", LABEL_WIDTH - indent, label,
            cli_size(bytes, s, 32), note[0] ? "  " : "", note);
}

static void
print_sites(FILE *out, const struct explain *x)
{
    char s[32];
    for (size_t i = 0; i < x->nsites; i++) {
        char *text = cli_stack_line(x->snap, x->sites[i].stack, " < ", false);
        fprintf(out, "      %s in %" PRIu64 " allocation%s: %s\n",
                cli_size(x->sites[i].bytes, s, 32), x->sites[i].count,
                x->sites[i].count == 1 ? "" : "s",
                text != NULL && text[0] ? text : "[no stack recorded]");
        free(text);
    }
    if (x->all_sites > x->nsites)
        fprintf(out, "      ... %zu more call sites\n", x->all_sites - x->nsites);
}

static void
print_free(FILE *out, const struct explain *x)
{
    char s1[32], s2[32];
    static const char *const names[2] = {"small pool", "large pool"};
    for (int p = 1; p >= 0 && x->state_from_replay; p--)
        fprintf(out, "      %s: %s free in %" PRIu64 " block%s, largest %s, in %zu segment%s\n",
                names[p], cli_size(x->pools[p].free_bytes, s1, 32), x->pools[p].free_blocks,
                x->pools[p].free_blocks == 1 ? "" : "s", cli_size(x->pools[p].largest_free, s2, 32),
                x->pools[p].segments_with_free, x->pools[p].segments_with_free == 1 ? "" : "s");
    for (size_t i = 0; i < x->nsegments; i++) {
        const struct explain_segment *g = &x->segments[i];
        fprintf(out, "        segment 0x%" PRIx64 " (%s, %s pool, stream %" PRIu64 "%s): ", g->addr,
                cli_size(g->size, s1, 32), g->small ? "small" : "large", g->stream,
                g->expandable ? ", expandable" : "");
        fprintf(out, "%s free, largest %s\n", cli_size(g->free_bytes, s1, 32),
                cli_size(g->largest_free, s2, 32));
    }
    if (x->segments_with_free > x->nsegments)
        fprintf(out, "        ... %zu more segments\n", x->segments_with_free - x->nsegments);
}

static void
print_device(FILE *out, const struct explain *x)
{
    char s1[32], s2[32], note[160];
    static const char *const from[] = {"the driver's total, cuprof.device_footprint", "--memory",
                                       "not recorded: reserved + pass-through + "
                                       "free, nothing taken as outside"};
    fprintf(out, "device %zu: %s (%s)\n", x->device, cli_size(x->capacity, s1, 32),
            from[x->capacity_from]);
    if (x->state_from_replay && x->replay_reserved != x->reserved)
        fprintf(out,
                "  (the replay held %s reserved here, the recording %s: blocks and free "
                "space below are the replay's)\n",
                cli_size(x->replay_reserved, s1, 32), cli_size(x->reserved, s2, 32));
    snprintf(note, sizeof note, "(%s requested, %zu call site%s%s)",
             cli_size(x->live_requested, s1, 32), x->all_sites, x->all_sites == 1 ? "" : "s",
             x->passthrough > 0 ? ", pass-through memory's among them" : "");
    line(out, 2, "live blocks", x->live_allocated, note);
    print_sites(out, x);
    if (x->pending_free > 0)
        line(out, 2, "freed, waiting for their streams", x->pending_free, "");
    line(out, 2, "cached, free in the allocator", x->cached_free, "");
    print_free(out, x);
    if (x->private_pools > 0)
        line(out, 4, "of the allocator's: private (CUDA graph) pools", x->private_pools, "");
    line(out, 2, "pass-through (managed, VMM, driver pools)", x->passthrough, "");
    line(out, 2, "outside the allocator", x->outside,
         x->outside_estimated ? "(as at the dump)" : "");
    if (x->outside > 0) {
        fprintf(out, "      (the context, libraries' own pools, other processes");
        if (x->outside_at_start > 0)
            fprintf(out, "; %s in use before the program's first call",
                    cli_size(x->outside_at_start, s1, 32));
        if (x->graphs > 0)
            fprintf(out, "; %s CUDA graphs' at the dump", cli_size(x->graphs, s2, 32));
        fprintf(out, ")\n");
    }
    line(out, 2, x->is_oom ? "free on the device (the driver said)" : "free on the device",
         x->free_bytes, "");
    uint64_t total = x->live_allocated + x->pending_free + x->cached_free + x->passthrough +
                     x->outside + x->free_bytes;
    line(out, 2, "total", total, total == x->capacity ? "" : "(the figures disagree)");
}

/* What takes the memory before the device fills, for the kind of call refused. */
static const char *
earlier_remedy(const char *call)
{
    if (strncmp(call, "cuGraph", 7) == 0) /* a graph's memory nodes */
        return "the graph uploaded before the device fills (cudaGraphUpload right after its "
               "instantiation takes its memory)";
    if (strncmp(call, "cuCtxCreate", 11) == 0)
        return "the context created before the device fills, or the device's primary context "
               "shared instead (cuDevicePrimaryCtxRetain, as the runtime does)";
    if (strstr(call, "Array") != NULL)
        return "the arrays allocated before the device fills";
    if (strcmp(call, "cuCtxSetLimit") == 0)
        return "the stack limit raised before the device fills";
    return "kernels loaded before the device fills (CUDA_MODULE_LOADING=EAGER takes each module's "
           "code at its load)";
}

/* A driver's own refusal: what the device held, and what would have left the driver room. */
static void
print_driver_verdict(FILE *out, const struct explain *x)
{
    char a[32], b[32], c[32], d[32], e[32], f[32];
    fputs("verdict: the driver's own memory: ", out);
    cli_fputs_term(x->driver_call, out);
    fprintf(out,
            " found too little free: %s free of %s, with %s in live blocks, %s cached free, %s "
            "passed through and %s outside the allocator\n",
            cli_size(x->free_bytes, a, 32), cli_size(x->capacity, b, 32),
            cli_size(x->live_allocated, c, 32), cli_size(x->cached_free, d, 32),
            cli_size(x->passthrough, e, 32), cli_size(x->outside, f, 32));
    if (x->free_without_cache > 0)
        fprintf(out,
                "cuprof's cache had handed back every whole free segment before the call failed; "
                "the %s it kept lies in segments that still hold live blocks: without the cache "
                "the driver would have had about %s free (the live blocks as requested); "
                "CUPROF_MODE=trace records the program without a cache\n",
                cli_size(x->cached_free, a, 32), cli_size(x->free_without_cache, b, 32));
    const struct explain_whatif *best = NULL;
    for (size_t i = 1; i < x->nwhatifs && x->nwhatifs > 0 && x->whatifs[0].kept_known; i++)
        if (x->whatifs[i].ok && x->whatifs[i].kept_known &&
            x->whatifs[i].kept_reserved < (best != NULL ? best : &x->whatifs[0])->kept_reserved)
            best = &x->whatifs[i];
    if (best != NULL) {
        fputs("of the settings below, ", out);
        cli_fputs_term(best->label, out);
        fprintf(out, " keeps the least there: %s, %s less than the recorded settings\n",
                cli_size(best->kept_reserved, a, 32),
                cli_size(x->whatifs[0].kept_reserved - best->kept_reserved, b, 32));
    }
    fprintf(out,
            "what leaves it room: fewer live bytes at that call, %s, or headroom left when a pool "
            "or batch is sized from cudaMemGetInfo\n",
            earlier_remedy(x->driver_call));
}

/* One sentence per verdict found. */
static void
print_verdict(FILE *out, const struct explain *x)
{
    char a[32], b[32], c[32], d[32], e[32];
    if (x->driver_call != NULL) {
        print_driver_verdict(out, x);
        return;
    }
    if (!x->is_oom) {
        fprintf(out, "verdict: no OOM here: %s reserved of %s, %s free\n",
                cli_size(x->reserved, a, 32), cli_size(x->capacity, b, 32),
                cli_size(x->free_bytes, c, 32));
        return;
    }
    unsigned v = x->verdict;
    int kinds = __builtin_popcount(v);
    fprintf(out, "verdict: %s", kinds > 1 ? "a combination:\n  - " : "");
    const char *sep = kinds > 1 ? "\n  - " : "";
    uint64_t need = x->live_allocated + x->request_size;
    if (v & EXPLAIN_LIVE_EXCEEDS)
        fprintf(out,
                "live memory alone exceeds the device: %s live + %s requested = %s > %s (%s "
                "short); no allocator setting avoids it",
                cli_size(x->live_allocated, a, 32), cli_size(x->request_size, b, 32),
                cli_size(need, c, 32), cli_size(x->capacity, d, 32), cli_size(x->missing, e, 32));
    if (v & EXPLAIN_OUTSIDE) {
        fprintf(out, "memory outside the allocator: %s outside and %s passed through; ",
                cli_size(x->outside, a, 32), cli_size(x->passthrough, b, 32));
        if (x->missing > 0)
            fprintf(out, "%s live + %s requested = %s, the allocator could reach %s (%s short)",
                    cli_size(x->live_allocated, a, 32), cli_size(x->request_size, b, 32),
                    cli_size(need, c, 32), cli_size(x->reserved + x->free_bytes, d, 32),
                    cli_size(x->missing, e, 32));
        else
            fprintf(out, "without them the new segment of %s would have fit",
                    cli_size(x->request_segment, a, 32));
        fputs(v & (EXPLAIN_CAP | EXPLAIN_FRAGMENTATION) ? sep : "", out);
    }
    if (v & EXPLAIN_CAP) {
        fprintf(out,
                "a cap: per_process_memory_fraction %g allows %s; %s reserved + a new "
                "segment of %s > %s (the driver had %s free)",
                x->fraction, cli_size(x->allowed, a, 32), cli_size(x->reserved, b, 32),
                cli_size(x->request_segment, c, 32), cli_size(x->allowed, d, 32),
                cli_size(x->free_bytes, e, 32));
        fputs(v & EXPLAIN_FRAGMENTATION ? sep : "", out);
    }
    if (v & EXPLAIN_FRAGMENTATION)
        fprintf(out,
                "fragmentation: %s cached free + %s free on the device >= %s requested, but "
                "no free block of its stream and pool was large enough (largest %s) and "
                "the driver had less than a new segment of %s",
                cli_size(x->cached_free, a, 32), cli_size(x->free_bytes, b, 32),
                cli_size(x->request_size, c, 32), cli_size(x->largest_fit, d, 32),
                cli_size(x->request_segment, e, 32));
    if (v & EXPLAIN_DRIVER)
        fprintf(out, "the driver refused a new segment of %s although it said %s was free",
                cli_size(x->request_segment, a, 32), cli_size(x->free_bytes, b, 32));
    fputc('\n', out);
    if (x->cache_caused)
        fprintf(out,
                "without cuprof's cache this request could have fit: %s live + %s requested = "
                "%s of the %s that cuprof's segments and the driver's free memory held; "
                "CUPROF_MODE=trace records the program without a cache\n",
                cli_size(x->live_requested, a, 32), cli_size(x->request_size, b, 32),
                cli_size(x->live_requested + x->request_size, c, 32),
                cli_size(x->without_cache, d, 32));
}

static void
print_exactness(FILE *out, const struct explain *x)
{
    fprintf(out, "how exact: the recorded settings' replay reproduced %zu/%zu placements",
            x->reproduced, x->checked);
    if (!explain_request_passed(x) && x->is_oom)
        fprintf(out, x->baseline_oom ? " and this OOM" : " but not this OOM (rows less certain)");
    if (x->mid_run)
        fprintf(out,
                "; the history starts mid-run (%" PRIu64 " entries dropped): replays start "
                "from the state at its first entry, each setting applying from there",
                x->dropped);
    if (x->start_misses > 0)
        fprintf(out, "; %zu blocks of that state could not be placed", x->start_misses);
    fprintf(out, "\n");
}

/* A driver's own refusal: what each setting's cache kept there, and what that left free. */
static void
print_whatif_driver(FILE *out, const struct explain *x)
{
    char s1[32], s2[32], s3[32], s4[32], label[128];
    fprintf(out, "what the cache kept at the call under each setting (the history replayed from "
                 "its start, each cache emptied there as cuprof's is before such a call fails):\n");
    fprintf(out, "  %-42s %12s %12s %5s %14s %14s %10s\n", "setting", "kept", "free then", "OOMs",
            "peak reserved", "peak allocated", "cudaMalloc");
    for (size_t i = 0; i < x->nwhatifs; i++) {
        const struct explain_whatif *w = &x->whatifs[i];
        const char *kept = "failed", *free_then = "failed";
        if (w->ok && w->kept_known) {
            kept = cli_size(w->kept_reserved, s1, 32);
            uint64_t used = x->passthrough + x->outside + w->kept_reserved;
            free_then = !x->capacity_known   ? "unknown"
                        : x->capacity > used ? cli_size(x->capacity - used, s2, 32)
                                             : cli_size(0, s2, 32);
        }
        fprintf(out, "  %-42.42s %12s %12s %5zu %14s %14s %10" PRIu64 "\n",
                cli_term(w->label, label, sizeof label), kept, free_then, w->ooms,
                cli_size(w->peak_reserved, s3, 32), cli_size(w->peak_allocated, s4, 32),
                w->device_allocs);
    }
    print_exactness(out, x);
}

static void
print_whatif(FILE *out, const struct explain *x)
{
    if (x->driver_call != NULL) {
        print_whatif_driver(out, x);
        return;
    }
    char s1[32], s2[32], label[128];
    bool judged = !explain_request_passed(x) && x->is_oom; /* an OOM some setting may avoid */
    if (explain_request_passed(x))
        fprintf(out, "no setting of cuprof's cache applies to this request: the driver refused "
                     "it itself\n");
    fprintf(out, "%s (the history replayed from its start under each setting):\n",
            judged ? "what would have avoided it" : "the peak under other settings");
    fprintf(out, "  %-42s %-12s %5s %14s %14s %10s\n", "setting", judged ? "this OOM" : "", "OOMs",
            "peak reserved", "peak allocated", "cudaMalloc");
    for (size_t i = 0; i < x->nwhatifs; i++) {
        const struct explain_whatif *w = &x->whatifs[i];
        const char *fate = !w->ok       ? "failed"
                           : !judged    ? ""
                           : w->avoided ? "avoided"
                                        : "not avoided";
        fprintf(out, "  %-42.42s %-12s %5zu %14s %14s %10" PRIu64 "\n",
                cli_term(w->label, label, sizeof label), fate, w->ooms,
                cli_size(w->peak_reserved, s1, 32), cli_size(w->peak_allocated, s2, 32),
                w->device_allocs);
    }
    print_exactness(out, x);
}

void
explain_print_answer(FILE *out, const struct explain *x)
{
    print_verdict(out, x);
    print_whatif(out, x);
}

void
explain_print_text(FILE *out, const char *path, const struct explain *x)
{
    print_heading(out, path, x);
    print_request(out, x);
    print_device(out, x);
    print_verdict(out, x);
    print_whatif(out, x);
}

static void
json_request(struct emitter *e, const struct explain *x)
{
    emitter_key(e, "request");
    if (!x->is_oom) {
        emitter_none(e);
        return;
    }
    emitter_begin_dict(e);
    cli_json_key_u64(e, "size", x->request_size);
    cli_json_key_u64(e, "segment_size", x->request_segment);
    cli_json_key_u64(e, "stream", x->request_stream);
    cli_json_key_u64(e, "device_free", x->device_free);
    emitter_key(e, "passed_through");
    emitter_bool(e, explain_request_passed(x));
    emitter_key(e, "frames");
    cli_json_frames(e, x->snap, x->request_stack);
    emitter_key(e, "message");
    if (x->message != NULL)
        cli_json_string(e, x->message);
    else
        emitter_none(e);
    emitter_end(e);
}

static void
json_device(struct emitter *e, const struct explain *x)
{
    static const char *const from[] = {"footprint", "option", "assumed"};
    emitter_key(e, "device_bytes");
    emitter_begin_dict(e);
    cli_json_key_u64(e, "capacity", x->capacity);
    cli_json_key_string(e, "capacity_from", from[x->capacity_from]);
    cli_json_key_u64(e, "live_requested", x->live_requested);
    cli_json_key_u64(e, "live_allocated", x->live_allocated);
    cli_json_key_u64(e, "reserved", x->reserved);
    cli_json_key_u64(e, "private_pools", x->private_pools);
    cli_json_key_u64(e, "pending_free", x->pending_free);
    cli_json_key_u64(e, "cached_free", x->cached_free);
    cli_json_key_u64(e, "replay_reserved", x->replay_reserved);
    cli_json_key_u64(e, "passthrough", x->passthrough);
    cli_json_key_u64(e, "outside", x->outside);
    cli_json_key_u64(e, "outside_at_start", x->outside_at_start);
    cli_json_key_u64(e, "graphs", x->graphs);
    emitter_key(e, "outside_estimated");
    emitter_bool(e, x->outside_estimated);
    cli_json_key_u64(e, "free", x->free_bytes);
    emitter_end(e);
    emitter_key(e, "pools");
    emitter_begin_dict(e);
    static const char *const names[2] = {"small", "large"};
    for (int p = 0; p < 2; p++) {
        emitter_key(e, names[p]);
        emitter_begin_dict(e);
        cli_json_key_u64(e, "free_bytes", x->pools[p].free_bytes);
        cli_json_key_u64(e, "largest_free", x->pools[p].largest_free);
        cli_json_key_u64(e, "free_blocks", x->pools[p].free_blocks);
        cli_json_key_u64(e, "segments_with_free", x->pools[p].segments_with_free);
        emitter_end(e);
    }
    emitter_end(e);
    cli_json_key_u64(e, "largest_fit", x->largest_fit);
    emitter_key(e, "segments");
    emitter_begin_list(e);
    for (size_t i = 0; i < x->nsegments; i++) {
        const struct explain_segment *g = &x->segments[i];
        emitter_begin_dict(e);
        cli_json_key_u64(e, "address", g->addr);
        cli_json_key_u64(e, "size", g->size);
        cli_json_key_u64(e, "free_bytes", g->free_bytes);
        cli_json_key_u64(e, "largest_free", g->largest_free);
        cli_json_key_u64(e, "stream", g->stream);
        cli_json_key_string(e, "pool", g->small ? "small" : "large");
        emitter_key(e, "expandable");
        emitter_bool(e, g->expandable);
        emitter_end(e);
    }
    emitter_end(e);
    emitter_key(e, "sites");
    emitter_begin_list(e);
    for (size_t i = 0; i < x->nsites; i++) {
        emitter_begin_dict(e);
        cli_json_key_u64(e, "bytes", x->sites[i].bytes);
        cli_json_key_u64(e, "count", x->sites[i].count);
        emitter_key(e, "frames");
        cli_json_frames(e, x->snap, x->sites[i].stack);
        emitter_end(e);
    }
    emitter_end(e);
}

static void
json_verdict(struct emitter *e, const struct explain *x)
{
    static const struct {
        unsigned flag;
        const char *name;
    } kinds[] = {{EXPLAIN_LIVE_EXCEEDS, "live_exceeds"},
                 {EXPLAIN_OUTSIDE, "outside"},
                 {EXPLAIN_CAP, "cap"},
                 {EXPLAIN_FRAGMENTATION, "fragmentation"},
                 {EXPLAIN_DRIVER, "driver"},
                 {EXPLAIN_DRIVER_OWN, "driver_own"}};
    emitter_key(e, "settings");
    emitter_begin_dict(e);
    cli_json_key_string(e, "recorded", x->recorded_conf);
    emitter_key(e, "fraction");
    emitter_float(e, x->fraction);
    cli_json_key_u64(e, "allowed", x->allowed);
    emitter_end(e);
    emitter_key(e, "verdict");
    emitter_begin_dict(e);
    emitter_key(e, "kinds");
    emitter_begin_list(e);
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        if (x->verdict & kinds[k].flag)
            emitter_string(e, kinds[k].name);
    emitter_end(e);
    cli_json_key_u64(e, "missing", x->missing);
    emitter_key(e, "cache_caused");
    emitter_bool(e, x->cache_caused);
    cli_json_key_u64(e, "free_without_cache", x->free_without_cache);
    emitter_end(e);
    emitter_key(e, "exactness");
    emitter_begin_dict(e);
    emitter_key(e, "mid_run");
    emitter_bool(e, x->mid_run);
    cli_json_key_u64(e, "dropped_entries", x->dropped);
    emitter_key(e, "state_from_replay");
    emitter_bool(e, x->state_from_replay);
    cli_json_key_u64(e, "start_misses", x->start_misses);
    cli_json_key_u64(e, "checked", x->checked);
    cli_json_key_u64(e, "reproduced", x->reproduced);
    emitter_key(e, "oom_reproduced");
    emitter_bool(e, x->baseline_oom);
    emitter_end(e);
}

static void
json_whatif(struct emitter *e, const struct explain *x)
{
    emitter_key(e, "whatif");
    emitter_begin_list(e);
    for (size_t i = 0; i < x->nwhatifs; i++) {
        const struct explain_whatif *w = &x->whatifs[i];
        emitter_begin_dict(e);
        cli_json_key_string(e, "label", w->label);
        cli_json_key_string(e, "setting", w->conf);
        emitter_key(e, "recorded");
        emitter_bool(e, w->recorded);
        emitter_key(e, "ok");
        emitter_bool(e, w->ok);
        emitter_key(e, "avoided");
        if (!explain_request_passed(x) && x->is_oom)
            emitter_bool(e, w->avoided);
        else
            emitter_none(e);
        cli_json_key_u64(e, "ooms", w->ooms);
        cli_json_key_u64(e, "peak_reserved", w->peak_reserved);
        cli_json_key_u64(e, "peak_allocated", w->peak_allocated);
        cli_json_key_u64(e, "device_allocs", w->device_allocs);
        emitter_key(e, "kept_reserved"); /* a driver's own refusal: what the cache kept there */
        if (w->kept_known)
            emitter_u64(e, w->kept_reserved);
        else
            emitter_none(e);
        emitter_end(e);
    }
    emitter_end(e);
}

bool
explain_print_json(FILE *out, const char *path, const struct explain *x)
{
    static const char *const chosen[] = {"oom", "oom", "peak", "entry", "oom"};
    struct emitter *e = cli_json_open(out);
    if (e == NULL)
        return false;
    emitter_begin_dict(e);
    cli_json_key_string(e, "file", path);
    cli_json_key_u64(e, "device", x->device);
    cli_json_key_u64(e, "entries", x->count);
    cli_json_key_u64(e, "at", x->at);
    cli_json_key_string(e, "chosen", chosen[x->chosen]);
    emitter_key(e, "is_oom");
    emitter_bool(e, x->is_oom);
    cli_json_key_u64(e, "ooms", x->oom_count);
    emitter_key(e, "driver_call");
    if (x->driver_call != NULL)
        cli_json_string(e, x->driver_call);
    else
        emitter_none(e);
    cli_json_key_u64(e, "driver_ooms", x->driver_ooms);
    emitter_key(e, "driver_message");
    if (x->driver_call != NULL && x->message != NULL)
        cli_json_string(e, x->message);
    else
        emitter_none(e);
    json_request(e, x);
    json_device(e, x);
    json_verdict(e, x);
    json_whatif(e, x);
    emitter_end(e);
    return cli_json_close(e);
}
