/* snapshot_read.c: format detection and the read pipeline: bytes -> value tree -> model. A pickle
 * file is read a window at a time and its history imported as it is read, so reading it takes
 * about its model's memory, not the file's plus a tree's. */
#include "snapshot/snapshot_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

static int
finish(int rc, struct snapshot *snap, const char *name, char *msg, struct snapshot **out, char *err,
       size_t err_len)
{
    if (rc != 0) {
        snapshot_free(snap);
        one_line(msg);
        snprintf(err, err_len, "%s: %s", name, msg);
        return rc;
    }
    *out = snap;
    return 0;
}

/* One pass over a pickle, its segments and history imported as they are read when `stream`. */
static int
pickle_pass(const struct pickle_input *in, bool stream, const char *name, struct snapshot **snap,
            char *msg, size_t msg_len)
{
    *snap = snapshot_create(0);
    struct snapshot_arena *tree = snapshot_arena_create();
    struct snapshot_importer *im =
        *snap != NULL ? snapshot_import_begin(*snap, name, msg, msg_len) : NULL;
    int rc = -CUPROF_EHOSTMEM;
    snprintf(msg, msg_len, "out of memory");
    if (tree != NULL && im != NULL) {
        struct pickle_stream st = {
            .take = snapshot_import_take, .take_record = snapshot_import_take_record, .ctx = im};
        struct sval root;
        rc = pickle_read_input(in, tree, *snap, stream ? &st : NULL, &root, msg, msg_len);
        if (rc == 0)
            rc = snapshot_import_end(im, &root, st.shared);
    }
    snapshot_import_free(im);
    snapshot_arena_destroy(tree);
    return rc;
}

/* A pickle whose big lists are not where the reader guessed (a hand-made file) is read again
 * without streaming: from the start of the file, or of the bytes. */
static int
read_pickle(struct pickle_input *in, const char *name, struct snapshot **out, char *err,
            size_t err_len)
{
    char msg[512] = "";
    struct snapshot *snap = NULL;
    int rc = pickle_pass(in, true, name, &snap, msg, sizeof(msg));
    if (rc == SNAPSHOT_IMPORT_AGAIN) {
        snapshot_free(snap);
        snap = NULL;
        if (in->fd < 0 || lseek(in->fd, 0, SEEK_SET) == 0) {
            rc = pickle_pass(in, false, name, &snap, msg, sizeof(msg));
        } else {
            rc = -CUPROF_EIO;
            snprintf(msg, sizeof(msg), "cannot read the file again: %s", strerror(errno));
        }
    }
    return finish(rc, snap, name, msg, out, err, err_len);
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
    if (pickle) {
        struct pickle_input in = {.data = p, .len = len, .fd = -1};
        return read_pickle(&in, name, out, err, err_len);
    }
    struct snapshot *snap = snapshot_create(0);
    struct snapshot_arena *tree = snapshot_arena_create();
    int rc = -CUPROF_EHOSTMEM;
    snprintf(msg, sizeof(msg), "out of memory");
    if (snap != NULL && tree != NULL) {
        struct sval root;
        rc = json_read(p, len, tree, snap, &root, msg, sizeof(msg));
        if (rc == 0)
            rc = snapshot_import(snap, &root, name, msg, sizeof(msg));
    }
    snapshot_arena_destroy(tree);
    return finish(rc, snap, name, msg, out, err, err_len);
}

/* The whole file in memory (JSON, and anything that is not a regular file). */
static int
read_all(FILE *f, const char *path, unsigned char **data, size_t *len, char *err, size_t err_len)
{
    size_t cap = 0;
    *data = NULL;
    *len = 0;
    for (;;) {
        if (*len == cap) {
            size_t ncap = cap ? cap * 2 : 1u << 20;
            unsigned char *d = realloc(*data, ncap);
            if (d == NULL) {
                snprintf(err, err_len, "%s: out of memory", path);
                return -CUPROF_EHOSTMEM;
            }
            *data = d;
            cap = ncap;
        }
        size_t n = fread(*data + *len, 1, cap - *len, f);
        *len += n;
        if (n == 0)
            break;
    }
    if (ferror(f) != 0) {
        snprintf(err, err_len, "%s: read error: %s", path, strerror(errno));
        return -CUPROF_EIO;
    }
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
    struct stat st;
    unsigned char first = 0;
    int fd = fileno(f);
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
        pread(fd, &first, 1, 0) == 1 && first == 0x80) {
        struct pickle_input in = {.len = (size_t)st.st_size, .fd = fd};
        int rc = read_pickle(&in, path, out, err, err_len);
        fclose(f);
        return rc;
    }
    unsigned char *data = NULL;
    size_t len = 0;
    int rc = read_all(f, path, &data, &len, err, err_len);
    fclose(f);
    if (rc == 0)
        rc = snapshot_read_mem(data, len, path, out, err, err_len);
    free(data);
    return rc;
}
