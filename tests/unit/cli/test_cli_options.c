/* test_cli_options.c: the subcommands' option tables and the parser they drive: every command's
 * --help lists each option of its table with its whole help text, the tables are consistent
 * (distinct keys, names and letters), an unknown option or a missing value is one line naming it,
 * and the parser hands values, operands and --all-frames over as its header says. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli/cli_commands.h"
#include "cli/cli_options.h"
#include "cli/cli_util.h"

static const struct cli_command *const commands[] = {
    &cmd_run_command,    &cmd_summary_command,    &cmd_leaks_command,    &cmd_diff_command,
    &cmd_replay_command, &cmd_flamegraph_command, &cmd_timeline_command, &cmd_plot_command,
    &cmd_stats_command,  &cmd_ps_command,         &cmd_dump_command,     &cmd_top_command,
    &cmd_check_command,  &cmd_explain_command,    &cmd_tune_command,
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

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

/* Runs cli_parse with stdout and stderr captured into malloc'd strings. */
struct captured {
    bool went_on;
    char *out, *err;
};

static char *
read_all(FILE *f)
{
    fflush(f);
    long n = ftell(f);
    char *text = calloc((size_t)n + 1, 1);
    assert_non_null(text);
    rewind(f);
    assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
    return text;
}

static struct captured
parse_captured(const struct cli_command *cmd, int argc, char **argv, void *ctx,
               struct cli_input *in)
{
    FILE *out = tmpfile(), *err = tmpfile();
    assert_non_null(out);
    assert_non_null(err);
    fflush(stdout);
    fflush(stderr);
    int saved_out = dup(STDOUT_FILENO), saved_err = dup(STDERR_FILENO);
    dup2(fileno(out), STDOUT_FILENO);
    dup2(fileno(err), STDERR_FILENO);
    struct captured c = {.went_on = cli_parse(cmd, argc, argv, ctx, in)};
    fflush(stdout);
    fflush(stderr);
    dup2(saved_out, STDOUT_FILENO);
    dup2(saved_err, STDERR_FILENO);
    close(saved_out);
    close(saved_err);
    fseek(out, 0, SEEK_END);
    fseek(err, 0, SEEK_END);
    c.out = read_all(out);
    c.err = read_all(err);
    fclose(out);
    fclose(err);
    return c;
}

static void
captured_free(struct captured *c)
{
    free(c->out);
    free(c->err);
}

static size_t
count_lines(const char *text)
{
    size_t n = 0;
    for (; *text; text++)
        n += *text == '\n';
    return n;
}

/* Every run of spaces and newlines as one space: wrapped text compares with its source. */
static char *
collapse(const char *text)
{
    char *out = malloc(strlen(text) + 1), *o = out;
    assert_non_null(out);
    for (const char *p = text; *p; p++) {
        bool space = *p == ' ' || *p == '\n';
        if (space && (o == out || o[-1] == ' '))
            continue;
        *o++ = space ? ' ' : *p;
    }
    *o = '\0';
    return out;
}

static char *
help_of(const struct cli_command *cmd)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    assert_non_null(mem);
    cli_help_print(mem, cmd);
    fclose(mem);
    return text;
}

static void
test_help_lists_every_option(void **state)
{
    (void)state;
    for (size_t c = 0; c < NCOMMANDS; c++) {
        const struct cli_command *cmd = commands[c];
        char *help = help_of(cmd), *flat = collapse(help);
        char want[256];
        snprintf(want, sizeof(want), "usage: cuprof %s", cmd->name);
        assert_true(strncmp(help, want, strlen(want)) == 0);
        assert_non_null(strstr(help, "\n  -h, --help  "));
        for (const struct cli_option *o = cmd->options; !is_end(o); o++) {
            /* The option's line names it (and its value), then its help, whole. */
            if (o->name != NULL && o->short_name != 0)
                snprintf(want, sizeof(want), "\n  -%c, --%s%s%s  ", o->short_name, o->name,
                         o->arg ? " " : "", o->arg ? o->arg : "");
            else if (o->name != NULL)
                snprintf(want, sizeof(want), "\n  --%s%s%s  ", o->name, o->arg ? " " : "",
                         o->arg ? o->arg : "");
            else
                snprintf(want, sizeof(want), "\n  -%c%s%s  ", o->short_name, o->arg ? " " : "",
                         o->arg ? o->arg : "");
            if (strstr(help, want) == NULL)
                fail_msg("cuprof %s --help: no line \"%s\"", cmd->name, want + 1);
            char *words = collapse(o->help);
            if (strstr(flat, words) == NULL)
                fail_msg("cuprof %s --help: no help \"%s\"", cmd->name, words);
            free(words);
        }
        /* Lines fit a terminal of 100 columns. */
        for (const char *line = help; *line;) {
            size_t n = strcspn(line, "\n");
            if (n > 100)
                fail_msg("cuprof %s --help: a line of %zu columns", cmd->name, n);
            line += n + (line[n] == '\n');
        }
        free(flat);
        free(help);
    }
}

