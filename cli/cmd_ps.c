/* cmd_ps.c: `cuprof ps`: this user's processes running under cuprof, from their control sockets:
 *   pid, rank, host, mode, devices, allocated and reserved now and at peak, command (the
 *   processes' own text shown escaped: control characters never reach the terminal). */
#include <stdio.h>
#include <string.h>

#include "cli/cli_commands.h"
#include "cli/cli_options.h"
#include "cli/cli_util.h"
#include "cli/control_client.h"

static const char ps_text[] =
    "usage: cuprof ps [--json]\n\n"
    "Lists this user's running processes under cuprof (each one answers on its control socket\n"
    "after its first CUDA call; see CUPROF_CONTROL), every rank of a job on this host included,\n"
    "sorted by rank then pid. Sockets that dead processes left behind are removed.\n\n";

static const struct cli_option ps_options[] = {
    {"json", 0, NULL, "one JSON list of the processes' INFO replies", 'j'},
    {0},
};

static int
ps_option(void *ctx, int key, const char *value)
{
    (void)value;
    if (key == 'j')
        *(bool *)ctx = true;
    return CLI_OK;
}

const struct cli_command cmd_ps_command = {
    .name = "ps",
    .text = ps_text,
    .options = ps_options,
    .unknown = "unknown option",
    .operands = 0,
    .operands_error = "takes no operands",
    .option = ps_option,
};

/* The command line, its arguments joined by spaces and cut to `len`; for a terminal, each one
 * escaped (control_term). */
static void
command_text(const struct sval *info, bool terminal, char *buf, size_t len)
{
    const struct sval *argv = sval_get(info, "argv");
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sval_len(argv) && used + 1 < len; i++) {
        const struct sval *a = sval_at(argv, i);
        if (a->type != SVAL_STR)
            continue;
        if (used > 0)
            buf[used++] = ' ';
        if (terminal)
            control_term(a->u.s, buf + used, len - used);
        else
            snprintf(buf + used, len - used, "%s", a->u.s);
        used += strlen(buf + used);
    }
}

/* The devices' totals: allocated and reserved now and at peak, and the device list "0,1". */
static void
device_totals(const struct sval *info, int64_t sums[4], char *list, size_t len)
{
    static const char *const keys[4] = {"allocated", "reserved", "peak_allocated", "peak_reserved"};
    const struct sval *devs = sval_get(info, "devices");
    size_t used = 0;
    list[0] = '\0';
    for (size_t i = 0; i < sval_len(devs); i++) {
        const struct sval *d = sval_at(devs, i);
        for (int k = 0; k < 4; k++)
            sums[k] += control_int(d, keys[k]);
        int n = snprintf(list + used, len - used, "%s%lld", used ? "," : "",
                         (long long)control_int(d, "device"));
        if (n > 0 && (size_t)n < len - used)
            used += (size_t)n;
    }
    if (used == 0)
        snprintf(list, len, "-");
}

/* One JSON list: per process its pid, rank, host, mode, devices, memory totals and command. */
static bool
print_json(const struct control_process *list, size_t count)
{
    struct emitter *e = cli_json_open(stdout);
    if (e == NULL)
        return false;
    emitter_begin_list(e);
    for (size_t i = 0; i < count; i++) {
        const struct sval *info = &list[i].info.value;
        char text[256];
        int64_t sums[4] = {0};
        device_totals(info, sums, text, sizeof(text));
        emitter_begin_dict(e);
        cli_json_key_int(e, "pid", list[i].pid);
        cli_json_key_int(e, "rank", control_int(info, "rank"));
        cli_json_key_string(e, "host", control_str(info, "host"));
        cli_json_key_string(e, "mode", control_str(info, "mode"));
        cli_json_key_string(e, "devices", text);
        cli_json_key_int(e, "allocated", sums[0]);
        cli_json_key_int(e, "reserved", sums[1]);
        cli_json_key_int(e, "peak_allocated", sums[2]);
        cli_json_key_int(e, "peak_reserved", sums[3]);
        command_text(info, false, text, sizeof(text));
        cli_json_key_string(e, "command", text);
        emitter_end(e);
    }
    emitter_end(e);
    return cli_json_close(e);
}

int
cmd_ps(int argc, char **argv)
{
    bool json = false;
    struct cli_input in;
    if (!cli_parse(&cmd_ps_command, argc, argv, &json, &in))
        return in.status;
    struct control_process *list;
    size_t count, removed;
    if (control_client_list("ps", &list, &count, &removed) != 0) {
        fprintf(stderr, "cuprof: ps: out of host memory\n");
        return CLI_BADUSE;
    }
    if (removed > 0)
        fprintf(stderr, "cuprof: ps: removed %zu socket%s left by processes that are gone\n",
                removed, removed == 1 ? "" : "s");
    bool ok = true;
    if (json) {
        ok = print_json(list, count);
    } else if (count == 0) {
        printf("no process of this user runs under cuprof (one shows up after its first CUDA "
               "call)\n");
    } else {
        printf("%-8s %-5s %-12s %-6s %-8s %-11s %-11s %-11s %-11s %s\n", "PID", "RANK", "HOST",
               "MODE", "DEVICES", "ALLOCATED", "RESERVED", "PEAK ALLOC", "PEAK RESV", "COMMAND");
        for (size_t i = 0; i < count; i++) {
            const struct sval *info = &list[i].info.value;
            char devs[64], cmd[200], s[4][32], rank[24], host[64], mode[32];
            int64_t sums[4] = {0};
            device_totals(info, sums, devs, sizeof(devs));
            command_text(info, true, cmd, sizeof(cmd));
            for (int k = 0; k < 4; k++)
                cli_size((uint64_t)sums[k], s[k], sizeof(s[k]));
            int64_t r = control_int(info, "rank");
            if (r < 0)
                snprintf(rank, sizeof(rank), "-");
            else
                snprintf(rank, sizeof(rank), "%lld", (long long)r);
            printf("%-8ld %-5s %-12.12s %-6s %-8s %-11s %-11s %-11s %-11s %s\n", (long)list[i].pid,
                   rank, control_term(control_str(info, "host"), host, sizeof(host)),
                   control_term(control_str(info, "mode"), mode, sizeof(mode)), devs, s[0], s[1],
                   s[2], s[3], cmd);
        }
    }
    control_client_list_free(list, count);
    return ok ? CLI_OK : CLI_BADUSE;
}
