/* cmd_leaks.c: `cuprof leaks FILE`: blocks still allocated at the end, grouped by stack. */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/allocator.h"
#include "cli/analysis.h"
#include "cli/cli_commands.h"
#include "cli/cli_util.h"
#include "cli/frame_filter.h"

static const char usage_text[] =
    "usage: cuprof leaks [--json] [--top N] [--all-frames] FILE\n\n"
    "Lists the blocks still allocated (state active_allocated) when FILE was written, grouped by\n"
    "allocation stack, largest total first, with block counts: compute-sanitizer's leak check,\n"
    "but it sees through the caching allocator (a block the program never freed stays\n"
    "allocated even though cuprof keeps the segment cached). Stacks that differ only in\n"
    "frames of the allocation machinery (cuprof, CUDA, PyTorch's allocator, the Python\n"
    "interpreter, libc start-up) are one call site, shown from the user's first frame.\n"
    "Exit status 1 when anything leaked, 0 when nothing did, 2 on bad input.\n\n"
    "  --json        one JSON object: {\"leaked_bytes\", \"leaked_blocks\", \"sites\": [{device,\n"
    "                bytes, requested_bytes, blocks, frames}]}\n"
    "  --top N       call sites to list (default all)\n"
    "  --all-frames  hide no frame: a call site is a whole stack, named by its innermost frame\n"
    "  -h, --help    this text\n";

struct leak_site {
    int32_t device;
    uint32_t stack;
    uint64_t bytes, requested, blocks;
};

static int
cmp_leak(const void *a, const void *b)
{
    const struct leak_site *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? 1 : -1;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    return (x->stack > y->stack) - (x->stack < y->stack);
}

/* Groups the allocated blocks by (device, stack); returns the count or -1. */
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
            uint64_t key = (((uint64_t)(uint32_t)seg->device << 32) | b->stack) + 1;
            struct span_map_item *it = span_map_get(&index, key);
            if (it == NULL) {
                if (n == cap) {
                    cap = cap ? cap * 2 : 16;
                    struct leak_site *bigger = realloc(sites, cap * sizeof(*sites));
                    if (bigger == NULL)
                        goto fail;
                    sites = bigger;
                }
                memset(&sites[n], 0, sizeof(sites[n]));
                sites[n].device = seg->device;
                sites[n].stack = b->stack;
                if (span_map_put(&index, key, n, 0) != 0)
                    goto fail;
                it = span_map_get(&index, key);
                n++;
            }
            struct leak_site *ls = &sites[it->size];
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

int
cmd_leaks(int argc, char **argv)
{
    static const struct option options[] = {
        {"json", no_argument, NULL, 'j'},
        {"top", required_argument, NULL, 't'},
        {"all-frames", no_argument, NULL, 'A'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool json = false, all_frames = false;
    uint64_t top = UINT64_MAX;
    struct cli_options o = {.cmd = "leaks",
                            .usage = usage_text,
                            .shortopts = "jt:h",
                            .longopts = options,
                            .unknown = "unknown option",
                            .operands = 1,
                            .operands_error = "expected one snapshot FILE"};
    int c;
    while ((c = cli_next_option(&o, argc, argv)) != -1) {
        switch (c) {
        case 'j':
            json = true;
            break;
        case 't':
            if (!cli_parse_u64(optarg, &top))
                return cli_usage_error("leaks", "--top wants a number, not \"%s\"", optarg);
            break;
        case 'A':
            all_frames = true;
            break;
        }
    }
    if (o.finished)
        return o.status;
    const char *path = argv[optind];
    struct snapshot *snap;
    int rc = frame_filter_load(path, all_frames, &snap);
    if (rc != CLI_OK)
        return rc;
    struct leak_site *sites = NULL;
    long n = collect(snap, &sites);
    if (n < 0) {
        fprintf(stderr, "cuprof: %s: out of memory\n", path);
        snapshot_free(snap);
        return CLI_BADUSE;
    }
    uint64_t bytes = 0, blocks = 0, requested = 0;
    for (long i = 0; i < n; i++) {
        bytes += sites[i].bytes;
        blocks += sites[i].blocks;
        requested += sites[i].requested;
    }
    char s1[32], s2[32];
    if (json) {
        printf("{\"file\": ");
        cli_json_string(stdout, path);
        printf(", \"leaked_bytes\": %" PRIu64 ", \"leaked_requested_bytes\": %" PRIu64
               ", \"leaked_blocks\": %" PRIu64 ", \"sites\": [",
               bytes, requested, blocks);
        for (long i = 0; i < n && (uint64_t)i < top; i++) {
            printf("%s\n  {\"device\": %" PRId32 ", \"bytes\": %" PRIu64
                   ", \"requested_bytes\": %" PRIu64 ", \"blocks\": %" PRIu64 ", \"frames\": ",
                   i ? "," : "", sites[i].device, sites[i].bytes, sites[i].requested,
                   sites[i].blocks);
            cli_json_frames(stdout, snap, sites[i].stack);
            printf("}");
        }
        printf("%s]}\n", n ? "\n" : "");
    } else if (n == 0) {
        printf("%s: no leaks: every block was freed\n", path);
    } else {
        printf("%s: %" PRIu64 " block%s still allocated, %s (%s requested), from %ld call "
               "site%s\n",
               path, blocks, blocks == 1 ? "" : "s", cli_size(bytes, s1, sizeof(s1)),
               cli_size(requested, s2, sizeof(s2)), n, n == 1 ? "" : "s");
        for (long i = 0; i < n && (uint64_t)i < top; i++) {
            printf("  %s in %" PRIu64 " block%s on device %" PRId32 " (%" PRIu64 " bytes, %" PRIu64
                   " requested)\n",
                   cli_size(sites[i].bytes, s1, sizeof(s1)), sites[i].blocks,
                   sites[i].blocks == 1 ? "" : "s", sites[i].device, sites[i].bytes,
                   sites[i].requested);
            cli_print_stack(stdout, snap, sites[i].stack, 6, 16);
        }
        if ((uint64_t)n > top)
            printf("  ... %" PRIu64 " more call sites\n", (uint64_t)n - top);
    }
    free(sites);
    snapshot_free(snap);
    return n > 0 ? CLI_FOUND : CLI_OK;
}
