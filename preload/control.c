/* control.c: the control thread: poll the listening socket with a one-second timeout, sample the
 * devices' counters on each tick, serve one client at a time (the peer checked, every read and
 * write under a timeout, so a stalled client costs this thread a few seconds and the program
 * nothing). Replies are JSON built in a growing buffer outside every cuprof lock. */
#include "preload/control.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "allocator/allocator.h"
#include "allocator/cuprof_errors.h"
#include "preload/config.h"
#include "preload/dumper.h"
#include "preload/path_template.h"
#include "preload/runtime.h"
#include "snapshot/control_socket.h"
#include "snapshot/stacks.h"
#include "snapshot/symbolize.h"

#define CONTROL_SAMPLES         600 /* ten minutes of one-second samples for `top` */
#define CONTROL_IO_MS           2000
#define CONTROL_MIN_INTERVAL_MS 50 /* 20 requests a second at most */
#define CONTROL_SITES_MAX       1000
#define CONTROL_SITE_FRAMES     24
#define CONTROL_DEVICES_MAX     64
#define CONTROL_CMDLINE_MAX     4096

struct control_state {
    struct cuprof_runtime *rt;
    int listen_fd;
    pid_t owner; /* the process that bound the socket: only it removes the file */
    char path[108];
    /* Samples, written by the control thread only. */
    int devices;
    int64_t (*allocated)[CONTROL_SAMPLES];
    int64_t (*reserved)[CONTROL_SAMPLES];
    size_t sample_count, sample_next;
    struct timespec last_sample;
    struct symbolizer *sym;
};

static struct control_state control = {.listen_fd = -1};
static atomic_bool control_exit_registered;

/* ---- A growing JSON text ------------------------------------------------------------------ */

struct jbuf {
    char *p;
    size_t len, cap;
    bool failed;
};

static void
jb_put(struct jbuf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (b->len + n + 1 > cap)
            cap *= 2;
        char *grown = cap > CONTROL_REPLY_MAX ? NULL : realloc(b->p, cap);
        if (grown == NULL) {
            b->failed = true;
            return;
        }
        b->p = grown;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

__attribute__((format(printf, 2, 3))) static void
jb_printf(struct jbuf *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(small)) {
        b->failed = true;
        return;
    }
    jb_put(b, small, (size_t)n);
}

/* A JSON string: quotes, backslashes and control characters escaped; other bytes as they are. */
static void
jb_str(struct jbuf *b, const char *s)
{
    jb_put(b, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c != '\0'; c++) {
        if (*c == '"' || *c == '\\') {
            char esc[2] = {'\\', (char)*c};
            jb_put(b, esc, 2);
        } else if (*c < 0x20) {
            jb_printf(b, "\\u%04x", *c);
        } else {
            jb_put(b, (const char *)c, 1);
        }
    }
    jb_put(b, "\"", 1);
}

/* ---- What a reply says -------------------------------------------------------------------- */

static void
put_argv(struct jbuf *b)
{
    char buf[CONTROL_CMDLINE_MAX];
    size_t total = 0;
    FILE *f = fopen("/proc/self/cmdline", "re");
    if (f != NULL) {
        total = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
    }
    buf[total] = '\0';
    jb_put(b, "[", 1);
    for (size_t at = 0, n = 0; at < total; at += strlen(buf + at) + 1, n++) {
        if (n > 0)
            jb_put(b, ",", 1);
        jb_str(b, buf + at);
    }
    jb_put(b, "]", 1);
}

static void
put_process(struct jbuf *b, const struct cuprof_runtime *rt)
{
    static const char *const mode_names[] = {"cache", "trace", "off"};
    char host[256];
    if (gethostname(host, sizeof(host)) != 0)
        strcpy(host, "unknown");
    host[sizeof(host) - 1] = '\0';
    jb_printf(b, "\"protocol\":1,\"version\":");
    jb_str(b, CUPROF_VERSION);
    jb_printf(b, ",\"pid\":%ld,\"rank\":%lld,\"host\":", (long)getpid(),
              (long long)path_template_rank_value());
    jb_str(b, host);
    jb_printf(b, ",\"mode\":");
    jb_str(b, mode_names[rt->mode]);
    jb_printf(b, ",\"argv\":");
    put_argv(b);
    jb_printf(b, ",\"devices\":[");
    bool first = true;
    for (int d = 0; d < rt->device_count; d++) {
        struct memory_stats st;
        allocator_get_stats(rt->alloc, d, &st);
        if (st.reserved_bytes[STAT_ALL].peak == 0 && st.num_ooms == 0 &&
            st.allocated_bytes[STAT_ALL].peak == 0)
            continue; /* a device the program never used */
        jb_printf(b,
                  "%s{\"device\":%d,\"allocated\":%lld,\"reserved\":%lld,\"peak_allocated\":%lld,"
                  "\"peak_reserved\":%lld,\"active\":%lld,\"segments\":%lld,\"ooms\":%lld}",
                  first ? "" : ",", d, (long long)st.allocated_bytes[STAT_ALL].current,
                  (long long)st.reserved_bytes[STAT_ALL].current,
                  (long long)st.allocated_bytes[STAT_ALL].peak,
                  (long long)st.reserved_bytes[STAT_ALL].peak,
                  (long long)st.active[STAT_ALL].current, (long long)st.segment[STAT_ALL].current,
                  (long long)st.num_ooms);
        first = false;
    }
    jb_put(b, "]", 1);
}

