/* cmd_top.c: `cuprof top [PID]`: a live view of a running process's device memory, refreshed
 *   every second: per device allocated / reserved / peak / OOMs with a sparkline of the last
 *   minutes, then the call sites holding the most live memory, named by their first user frame.
 *   `--once` prints one frame as plain text, `--json` the process's raw TOP reply. */
#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli_commands.h"
#include "cli/cli_options.h"
#include "cli/cli_util.h"
#include "cli/control_client.h"
#include "cli/frame_filter.h"
#include "snapshot/text_escape.h"

static const char top_text[] =
    "usage: cuprof top [PID] [--once | --json] [-n N]\n\n"
    "Shows a running process under cuprof (PID, or the only one `cuprof ps` lists) live, like\n"
    "top: per device the bytes allocated and reserved now and at peak, OOMs so far (the\n"
    "driver's own calls refused for lack of memory too: kernel code, arrays, stacks, contexts,\n"
    "graphs' memory) and a sparkline of allocated bytes over the last minutes; then the call "
    "sites\n"
    "holding the most live memory, named by their first frame outside cuprof, CUDA, PyTorch's\n"
    "allocator and the Python interpreter. Refreshed every second; works in any terminal (over\n"
    "SSH too).\n"
    "Keys: q quit, d dump a snapshot now, s sort sites by bytes or by count, + / - more or fewer\n"
    "sites.\n\n";

static const struct cli_option top_options[] = {
    {"once", 0, NULL, "print one frame as plain text and exit", '1'},
    {"json", 0, NULL, "print the process's TOP reply (JSON) and exit", 'j'},
    {NULL, 'n', "N", "call sites to show (default: what fits the terminal, 10 with --once)", 0},
    {0},
};

struct top_args {
    bool once, json, fixed_sites;
    size_t sites;
};

static int
top_option(void *ctx, int key, const char *value)
{
    struct top_args *a = ctx;
    uint64_t n;
    if (key == '1') {
        a->once = true;
    } else if (key == 'j') {
        a->json = true;
    } else if (key == 'n') {
        if (!cli_parse_u64(value, &n) || n == 0 || n > 1000)
            return cli_usage_error("top", "-n \"%s\": expected 1 to 1000 call sites", value);
        a->sites = (size_t)n;
        a->fixed_sites = true;
    }
    return CLI_OK;
}

const struct cli_command cmd_top_command = {
    .name = "top",
    .text = top_text,
    .options = top_options,
    .unknown = "unknown option",
    .operands = CLI_ANY_OPERANDS,
    .operands_error = "",
    .option = top_option,
};

static volatile sig_atomic_t top_stop;

static void
on_stop(int sig)
{
    (void)sig;
    top_stop = 1;
}

struct top_view {
    int width, height;
    bool utf8;
    bool by_count;
    size_t sites;
    char status[1024];
};

/* Sparkline of `values` (the last `n` that fit `width` columns), scaled to their maximum. */
static void
sparkline(FILE *out, const struct sval *values, int width, bool utf8)
{
    static const char *const bars[8] = {"\u2581", "\u2582", "\u2583", "\u2584",
                                        "\u2585", "\u2586", "\u2587", "\u2588"};
    static const char ascii[] = " .:-=+*#";
    size_t n = sval_len(values), from = n > (size_t)width ? n - (size_t)width : 0;
    int64_t max = 0;
    for (size_t i = from; i < n; i++) {
        const struct sval *v = sval_at(values, i);
        if (v->type == SVAL_INT && v->u.i > max)
            max = v->u.i;
    }
    for (size_t i = from; i < n; i++) {
        const struct sval *v = sval_at(values, i);
        int64_t x = v->type == SVAL_INT ? v->u.i : 0;
        int level = max > 0 ? (int)((x * 7 + max - 1) / max) : 0;
        if (level > 7)
            level = 7;
        if (utf8)
            fputs(bars[level], out);
        else
            fputc(ascii[level], out);
    }
}

