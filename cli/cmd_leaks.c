/* cmd_leaks.c: `cuprof leaks FILE`: blocks still allocated at the end, grouped by stack. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/allocator.h"
#include "cli/analysis.h"
#include "cli/cli_commands.h"
#include "cli/cli_options.h"
#include "cli/cli_util.h"

static const char leaks_text[] =
    "usage: cuprof leaks [--json] [--top N] [--all-frames] FILE\n\n"
    "Lists the blocks still allocated (state active_allocated) when FILE was written, grouped by\n"
    "allocation stack, largest total first, with block counts: compute-sanitizer's leak check,\n"
    "but it sees through the caching allocator (a block the program never freed stays\n"
    "allocated even though cuprof keeps the segment cached). Stacks that differ only in\n"
    "frames of the allocation machinery (cuprof, CUDA, PyTorch's allocator, the Python\n"
    "interpreter, libc start-up) are one call site, shown from the user's first frame.\n"
    "A program's own pool told to tools through NVTX (its regions: nvtxMemRegionsRegister) is\n"
    "seen inside: a region never unregistered is a leaked block, named by its NVTX name.\n"
    "Exit status 1 when anything leaked, 0 when nothing did, 2 on bad input.\n\n";

static const struct cli_option leaks_options[] = {
    {"json", 'j', NULL,
     "one JSON object: {\"leaked_bytes\", \"leaked_blocks\", \"sites\": [{device, bytes, "
     "requested_bytes, blocks, name (an NVTX region's), frames}]}",
     0},
    {"top", 't', "N", "call sites to list (default all)", 0},
    {"all-frames", 0, NULL,
     "hide no frame: a call site is a whole stack, named by its innermost frame", CLI_ALL_FRAMES},
    {0},
};

struct leaks_args {
    bool json;
    uint64_t top;
};

static int
leaks_option(void *ctx, int key, const char *value)
{
    struct leaks_args *a = ctx;
    if (key == 'j')
        a->json = true;
    else if (key == 't' && !cli_parse_u64(value, &a->top))
        return cli_usage_error("leaks", "--top wants a number, not \"%s\"", value);
    return CLI_OK;
}

const struct cli_command cmd_leaks_command = {
    .name = "leaks",
    .text = leaks_text,
    .options = leaks_options,
    .unknown = "unknown option",
    .operands = 1,
    .operands_error = "expected one snapshot FILE",
    .option = leaks_option,
    .read = 1,
    .filter_frames = true,
};

struct leak_site {
    int32_t device;
    uint32_t stack;
    const char *name; /* an NVTX region's name (the model's interned text), or NULL */
    uint64_t bytes, requested, blocks;
    long next; /* the next site of the same (device, stack) with another name, or -1 */
};

static int
cmp_leak(const void *a, const void *b)
{
    const struct leak_site *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? 1 : -1;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    if (x->stack != y->stack)
        return (x->stack > y->stack) - (x->stack < y->stack);
    return strcmp(x->name ? x->name : "", y->name ? y->name : "");
}

/* The site of (device, stack, name) among those `index` knows, made when new; -1 on OOM. */
static long
site_of(struct span_map *index, struct leak_site **sites, size_t *n, size_t *cap, int32_t device,
        uint32_t stack, const char *name)
{
    uint64_t key = (((uint64_t)(uint32_t)device << 32) | stack) + 1;
    struct span_map_item *it = span_map_get(index, key);
    long first = it != NULL ? (long)it->size : -1, last = -1;
    for (long i = first; i >= 0; last = i, i = (*sites)[i].next)
        if ((*sites)[i].name == name) /* interned: one pointer per text */
            return i;
    if (*n == *cap) {
        size_t grown = *cap ? *cap * 2 : 16;
        struct leak_site *bigger = realloc(*sites, grown * sizeof(**sites));
        if (bigger == NULL)
            return -1;
        *sites = bigger;
        *cap = grown;
    }
    (*sites)[*n] = (struct leak_site){.device = device, .stack = stack, .name = name, .next = -1};
    if (last >= 0)
        (*sites)[last].next = (long)*n;
    else if (span_map_put(index, key, *n, 0) != 0)
        return -1;
    return (long)(*n)++;
}

/* Groups the allocated blocks by (device, stack, name); returns the count or -1. */
static long
collect(const struct snapshot *snap, struct leak_site **out)
{
    struct leak_site *sites = NULL;
    size_t n = 0, cap = 0;
    struct span_map index; /* (device << 32 | stack) + 1 -> position in sites */
    span_map_init(&index);
    for (size_t s = 0; s < snap->segment_count; s++) {
        const struct snap_segment *seg = &snap->segments[s];
        for (uint32_t k = 0; k < seg->block_count; k++) {
            const struct snap_block *b = &snap->blocks[seg->first_block + k];
            if (b->state != BLOCK_ACTIVE_ALLOCATED)
                continue;
            long at = site_of(&index, &sites, &n, &cap, seg->device, b->stack, b->label);
            if (at < 0)
                goto fail;
            struct leak_site *ls = &sites[at];
            ls->bytes += b->size;
            ls->requested += b->requested_size;
            ls->blocks++;
        }
    }
    span_map_free(&index);
    if (n > 1)
        qsort(sites, n, sizeof(*sites), cmp_leak);
    *out = sites;
    return (long)n;
fail:
    span_map_free(&index);
    free(sites);
    return -1;
}

