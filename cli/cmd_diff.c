/* cmd_diff.c: `cuprof diff A B`: two runs (or two dumps of one, or two ranks) compared, as text or
 *   JSON; the figures are run_diff's (cli/run_diff.h), this file only prints them. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli/analysis.h"
#include "cli/cli_commands.h"
#include "cli/cli_options.h"
#include "cli/cli_util.h"
#include "cli/diff_print.h"
#include "cli/run_diff.h"

static const char diff_text[] =
    "usage: cuprof diff [--json] [--top N] [--all-frames] A B\n\n"
    "Compares two snapshots: two runs of a program (A the earlier, B the new one), two dumps of\n"
    "one run, or two ranks. Per device:\n"
    "  - peak allocated and peak reserved bytes side by side, with where each happened (the\n"
    "    trace entry, its time since the history began, and the call site that made the\n"
    "    peak), bytes at the end, device allocations and frees made (segment_alloc and\n"
    "    segment_free entries; cuprof's own counters for the whole run in --json) and OOMs;\n"
    "  - call sites compared at each run's own peak of allocated bytes, and at the end;\n"
    "  - reserved memory by segment: segments matched by size, pool and the call site that\n"
    "    made them (never by address, which differs from run to run): new in B, released.\n"
    "Call sites are matched by their frames, so the files need not share stack indices or\n"
    "addresses; a site whose lines moved (the program was edited) is matched by its\n"
    "functions and files when that match is unique. Stacks that differ only in frames of the\n"
    "allocation machinery (cuprof, CUDA, PyTorch's allocator, the Python interpreter, libc\n"
    "start-up) are one call site, shown from the user's first frame. \"Allocated\" bytes are\n"
    "requested sizes of allocations not yet freed, as the trace records them.\n\n";

static const char diff_epilog[] =
    "--json writes one object: \"a\" and \"b\" (the files), \"growth_bytes\" (allocated bytes at\n"
    "the end, B - A), \"sites\" (the call sites at the end that changed: device, a_bytes,\n"
    "b_bytes, a_count, b_count, growth, frames) and \"devices\": per device \"a\" and \"b\"\n"
    "(present, entries, dropped_entries, mid_run, peak_allocated and peak_reserved as {bytes,\n"
    "entry, time_us, seconds, frames}, end_allocated, end_reserved, segments, segment_allocs,\n"
    "segment_frees, segment_maps, segment_unmaps, counted_allocs, counted_frees (null without\n"
    "cuprof's counters), ooms, driver_ooms (the driver's own calls refused for lack of\n"
    "memory), leaked_bytes, leaked_blocks), the growth of each peak, \"sites_at_peak\",\n"
    "\"sites_at_end\", \"segment_kinds\" (size, pool, expandable, pool_id, a_count, b_count,\n"
    "frames) and the totals reserved_a/b, segments_a/b, new_segments, new_bytes,\n"
    "released_segments, released_bytes.\n";

static const struct cli_option diff_options[] = {
    {"json", 'j', NULL, "one JSON object (below) instead of the text", 0},
    {"top", 't', "N", "call sites to list in each comparison (default 20)", 0},
    {"all-frames", 0, NULL,
     "hide no frame: a call site is a whole stack, named by its innermost frame", CLI_ALL_FRAMES},
    {0},
};

struct diff_args {
    bool json;
    uint64_t top;
};

static int
diff_option(void *ctx, int key, const char *value)
{
    struct diff_args *a = ctx;
    if (key == 'j')
        a->json = true;
    else if (key == 't' && !cli_parse_u64(value, &a->top))
        return cli_usage_error("diff", "--top: bad value \"%s\": expected a number", value);
    return CLI_OK;
}

const struct cli_command cmd_diff_command = {
    .name = "diff",
    .text = diff_text,
    .options = diff_options,
    .epilog = diff_epilog,
    .unknown = "unknown option",
    .operands = 2,
    .operands_error = "expected two snapshot files A and B",
    .option = diff_option,
    .read = 2,
    .filter_frames = true,
};

/* ---- JSON ------------------------------------------------------------------------------------ */

