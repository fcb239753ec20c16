/* cmd_dump.c: `cuprof dump PID [-o FILE]`: asks a running process for a snapshot over its control
 *   socket (no signal: the program's sleeps and reads are not cut short) and says where it went. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli_commands.h"
#include "cli/cli_options.h"
#include "cli/cli_util.h"
#include "cli/control_client.h"
#include "snapshot/text_escape.h"

static const char dump_text[] =
    "usage: cuprof dump PID [-o FILE]\n\n"
    "Makes the running process PID (under cuprof, see `cuprof ps`) write a snapshot now, through\n"
    "its control socket: no signal is sent, so the program's own sleeps and reads go on\n"
    "undisturbed. Prints the file's path.\n\n";

static const struct cli_option dump_options[] = {
    {"output", 'o', "FILE",
     "write FILE (.pickle/.pkl or .json; mode 0600); anything already\n"
     "there is kept and the snapshot gets FILE's next free name\n"
     "(run.pickle, run.1.pickle, ...); default: the program's\n"
     "CUPROF_SNAPSHOT name, never overwriting either",
     0},
    {0},
};

static int
dump_option(void *ctx, int key, const char *value)
{
    if (key == 'o')
        *(const char **)ctx = value;
    return CLI_OK;
}

const struct cli_command cmd_dump_command = {
    .name = "dump",
    .text = dump_text,
    .options = dump_options,
    .unknown = "unknown option",
    .operands = 1,
    .operands_error = "expected one PID",
    .option = dump_option,
};

/* PID as a positive number; false on anything else. */
static bool
parse_pid(const char *text, pid_t *pid)
{
    uint64_t v;
    if (!cli_parse_u64(text, &v) || v == 0 || v > 0x7fffffff)
        return false;
    *pid = (pid_t)v;
    return true;
}

/* The extensions that pick a snapshot's format (CUPROF_SNAPSHOT's rule). */
static bool
has_snapshot_extension(const char *path)
{
    static const char *const accepted[] = {".pickle", ".pkl", ".json"};
    const char *base = strrchr(path, '/');
    base = base == NULL ? path : base + 1;
    size_t len = strlen(base);
    for (size_t i = 0; i < sizeof accepted / sizeof accepted[0]; i++) {
        size_t n = strlen(accepted[i]);
        if (len > n && strcmp(base + len - n, accepted[i]) == 0)
            return true;
    }
    return false;
}

int
cmd_dump(int argc, char **argv)
{
    const char *output = NULL;
    struct cli_input in;
    if (!cli_parse(&cmd_dump_command, argc, argv, &output, &in))
        return in.status;
    pid_t pid;
    if (!parse_pid(in.paths[0], &pid))
        return cli_usage_error("dump", "PID \"%s\" is not a process id", in.paths[0]);
    /* The program's working directory is not ours: a relative FILE is made absolute here. */
    char request[PATH_MAX + 16], absolute[PATH_MAX];
    if (output != NULL && output[0] != '/') {
        if (getcwd(absolute, sizeof(absolute)) == NULL ||
            strlen(absolute) + 1 + strlen(output) >= sizeof(absolute))
            return cli_usage_error("dump", "output path \"%s\" is too long", output);
        strcat(absolute, "/");
        strcat(absolute, output);
        output = absolute;
    }
    if (output != NULL && (strchr(output, '\n') != NULL || strlen(output) > 4000))
        return cli_usage_error("dump", "output path \"%s\" cannot be sent", output);
    if (output != NULL && !has_snapshot_extension(output))
        return cli_usage_error("dump",
                               "-o: bad value \"%s\": expected a path ending in .pickle, "
                               ".pkl or .json",
                               output);
    if (output != NULL)
        snprintf(request, sizeof(request), "DUMP %s", output);
    else
        snprintf(request, sizeof(request), "DUMP");
    char path[256], err[512];
    if (control_client_find(pid, path, sizeof(path), err, sizeof(err)) != 0) {
        fprintf(stderr, "cuprof: dump: %s\n", err);
        return CLI_BADUSE;
    }
    struct control_reply r;
    if (control_client_ask(path, request, &r, err, sizeof(err)) != 0) {
        fprintf(stderr, "cuprof: dump: pid %ld: %s\n", (long)pid, err);
        return CLI_FOUND;
    }
    printf("cuprof: snapshot of pid %ld written to ", (long)pid);
    text_escape_fputs(control_str(&r.value, "path"), TEXT_ESCAPE_TERMINAL, stdout);
    putchar('\n');
    control_reply_free(&r);
    return CLI_OK;
}
