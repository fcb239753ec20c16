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

static const char dump_text[] =
    "usage: cuprof dump PID [-o FILE]\n\n"
    "Makes the running process PID (under cuprof, see `cuprof ps`) write a snapshot now, through\n"
    "its control socket: no signal is sent, so the program's own sleeps and reads go on\n"
    "undisturbed. Prints the file's path.\n\n";

static const struct cli_option dump_options[] = {
    {"output", 'o', "FILE",
     "write exactly FILE (.pickle/.pkl or .json; replaced atomically);\n"
     "default: the program's CUPROF_SNAPSHOT name, never overwriting",
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
    printf("cuprof: snapshot of pid %ld written to %s\n", (long)pid, control_str(&r.value, "path"));
    control_reply_free(&r);
    return CLI_OK;
}
