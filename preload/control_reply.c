/* control_reply.c: what INFO, TOP and DUMP answer (see control_reply.h). Strings from outside
 * (argv, the host name, frame and file names, paths) go through control_json's escaping. */
#include "preload/control_reply.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allocator/allocator.h"
#include "allocator/cuprof_errors.h"
#include "preload/control_json.h"
#include "preload/control_sample.h"
#include "preload/dumper.h"
#include "preload/oom_log.h"
#include "preload/path_template.h"
#include "preload/runtime.h"
#include "snapshot/control_socket.h"
#include "snapshot/stacks.h"
#include "snapshot/symbolize.h"

#define CONTROL_SITES_MAX   1000
#define CONTROL_SITE_FRAMES 24
#define CONTROL_DEVICES_MAX 64
#define CONTROL_CMDLINE_MAX 4096

static struct symbolizer *reply_symbolizer; /* made at the first TOP, kept for its cache */

/* ---- What a reply says -------------------------------------------------------------------- */

static void
put_argv(struct control_json *b)
{
    char buf[CONTROL_CMDLINE_MAX];
    size_t total = 0;
    FILE *f = fopen("/proc/self/cmdline", "re");
    if (f != NULL) {
        total = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
    }
    buf[total] = '\0';
    control_json_put(b, "[", 1);
    for (size_t at = 0, n = 0; at < total; at += strlen(buf + at) + 1, n++) {
        if (n > 0)
            control_json_put(b, ",", 1);
        control_json_str(b, buf + at);
    }
    control_json_put(b, "]", 1);
}

static void
put_process(struct control_json *b, const struct cuprof_runtime *rt)
{
    static const char *const mode_names[] = {"cache", "trace", "off"};
    char host[256];
    if (gethostname(host, sizeof(host)) != 0)
        strcpy(host, "unknown");
    host[sizeof(host) - 1] = '\0';
    control_json_printf(b, "\"protocol\":1,\"version\":");
    control_json_str(b, CUPROF_VERSION);
    control_json_printf(b, ",\"pid\":%ld,\"rank\":%lld,\"host\":", (long)getpid(),
                        (long long)path_template_rank_value());
    control_json_str(b, host);
    control_json_printf(b, ",\"mode\":");
    control_json_str(b, mode_names[rt->mode]);
    control_json_printf(b, ",\"argv\":");
    put_argv(b);
    control_json_printf(b, ",\"devices\":[");
    bool first = true;
    for (int d = 0; d < rt->device_count; d++) {
        struct memory_stats st;
        allocator_get_stats(rt->alloc, d, &st);
        uint64_t driver_ooms = oom_log_driver_refusals(d);
        if (st.reserved_bytes[STAT_ALL].peak == 0 && st.num_ooms == 0 && driver_ooms == 0 &&
            st.allocated_bytes[STAT_ALL].peak == 0)
            continue; /* a device the program never used */
        control_json_printf(
            b,
            "%s{\"device\":%d,\"allocated\":%lld,\"reserved\":%lld,\"peak_allocated\":%lld,"
            "\"peak_reserved\":%lld,\"active\":%lld,\"segments\":%lld,\"ooms\":%lld,"
            "\"driver_ooms\":%llu}",
            first ? "" : ",", d, (long long)st.allocated_bytes[STAT_ALL].current,
            (long long)st.reserved_bytes[STAT_ALL].current,
            (long long)st.allocated_bytes[STAT_ALL].peak,
            (long long)st.reserved_bytes[STAT_ALL].peak, (long long)st.active[STAT_ALL].current,
            (long long)st.segment[STAT_ALL].current, (long long)st.num_ooms,
            (unsigned long long)driver_ooms);
        first = false;
    }
    control_json_put(b, "]", 1);
}

struct site {
    int device;
    uint32_t stack;
    uint64_t bytes, count;
};

static int
site_order(const void *a, const void *b)
{
    const struct site *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    return x->stack < y->stack ? -1 : x->stack > y->stack;
}

static int
stack_order(const void *a, const void *b)
{
    const struct block_info *x = a, *y = b;
    return x->stack_id < y->stack_id ? -1 : x->stack_id > y->stack_id;
}