static const struct sval *
samples_of(const struct sval *top, int64_t device, const char *key)
{
    const struct sval *all = sval_get(top, "samples");
    for (size_t i = 0; i < sval_len(all); i++)
        if (control_int(sval_at(all, i), "device") == device)
            return sval_get(sval_at(all, i), key);
    return NULL;
}

/* The stack as the reports cut it (frame_filter.h, with its library entries): the reply's frames
 * in a model of their own. Returns the model (NULL when host memory ran out) and *stack. */
static struct snapshot *
filtered(const struct sval *frames, uint32_t *stack)
{
    size_t n = sval_len(frames);
    struct snapshot *snap = snapshot_create(1);
    uint32_t *ids = malloc((n + 1) * sizeof(*ids));
    bool ok = snap != NULL && ids != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        const struct sval *f = sval_at(frames, i);
        int64_t line = control_int(f, "line");
        ok = snapshot_add_frame(snap, control_str(f, "name"), control_str(f, "filename"),
                                line > 0 ? line : SNAP_LINE_UNKNOWN, &ids[i]) == 0;
    }
    struct snap_entry e = {0};
    ok = ok && snapshot_add_stack(snap, ids, n, &e.stack) == 0 &&
         snapshot_add_entry(snap, 0, &e) == 0 && frame_filter_apply(snap) == 0;
    free(ids);
    if (!ok) {
        snapshot_free(snap);
        return NULL;
    }
    *stack = snap->device_traces[0].entries[0].stack;
    return snap;
}

/* The site's name: its first frame as the reports show it (machinery hidden, a stripped
 * library's offsets collapsed into its entry point, a Python package's frames given way to the
 * program's line with the entry point beside it), as "name (file:line)" with the file's last
 * component; the innermost frame when every one is machinery. */
static void
site_name(const struct sval *frames, char *buf, size_t len)
{
    uint32_t stack = 0;
    struct snapshot *snap = sval_len(frames) > 0 ? filtered(frames, &stack) : NULL;
    if (snap == NULL || snap->stacks[stack].count == 0) {
        snprintf(buf, len, "(no stack recorded)");
        snapshot_free(snap);
        return;
    }
    const struct snap_stack *st = &snap->stacks[stack];
    const char *via = NULL;
    uint32_t pick = snap->stack_frames[st->first];
    if (cli_frame_is_via(snap, pick) && st->count > 1) {
        via = snap->frames[pick].name;
        pick = snap->stack_frames[st->first + 1];
    }
    const struct snap_frame *f = &snap->frames[pick];
    const char *file = f->filename != NULL ? f->filename : "";
    const char *base = strrchr(file, '/');
    char name[200], where[200], beside[200] = "";
    control_term(f->name != NULL ? f->name : "", name, sizeof(name));
    control_term(base ? base + 1 : file, where, sizeof(where));
    if (via != NULL) {
        beside[0] = ' ';
        control_term(via, beside + 1, sizeof(beside) - 1);
    }
    if (f->line > 0)
        snprintf(buf, len, "%s (%s:%lld)%s", name, where, (long long)f->line, beside);
    else if (where[0] != '\0')
        snprintf(buf, len, "%s (%s)%s", name, where, beside);
    else
        snprintf(buf, len, "%s%s", name, beside);
    snapshot_free(snap);
}

struct site_ref {
    const struct sval *site;
    int64_t bytes, count;
    char name[512]; /* what the row shows (site_name): sites shown alike are one row */
};

static int
by_key(const void *a, const void *b)
{
    const struct site_ref *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c != 0)
        return c;
    return control_int(x->site, "device") < control_int(y->site, "device")   ? -1
           : control_int(x->site, "device") > control_int(y->site, "device") ? 1
                                                                             : 0;
}

/* Sites that the table would show alike (the same first user frame on the same device: two
 * callers of one helper) become one row, their bytes and counts summed. Returns the new count. */
