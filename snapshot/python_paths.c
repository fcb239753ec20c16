/* python_paths.c: the interpreter's library directories told from a path. Installed packages lie
 * under a folder named site-packages (pip, venv, conda, pyenv) or dist-packages (Debian); the
 * standard library under lib/pythonX.Y (or lib64/, or the zipped pythonXY.zip), and frozen modules
 * are named "<frozen NAME>". Nothing else is asked of the system: a snapshot is read elsewhere. */
#include "snapshot/python_paths.h"

#include <stdio.h>
#include <string.h>

/* The last occurrence of `needle` in `s`, or NULL. */
static const char *
last_of(const char *s, const char *needle)
{
    const char *found = NULL;
    for (const char *p = strstr(s, needle); p != NULL; p = strstr(p + 1, needle))
        found = p;
    return found;
}

/* After ".../lib/python": "3.11/" or "3.13t/" or "311.zip/"; the offset of what follows the
 * folder, or 0 when this is not a standard library folder. */
static size_t
stdlib_folder(const char *after)
{
    size_t i = 0, digits = 0;
    for (; (after[i] >= '0' && after[i] <= '9') || after[i] == '.'; i++)
        digits += after[i] != '.';
    if (digits == 0)
        return 0;
    if (i > 0 && after[i - 1] == '.' && strncmp(after + i, "zip/", 4) == 0)
        return i + 4;
    while (after[i] != '\0' && strchr("dmtu", after[i]) != NULL)
        i++;
    return after[i] == '/' ? i + 1 : 0;
}

/* The offset of the part under the standard library folder in path, or 0. */
static size_t
stdlib_rel(const char *path)
{
    static const char *const roots[] = {"lib/python", "lib64/python"};
    for (size_t r = 0; r < sizeof roots / sizeof roots[0]; r++) {
        size_t len = strlen(roots[r]);
        const char *at = last_of(path, roots[r]);
        /* At the start of the path or right after a '/'. */
        while (at != NULL && at != path && at[-1] != '/') {
            const char *earlier = NULL;
            for (const char *q = strstr(path, roots[r]); q != NULL && q < at;
                 q = strstr(q + 1, roots[r]))
                earlier = q;
            at = earlier;
        }
        if (at == NULL)
            continue;
        size_t under = stdlib_folder(at + len);
        if (under > 0)
            return (size_t)(at - path) + len + under;
    }
    return 0;
}

static void
set_library(struct python_path *out, enum python_path_kind kind, const char *path, size_t rel)
{
    const char *p = path + rel;
    size_t first = strcspn(p, "/");
    out->kind = kind;
    out->rel = rel;
    /* A top-level module file: its name without the extension. */
    out->package_len = p[first] == '/' ? first : strcspn(p, ".");
    if (out->package_len == 0)
        *out = (struct python_path){PYTHON_PATH_USER, 0, 0};
}

void
python_path_classify(const char *path, struct python_path *out)
{
    *out = (struct python_path){PYTHON_PATH_USER, 0, 0};
    if (path == NULL || path[0] == '\0')
        return;
    if (strncmp(path, "<frozen ", 8) == 0) {
        out->kind = PYTHON_PATH_STDLIB;
        out->rel = 8;
        out->package_len = strcspn(path + 8, ".>");
        return;
    }
    static const char *const packages[] = {"site-packages/", "dist-packages/"};
    const char *best = NULL;
    for (size_t i = 0; i < sizeof packages / sizeof packages[0]; i++) {
        const char *at = last_of(path, packages[i]);
        if (at != NULL && (at == path || at[-1] == '/') && (best == NULL || at > best))
            best = at;
    }
    if (best != NULL) {
        set_library(out, PYTHON_PATH_PACKAGES, path, (size_t)(best - path) + strlen(packages[0]));
        return;
    }
    size_t rel = stdlib_rel(path);
    if (rel == 0)
        return;
    /* The standard library's native modules: lib-dynload/_ctypes.cpython-311-....so is _ctypes. */
    if (strncmp(path + rel, "lib-dynload/", 12) == 0)
        rel += 12;
    set_library(out, PYTHON_PATH_STDLIB, path, rel);
}

const char *
python_path_module(const char *path, const struct python_path *p, char *buf, size_t len)
{
    if (len == 0)
        return buf;
    buf[0] = '\0';
    if (path == NULL || !python_path_is_library(p))
        return buf;
    const char *rel = path + p->rel;
    size_t n = strcspn(rel, ">"); /* a frozen module's name ends there */
    size_t used = 0;
    size_t last = 0; /* where the last component starts in buf */
    for (size_t i = 0; i < n && used + 1 < len; i++) {
        if (rel[i] == '/') {
            buf[used++] = '.';
            last = used;
        } else {
            buf[used++] = rel[i];
        }
    }
    buf[used] = '\0';
    /* The last component's extension (.py, .cpython-311-x86_64-linux-gnu.so) goes, then a
     * package's __init__. */
    if (strncmp(path, "<frozen ", 8) != 0) {
        char *dot = strchr(buf + last, '.');
        if (dot != NULL)
            *dot = '\0';
    }
    size_t blen = strlen(buf);
    if (blen > 9 && strcmp(buf + blen - 9, ".__init__") == 0)
        buf[blen - 9] = '\0';
    return buf;
}