static void
emit_peak(struct emitter *e, const struct snapshot *snap, const struct run_peak *p)
{
    emitter_begin_dict(e);
    cli_json_key_u64(e, "bytes", p->bytes);
    emitter_key(e, "entry"); /* the entry that made it; null: the state at the start */
    if (p->at > 0)
        emitter_u64(e, p->at - 1);
    else
        emitter_none(e);
    emitter_key(e, "time_us");
    if (p->has_time)
        emitter_int(e, p->time_us);
    else
        emitter_none(e);
    emitter_key(e, "seconds"); /* since the history's first entry */
    if (p->has_time)
        emitter_float(e, (double)p->since_us / 1e6);
    else
        emitter_none(e);
    emitter_key(e, "frames");
    cli_json_frames(e, snap, p->at > 0 ? p->stack : 0);
    emitter_end(e);
}

static void
emit_counter(struct emitter *e, const char *key, int64_t v)
{
    emitter_key(e, key);
    if (v >= 0)
        emitter_int(e, v);
    else
        emitter_none(e);
}

static void
emit_side(struct emitter *e, const struct snapshot *snap, const struct run_side *s)
{
    emitter_begin_dict(e);
    emitter_key(e, "present");
    emitter_bool(e, s->present);
    cli_json_key_u64(e, "entries", s->entries);
    cli_json_key_u64(e, "dropped_entries", s->dropped);
    emitter_key(e, "mid_run");
    emitter_bool(e, s->mid_run);
    emitter_key(e, "peak_allocated");
    emit_peak(e, snap, &s->allocated);
    emitter_key(e, "peak_reserved");
    emit_peak(e, snap, &s->reserved);
    cli_json_key_u64(e, "end_allocated", s->end_allocated);
    cli_json_key_u64(e, "end_reserved", s->end_reserved);
    cli_json_key_u64(e, "segments", s->segments);
    cli_json_key_u64(e, "segment_allocs", s->segment_allocs);
    cli_json_key_u64(e, "segment_frees", s->segment_frees);
    cli_json_key_u64(e, "segment_maps", s->segment_maps);
    cli_json_key_u64(e, "segment_unmaps", s->segment_unmaps);
    emit_counter(e, "counted_allocs", s->counted_allocs);
    emit_counter(e, "counted_frees", s->counted_frees);
    cli_json_key_u64(e, "ooms", s->ooms);
    cli_json_key_u64(e, "driver_ooms", s->driver_ooms);
    cli_json_key_u64(e, "leaked_bytes", s->leaked_bytes);
    cli_json_key_u64(e, "leaked_blocks", s->leaked_blocks);
    emitter_end(e);
}

static void
emit_site(struct emitter *e, const struct snapshot *a, const struct snapshot *b,
          const struct run_site *r, size_t device)
{
    emitter_begin_dict(e);
    cli_json_key_u64(e, "device", device);
    cli_json_key_u64(e, "a_bytes", r->bytes_a);
    cli_json_key_u64(e, "b_bytes", r->bytes_b);
    cli_json_key_u64(e, "a_count", r->count_a);
    cli_json_key_u64(e, "b_count", r->count_b);
    cli_json_key_int(e, "growth", r->growth);
    emitter_key(e, "frames");
    if (r->stack_b != 0 || r->stack_a == 0)
        cli_json_frames(e, b, r->stack_b);
    else
        cli_json_frames(e, a, r->stack_a);
    emitter_end(e);
}

static void
emit_sites(struct emitter *e, const struct snapshot *a, const struct snapshot *b,
           const struct run_device_diff *d, const struct run_site *rows, size_t n, uint64_t top)
{
    emitter_begin_list(e);
    for (size_t i = 0, k = 0; i < n && k < top; i++)
        if (rows[i].growth != 0) {
            emit_site(e, a, b, &rows[i], d->device);
            k++;
        }
    emitter_end(e);
}

static void
emit_segment_kinds(struct emitter *e, const struct snapshot *a, const struct snapshot *b,
                   const struct run_device_diff *d)
{
    emitter_begin_list(e);
    for (size_t i = 0; i < d->segment_kinds; i++) {
        const struct run_segments *k = &d->segments[i];
        emitter_begin_dict(e);
        cli_json_key_u64(e, "size", k->size);
        cli_json_key_string(e, "pool", k->is_small ? "small" : "large");
        emitter_key(e, "expandable");
        emitter_bool(e, k->is_expandable);
        emitter_key(e, "pool_id");
        emitter_begin_list(e);
        emitter_int(e, k->pool_id[0]);
        emitter_int(e, k->pool_id[1]);
        emitter_end(e);
        cli_json_key_u64(e, "a_count", k->count_a);
        cli_json_key_u64(e, "b_count", k->count_b);
        emitter_key(e, "frames");
        if (k->stack_b != 0 || k->count_a == 0)
            cli_json_frames(e, b, k->stack_b);
        else
            cli_json_frames(e, a, k->stack_a);
        emitter_end(e);
    }
    emitter_end(e);
}