static void
put_samples(struct jbuf *b)
{
    jb_printf(b, ",\"sample_interval_ms\":1000,\"samples\":[");
    size_t n = control.sample_count;
    size_t start = (control.sample_next + CONTROL_SAMPLES - n) % CONTROL_SAMPLES;
    for (int d = 0; d < control.devices; d++) {
        jb_printf(b, "%s{\"device\":%d,\"allocated\":[", d ? "," : "", d);
        for (size_t i = 0; i < n; i++)
            jb_printf(b, "%s%lld", i ? "," : "",
                      (long long)control.allocated[d][(start + i) % CONTROL_SAMPLES]);
        jb_printf(b, "],\"reserved\":[");
        for (size_t i = 0; i < n; i++)
            jb_printf(b, "%s%lld", i ? "," : "",
                      (long long)control.reserved[d][(start + i) % CONTROL_SAMPLES]);
        jb_put(b, "]}", 2);
    }
    jb_put(b, "]", 1);
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

/* Live blocks of one device grouped by allocation stack, appended to *sites. */
static int
collect_sites(struct cuprof_runtime *rt, int device, struct site **sites, size_t *n, size_t *cap)
{
    struct segment_info *segs = NULL;
    struct block_info *blocks = NULL;
    size_t ns = 0, nb = 0;
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
                                       &ns, &nb);
        allocator_unlock_device(rt->alloc, device);
        if (rc == 0)
            break;
        nb = 0;
    }
    free(segs);
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
put_frames(struct jbuf *b, uint32_t stack)
{
    const uintptr_t *ips;
    size_t count = 0, shown = 0;
    jb_put(b, "[", 1);
    if (stack != 0 && stacks_get(stack, &ips, &count)) {
        if (control.sym == NULL)
            control.sym = symbolizer_create();
        for (size_t i = 0; i < count && shown < CONTROL_SITE_FRAMES; i++) {
            struct symbolized_frame fr[8];
            size_t k = 0;
            if (control.sym == NULL || symbolizer_lookup(control.sym, ips[i], fr, 8, &k) != 0)
                continue;
            for (size_t j = 0; j < k && j < 8 && shown < CONTROL_SITE_FRAMES; j++, shown++) {
                jb_printf(b, "%s{\"name\":", shown ? "," : "");
                jb_str(b, fr[j].name);
                jb_printf(b, ",\"filename\":");
                jb_str(b, fr[j].filename);
                jb_printf(b, ",\"line\":%lld}", (long long)fr[j].line);
            }
        }
    }
    jb_put(b, "]", 1);
}

static void
put_sites(struct jbuf *b, struct cuprof_runtime *rt, size_t top)
{
    struct site *sites = NULL;
    size_t n = 0, cap = 0;
    for (int d = 0; d < rt->device_count && d < CONTROL_DEVICES_MAX; d++)
        if (collect_sites(rt, d, &sites, &n, &cap) != 0)
            b->failed = true;
    if (n > 1)
        qsort(sites, n, sizeof(*sites), site_order);
    jb_printf(b, ",\"live_sites\":%zu,\"sites\":[", n);
    for (size_t i = 0; i < n && i < top; i++) {
        jb_printf(b, "%s{\"device\":%d,\"bytes\":%llu,\"count\":%llu,\"frames\":", i ? "," : "",
                  sites[i].device, (unsigned long long)sites[i].bytes,
                  (unsigned long long)sites[i].count);
        put_frames(b, sites[i].stack);
        jb_put(b, "}", 1);
    }
    jb_put(b, "]", 1);
    free(sites);
}

/* ---- Serving ------------------------------------------------------------------------------ */

