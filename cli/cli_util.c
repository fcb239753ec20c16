/* cli_util.c: loading, formatting and progress shared by the subcommands. */
#include "cli/cli_util.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "allocator/cuprof_errors.h"
#include "allocator/trace_sink.h"
#include "snapshot/snapshot_read.h"
#include "snapshot/text_escape.h"

/* Standard input is one stream: read by one thread at a time, and a pipe only once. */
static pthread_mutex_t stdin_lock = PTHREAD_MUTEX_INITIALIZER;
static bool stdin_read;   /* protected by stdin_lock */
static off_t stdin_start; /* protected by stdin_lock: its offset when first read, or -1 */

/* Reads `-`: standard input, from where it stood the first time when it is a file. */
static int
load_stdin(struct snapshot **out, char *err, size_t len)
{
    pthread_mutex_lock(&stdin_lock);
    int rc;
    if (!stdin_read) {
        stdin_read = true;
        stdin_start = lseek(STDIN_FILENO, 0, SEEK_CUR);
        rc = snapshot_read_fd(STDIN_FILENO, CLI_STDIN_NAME, out, err, len);
    } else if (stdin_start >= 0 && lseek(STDIN_FILENO, stdin_start, SEEK_SET) == stdin_start) {
        rc = snapshot_read_fd(STDIN_FILENO, CLI_STDIN_NAME, out, err, len);
    } else {
        snprintf(err, len, "%s: already read (a pipe is read once: give a file)", CLI_STDIN_NAME);
        rc = -CUPROF_EIO;
    }
    pthread_mutex_unlock(&stdin_lock);
    return rc;
}

/* The reader's message for `name`, on one line starting "cuprof: ". */
static void
load_error(const char *name, const char *err)
{
    char safe[1024], what[2048];
    if (err[0] == '\0')
        fprintf(stderr, "cuprof: %s: not a readable snapshot\n", cli_term(name, safe, sizeof safe));
    else if (strstr(err, name) != NULL) /* the reader names the file */
        fprintf(stderr, "cuprof: %s\n",
                cli_term(strncmp(err, "cuprof: ", 8) == 0 ? err + 8 : err, what, sizeof what));
    else
        fprintf(stderr, "cuprof: %s: %s\n", cli_term(name, safe, sizeof safe),
                cli_term(strncmp(err, "cuprof: ", 8) == 0 ? err + 8 : err, what, sizeof what));
}

int
cli_load(const char *path, struct snapshot **out)
{
    struct stat st;
    *out = NULL;
    bool from_stdin = strcmp(path, "-") == 0;
    const char *name = from_stdin ? CLI_STDIN_NAME : path;
    char safe[1024];
    if (!from_stdin && stat(path, &st) != 0) {
        fprintf(stderr, "cuprof: %s: %s\n", cli_term(path, safe, sizeof safe), strerror(errno));
        return CLI_BADUSE;
    }
    bool show =
        !from_stdin && isatty(STDERR_FILENO) && S_ISREG(st.st_mode) && st.st_size > (64 << 20);
    if (show)
        fprintf(stderr, "cuprof: reading %s (%" PRId64 " MiB)...",
                cli_term(path, safe, sizeof safe), (int64_t)(st.st_size >> 20));
    char err[512] = "";
    int rc = from_stdin ? load_stdin(out, err, sizeof(err))
                        : snapshot_read_file(path, out, err, sizeof(err));
    if (show)
        fprintf(stderr, "\r\033[K");
    if (rc != 0 || *out == NULL) {
        load_error(name, err);
        return CLI_BADUSE;
    }
    /* Fields the reader could not use: one line per field name, the rest of the file is read. */
    for (size_t i = 0; i < (*out)->warning_count; i++) {
        fputs("cuprof: ", stderr);
        cli_fputs_term((*out)->warnings[i], stderr);
        fputc('\n', stderr);
    }
    return CLI_OK;
}