static void
emit_device(struct emitter *e, const struct snapshot *a, const struct snapshot *b,
            const struct run_device_diff *d, uint64_t top)
{
    emitter_begin_dict(e);
    cli_json_key_u64(e, "device", d->device);
    emitter_key(e, "a");
    emit_side(e, a, &d->a);
    emitter_key(e, "b");
    emit_side(e, b, &d->b);
    cli_json_key_int(e, "peak_allocated_growth",
                     run_diff_growth(d->a.allocated.bytes, d->b.allocated.bytes));
    cli_json_key_int(e, "peak_reserved_growth",
                     run_diff_growth(d->a.reserved.bytes, d->b.reserved.bytes));
    emitter_key(e, "sites_at_peak");
    emit_sites(e, a, b, d, d->at_peak, d->at_peak_count, top);
    emitter_key(e, "sites_at_end");
    emit_sites(e, a, b, d, d->at_end, d->at_end_count, top);
    emitter_key(e, "segment_kinds");
    emit_segment_kinds(e, a, b, d);
    cli_json_key_u64(e, "reserved_a", d->a.end_reserved);
    cli_json_key_u64(e, "reserved_b", d->b.end_reserved);
    cli_json_key_u64(e, "segments_a", d->a.segments);
    cli_json_key_u64(e, "segments_b", d->b.segments);
    cli_json_key_u64(e, "new_segments", d->new_segments);
    cli_json_key_u64(e, "new_bytes", d->new_bytes);
    cli_json_key_u64(e, "released_segments", d->released_segments);
    cli_json_key_u64(e, "released_bytes", d->released_bytes);
    emitter_end(e);
}

static bool
print_json(const struct run_diff *diff, uint64_t top, const struct snapshot *a,
           const struct snapshot *b, char **paths)
{
    size_t n;
    struct diff_end_site *ends = diff_end_sites(diff, &n);
    struct emitter *e = n != SIZE_MAX ? cli_json_open(stdout) : NULL;
    if (e == NULL) {
        free(ends);
        return false;
    }
    emitter_begin_dict(e);
    cli_json_key_string(e, "a", paths[0]);
    cli_json_key_string(e, "b", paths[1]);
    cli_json_key_int(e, "growth_bytes", diff->end_growth);
    /* Every device's changed sites at the end, largest growth first, top N in all. */
    emitter_key(e, "sites");
    emitter_begin_list(e);
    for (size_t i = 0; i < n && i < top; i++)
        emit_site(e, a, b, ends[i].r, ends[i].d->device);
    emitter_end(e);
    emitter_key(e, "devices");
    emitter_begin_list(e);
    for (size_t i = 0; i < diff->device_count; i++)
        emit_device(e, a, b, &diff->devices[i], top);
    emitter_end(e);
    emitter_end(e);
    free(ends);
    return cli_json_close(e);
}

int
cmd_diff(int argc, char **argv)
{
    struct diff_args args = {.top = 20};
    struct cli_input in;
    if (!cli_begin(&cmd_diff_command, argc, argv, &args, &in))
        return in.status;
    struct run_diff diff;
    int status = CLI_OK;
    if (run_diff_make(in.snap[0], in.snap[1], &diff) != 0) {
        fprintf(stderr, "cuprof: diff: out of memory\n");
        status = CLI_BADUSE;
    } else {
        if (args.json) {
            if (!print_json(&diff, args.top, in.snap[0], in.snap[1], in.paths))
                status = CLI_BADUSE;
        } else if (!diff_print_text(stdout, &diff, args.top, in.snap[0], in.snap[1], in.paths)) {
            fprintf(stderr, "cuprof: diff: out of memory\n");
            status = CLI_BADUSE;
        }
        run_diff_free(&diff);
    }
    cli_input_free(&in);
    return status;
}
