/* cli_options.h: a subcommand's options written once, as a table that gives getopt_long its option
 *   lists, --help its option lines and the parser its checks; and the prologue the commands that
 *   read snapshots share: parse the options, then read the snapshot operands (glibc's argp model).
 * Locking: none (single-threaded command).
 * Hot path: no. */
#ifndef CUPROF_CLI_OPTIONS_H
#define CUPROF_CLI_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "snapshot/snapshot_model.h"

/* One option. A table ends with a zero entry; -h, --help is added to every command. */
struct cli_option {
    const char *name; /* long name without "--", or NULL for a short option alone */
    char short_name;  /* -x as well, or 0 */
    const char *arg;  /* the value's name in --help ("N"), or NULL for a flag */
    const char *help; /* wrapped under the option in --help; '\n' starts a new line */
    int key;          /* what the command's handler gets; 0 means short_name */
};

/* The key of `--all-frames` (read snapshots with every frame): cli_begin keeps it for itself. */
#define CLI_ALL_FRAMES 'A'

/* Operand counts besides an exact one. */
#define CLI_ONE_OR_MORE  (-1)
#define CLI_ANY_OPERANDS (-2) /* the command counts its operands itself */

/* At most this many snapshots read by cli_begin, and options in one table. */
#define CLI_MAX_READ    2
#define CLI_MAX_OPTIONS 24

struct cli_command {
    const char *name;                 /* the subcommand, for messages */
    const char *text;                 /* usage line(s) and description, before the options */
    const struct cli_option *options; /* ends with a zero entry */
    const char *epilog;               /* after the options (an example), or NULL */
    const char *unknown;              /* what a bad option is called: "unknown option" */
    int operands;                     /* exactly this many, CLI_ONE_OR_MORE or CLI_ANY_OPERANDS */
    const char *operands_error;       /* said when the count is wrong */
    bool in_order;                    /* options end at the first operand (run: PROG's follow) */
    /* Takes one option: CLI_OK, or the exit status to stop with (after saying why). */
    int (*option)(void *ctx, int key, const char *value);
    int read;           /* snapshot operands cli_begin reads, in order (at most CLI_MAX_READ) */
    bool filter_frames; /* read through frame_filter unless --all-frames was given */
};

/* What the prologue leaves the command. */
struct cli_input {
    char **paths;                        /* the operands (argv after the options) */
    size_t count;                        /* how many */
    bool all_frames;                     /* --all-frames was given */
    int status;                          /* the exit status when the command ends at once */
    struct snapshot *snap[CLI_MAX_READ]; /* the first `read` operands, read */
};

/* Writes the --help text: cmd->text, one line per option with its help wrapped beside it, then
 * the epilog. */
void cli_help_print(FILE *out, const struct cli_command *cmd);

/* Parses argv (argv[0] is the subcommand) with getopt_long, without getopt's own messages:
 * each option goes to cmd->option with ctx (--all-frames sets in->all_frames instead). -h/--help
 * prints the help on stdout; an unknown option or one missing its value, or a wrong count of
 * operands, is one line through cli_usage_error. Returns true when the command goes on with
 * in->paths; false when it ends now with in->status. */
__attribute__((warn_unused_result)) bool cli_parse(const struct cli_command *cmd, int argc,
                                                   char **argv, void *ctx, struct cli_input *in);

/* Reads the first cmd->read operands (frame-filtered unless --all-frames or !filter_frames).
 * Returns true when all were read; false with in->status = CLI_BADUSE (one line said why, and
 * nothing stays read) otherwise. */
__attribute__((warn_unused_result)) bool cli_read(const struct cli_command *cmd,
                                                  struct cli_input *in);

/* cli_parse, then cli_read: the prologue of the commands that read snapshots. */
__attribute__((warn_unused_result)) bool cli_begin(const struct cli_command *cmd, int argc,
                                                   char **argv, void *ctx, struct cli_input *in);

/* Frees the snapshots cli_read read. */
void cli_input_free(struct cli_input *in);

#endif
