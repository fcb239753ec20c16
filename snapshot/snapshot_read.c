/* snapshot_read.c: format detection and the read pipeline: bytes -> value tree -> model. */
#include "snapshot/snapshot_read.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/cuprof_errors.h"
#include "snapshot/json_reader.h"
#include "snapshot/pickle_reader.h"
#include "snapshot/snapshot_arena.h"
#include "snapshot/snapshot_import.h"

/* Messages quote bytes from the file: keep them one printable line (a hostile file's newline or
 * escape sequence must not reach the terminal). */
static void
one_line(char *s)
{
    for (; *s != '\0'; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
}

int
snapshot_read_mem(const void *data, size_t len, const char *name, struct snapshot **out, char *err,
                  size_t err_len)
{
    char msg[512] = "";
    const unsigned char *p = data;
    size_t i = 0;
    while (i < len && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
        i++;
    bool pickle = len > 0 && p[0] == 0x80;
    bool json = i < len && (p[i] == '{' || p[i] == '[');
    if (!pickle && !json) {
        snprintf(err, err_len, "%s: not a snapshot (neither a pickle nor JSON)", name);
        return -CUPROF_EFORMAT;
    }
    struct snapshot *snap = snapshot_create(0);
    struct snapshot_arena *tree = snapshot_arena_create();
    int rc = -CUPROF_EHOSTMEM;
    snprintf(msg, sizeof(msg), "out of memory");
    if (snap != NULL && tree != NULL) {
        struct sval root;
        rc = pickle ? pickle_read(p, len, tree, snap, &root, msg, sizeof(msg))
                    : json_read(p, len, tree, snap, &root, msg, sizeof(msg));
        if (rc == 0)
            rc = snapshot_import(snap, &root, name, msg, sizeof(msg));
    }
    snapshot_arena_destroy(tree);
    if (rc != 0) {
        snapshot_free(snap);
        one_line(msg);
        snprintf(err, err_len, "%s: %s", name, msg);
        return rc;
    }
    *out = snap;
    return 0;
}

int
snapshot_read_file(const char *path, struct snapshot **out, char *err, size_t err_len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, err_len, "%s: %s", path, strerror(errno));
        return -CUPROF_EIO;
    }
    unsigned char *data = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 1u << 20;
            unsigned char *d = realloc(data, ncap);
            if (d == NULL) {
                free(data);
                fclose(f);
                snprintf(err, err_len, "%s: out of memory", path);
                return -CUPROF_EHOSTMEM;
            }
            data = d;
            cap = ncap;
        }
        size_t n = fread(data + len, 1, cap - len, f);
        len += n;
        if (n == 0)
            break;
    }
    bool bad = ferror(f) != 0;
    int saved = errno;
    fclose(f);
    if (bad) {
        free(data);
        snprintf(err, err_len, "%s: read error: %s", path, strerror(saved));
        return -CUPROF_EIO;
    }
    int rc = snapshot_read_mem(data, len, path, out, err, err_len);
    free(data);
    return rc;
}