static size_t
merge_sites(struct site_ref *refs, size_t n)
{
    qsort(refs, n, sizeof(*refs), by_key);
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        if (out > 0 && by_key(&refs[out - 1], &refs[i]) == 0) {
            refs[out - 1].bytes += refs[i].bytes;
            refs[out - 1].count += refs[i].count;
        } else {
            refs[out++] = refs[i];
        }
    }
    return out;
}

static int
by_bytes(const void *a, const void *b)
{
    const struct site_ref *x = a, *y = b;
    return x->bytes != y->bytes ? (x->bytes > y->bytes ? -1 : 1)
                                : (x->count > y->count ? -1 : x->count < y->count);
}

static int
by_count(const void *a, const void *b)
{
    const struct site_ref *x = a, *y = b;
    return x->count != y->count ? (x->count > y->count ? -1 : 1)
                                : (x->bytes > y->bytes ? -1 : x->bytes < y->bytes);
}

static void
render(FILE *out, const struct sval *top, const struct top_view *v)
{
    char s[5][32];
    char cmd[160] = "";
    const struct sval *argv = sval_get(top, "argv");
    for (size_t i = 0, used = 0; i < sval_len(argv) && used + 2 < sizeof(cmd); i++) {
        const struct sval *a = sval_at(argv, i);
        if (a->type != SVAL_STR)
            continue;
        if (i > 0)
            cmd[used++] = ' ';
        used += strlen(control_term(a->u.s, cmd + used, sizeof(cmd) - used));
    }
    int64_t rank = control_int(top, "rank");
    time_t now = time(NULL);
    char clock[16];
    strftime(clock, sizeof(clock), "%H:%M:%S", localtime(&now));
    fprintf(out, "cuprof top - pid %lld", (long long)control_int(top, "pid"));
    if (rank >= 0)
        fprintf(out, ", rank %lld", (long long)rank);
    char host[64], mode[32];
    fprintf(out, ", %s, %s mode - %s  %s\n\n", control_term(control_str(top, "host"), host, 64),
            control_term(control_str(top, "mode"), mode, 32), cmd, clock);
    fprintf(out, "%-6s %-11s %-11s %-11s %-11s %-5s %s\n", "DEVICE", "ALLOCATED", "RESERVED",
            "PEAK ALLOC", "PEAK RESV", "OOMS", "ALLOCATED, LAST MINUTES");
    const struct sval *devs = sval_get(top, "devices");
    int spark = v->width - 62 > 10 ? v->width - 62 : 10;
    for (size_t i = 0; i < sval_len(devs); i++) {
        const struct sval *d = sval_at(devs, i);
        fprintf(out, "%-6lld %-11s %-11s %-11s %-11s %-5lld ", (long long)control_int(d, "device"),
                cli_size((uint64_t)control_int(d, "allocated"), s[0], 32),
                cli_size((uint64_t)control_int(d, "reserved"), s[1], 32),
                cli_size((uint64_t)control_int(d, "peak_allocated"), s[2], 32),
                cli_size((uint64_t)control_int(d, "peak_reserved"), s[3], 32),
                (long long)(control_int(d, "ooms") + control_int(d, "driver_ooms")));
        sparkline(out, samples_of(top, control_int(d, "device"), "allocated"), spark, v->utf8);
        fputc('\n', out);
    }
    if (sval_len(devs) == 0)
        fprintf(out, "(no device memory used yet)\n");
    const struct sval *sites = sval_get(top, "sites");
    size_t n = sval_len(sites);
    struct site_ref *refs = n ? calloc(n, sizeof(*refs)) : NULL;
    for (size_t i = 0; refs != NULL && i < n; i++) {
        refs[i].site = sval_at(sites, i);
        refs[i].bytes = control_int(refs[i].site, "bytes");
        refs[i].count = control_int(refs[i].site, "count");
        site_name(sval_get(refs[i].site, "frames"), refs[i].name, sizeof(refs[i].name));
    }
    if (refs != NULL) {
        n = merge_sites(refs, n);
        qsort(refs, n, sizeof(*refs), v->by_count ? by_count : by_bytes);
    }
    fprintf(out, "\n%lld allocation stacks hold live memory; the largest call sites, by %s:\n",
            (long long)control_int(top, "live_sites"), v->by_count ? "count" : "bytes");
    fprintf(out, "%-11s %-7s %-6s %s\n", "BYTES", "COUNT", "DEVICE", "SITE (first user frame)");
    for (size_t i = 0; refs != NULL && i < n && i < v->sites; i++) {
        char name[512];
        int room = v->width - 27 > 20 ? v->width - 27 : 20;
        /* Cut at a whole character or escape (the name is escaped already: no control left). */
        (void)text_escape(refs[i].name, strlen(refs[i].name), TEXT_ESCAPE_TERMINAL, name,
                          (size_t)room + 1 < sizeof(name) ? (size_t)room + 1 : sizeof(name));
        fprintf(out, "%-11s %-7lld %-6lld %s\n", cli_size((uint64_t)refs[i].bytes, s[4], 32),
                (long long)refs[i].count, (long long)control_int(refs[i].site, "device"), name);
    }
    free(refs);
    if (v->status[0] != '\0') {
        fputc('\n', out);
        text_escape_fputs(v->status, TEXT_ESCAPE_TERMINAL, out); /* a path from the process */
        fputc('\n', out);
    }
}