/* The live blocks of one device, copied under its lock (retried while the table grows). */
static struct block_info *
copy_blocks(struct cuprof_runtime *rt, int device, size_t *nb)
{
    struct segment_info *segs = NULL;
    struct block_info *blocks = NULL;
    size_t ns = 0;
    *nb = 0;
    for (int tries = 0; tries < 8; tries++) {
        size_t want_s, want_b;
        allocator_lock_device(rt->alloc, device);
        allocator_count_locked(rt->alloc, device, &want_s, &want_b);
        allocator_unlock_device(rt->alloc, device);
        free(segs);
        free(blocks);
        segs = malloc((want_s + 16) * sizeof(*segs));
        blocks = malloc((want_b + 64) * sizeof(*blocks));
        if (segs == NULL || blocks == NULL)
            break;
        allocator_lock_device(rt->alloc, device);
        int rc = allocator_copy_locked(rt->alloc, device, segs, want_s + 16, blocks, want_b + 64,
                                       &ns, nb);
        allocator_unlock_device(rt->alloc, device);
        if (rc == 0)
            break;
        *nb = 0;
    }
    free(segs);
    return blocks;
}

/* Live blocks of one device grouped by allocation stack, appended to *sites. */
static int
collect_sites(struct cuprof_runtime *rt, int device, struct site **sites, size_t *n, size_t *cap)
{
    size_t nb = 0;
    struct block_info *blocks = copy_blocks(rt, device, &nb);
    if (blocks == NULL)
        return -CUPROF_EHOSTMEM;
    qsort(blocks, nb, sizeof(*blocks), stack_order);
    for (size_t i = 0; i < nb; i++) {
        if (blocks[i].state == BLOCK_INACTIVE)
            continue;
        if (*n == 0 || (*sites)[*n - 1].device != device ||
            (*sites)[*n - 1].stack != blocks[i].stack_id) {
            if (*n == *cap) {
                size_t c = *cap ? *cap * 2 : 256;
                struct site *grown = realloc(*sites, c * sizeof(*grown));
                if (grown == NULL) {
                    free(blocks);
                    return -CUPROF_EHOSTMEM;
                }
                *sites = grown;
                *cap = c;
            }
            (*sites)[(*n)++] = (struct site){device, blocks[i].stack_id, 0, 0};
        }
        (*sites)[*n - 1].bytes += blocks[i].requested_size;
        (*sites)[*n - 1].count++;
    }
    free(blocks);
    return 0;
}

static void
put_frames(struct control_json *b, uint32_t stack)
{
    const uintptr_t *ips;
    size_t count = 0, shown = 0;
    control_json_put(b, "[", 1);
    if (stack != 0 && stacks_get(stack, &ips, &count)) {
        if (reply_symbolizer == NULL)
            reply_symbolizer = symbolizer_create();
        for (size_t i = 0; i < count && shown < CONTROL_SITE_FRAMES; i++) {
            struct symbolized_frame fr[8];
            size_t k = 0;
            if (reply_symbolizer == NULL ||
                symbolizer_lookup(reply_symbolizer, ips[i], fr, 8, &k) != 0)
                continue;
            for (size_t j = 0; j < k && j < 8 && shown < CONTROL_SITE_FRAMES; j++, shown++) {
                control_json_printf(b, "%s{\"name\":", shown ? "," : "");
                control_json_str(b, fr[j].name);
                control_json_printf(b, ",\"filename\":");
                control_json_str(b, fr[j].filename);
                control_json_printf(b, ",\"line\":%lld}", (long long)fr[j].line);
            }
        }
    }
    control_json_put(b, "]", 1);
}

static void
put_sites(struct control_json *b, struct cuprof_runtime *rt, size_t top)
{
    struct site *sites = NULL;
    size_t n = 0, cap = 0;
    for (int d = 0; d < rt->device_count && d < CONTROL_DEVICES_MAX; d++)
        if (collect_sites(rt, d, &sites, &n, &cap) != 0)
            b->failed = true;
    if (n > 1)
        qsort(sites, n, sizeof(*sites), site_order);
    control_json_printf(b, ",\"live_sites\":%zu,\"sites\":[", n);
    for (size_t i = 0; i < n && i < top; i++) {
        control_json_printf(b, "%s{\"device\":%d,\"bytes\":%llu,\"count\":%llu,\"frames\":",
                            i ? "," : "", sites[i].device, (unsigned long long)sites[i].bytes,
                            (unsigned long long)sites[i].count);
        put_frames(b, sites[i].stack);
        control_json_put(b, "}", 1);
    }
    control_json_put(b, "]", 1);
    free(sites);
}