static void
test_tables_are_consistent(void **state)
{
    (void)state;
    for (size_t c = 0; c < NCOMMANDS; c++) {
        const struct cli_command *cmd = commands[c];
        assert_non_null(cmd->option);
        assert_true(cmd->read >= 0 && cmd->read <= CLI_MAX_READ);
        assert_true(cmd->operands >= CLI_ANY_OPERANDS);
        assert_true(cmd->read == 0 || cmd->operands == CLI_ONE_OR_MORE ||
                    cmd->operands >= cmd->read);
        size_t n = 0;
        for (const struct cli_option *o = cmd->options; !is_end(o); o++, n++) {
            assert_non_null(o->help);
            assert_true(key_of(o) != 0);
            assert_true(o->short_name != 'h' && (o->name == NULL || strcmp(o->name, "help")));
            /* --all-frames, and only it, has the key cli_parse keeps. */
            assert_true((key_of(o) == CLI_ALL_FRAMES) ==
                        (o->name != NULL && strcmp(o->name, "all-frames") == 0));
            for (const struct cli_option *p = cmd->options; p != o; p++) {
                assert_int_not_equal(key_of(p), key_of(o));
                assert_true(o->short_name == 0 || p->short_name != o->short_name);
                assert_true(o->name == NULL || p->name == NULL || strcmp(p->name, o->name));
            }
        }
        assert_true(n <= CLI_MAX_OPTIONS);
    }
}

/* A buffer any command's handler may take as its context. */
static union {
    max_align_t align;
    char bytes[4096];
} any_ctx;

/* One line on stderr: "cuprof: CMD: ..." naming `what`, exit status 2, nothing on stdout. */
static void
expect_one_line(const struct cli_command *cmd, char **argv, int argc, const char *what)
{
    struct cli_input in;
    memset(&any_ctx, 0, sizeof(any_ctx));
    struct captured got = parse_captured(cmd, argc, argv, &any_ctx, &in);
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "cuprof: %s: ", cmd->name);
    assert_false(got.went_on);
    assert_int_equal(in.status, CLI_BADUSE);
    assert_string_equal(got.out, "");
    assert_int_equal(count_lines(got.err), 1);
    assert_true(strncmp(got.err, prefix, strlen(prefix)) == 0);
    if (strstr(got.err, what) == NULL)
        fail_msg("cuprof %s: \"%s\" does not name %s", cmd->name, got.err, what);
    captured_free(&got);
}

static void
test_unknown_option_is_one_line_naming_it(void **state)
{
    (void)state;
    for (size_t c = 0; c < NCOMMANDS; c++) {
        const struct cli_command *cmd = commands[c];
        char name[32], bogus[] = "--no-such-option", letter[] = "-Z", operand[] = "x";
        snprintf(name, sizeof(name), "%s", cmd->name);
        char *argv[] = {name, bogus, operand, NULL};
        expect_one_line(cmd, argv, 3, "\"--no-such-option\"");
        char *argv2[] = {name, letter, operand, NULL};
        expect_one_line(cmd, argv2, 3, "\"-Z\"");
        /* An option that wants a value, given none. */
        for (const struct cli_option *o = cmd->options; !is_end(o); o++) {
            if (o->arg == NULL)
                continue;
            char opt[64];
            if (o->name != NULL)
                snprintf(opt, sizeof(opt), "--%s", o->name);
            else
                snprintf(opt, sizeof(opt), "-%c", o->short_name);
            char *argv3[] = {name, opt, NULL};
            expect_one_line(cmd, argv3, 2, opt);
        }
    }
}

