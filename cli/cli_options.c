/* cli_options.c: getopt_long's lists and the --help option lines, both from a command's table. */
#include "cli/cli_options.h"

#include <getopt.h>
#include <string.h>

#include "cli/cli_util.h"
#include "cli/frame_filter.h"

#define HELP_WIDTH 96    /* --help lines wrap before this column */
#define LONG_ONLY  0x100 /* getopt's value of a long option without a short one: this + index */

static const struct cli_option help_option = {"help", 'h', NULL, "this text", 0};

static bool
is_end(const struct cli_option *o)
{
    return o->name == NULL && o->short_name == 0;
}

static int
key_of(const struct cli_option *o)
{
    return o->key != 0 ? o->key : o->short_name;
}

/* "-o, --output FILE", "--top N", "-n N". */
static void
label(const struct cli_option *o, char *buf, size_t len)
{
    const char *sep = o->arg ? " " : "", *arg = o->arg ? o->arg : "";
    if (o->name != NULL && o->short_name != 0)
        snprintf(buf, len, "-%c, --%s%s%s", o->short_name, o->name, sep, arg);
    else if (o->name != NULL)
        snprintf(buf, len, "--%s%s%s", o->name, sep, arg);
    else
        snprintf(buf, len, "-%c%s%s", o->short_name, sep, arg);
}

/* Writes `help` from column `col` (where the cursor stands), word-wrapped before HELP_WIDTH. */
static void
print_wrapped(FILE *out, const char *help, size_t col)
{
    size_t at = col;
    bool empty = true;
    for (const char *p = help; *p != '\0';) {
        if (*p == ' ') {
            p++;
            continue;
        }
        size_t n = *p == '\n' ? 0 : strcspn(p, " \n");
        if (*p == '\n' || (!empty && at + 1 + n > HELP_WIDTH)) {
            fprintf(out, "\n%*s", (int)col, "");
            at = col;
            empty = true;
            p += *p == '\n';
            continue;
        }
        if (!empty)
            at += (size_t)fprintf(out, " ");
        at += fwrite(p, 1, n, out);
        empty = false;
        p += n;
    }
    fputc('\n', out);
}

void
cli_help_print(FILE *out, const struct cli_command *cmd)
{
    char text[128];
    size_t width = strlen("-h, --help");
    for (const struct cli_option *o = cmd->options; !is_end(o); o++) {
        label(o, text, sizeof(text));
        width = strlen(text) > width ? strlen(text) : width;
    }
    fputs(cmd->text, out);
    for (const struct cli_option *o = cmd->options;; o++) {
        const struct cli_option *shown = is_end(o) ? &help_option : o;
        label(shown, text, sizeof(text));
        fprintf(out, "  %-*s  ", (int)width, text);
        print_wrapped(out, shown->help, width + 4);
        if (is_end(o))
            break;
    }
    if (cmd->epilog != NULL)
        fprintf(out, "\n%s", cmd->epilog);
}

/* getopt_long's option string and list: a short option's value is its letter, a long-only one's
 * LONG_ONLY + its index. False when the table does not fit. */
static bool
getopt_lists(const struct cli_command *cmd, char *shorts, struct option *longs)
{
    size_t s = 0, l = 0;
    if (cmd->in_order)
        shorts[s++] = '+'; /* stop at the first operand */
    for (size_t i = 0; !is_end(&cmd->options[i]); i++) {
        const struct cli_option *o = &cmd->options[i];
        if (i == CLI_MAX_OPTIONS)
            return false;
        int has_arg = o->arg ? required_argument : no_argument;
        if (o->short_name != 0) {
            shorts[s++] = o->short_name;
            if (o->arg)
                shorts[s++] = ':';
        }
        if (o->name != NULL)
            longs[l++] = (struct option){o->name, has_arg, NULL,
                                         o->short_name ? o->short_name : LONG_ONLY + (int)i};
    }
    shorts[s++] = 'h';
    shorts[s] = '\0';
    longs[l++] = (struct option){"help", no_argument, NULL, 'h'};
    longs[l] = (struct option){NULL, 0, NULL, 0};
    return true;
}

/* The option getopt_long returned as `c`. */
static const struct cli_option *
option_of(const struct cli_command *cmd, int c)
{
    if (c >= LONG_ONLY)
        return &cmd->options[c - LONG_ONLY];
    for (const struct cli_option *o = cmd->options; !is_end(o); o++)
        if (o->short_name == c)
            return o;
    return NULL;
}

static bool
stop(struct cli_input *in, int status)
{
    in->status = status;
    return false;
}

/* Whether `have` operands are what the command takes. */
static bool
operands_fit(const struct cli_command *cmd, int have)
{
    if (cmd->operands >= 0)
        return have == cmd->operands;
    return cmd->operands == CLI_ANY_OPERANDS || have >= 1;
}

bool
cli_parse(const struct cli_command *cmd, int argc, char **argv, void *ctx, struct cli_input *in)
{
    memset(in, 0, sizeof(*in));
    char shorts[3 * CLI_MAX_OPTIONS + 4];
    struct option longs[CLI_MAX_OPTIONS + 2];
    if (!getopt_lists(cmd, shorts, longs)) {
        fprintf(stderr, "cuprof: %s: too many options\n", cmd->name);
        return stop(in, CLI_BADUSE);
    }
    optind = 0; /* 0, not 1: glibc then resets all its state (commands and tests parse again) */
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
        if (c == 'h') {
            cli_help_print(stdout, cmd);
            return stop(in, CLI_OK);
        }
        const struct cli_option *o = c == '?' || c == ':' ? NULL : option_of(cmd, c);
        if (o == NULL)
            return stop(in,
                        cli_usage_error(cmd->name, "%s \"%s\"", cmd->unknown, argv[optind - 1]));
        if (key_of(o) == CLI_ALL_FRAMES) {
            in->all_frames = true;
            continue;
        }
        int status = cmd->option(ctx, key_of(o), optarg);
        if (status != CLI_OK)
            return stop(in, status);
    }
    if (!operands_fit(cmd, argc - optind))
        return stop(in, cli_usage_error(cmd->name, "%s", cmd->operands_error));
    in->paths = argv + optind;
    in->count = (size_t)(argc - optind);
    return true;
}

bool
cli_read(const struct cli_command *cmd, struct cli_input *in)
{
    for (int i = 0; i < cmd->read && i < CLI_MAX_READ && (size_t)i < in->count; i++) {
        int rc = cmd->filter_frames ? frame_filter_load(in->paths[i], in->all_frames, &in->snap[i])
                                    : cli_load(in->paths[i], &in->snap[i]);
        if (rc != CLI_OK) {
            cli_input_free(in);
            return stop(in, rc);
        }
    }
    return true;
}

bool
cli_begin(const struct cli_command *cmd, int argc, char **argv, void *ctx, struct cli_input *in)
{
    return cli_parse(cmd, argc, argv, ctx, in) && cli_read(cmd, in);
}

void
cli_input_free(struct cli_input *in)
{
    for (int i = 0; i < CLI_MAX_READ; i++) {
        snapshot_free(in->snap[i]);
        in->snap[i] = NULL;
    }
}