/* ---- Reply lines -------------------------------------------------------------------------- */

static char *
line_of(const char *status, const char *text, size_t tlen, size_t *len)
{
    size_t slen = strlen(status);
    char *line = malloc(slen + tlen + 2);
    if (line == NULL)
        return NULL;
    memcpy(line, status, slen);
    memcpy(line + slen, text, tlen);
    line[slen + tlen] = '\n';
    line[slen + tlen + 1] = '\0';
    *len = slen + tlen + 1;
    return line;
}

char *
control_reply_error(const char *message, size_t *len)
{
    return line_of("ERROR ", message, strlen(message), len);
}

static char *
reply_json(struct control_json *b, size_t *len)
{
    char *line = b->failed || b->p == NULL
                     ? control_reply_error("out of host memory while building the reply", len)
                     : line_of("OK ", b->p, b->len, len);
    free(b->p);
    return line;
}

static char *
answer_dump(struct cuprof_runtime *rt, const char *arg, size_t *len)
{
    if (arg != NULL && arg[0] != '/')
        return control_reply_error("DUMP takes an absolute path (or none for CUPROF_SNAPSHOT)",
                                   len);
    char written[PATH_MAX + 32] = "";
    int rc = dumper_dump_named(rt, arg, written, sizeof(written));
    if (rc != 0) {
        char msg[256];
        snprintf(msg, sizeof(msg), "the snapshot was not written: %s",
                 rc == -CUPROF_EINVAL     ? "the program is exiting or the path is too long"
                 : rc == -CUPROF_EHOSTMEM ? "out of host memory"
                                          : "write error (see the program's stderr)");
        return control_reply_error(msg, len);
    }
    char absolute[PATH_MAX];
    struct control_json b = {0};
    control_json_printf(&b, "{\"path\":");
    control_json_str(&b, realpath(written, absolute) != NULL ? absolute : written);
    control_json_put(&b, "}", 1);
    return reply_json(&b, len);
}

static char *
answer_top(struct cuprof_runtime *rt, const char *arg, size_t *len)
{
    char *end = NULL;
    unsigned long top = arg == NULL ? 20 : strtoul(arg, &end, 10);
    if (arg != NULL && (end == arg || *end != '\0' || top == 0 || top > CONTROL_SITES_MAX))
        return control_reply_error("TOP takes a number of call sites from 1 to 1000", len);
    struct control_json b = {0};
    control_json_put(&b, "{", 1);
    put_process(&b, rt);
    control_sample_put_json(&b);
    put_sites(&b, rt, top);
    control_json_put(&b, "}", 1);
    return reply_json(&b, len);
}

char *
control_reply_answer(struct cuprof_runtime *rt, char *request, size_t *len)
{
    size_t plen = strlen(CONTROL_PROTOCOL);
    if (strncmp(request, CONTROL_PROTOCOL, plen) != 0 || request[plen] != ' ')
        return control_reply_error("unknown protocol: requests start with " CONTROL_PROTOCOL, len);
    char *cmd = request + plen + 1;
    char *arg = strchr(cmd, ' ');
    if (arg != NULL)
        *arg++ = '\0';
    if (strcmp(cmd, "INFO") == 0 && arg == NULL) {
        struct control_json b = {0};
        control_json_put(&b, "{", 1);
        put_process(&b, rt);
        control_json_put(&b, "}", 1);
        return reply_json(&b, len);
    }
    if (strcmp(cmd, "TOP") == 0)
        return answer_top(rt, arg, len);
    if (strcmp(cmd, "DUMP") == 0)
        return answer_dump(rt, arg, len);
    return control_reply_error("unknown request: expected INFO, TOP [N] or DUMP [PATH]", len);
}
