/* dumper_write.c: the cuprof section of a snapshot, and the hand-over to snapshot_dump_live. */
#include "preload/dumper_write.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "allocator/cuprof_errors.h"
#include "preload/config.h"
#include "preload/device_footprint.h"
#include "preload/library_usage.h"
#include "preload/oom_log.h"
#include "preload/path_template.h"
#include "preload/runtime.h"
#include "snapshot/snapshot_dump.h"
#include "snapshot/snapshot_usage.h"
#include "snapshot/snapshot_write.h"
#include "snapshot/symbolize.h"

#define DUMPER_CMDLINE_MAX 65536
#define DUMPER_ARGV_MAX    256

/* Kept across dumps for its cache; protected by the dump lock (dumper.c) like every dump. */
static struct symbolizer *dumper_symbolizer;

/* The command line, from /proc/self/cmdline (the dump may run before our constructor saw argv).
 * Fills argv with pointers into buf; returns the count. */
static size_t
dumper_write_argv(char *buf, size_t len, const char **argv, size_t cap)
{
    size_t total = 0, count = 0;
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    while (total + 1 < len) {
        ssize_t n = read(fd, buf + total, len - 1 - total);
        if (n <= 0)
            break;
        total += (size_t)n;
    }
    close(fd);
    buf[total] = '\0';
    for (size_t at = 0; at < total && count < cap; at += strlen(buf + at) + 1)
        argv[count++] = buf + at;
    return count;
}

/* Where one dump goes: a file (path, mode, chosen) or memory (out, out_len). */
struct dumper_target {
    const char *path;
    enum file_publish_mode mode;
    char *chosen;
    size_t chosen_len;
    unsigned char **out;
    size_t *out_len;
};

static int
dumper_emit(struct cuprof_runtime *rt, const struct dump_info *info, const struct dumper_target *to)
{
    if (to->path != NULL)
        return snapshot_dump_live(rt->alloc, rt->ring, info, to->path, to->mode, to->chosen,
                                  to->chosen_len);
    struct snapshot *snap = NULL;
    int rc = snapshot_dump_build(rt->alloc, rt->ring, info, &snap);
    if (rc == 0)
        rc = snapshot_write_mem(snap, SNAPSHOT_FORMAT_PICKLE, to->out, to->out_len);
    snapshot_free(snap);
    return rc;
}

static atomic_bool dumper_write_no_device;

void
dumper_write_without_device_calls(void)
{
    atomic_store(&dumper_write_no_device, true);
}