/* The totals of every site. */
static struct leak_site
leak_totals(const struct leak_site *sites, long n)
{
    struct leak_site all = {0};
    for (long i = 0; i < n; i++) {
        all.bytes += sites[i].bytes;
        all.blocks += sites[i].blocks;
        all.requested += sites[i].requested;
    }
    return all;
}

static bool
print_json(const char *path, const struct snapshot *snap, const struct leak_site *sites, long n,
           uint64_t top)
{
    struct leak_site all = leak_totals(sites, n);
    struct emitter *e = cli_json_open(stdout);
    if (e == NULL)
        return false;
    emitter_begin_dict(e);
    cli_json_key_string(e, "file", path);
    cli_json_key_u64(e, "leaked_bytes", all.bytes);
    cli_json_key_u64(e, "leaked_requested_bytes", all.requested);
    cli_json_key_u64(e, "leaked_blocks", all.blocks);
    emitter_key(e, "sites");
    emitter_begin_list(e);
    for (long i = 0; i < n && (uint64_t)i < top; i++) {
        emitter_begin_dict(e);
        cli_json_key_int(e, "device", sites[i].device);
        cli_json_key_u64(e, "bytes", sites[i].bytes);
        cli_json_key_u64(e, "requested_bytes", sites[i].requested);
        cli_json_key_u64(e, "blocks", sites[i].blocks);
        if (sites[i].name != NULL)
            cli_json_key_string(e, "name", sites[i].name); /* an NVTX region's */
        emitter_key(e, "frames");
        cli_json_frames(e, snap, sites[i].stack);
        emitter_end(e);
    }
    emitter_end(e);
    emitter_end(e);
    return cli_json_close(e);
}

static void
print_text(const char *path, const struct snapshot *snap, const struct leak_site *sites, long n,
           uint64_t top)
{
    char safe[1024];
    path = cli_term(path, safe, sizeof safe);
    if (n == 0) {
        printf("%s: no leaks: every block was freed\n", path);
        return;
    }
    struct leak_site all = leak_totals(sites, n);
    char s1[32], s2[32];
    printf("%s: %" PRIu64 " block%s still allocated, %s (%s requested), from %ld call "
           "site%s\n",
           path, all.blocks, all.blocks == 1 ? "" : "s", cli_size(all.bytes, s1, sizeof(s1)),
           cli_size(all.requested, s2, sizeof(s2)), n, n == 1 ? "" : "s");
    for (long i = 0; i < n && (uint64_t)i < top; i++) {
        printf("  %s in %" PRIu64 " block%s on device %" PRId32 " (%" PRIu64 " bytes, %" PRIu64
               " requested)\n",
               cli_size(sites[i].bytes, s1, sizeof(s1)), sites[i].blocks,
               sites[i].blocks == 1 ? "" : "s", sites[i].device, sites[i].bytes,
               sites[i].requested);
        if (sites[i].name != NULL) {
            fputs("    NVTX region \"", stdout);
            cli_fputs_term(sites[i].name, stdout);
            fputs("\" of the program's own pool\n", stdout);
        }
        cli_print_stack(stdout, snap, sites[i].stack, 6, 16);
    }
    if ((uint64_t)n > top)
        printf("  ... %" PRIu64 " more call sites\n", (uint64_t)n - top);
}

int
cmd_leaks(int argc, char **argv)
{
    struct leaks_args args = {.top = UINT64_MAX};
    struct cli_input in;
    if (!cli_begin(&cmd_leaks_command, argc, argv, &args, &in))
        return in.status;
    struct leak_site *sites = NULL;
    long n = collect(in.snap[0], &sites);
    if (n < 0) {
        char safe[1024];
        fprintf(stderr, "cuprof: %s: out of memory\n", cli_term(in.paths[0], safe, sizeof safe));
        cli_input_free(&in);
        return CLI_BADUSE;
    }
    int status = n > 0 ? CLI_FOUND : CLI_OK;
    if (!args.json)
        print_text(in.paths[0], in.snap[0], sites, n, args.top);
    else if (!print_json(in.paths[0], in.snap[0], sites, n, args.top))
        status = CLI_BADUSE;
    free(sites);
    cli_input_free(&in);
    return status;
}