const char *
cli_term(const char *s, char *buf, size_t len)
{
    if (s == NULL)
        return "";
    size_t n = strlen(s);
    if (text_escape_is_clean(s, n, TEXT_ESCAPE_TERMINAL))
        return s;
    (void)text_escape(s, n, TEXT_ESCAPE_TERMINAL, buf, len);
    return buf;
}

void
cli_fputs_term(const char *s, FILE *out)
{
    if (s != NULL)
        (void)text_escape_fputs(s, TEXT_ESCAPE_TERMINAL, out);
}

int
cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    /* Sized to the message, which may quote a long argument or list every key: never cut. */
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (text != NULL) {
        va_start(ap, fmt);
        vsnprintf(text, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    /* The message may quote the command line: shown escaped like any text from outside. */
    fprintf(stderr, "cuprof: %s: ", cmd);
    cli_fputs_term(text != NULL ? text : fmt, stderr);
    fprintf(stderr, " (see `cuprof %s --help`)\n", cmd);
    free(text);
    return CLI_BADUSE;
}

const char *
cli_size(uint64_t bytes, char *buf, size_t len)
{
    /* PyTorch's format_size (the OOM message's units). */
    if (bytes < 1024)
        snprintf(buf, len, "%" PRIu64 " bytes", bytes);
    else if (bytes < 1048576)
        snprintf(buf, len, "%.2f KiB", (double)bytes / 1024.0);
    else if (bytes < 1073741824)
        snprintf(buf, len, "%.2f MiB", (double)bytes / 1048576.0);
    else
        snprintf(buf, len, "%.2f GiB", (double)bytes / 1073741824.0);
    return buf;
}

const char *
cli_action_name(unsigned action)
{
    const char *name = trace_action_name(action);
    return name != NULL ? name : "unknown";
}

void
cli_frame_text(const struct snapshot *snap, uint32_t frame, char *buf, size_t len)
{
    if (frame >= snap->frame_count) {
        snprintf(buf, len, "??");
        return;
    }
    const struct snap_frame *f = &snap->frames[frame];
    const char *name = f->name ? f->name : "??";
    const char *file = f->filename ? f->filename : "??";
    if (strcmp(file, "??") == 0 || file[0] == '\0')
        snprintf(buf, len, "%s", name);
    else if (f->line == SNAP_LINE_UNKNOWN)
        snprintf(buf, len, "%s (%s)", name, file);
    else
        snprintf(buf, len, "%s (%s:%" PRId64 ")", name, file, f->line);
}

bool
cli_frame_is_via(const struct snapshot *snap, uint32_t frame)
{
    if (frame >= snap->frame_count)
        return false;
    const struct snap_frame *f = &snap->frames[frame];
    return f->name != NULL && strncmp(f->name, CLI_VIA_PREFIX, strlen(CLI_VIA_PREFIX)) == 0 &&
           (f->filename == NULL || f->filename[0] == '\0') && f->line == SNAP_LINE_UNKNOWN;
}

static uint32_t
stack_frame(const struct snapshot *snap, const struct snap_stack *s, uint32_t i)
{
    return s->first + i < snap->stack_frame_count ? snap->stack_frames[s->first + i] : UINT32_MAX;
}

/* The text of frame i of a stack, with a via frame at i folded in beside frame i + 1; *used is
 * how many frames the text took (1 or 2). */
static void
stack_text(const struct snapshot *snap, const struct snap_stack *s, uint32_t i, char *buf,
           size_t len, uint32_t *used)
{
    uint32_t fi = stack_frame(snap, s, i);
    *used = 1;
    if (i == 0 && s->count > 1 && cli_frame_is_via(snap, fi)) {
        char next[1024];
        cli_frame_text(snap, stack_frame(snap, s, 1), next, sizeof next);
        snprintf(buf, len, "%s %s", next, snap->frames[fi].name);
        *used = 2;
        return;
    }
    cli_frame_text(snap, fi, buf, len);
}

void
cli_print_stack(FILE *out, const struct snapshot *snap, uint32_t stack, int indent,
                size_t max_frames)
{
    if (stack == 0 || stack >= snap->stack_count || snap->stacks[stack].count == 0) {
        fprintf(out, "%*s[no stack recorded]\n", indent, "");
        return;
    }
    const struct snap_stack *s = &snap->stacks[stack];
    char text[2048];
    size_t lines = 0;
    for (uint32_t i = 0; i < s->count; lines++) {
        if (lines == max_frames) {
            fprintf(out, "%*s... %" PRIu32 " more\n", indent, "", s->count - i);
            break;
        }
        uint32_t used;
        stack_text(snap, s, i, text, sizeof text, &used);
        fprintf(out, "%*s", indent, "");
        cli_fputs_term(text, out); /* frame names come from the snapshot */
        fputc('\n', out);
        i += used;
    }
}

const char *
cli_site_name(const struct snapshot *snap, uint32_t stack, size_t frames, char *buf, size_t len)
{
    if (len == 0)
        return buf;
    snprintf(buf, len, "[no stack recorded]");
    if (stack == 0 || stack >= snap->stack_count || snap->stacks[stack].count == 0)
        return buf;
    const struct snap_stack *s = &snap->stacks[stack];
    size_t used = 0, shown = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < s->count && shown < frames && used + 1 < len; shown++) {
        char raw[2048], safe[2048];
        uint32_t took;
        stack_text(snap, s, i, raw, sizeof raw, &took);
        int w = snprintf(buf + used, len - used, "%s%s", shown ? " < " : "",
                         cli_term(raw, safe, sizeof safe));
        if (w < 0)
            break;
        used += (size_t)w < len - used ? (size_t)w : len - used - 1;
        i += took;
    }
    return buf;
}