static void
terminal_size(struct top_view *v)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
        v->width = ws.ws_col;
        v->height = ws.ws_row;
    }
}

static int
ask_top(const char *path, size_t sites, struct control_reply *r, char *err, size_t err_len)
{
    char req[32];
    snprintf(req, sizeof(req), "TOP %zu", sites > 1000 ? (size_t)1000 : sites ? sites : 1);
    return control_client_ask(path, req, r, err, err_len);
}

/* `top` of one process: its socket, or the only process there is. */
static int
pick_process(int argc, char **argv, char *path, size_t len, pid_t *pid)
{
    char err[512];
    if (argc > 1)
        return cli_usage_error("top", "expected at most one PID");
    if (argc == 1) {
        uint64_t v;
        if (!cli_parse_u64(argv[0], &v) || v == 0 || v > 0x7fffffff)
            return cli_usage_error("top", "PID \"%s\" is not a process id", argv[0]);
        *pid = (pid_t)v;
        if (control_client_find(*pid, path, len, err, sizeof(err)) != 0) {
            fprintf(stderr, "cuprof: top: %s\n", err);
            return CLI_BADUSE;
        }
        return CLI_OK;
    }
    struct control_process *list;
    size_t count, removed;
    if (control_client_list("top", &list, &count, &removed) != 0)
        return CLI_BADUSE;
    int rc = CLI_OK;
    if (count != 1) {
        fprintf(stderr, "cuprof: top: %s; name one PID (see `cuprof ps`)\n",
                count == 0 ? "no process of this user runs under cuprof"
                           : "several processes run under cuprof");
        rc = CLI_BADUSE;
    } else {
        *pid = list[0].pid;
        snprintf(path, len, "%s", list[0].socket_path);
    }
    control_client_list_free(list, count);
    return rc;
}

static void
dump_now(const char *path, pid_t pid, struct top_view *v)
{
    struct control_reply r;
    char err[512];
    if (control_client_ask(path, "DUMP", &r, err, sizeof(err)) == 0) {
        snprintf(v->status, sizeof(v->status), "snapshot of pid %ld written to %s", (long)pid,
                 control_str(&r.value, "path"));
        control_reply_free(&r);
    } else {
        snprintf(v->status, sizeof(v->status), "dump failed: %s", err);
    }
}

/* True when process `pid` has ended (or is ending): its exit removed its socket, or it is gone
 * or a zombie. */
static bool
process_ended(pid_t pid, const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0 && errno == ENOENT)
        return true;
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return true;
    char name[64], text[512];
    snprintf(name, sizeof(name), "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(name, "re");
    size_t n = f != NULL ? fread(text, 1, sizeof(text) - 1, f) : 0;
    if (f != NULL)
        fclose(f);
    text[n] = '\0';
    const char *state = strrchr(text, ')'); /* "pid (comm) S ...": comm may hold anything */
    return f == NULL || (state != NULL && (state[1] == '\0' || state[2] == 'Z' || state[2] == 'X'));
}