/* One reply line, written with as few sends as it takes (a short reply in one). */
static void
reply(int fd, const char *status, const char *text)
{
    size_t slen = strlen(status), tlen = strlen(text);
    char small[512];
    char *line = slen + tlen + 1 <= sizeof(small) ? small : malloc(slen + tlen + 1);
    if (line == NULL)
        return; /* out of host memory: the client sees the connection close */
    memcpy(line, status, slen);
    memcpy(line + slen, text, tlen);
    line[slen + tlen] = '\n';
    const char *p = line;
    size_t n = slen + tlen + 1;
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break; /* the client went away or stalled past the timeout */
        p += w;
        n -= (size_t)w;
    }
    if (line != small)
        free(line);
}

static void
reply_json(int fd, struct jbuf *b)
{
    if (b->failed || b->p == NULL)
        reply(fd, "ERROR ", "out of host memory while building the reply");
    else
        reply(fd, "OK ", b->p);
    free(b->p);
}

/* After a reply sent before the request was read: reads what the client still sends (bounded,
 * under the timeout, thrown away), since closing with unread bytes resets the connection and
 * can lose the reply on its way. */
static void
drain(int fd)
{
    char sink[4096];
    (void)shutdown(fd, SHUT_WR);
    for (size_t drained = 0; drained < ((size_t)1 << 20);) {
        ssize_t n = recv(fd, sink, sizeof(sink), 0);
        if (n <= 0 && !(n < 0 && errno == EINTR))
            break;
        drained += n > 0 ? (size_t)n : 0;
    }
}

/* Reads one request line; false (an error reply sent) when there is none. */
static bool
read_request(int fd, char *line, size_t cap)
{
    size_t used = 0;
    while (used + 1 < cap) {
        ssize_t n = recv(fd, line + used, cap - 1 - used, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (used > 0)
                break; /* no newline before the end: take what came */
            return false;
        }
        used += (size_t)n;
        line[used] = '\0';
        char *nl = memchr(line, '\n', used);
        if (nl != NULL) {
            *nl = '\0';
            if (nl > line && nl[-1] == '\r')
                nl[-1] = '\0';
            return true;
        }
    }
    line[used] = '\0';
    if (used + 1 >= cap) {
        reply(fd, "ERROR ", "request longer than 4096 bytes");
        drain(fd);
        return false;
    }
    return true;
}

static void
serve_dump(int fd, struct cuprof_runtime *rt, const char *arg)
{
    if (arg != NULL && arg[0] != '/') {
        reply(fd, "ERROR ", "DUMP takes an absolute path (or none for CUPROF_SNAPSHOT)");
        return;
    }
    char written[PATH_MAX + 32] = "";
    int rc = dumper_dump_named(rt, arg, written, sizeof(written));
    if (rc != 0) {
        char msg[PATH_MAX + 128];
        snprintf(msg, sizeof(msg), "the snapshot was not written: %s",
                 rc == -CUPROF_EINVAL     ? "the program is exiting or the path is too long"
                 : rc == -CUPROF_EHOSTMEM ? "out of host memory"
                                          : "write error (see the program's stderr)");
        reply(fd, "ERROR ", msg);
        return;
    }
    char absolute[PATH_MAX];
    struct jbuf b = {0};
    jb_printf(&b, "{\"path\":");
    jb_str(&b, realpath(written, absolute) != NULL ? absolute : written);
    jb_put(&b, "}", 1);
    reply_json(fd, &b);
}

static void
serve(int fd, struct cuprof_runtime *rt)
{
    control_socket_set_timeouts(fd, CONTROL_IO_MS);
    if (!control_socket_peer_allowed(fd)) {
        reply(fd, "ERROR ", "permission denied: the client runs as another user");
        drain(fd);
        return;
    }
    char line[CONTROL_REQUEST_MAX + 1];
    if (!read_request(fd, line, sizeof(line)))
        return;
    size_t plen = strlen(CONTROL_PROTOCOL);
    if (strncmp(line, CONTROL_PROTOCOL, plen) != 0 || line[plen] != ' ') {
        reply(fd, "ERROR ", "unknown protocol: requests start with " CONTROL_PROTOCOL);
        return;
    }
    char *cmd = line + plen + 1;
    char *arg = strchr(cmd, ' ');
    if (arg != NULL)
        *arg++ = '\0';
    if (strcmp(cmd, "INFO") == 0 && arg == NULL) {
        struct jbuf b = {0};
        jb_put(&b, "{", 1);
        put_process(&b, rt);
        jb_put(&b, "}", 1);
        reply_json(fd, &b);
    } else if (strcmp(cmd, "TOP") == 0) {
        char *end = NULL;
        unsigned long top = arg == NULL ? 20 : strtoul(arg, &end, 10);
        if (arg != NULL && (end == arg || *end != '\0' || top == 0 || top > CONTROL_SITES_MAX)) {
            reply(fd, "ERROR ", "TOP takes a number of call sites from 1 to 1000");
            return;
        }
        struct jbuf b = {0};
        jb_put(&b, "{", 1);
        put_process(&b, rt);
        put_samples(&b);
        put_sites(&b, rt, top);
        jb_put(&b, "}", 1);
        reply_json(fd, &b);
    } else if (strcmp(cmd, "DUMP") == 0) {
        serve_dump(fd, rt, arg);
    } else {
        reply(fd, "ERROR ", "unknown request: expected INFO, TOP [N] or DUMP [PATH]");
    }
}