char *
cli_stack_line(const struct snapshot *snap, uint32_t stack, const char *sep, bool outer_first)
{
    size_t cap = 256, len = 0;
    char *line = malloc(cap);
    if (line == NULL)
        return NULL;
    line[0] = '\0';
    if (stack == 0 || stack >= snap->stack_count || snap->stacks[stack].count == 0) {
        snprintf(line, cap, "[no stack]");
        return line;
    }
    const struct snap_stack *s = &snap->stacks[stack];
    char raw[1024], text[1024];
    for (uint32_t k = 0; k < s->count; k++) {
        uint32_t i = outer_first ? s->count - 1 - k : k;
        uint32_t fi =
            s->first + i < snap->stack_frame_count ? snap->stack_frames[s->first + i] : UINT32_MAX;
        cli_frame_text(snap, fi, raw, sizeof(raw));
        (void)text_escape(raw, strlen(raw), TEXT_ESCAPE_TERMINAL, text, sizeof text);
        size_t need = len + strlen(sep) + strlen(text) + 1;
        if (need > cap) {
            while (cap < need)
                cap *= 2;
            char *bigger = realloc(line, cap);
            if (bigger == NULL) {
                free(line);
                return NULL;
            }
            line = bigger;
        }
        if (k > 0) {
            memcpy(line + len, sep, strlen(sep));
            len += strlen(sep);
        }
        memcpy(line + len, text, strlen(text) + 1);
        len += strlen(text);
    }
    return line;
}

void
cli_progress_begin(struct cli_progress *p, const char *what)
{
    p->enabled = isatty(STDERR_FILENO) != 0;
    p->what = what;
    p->last_percent = -1;
}

void
cli_progress_update(struct cli_progress *p, size_t done, size_t total)
{
    if (!p->enabled || total == 0)
        return;
    int percent = (int)((double)done * 100.0 / (double)total);
    if (percent == p->last_percent)
        return;
    p->last_percent = percent;
    fprintf(stderr, "\rcuprof: %s %3d%%", p->what, percent);
    fflush(stderr);
}

void
cli_progress_end(struct cli_progress *p)
{
    if (p->enabled && p->last_percent >= 0)
        fprintf(stderr, "\r\033[K");
    p->last_percent = -1;
}

