/* snapshot_place.c: the fallback folder of template snapshots (snapshot_place.h). */
#include "preload/snapshot_place.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "preload/path_template.h"
#include "preload/runtime.h"
#include "snapshot/file_publish.h"

static char place_fallback_dir[PATH_MAX] = "/tmp";

/* The folder part of `path` ("." for a bare name, "/" for a name at the root). */
static void
folder_of(const char *path, char *out, size_t out_len)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        snprintf(out, out_len, ".");
    else if (slash == path)
        snprintf(out, out_len, "/");
    else
        snprintf(out, out_len, "%.*s", (int)(slash - path), path);
}

void
snapshot_place_anchor(char *tmpl, size_t tmpl_len)
{
    char cwd[PATH_MAX], anchored[PATH_MAX * 2];
    if (tmpl[0] == '/' || getcwd(cwd, sizeof cwd) == NULL || cwd[0] != '/')
        return;
    size_t at = 0;
    for (const char *c = cwd; *c != '\0' && at + 2 < sizeof anchored; c++) {
        if (*c == '%') /* a template escape otherwise */
            anchored[at++] = '%';
        anchored[at++] = *c;
    }
    int n = snprintf(anchored + at, sizeof anchored - at, "%s%s", strcmp(cwd, "/") == 0 ? "" : "/",
                     tmpl);
    if (n < 0 || (size_t)n >= sizeof anchored - at || at + (size_t)n >= tmpl_len)
        return;
    memcpy(tmpl, anchored, at + (size_t)n + 1);
}

void
snapshot_place_start(const char *tmpl)
{
    file_publish_fallback_folder(place_fallback_dir, sizeof place_fallback_dir);
    char first[PATH_MAX], folder[PATH_MAX];
    if (path_template_expand(tmpl, 0, (int64_t)time(NULL), first, sizeof first) != 0)
        return; /* said when a dump expands it */
    folder_of(first, folder, sizeof folder);
    struct stat st;
    if (stat(folder, &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            errno = ENOTDIR;
        else if (access(folder, W_OK | X_OK) == 0)
            return;
    }
    int err = errno;
    char cwd[PATH_MAX];
    /* A bare name's folder is the working directory: named, as "." says little in a log. */
    if (strcmp(folder, ".") == 0 && getcwd(cwd, sizeof cwd) != NULL)
        snprintf(folder, sizeof folder, "%s", cwd);
    runtime_log("cuprof: CUPROF_SNAPSHOT: cannot write in %s (%s): snapshots go to %s while it "
                "cannot",
                folder, strerror(err), place_fallback_dir);
}

bool
snapshot_place_folder_error(int err)
{
    return err == ENOENT || err == ENOTDIR || err == EACCES || err == EPERM || err == EROFS ||
           err == ENOSPC || err == EDQUOT;
}

bool
snapshot_place_fallback(const char *path, char *out, size_t out_len)
{
    char folder[PATH_MAX], real_folder[PATH_MAX], real_fallback[PATH_MAX];
    folder_of(path, folder, sizeof folder);
    /* The same folder again would fail the same way. */
    if (realpath(folder, real_folder) != NULL &&
        realpath(place_fallback_dir, real_fallback) != NULL &&
        strcmp(real_folder, real_fallback) == 0)
        return false;
    return file_publish_in_folder(place_fallback_dir, path, out, out_len);
}