static void
sample(struct cuprof_runtime *rt)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long ms = (now.tv_sec - control.last_sample.tv_sec) * 1000 +
              (now.tv_nsec - control.last_sample.tv_nsec) / 1000000;
    if (control.sample_count > 0 && ms < 1000)
        return;
    control.last_sample = now;
    for (int d = 0; d < control.devices; d++) {
        struct memory_stats st;
        allocator_get_stats(rt->alloc, d, &st);
        control.allocated[d][control.sample_next] = st.allocated_bytes[STAT_ALL].current;
        control.reserved[d][control.sample_next] = st.reserved_bytes[STAT_ALL].current;
    }
    control.sample_next = (control.sample_next + 1) % CONTROL_SAMPLES;
    if (control.sample_count < CONTROL_SAMPLES)
        control.sample_count++;
}

static void *
control_thread(void *arg)
{
    struct cuprof_runtime *rt = arg;
    int fd = control.listen_fd;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, 1000);
        if (r < 0 && errno != EINTR)
            return NULL;
        sample(rt);
        if (r > 0 && (p.revents & POLLIN) != 0) {
            int client = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
            if (client >= 0) {
                serve(client, rt);
                close(client);
                /* At most one request per interval: a flood of clients waits in the backlog
                 * instead of taking the program's CPU and device locks. */
                struct timespec pause = {0, CONTROL_MIN_INTERVAL_MS * 1000000L};
                while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {
                }
            }
        } else if (r > 0) {
            return NULL; /* the socket was closed under us (fork child, exit) */
        }
    }
}

static void
control_at_exit(void)
{
    if (control.listen_fd >= 0 && control.owner == getpid())
        unlink(control.path);
}

void
control_start(struct cuprof_runtime *rt)
{
    if (rt->config->control != 0) /* "on" is choice 0 */
        return;
    char dirs[2][256], err[512] = "";
    size_t ndirs = control_socket_dirs(dirs, 2);
    int fd = -1;
    for (size_t i = 0; i < ndirs && fd < 0; i++) {
        if (control_socket_check_dir(dirs[i], true, err, sizeof(err)) != 0 ||
            control_socket_path(dirs[i], getpid(), control.path, sizeof(control.path)) != 0)
            continue;
        fd = control_socket_listen(control.path, err, sizeof(err));
    }
    if (fd < 0) {
        runtime_log("cuprof: no control socket (%s): `cuprof ps`, `dump` and `top` cannot see "
                    "this process",
                    err[0] ? err : "no usable directory");
        return;
    }
    control.rt = rt;
    control.owner = getpid();
    control.devices =
        rt->device_count < CONTROL_DEVICES_MAX ? rt->device_count : CONTROL_DEVICES_MAX;
    if (control.allocated == NULL) {
        control.allocated = calloc((size_t)control.devices + 1, sizeof(*control.allocated));
        control.reserved = calloc((size_t)control.devices + 1, sizeof(*control.reserved));
    }
    control.sample_count = control.sample_next = 0;
    control.listen_fd = fd;
    if (control.allocated == NULL || control.reserved == NULL) {
        control.devices = 0;
    }
    sigset_t all, old;
    pthread_t thread;
    pthread_attr_t attr;
    sigfillset(&all);
    int rc = pthread_attr_init(&attr);
    if (rc == 0) {
        (void)pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_sigmask(SIG_SETMASK, &all, &old); /* no signal is ever delivered to it */
        rc = pthread_create(&thread, &attr, control_thread, rt);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&attr);
    }
    if (rc != 0) {
        runtime_log("cuprof: cannot start the control thread: %s", strerror(rc));
        unlink(control.path);
        close(fd);
        control.listen_fd = -1;
        return;
    }
    (void)pthread_setname_np(thread, "cuprof-control");
    if (!atomic_exchange(&control_exit_registered, true) && atexit(control_at_exit) != 0)
        runtime_log("cuprof: atexit failed: %s stays after exit", control.path);
    if (runtime_log_debug())
        runtime_log("cuprof: control socket %s", control.path);
}

void
control_fork_child(void)
{
    if (control.listen_fd >= 0)
        close(control.listen_fd);
    control.listen_fd = -1;
}

void
control_resume(struct cuprof_runtime *rt)
{
    if (control.owner != 0 && control.owner != getpid())
        control_start(rt);
}