static void
test_help_ends_the_command(void **state)
{
    (void)state;
    for (size_t c = 0; c < NCOMMANDS; c++) {
        char name[32], help[] = "--help", bogus[] = "--no-such-option";
        snprintf(name, sizeof(name), "%s", commands[c]->name);
        char *argv[] = {name, help, bogus, NULL};
        struct cli_input in;
        struct captured got = parse_captured(commands[c], 3, argv, &any_ctx, &in);
        char *want = help_of(commands[c]);
        assert_false(got.went_on);
        assert_int_equal(in.status, CLI_OK);
        assert_string_equal(got.out, want);
        assert_string_equal(got.err, "");
        free(want);
        captured_free(&got);
    }
}

/* A table of every kind of option, for the parser's own rules. */
struct seen {
    int keys[8];
    const char *values[8];
    size_t n;
};

static int
record(void *ctx, int key, const char *value)
{
    struct seen *s = ctx;
    if (value != NULL && strcmp(value, "bad") == 0)
        return cli_usage_error("t", "bad value");
    s->keys[s->n] = key;
    s->values[s->n++] = value;
    return CLI_OK;
}

static const struct cli_option test_options[] = {
    {"flag", 'f', NULL, "a flag", 0},
    {"value", 0, "V", "a long option with a value", 'v'},
    {NULL, 'n', "N", "a short option with a value", 0},
    {"all-frames", 0, NULL, "every frame", CLI_ALL_FRAMES},
    {0},
};

static struct cli_command
test_command(int operands, bool in_order)
{
    return (struct cli_command){.name = "t",
                                .text = "usage: cuprof t\n\n",
                                .options = test_options,
                                .unknown = "unknown option",
                                .operands = operands,
                                .operands_error = "wrong operands",
                                .in_order = in_order,
                                .option = record};
}

static void
test_parse_hands_over_values(void **state)
{
    (void)state;
    struct cli_command cmd = test_command(CLI_ONE_OR_MORE, false);
    char *argv[] = {"t", "-f", "--value=3", "a", "-n", "5", "--all-frames", "b", NULL};
    struct seen s = {0};
    struct cli_input in;
    struct captured got = parse_captured(&cmd, 8, argv, &s, &in);
    assert_true(got.went_on);
    assert_string_equal(got.err, "");
    assert_int_equal(s.n, 3);
    assert_int_equal(s.keys[0], 'f');
    assert_null(s.values[0]);
    assert_int_equal(s.keys[1], 'v');
    assert_string_equal(s.values[1], "3");
    assert_int_equal(s.keys[2], 'n');
    assert_string_equal(s.values[2], "5");
    assert_true(in.all_frames); /* kept by the parser, never handed over */
    assert_int_equal(in.count, 2);
    assert_string_equal(in.paths[0], "a");
    assert_string_equal(in.paths[1], "b");
    assert_null(in.snap[0]);
    captured_free(&got);
}

static void
test_parse_in_order_stops_at_the_first_operand(void **state)
{
    (void)state;
    struct cli_command cmd = test_command(CLI_ONE_OR_MORE, true);
    char *argv[] = {"t", "-f", "prog", "-f", "--value", "x", NULL};
    struct seen s = {0};
    struct cli_input in;
    struct captured got = parse_captured(&cmd, 6, argv, &s, &in);
    assert_true(got.went_on);
    assert_int_equal(s.n, 1);
    assert_int_equal(in.count, 4);
    assert_string_equal(in.paths[0], "prog");
    assert_string_equal(in.paths[1], "-f");
    assert_null(in.paths[4]); /* still argv's end: execvp takes it as is */
    captured_free(&got);
}