/* Gathers the cuprof section, then dumps to `to`. */
static int
dumper_write_gathered(struct cuprof_runtime *rt, const struct dumper_target *to)
{
    static const char *const mode_names[] = {"cache", "trace", "off"};
    struct dump_setting settings[CONFIG_VAR_COUNT];
    const char *argv[DUMPER_ARGV_MAX];
    char host[256];
    char *cmdline = malloc(DUMPER_CMDLINE_MAX);
    if (cmdline == NULL)
        return -CUPROF_EHOSTMEM;
    if (dumper_symbolizer == NULL) {
        dumper_symbolizer = symbolizer_create(); /* NULL: snapshot_dump makes one per dump */
        if (dumper_symbolizer != NULL && !symbolizer_reads_lines(dumper_symbolizer))
            runtime_log("cuprof: libdw.so.1 could not be loaded: stack frames name their "
                        "functions, without source file and line (install libdw1 on "
                        "Debian/Ubuntu, elfutils-libs on Fedora/RHEL)");
    }

    for (size_t i = 0; i < CONFIG_VAR_COUNT; i++) {
        settings[i].key = config_var_name(i);
        settings[i].value = rt->config->text[i];
    }
    if (gethostname(host, sizeof host) != 0)
        strcpy(host, "unknown");
    host[sizeof host - 1] = '\0';

    struct dump_info info = {
        .mode = mode_names[rt->mode],
        .config = settings,
        .config_count = CONFIG_VAR_COUNT,
        .pid = (int64_t)getpid(),
        .rank = path_template_rank_value(),
        .host = host,
        .argv = argv,
        .argc = dumper_write_argv(cmdline, DUMPER_CMDLINE_MAX, argv, DUMPER_ARGV_MAX),
        .alloc_config = &rt->config->alloc_conf,
        .fit_segment_on_oom = RUNTIME_FIT_SEGMENT_ON_OOM,
        .symbolizer = dumper_symbolizer,
        .pools = rt->pools,
    };
    /* Counters first, then the device: the footprint is never older than the rows beside it. */
    struct snap_library *libraries = NULL;
    struct snap_footprint *footprints = calloc((size_t)rt->device_count, sizeof(*footprints));
    if (footprints == NULL ||
        library_usage_collect(rt->alloc, &libraries, &info.library_count) != 0) {
        free(footprints);
        free(cmdline);
        return -CUPROF_EHOSTMEM;
    }
    info.libraries = libraries;
    info.footprints = footprints;
    info.footprint_count = atomic_load(&dumper_write_no_device)
                               ? 0
                               : device_footprint_collect(footprints, (size_t)rt->device_count);
    /* Each OOM's message, to be placed beside its trace entry. */
    struct dump_oom_message *ooms = malloc(OOM_LOG_KEPT * sizeof(*ooms));
    char *texts = malloc((size_t)OOM_LOG_KEPT * OOM_LOG_MESSAGE_LEN);
    if (ooms != NULL && texts != NULL) {
        info.oom_messages = ooms;
        info.oom_message_count = oom_log_copy(ooms, texts, OOM_LOG_KEPT);
    }
    int rc = dumper_emit(rt, &info, to);
    free(ooms);
    free(texts);
    free(libraries);
    free(footprints);
    free(cmdline);
    return rc;
}

/* A program out of descriptors (a leak: the very thing a job is often being debugged for) would
 * lose its snapshot: the file, /proc/self/cmdline, libdw and the modules the symbolizer reads
 * each need one. When none is free, the soft RLIMIT_NOFILE is raised for the dump, up to the hard
 * limit, and put back after unless the program set its own meanwhile. */
struct dumper_fd_room {
    bool raised;
    rlim_t old_soft, raised_to;
};

static void
dumper_fd_room_take(struct dumper_fd_room *room)
{
    room->raised = false;
    int probe = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (probe >= 0) {
        close(probe);
        return;
    }
    struct rlimit lim;
    if (errno != EMFILE || getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY ||
        lim.rlim_cur >= lim.rlim_max)
        return;
    struct rlimit more = {lim.rlim_max - lim.rlim_cur > 64 ? lim.rlim_cur + 64 : lim.rlim_max,
                          lim.rlim_max};
    if (setrlimit(RLIMIT_NOFILE, &more) == 0)
        *room = (struct dumper_fd_room){true, lim.rlim_cur, more.rlim_cur};
}

static void
dumper_fd_room_give_back(const struct dumper_fd_room *room)
{
    struct rlimit lim;
    if (!room->raised || getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur != room->raised_to)
        return;
    lim.rlim_cur = room->old_soft;
    (void)setrlimit(RLIMIT_NOFILE, &lim);
}

static int
dumper_write(struct cuprof_runtime *rt, const struct dumper_target *to)
{
    int saved_errno = errno;
    struct dumper_fd_room room;
    dumper_fd_room_take(&room);
    errno = saved_errno;
    int rc = dumper_write_gathered(rt, to);
    saved_errno = errno; /* the caller reads why a write failed */
    dumper_fd_room_give_back(&room);
    errno = saved_errno;
    return rc;
}

int
dumper_write_snapshot(struct cuprof_runtime *rt, const char *path, enum file_publish_mode mode,
                      char *chosen, size_t chosen_len)
{
    struct dumper_target to = {
        .path = path, .mode = mode, .chosen = chosen, .chosen_len = chosen_len};
    return dumper_write(rt, &to);
}

int
dumper_write_memory(struct cuprof_runtime *rt, unsigned char **out, size_t *len)
{
    struct dumper_target to = {.out = out, .out_len = len};
    return dumper_write(rt, &to);
}