bool
cli_parse_u64(const char *text, uint64_t *value)
{
    if (text == NULL || *text < '0' || *text > '9')
        return false;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0')
        return false;
    *value = (uint64_t)v;
    return true;
}

bool
cli_parse_size(const char *text, uint64_t *bytes)
{
    static const struct {
        const char *unit;
        uint64_t scale;
    } units[] = {
        {"", 1},
        {"b", 1},
        {"k", 1ull << 10},
        {"kib", 1ull << 10},
        {"kb", 1000ull},
        {"m", 1ull << 20},
        {"mib", 1ull << 20},
        {"mb", 1000000ull},
        {"g", 1ull << 30},
        {"gib", 1ull << 30},
        {"gb", 1000000000ull},
        {"t", 1ull << 40},
        {"tib", 1ull << 40},
        {"tb", 1000000000000ull},
    };
    if (text == NULL || *text < '0' || *text > '9')
        return false;
    /* Whole part and fraction as exact integers: 1.5GiB is 1610612736, never 1610612735. */
    uint64_t whole = 0, frac = 0, frac_scale = 1;
    const char *p = text;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (whole > (UINT64_MAX - 9) / 10)
            return false;
        whole = whole * 10 + (uint64_t)(*p - '0');
    }
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            return false;
        for (; *p >= '0' && *p <= '9'; p++) {
            if (frac_scale >= 1000000ull)
                continue; /* six digits: frac * scale stays below 2^60 */
            frac = frac * 10 + (uint64_t)(*p - '0');
            frac_scale *= 10;
        }
    }
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcasecmp(p, units[i].unit) != 0)
            continue;
        uint64_t scale = units[i].scale;
        if (whole > (1ull << 63) / scale)
            return false;
        uint64_t total = whole * scale + frac * scale / frac_scale; /* frac < 10^6, scale <= 2^40 */
        if (total > (1ull << 63))
            return false;
        *bytes = total;
        return true;
    }
    return false;
}

static int
cli_json_write(void *ctx, const void *buf, size_t len)
{
    return fwrite(buf, 1, len, ctx) == len ? 0 : -CUPROF_EIO;
}

void
cli_json_string(struct emitter *e, const char *s)
{
    if (s == NULL)
        s = "";
    size_t n = strlen(s);
    if (text_escape_is_clean(s, n, TEXT_ESCAPE_UTF8)) {
        emitter_string(e, s);
        return;
    }
    /* A snapshot's strings may hold any bytes: the output stays valid UTF-8 (\xHH). */
    char *escaped = text_escape_dup(s, n, TEXT_ESCAPE_UTF8);
    emitter_string(e, escaped != NULL ? escaped : "?");
    free(escaped);
}

struct emitter *
cli_json_open(FILE *out)
{
    struct emitter *e = json_emitter_create(cli_json_write, out);
    if (e == NULL)
        fprintf(stderr, "cuprof: out of host memory\n");
    return e;
}

bool
cli_json_close(struct emitter *e)
{
    if (e == NULL)
        return false;
    int rc = emitter_finish(e);
    emitter_destroy(e);
    return rc == 0;
}

void
cli_json_frames(struct emitter *e, const struct snapshot *snap, uint32_t stack)
{
    emitter_begin_list(e);
    if (stack != 0 && stack < snap->stack_count) {
        const struct snap_stack *s = &snap->stacks[stack];
        for (uint32_t i = 0; i < s->count && s->first + i < snap->stack_frame_count; i++) {
            uint32_t fi = snap->stack_frames[s->first + i];
            if (fi >= snap->frame_count)
                continue;
            const struct snap_frame *f = &snap->frames[fi];
            emitter_begin_dict(e);
            cli_json_key_string(e, "name", f->name);
            cli_json_key_string(e, "filename", f->filename);
            emitter_key(e, "line");
            emitter_int(e, f->line);
            emitter_end(e);
        }
    }
    emitter_end(e);
}
