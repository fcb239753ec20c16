/* main.c: `cuprof SUBCOMMAND ...`: dispatch, global usage, --version. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli_commands.h"
#include "cli/cli_util.h"
#include "cli/out_file.h"

struct subcommand {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *what;
};

static const struct subcommand subcommands[] = {
    {"run", cmd_run, "run a program under the profiler and summarize its snapshot"},
    {"summary", cmd_summary, "memory_summary table, peaks, fragmentation, top call sites, OOMs"},
    {"leaks", cmd_leaks, "blocks still allocated at the end, by stack (exit 1 if any)"},
    {"explain", cmd_explain, "why the device ran out of memory, and what would have avoided it"},
    {"diff", cmd_diff, "two runs compared: peaks side by side, call sites, segments"},
    {"check", cmd_check, "a memory gate for CI: budgets and growth against a baseline (exit 1)"},
    {"tune", cmd_tune, "search allocator settings by replay and recommend one"},
    {"replay", cmd_replay,
     "replay the recorded requests through the allocator with other settings"},
    {"plot", cmd_plot, "the report page: timeline, allocator state, flame graphs, call sites"},
    {"flamegraph", cmd_flamegraph, "flame graph of live bytes: folded stacks, or --html"},
    {"timeline", cmd_timeline, "Chrome trace-event / Perfetto JSON of memory over time"},
    {"stats", cmd_stats, "the memory_stats dict as JSON, PyTorch's key names"},
    {"ps", cmd_ps, "this user's running processes under cuprof, with their memory"},
    {"dump", cmd_dump, "make a running process write a snapshot now (no signal)"},
    {"top", cmd_top, "a live view of a running process's device memory and call sites"},
};

static void
usage(FILE *out)
{
    fprintf(out, "usage: cuprof SUBCOMMAND [OPTIONS] [ARGS]\n\n"
                 "A GPU memory profiler: records every device allocation of an unmodified CUDA\n"
                 "program through libcuprof.so and reads back the snapshots it writes (and the\n"
                 "ones PyTorch's torch.cuda.memory._dump_snapshot writes).\n\nsubcommands:\n");
    for (size_t i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
        fprintf(out, "  %-11s %s\n", subcommands[i].name, subcommands[i].what);
    fprintf(out, "\n`cuprof SUBCOMMAND --help` (or `cuprof help SUBCOMMAND`) describes each one.\n"
                 "Exit status: 0 ok, 1 a problem was found (leaks, replay differences, a budget\n"
                 "crossed), 2 bad usage or unreadable input; `run` exits with the program's\n"
                 "status.\n");
}

/* Edits (insert, delete, replace, swap two neighbours) from a to b; large past 32 characters. */
static size_t
edit_distance(const char *a, const char *b)
{
    enum { MAX = 32 };
    size_t la = strlen(a), lb = strlen(b);
    if (la > MAX || lb > MAX)
        return SIZE_MAX;
    size_t d[MAX + 1][MAX + 1];
    for (size_t i = 0; i <= la; i++)
        for (size_t j = 0; j <= lb; j++) {
            if (i == 0 || j == 0) {
                d[i][j] = i + j;
                continue;
            }
            size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

/* One line for a name that is no subcommand, with the closest one when a typo explains it. */
static int
unknown_subcommand(const char *name)
{
    const char *closest = NULL;
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++) {
        size_t d = edit_distance(name, subcommands[i].name);
        if (d < best) {
            best = d;
            closest = subcommands[i].name;
        }
    }
    char safe[1024];
    fprintf(stderr, "cuprof: unknown subcommand \"%s\"", cli_term(name, safe, sizeof safe));
    /* Two edits at most, and fewer than half the name: `ps` is no typo of `top`. */
    if (closest != NULL && best <= 2 && best * 2 < strlen(closest))
        fprintf(stderr, ": did you mean `%s`? (`cuprof --help` lists them all)\n", closest);
    else
        fprintf(stderr, " (`cuprof --help` lists them all)\n");
    return CLI_BADUSE;
}

/* The subcommand called `name`, or NULL. */
static const struct subcommand *
find_subcommand(const char *name)
{
    for (size_t i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
        if (strcmp(name, subcommands[i].name) == 0)
            return &subcommands[i];
    return NULL;
}

int
main(int argc, char **argv)
{
    out_file_stdout_begin();
    if (argc < 2) {
        fprintf(stderr, "cuprof: missing subcommand\n\n");
        usage(stderr);
        return CLI_BADUSE;
    }
    /* `cuprof help CMD` is `cuprof CMD --help`. */
    if (strcmp(argv[1], "help") == 0 && argc > 2) {
        const struct subcommand *sub = find_subcommand(argv[2]);
        if (sub == NULL)
            return unknown_subcommand(argv[2]);
        char *help_argv[] = {argv[2], "--help", NULL};
        int status = sub->run(2, help_argv);
        return out_file_stdout_done() == 0 ? status : CLI_BADUSE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return out_file_stdout_done() == 0 ? CLI_OK : CLI_BADUSE;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("cuprof %s\n", CUPROF_VERSION);
        return out_file_stdout_done() == 0 ? CLI_OK : CLI_BADUSE;
    }
    const struct subcommand *sub = find_subcommand(argv[1]);
    if (sub == NULL)
        return unknown_subcommand(argv[1]);
    int status = sub->run(argc - 1, argv + 1);
    /* Output lost on the way (a full disk, a closed pipe) is a failure, said in one line;
     * `run` still exits with PROG's status. */
    if (out_file_stdout_done() != 0 && sub->run != cmd_run)
        status = CLI_BADUSE;
    return status;
}
