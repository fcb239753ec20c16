/* cli_commands.h: the cuprof subcommands; each takes its own argv (argv[0] is the subcommand name)
 *   and returns the process exit status (enum cli_exit, or PROG's status for `run`).
 * Locking: none (single-threaded command).
 * Hot path: no. */
#ifndef CUPROF_CLI_COMMANDS_H
#define CUPROF_CLI_COMMANDS_H

#include <stdio.h>

#include "cli/cli_options.h"
#include "snapshot/snapshot_model.h"

int cmd_run(int argc, char **argv);
int cmd_summary(int argc, char **argv);
int cmd_leaks(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_flamegraph(int argc, char **argv);
int cmd_timeline(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_ps(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_explain(int argc, char **argv);
int cmd_tune(int argc, char **argv);

/* Each subcommand's options and help (cli_options.h). */
extern const struct cli_command cmd_run_command;
extern const struct cli_command cmd_summary_command;
extern const struct cli_command cmd_leaks_command;
extern const struct cli_command cmd_diff_command;
extern const struct cli_command cmd_check_command;
extern const struct cli_command cmd_replay_command;
extern const struct cli_command cmd_flamegraph_command;
extern const struct cli_command cmd_timeline_command;
extern const struct cli_command cmd_plot_command;
extern const struct cli_command cmd_stats_command;
extern const struct cli_command cmd_ps_command;
extern const struct cli_command cmd_dump_command;
extern const struct cli_command cmd_top_command;
extern const struct cli_command cmd_explain_command;
extern const struct cli_command cmd_tune_command;

/* The summary of one loaded snapshot; `brief` keeps it to one screen (used by `run`). Returns 0,
 * or -1 when host memory runs out. */
__attribute__((warn_unused_result)) int
summary_print(FILE *out, const char *path, const struct snapshot *snap, bool brief, size_t top);

/* The memory_stats of device `device`: cuprof's recorded counters when the snapshot has them,
 * else rebuilt from the block table (current values; peaks from the trace). Returns true when
 * they came from the recorded counters. */
struct memory_stats;
bool stats_for_device(const struct snapshot *snap, size_t device, struct memory_stats *out);

#endif