/* The interactive loop: raw keys, one refresh a second, the screen redrawn in place. */
static int
live(const char *path, pid_t pid, struct top_view *v, bool fixed_sites)
{
    struct termios old, raw;
    bool tty = tcgetattr(STDIN_FILENO, &old) == 0;
    if (tty) {
        raw = old;
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        tcsetattr(STDIN_FILENO, TCSANOW, &raw);
    }
    struct sigaction sa = {.sa_handler = on_stop};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    fputs("\033[?25l", stdout); /* hide the cursor */
    int rc = CLI_OK;
    while (!top_stop) {
        terminal_size(v);
        if (!fixed_sites)
            v->sites = v->height > 14 ? (size_t)(v->height - 12) : 2;
        struct control_reply r;
        char err[512];
        if (ask_top(path, v->sites, &r, err, sizeof(err)) != 0) {
            if (process_ended(pid, path)) {
                /* The program's end is the natural end of watching it: its last frame stays. */
                fprintf(stdout, "\n");
                fprintf(stderr, "cuprof: top: process %ld exited\n", (long)pid);
                break;
            }
            fprintf(stdout, "\033[H\033[2J");
            fprintf(stderr, "cuprof: top: pid %ld: %s\n", (long)pid, err);
            rc = CLI_FOUND;
            break;
        }
        fputs("\033[H\033[2J", stdout);
        render(stdout, &r.value, v);
        control_reply_free(&r);
        fflush(stdout);
        struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
        (void)poll(&p, tty ? 1 : 0, 1000); /* without a terminal: a one-second pause */
        char key = 0;
        if (tty && (p.revents & POLLIN) != 0 && read(STDIN_FILENO, &key, 1) == 1) {
            if (key == 'q')
                break;
            if (key == 'd')
                dump_now(path, pid, v);
            if (key == 's')
                v->by_count = !v->by_count;
            if (key == '+') {
                v->sites++;
                fixed_sites = true;
            }
            if (key == '-' && v->sites > 1) {
                v->sites--;
                fixed_sites = true;
            }
        }
    }
    fputs("\033[?25h", stdout);
    fflush(stdout);
    if (tty)
        tcsetattr(STDIN_FILENO, TCSANOW, &old);
    return rc;
}

int
cmd_top(int argc, char **argv)
{
    struct top_args args = {.sites = 10};
    struct cli_input in;
    if (!cli_parse(&cmd_top_command, argc, argv, &args, &in))
        return in.status;
    bool once = args.once, json = args.json, fixed_sites = args.fixed_sites;
    struct top_view v = {.width = 100, .height = 30, .sites = args.sites};
    if (once && json)
        return cli_usage_error("top", "--once and --json exclude each other");
    char path[256];
    pid_t pid = 0;
    int rc = pick_process((int)in.count, in.paths, path, sizeof(path), &pid);
    if (rc != CLI_OK)
        return rc;
    setlocale(LC_CTYPE, "");
    v.utf8 = strcmp(nl_langinfo(CODESET), "UTF-8") == 0;
    if (!once && !json && isatty(STDOUT_FILENO))
        return live(path, pid, &v, fixed_sites);
    terminal_size(&v);
    struct control_reply r;
    char err[512];
    if (ask_top(path, v.sites, &r, err, sizeof(err)) != 0) {
        fprintf(stderr, "cuprof: top: pid %ld: %s\n", (long)pid, err);
        return CLI_FOUND;
    }
    if (json) {
        /* The reply as the process sent it: ask again raw rather than re-encode the tree. */
        control_reply_free(&r);
        return control_client_print_raw(path, v.sites, stdout) == 0 ? CLI_OK : CLI_FOUND;
    }
    render(stdout, &r.value, &v);
    control_reply_free(&r);
    return CLI_OK;
}