static void
test_parse_stops_at_the_first_problem(void **state)
{
    (void)state;
    struct cli_command cmd = test_command(1, false);
    struct seen s = {0};
    struct cli_input in;
    /* The handler's refusal ends parsing: the later option is not seen. */
    char *argv[] = {"t", "--value", "bad", "-f", "a", NULL};
    struct captured got = parse_captured(&cmd, 5, argv, &s, &in);
    assert_false(got.went_on);
    assert_int_equal(in.status, CLI_BADUSE);
    assert_int_equal(s.n, 0);
    assert_non_null(strstr(got.err, "bad value"));
    captured_free(&got);
    /* A wrong count of operands. */
    char *argv2[] = {"t", "a", "b", NULL};
    got = parse_captured(&cmd, 3, argv2, &s, &in);
    assert_false(got.went_on);
    assert_int_equal(in.status, CLI_BADUSE);
    assert_string_equal(got.err, "cuprof: t: wrong operands (see `cuprof t --help`)\n");
    captured_free(&got);
    struct cli_command any = test_command(CLI_ANY_OPERANDS, false);
    char *argv3[] = {"t", NULL};
    got = parse_captured(&any, 1, argv3, &s, &in);
    assert_true(got.went_on);
    assert_int_equal(in.count, 0);
    captured_free(&got);
}

static void
test_read_failure_reads_nothing(void **state)
{
    (void)state;
    char dir[] = "/tmp/cuprof-cli-options-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char good[128], missing[128];
    snprintf(good, sizeof(good), "%s/good.json", dir);
    snprintf(missing, sizeof(missing), "%s/missing.json", dir);
    FILE *f = fopen(good, "w");
    assert_non_null(f);
    fputs("{\"segments\": [], \"device_traces\": []}", f);
    fclose(f);
    struct cli_command cmd = test_command(2, false);
    cmd.read = 2;
    char *paths[] = {good, missing, NULL};
    struct cli_input in = {.paths = paths, .count = 2};
    FILE *err = tmpfile();
    int saved = dup(STDERR_FILENO);
    dup2(fileno(err), STDERR_FILENO);
    bool ok = cli_read(&cmd, &in);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    char *text = read_all(err);
    fclose(err);
    assert_false(ok);
    assert_int_equal(in.status, CLI_BADUSE);
    assert_null(in.snap[0]); /* the first one, read, is freed again */
    assert_null(in.snap[1]);
    assert_int_equal(count_lines(text), 1);
    assert_non_null(strstr(text, missing));
    free(text);
    /* Both readable: both read (the frame filter applies without --all-frames). */
    paths[1] = good;
    cmd.filter_frames = true;
    assert_true(cli_read(&cmd, &in));
    assert_non_null(in.snap[0]);
    assert_non_null(in.snap[1]);
    cli_input_free(&in);
    assert_null(in.snap[0]);
    unlink(good);
    rmdir(dir);
}

/* Sizes with units (cli_parse_size): binary for K/M/G/T and KiB..TiB, decimal for KB..TB,
 * fractions exact, garbage and overflow refused. */
static void
test_sizes(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        uint64_t bytes;
    } good[] = {
        {"0", 0},
        {"4096", 4096},
        {"4096b", 4096},
        {"300M", 300ull << 20},
        {"300MiB", 300ull << 20},
        {"300mib", 300ull << 20},
        {"300MB", 300000000ull},
        {"1.5GiB", 3ull << 29},
        {"1.5G", 3ull << 29},
        {"0.1GB", 100000000ull},
        {"80GB", 80000000000ull},
        {"2k", 2048},
        {"2KB", 2000},
        {"1T", 1ull << 40},
        {"8388608TiB", 1ull << 63},
        {"0.0000001K", 0},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        uint64_t v = 1;
        assert_true(cli_parse_size(good[i].text, &v));
        assert_int_equal(v, good[i].bytes);
    }
    static const char *const bad[] = {
        "",    "M",    "-1",   "1.",   ".5G", "1 M",        "1MiBs",
        "1e9", "1,5G", "0x10", "1PiB", " 1",  "8388609TiB", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 7;
        assert_false(cli_parse_size(bad[i], &v));
        assert_int_equal(v, 7);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_lists_every_option),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_tables_are_consistent),
        cmocka_unit_test(test_unknown_option_is_one_line_naming_it),
        cmocka_unit_test(test_help_ends_the_command),
        cmocka_unit_test(test_parse_hands_over_values),
        cmocka_unit_test(test_parse_in_order_stops_at_the_first_operand),
        cmocka_unit_test(test_parse_stops_at_the_first_problem),
        cmocka_unit_test(test_read_failure_reads_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
