/* dumper_write.c: the cuprof section of a snapshot, and the hand-over to snapshot_dump_live. */
#include "preload/dumper_write.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allocator/cuprof_errors.h"
#include "preload/config.h"
#include "preload/path_template.h"
#include "preload/runtime.h"
#include "snapshot/snapshot_dump.h"

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

int
dumper_write_snapshot(struct cuprof_runtime *rt, const char *path)
{
    static const char *const mode_names[] = {"cache", "trace", "off"};
    const char *keys[CONFIG_VAR_COUNT];
    const char *values[CONFIG_VAR_COUNT];
    const char *argv[256];
    char rank[64], host[256];
    char *cmdline = malloc(65536);
    if (cmdline == NULL)
        return -CUPROF_EHOSTMEM;

    for (size_t i = 0; i < CONFIG_VAR_COUNT; i++) {
        keys[i] = config_var_name(i);
        values[i] = rt->config->text[i];
    }
    path_template_rank(rank, sizeof rank);
    if (gethostname(host, sizeof host) != 0)
        strcpy(host, "unknown");
    host[sizeof host - 1] = '\0';

    struct dump_info info = {
        .mode = mode_names[rt->mode],
        .config_keys = keys,
        .config_values = values,
        .config_count = CONFIG_VAR_COUNT,
        .pid = (int64_t)getpid(),
        .rank = rank,
        .host = host,
        .argv = argv,
        .argc = dumper_write_argv(cmdline, 65536, argv, sizeof argv / sizeof argv[0]),
    };
    int rc = snapshot_dump_live(rt->alloc, rt->ring, &info, path);
    free(cmdline);
    return rc;
}
