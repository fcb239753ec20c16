/* library_report.c: the device-memory-by-library section (see library_report.h). */
#include "cli/library_report.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_util.h"
#include "snapshot/snapshot_usage.h"

#define NAME_WIDTH 26

static const struct snap_footprint *
footprint_of(const struct snapshot *snap, size_t device)
{
    for (size_t i = 0; i < snap->cuprof.footprint_count; i++)
        if ((size_t)snap->cuprof.footprints[i].device == device)
            return &snap->cuprof.footprints[i];
    return NULL;
}

bool
library_report_has(const struct snapshot *snap, size_t device)
{
    for (size_t i = 0; i < snap->cuprof.library_count; i++)
        if ((size_t)snap->cuprof.libraries[i].device == device)
            return true;
    return footprint_of(snap, device) != NULL;
}

/* "12.00 MiB / 18.00 MiB", padded to one column (the last one is not: no trailing blanks). */
static void
print_pair(FILE *out, uint64_t live, uint64_t peak, bool last)
{
    char a[32], b[32], both[72];
    snprintf(both, sizeof both, "%s / %s", cli_size(live, a, sizeof a),
             cli_size(peak, b, sizeof b));
    fprintf(out, last ? "  %s" : "  %-24s", both);
}

static void
print_footprint(FILE *out, const struct snap_footprint *fp, uint64_t reserved, uint64_t passthrough)
{
    char s[5][32];
    fprintf(out,
            "device footprint (device-wide, other processes count too): at start %s, at dump %s",
            fp->used_at_start >= 0 ? cli_size((uint64_t)fp->used_at_start, s[0], 32) : "unknown",
            fp->used_at_dump >= 0 ? cli_size((uint64_t)fp->used_at_dump, s[1], 32) : "unknown");
    if (fp->total >= 0)
        fprintf(out, " of %s", cli_size((uint64_t)fp->total, s[2], 32));
    fprintf(out, "\n  cuprof's reserved total %s, pass-through %s", cli_size(reserved, s[3], 32),
            cli_size(passthrough, s[4], 32));
    /* What the driver counts and cuprof never saw: contexts (code, stacks, buffers), other
     * processes, and memory taken around cuprof. */
    if (fp->used_at_dump >= 0 && (uint64_t)fp->used_at_dump >= reserved + passthrough)
        fprintf(out,
                "; not seen by cuprof: %s (contexts, other processes, memory taken around "
                "cuprof)",
                cli_size((uint64_t)fp->used_at_dump - reserved - passthrough, s[0], 32));
    /* Graph memory nodes allocate at each launch without a call cuprof could see. */
    if (fp->graph_reserved_at_dump > 0)
        fprintf(out, "; CUDA graphs' memory nodes hold %s of it",
                cli_size((uint64_t)fp->graph_reserved_at_dump, s[1], 32));
    fprintf(out, "\n");
}

void
library_report_print(FILE *out, const struct snapshot *snap, size_t device)
{
    if (!library_report_has(snap, device))
        return;
    const struct snap_cuprof *c = &snap->cuprof;
    uint64_t requested = 0, reserved = 0, passthrough = 0;
    bool header = false;
    for (size_t i = 0; i < c->library_count; i++) {
        const struct snap_library *r = &c->libraries[i];
        if ((size_t)r->device != device)
            continue;
        if (!header) {
            fprintf(out, "device memory by library (the first caller outside the CUDA libraries; "
                         "live / peak):\n");
            fprintf(out, "  %-*s  %-24s  %-24s  %-24s  %s\n", NAME_WIDTH, "library",
                    "cache: requested", "cache: segments reserved", "pass-through", "device");
            header = true;
        }
        char name[NAME_WIDTH + 16], safe[NAME_WIDTH + 16];
        snprintf(name, sizeof name, "%s%s", cli_term(snapshot_library_name(r), safe, sizeof safe),
                 r->is_program ? " (program)" : "");
        fprintf(out, "  %-*s", NAME_WIDTH, name);
        print_pair(out, r->cache_requested, r->cache_requested_peak, false);
        print_pair(out, r->cache_reserved, r->cache_reserved_peak, false);
        print_pair(out, r->passthrough, r->passthrough_peak, false);
        print_pair(out, r->device_bytes, r->device_bytes_peak, true);
        fprintf(out, "\n");
        requested += r->cache_requested;
        reserved += r->cache_reserved;
        passthrough += r->passthrough;
    }
    if (header) {
        char s[4][32];
        fprintf(out, "  %-*s  %-24s  %-24s  %-24s  %s\n", NAME_WIDTH, "all (live)",
                cli_size(requested, s[0], 32), cli_size(reserved, s[1], 32),
                cli_size(passthrough, s[2], 32), cli_size(reserved + passthrough, s[3], 32));
        fprintf(out, "  (cache: cuprof's caching allocator; a segment counts for the library "
                     "whose request made it; pass-through: managed, VMM, the driver's pools, "
                     "trace mode)\n");
    }
    const struct snap_footprint *fp = footprint_of(snap, device);
    if (fp != NULL)
        print_footprint(out, fp, reserved, passthrough);
}

char *
library_report_text(const struct snapshot *snap, size_t device)
{
    if (!library_report_has(snap, device))
        return NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (out == NULL)
        return NULL;
    library_report_print(out, snap, device);
    if (fclose(out) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

void
library_report_emit(struct emitter *e, const struct snapshot *snap, size_t device)
{
    if (!library_report_has(snap, device))
        return;
    const struct snap_cuprof *c = &snap->cuprof;
    uint64_t reserved = 0, passthrough = 0;
    emitter_key(e, "libraries");
    emitter_begin_list(e);
    for (size_t i = 0; i < c->library_count; i++) {
        const struct snap_library *r = &c->libraries[i];
        if ((size_t)r->device != device)
            continue;
        emitter_begin_dict(e);
        cli_json_key_string(e, "name", snapshot_library_name(r));
        cli_json_key_string(e, "path", r->path);
        emitter_key(e, "is_program");
        emitter_bool(e, r->is_program);
        const char *keys[] = {"cache_requested",     "cache_requested_peak", "cache_reserved",
                              "cache_reserved_peak", "passthrough",          "passthrough_peak",
                              "device_bytes",        "device_bytes_peak"};
        uint64_t values[] = {r->cache_requested,     r->cache_requested_peak, r->cache_reserved,
                             r->cache_reserved_peak, r->passthrough,          r->passthrough_peak,
                             r->device_bytes,        r->device_bytes_peak};
        for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
            cli_json_key_u64(e, keys[k], values[k]);
        emitter_end(e);
        reserved += r->cache_reserved;
        passthrough += r->passthrough;
    }
    emitter_end(e);
    const struct snap_footprint *fp = footprint_of(snap, device);
    if (fp == NULL)
        return;
    emitter_key(e, "footprint");
    emitter_begin_dict(e);
    cli_json_key_int(e, "total", fp->total);
    cli_json_key_int(e, "used_at_start", fp->used_at_start);
    cli_json_key_int(e, "used_at_dump", fp->used_at_dump);
    cli_json_key_int(e, "graph_reserved_at_dump", fp->graph_reserved_at_dump);
    cli_json_key_u64(e, "reserved", reserved);
    cli_json_key_u64(e, "passthrough", passthrough);
    emitter_end(e);
}
