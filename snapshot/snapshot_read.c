/* snapshot_read.c: format detection and the read pipeline: bytes -> value tree -> model. The
 * first bytes are looked at before anything else is read, so a file that is not a snapshot costs
 * one chunk whatever its size. A pickle file is read a window at a time and its history imported
 * as it is read, so reading it takes about its model's memory, not the file's plus a tree's. */
#include "snapshot/snapshot_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
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

/* Bytes read at a time before the format is known, and from a stream. */
#define SNAPSHOT_READ_CHUNK (64u << 10)

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

/* One pass over a pickle that streams its big lists; one whose lists are not where the reader
 * guessed (a hand-made file) is read again without streaming: from the start of the bytes, or of
 * the file (its offset when the reading began). Input that cannot be read again (`stream` false:
 * a pipe) gets the second kind of pass only. */
static int
read_pickle(struct pickle_input *in, bool stream, const char *name, struct snapshot **out,
            char *err, size_t err_len)
{
    char msg[512] = "";
    struct snapshot *snap = NULL;
    off_t start = in->fd >= 0 && stream ? lseek(in->fd, 0, SEEK_CUR) : 0;
    int rc = pickle_pass(in, stream, name, &snap, msg, sizeof(msg));
    if (rc == SNAPSHOT_IMPORT_AGAIN && stream) {
        snapshot_free(snap);
        snap = NULL;
        if (in->fd < 0 || (start >= 0 && lseek(in->fd, start, SEEK_SET) == start)) {
            rc = pickle_pass(in, false, name, &snap, msg, sizeof(msg));
        } else {
            rc = -CUPROF_EIO;
            snprintf(msg, sizeof(msg), "cannot read the file again: %s", strerror(errno));
        }
    }
    return finish(rc, snap, name, msg, out, err, err_len);
}

/* What a snapshot's first bytes are: a pickle starts with PROTO (0x80; the reader names a
 * protocol it does not read), JSON with '{' or '[' after optional whitespace. */
enum snapshot_kind { KIND_NONE, KIND_PICKLE, KIND_JSON, KIND_MORE };

static bool
is_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The kind of data[0..len); KIND_MORE when it is whitespace only (more bytes decide). */
static enum snapshot_kind
kind_of(const unsigned char *data, size_t len, bool at_start)
{
    if (at_start && len > 0 && data[0] == 0x80)
        return KIND_PICKLE;
    size_t i = 0;
    while (i < len && is_space(data[i]))
        i++;
    if (i == len)
        return KIND_MORE;
    return data[i] == '{' || data[i] == '[' ? KIND_JSON : KIND_NONE;
}

static int
not_a_snapshot(const char *name, const unsigned char *data, size_t len, char *err, size_t err_len)
{
    size_t i = 0;
    while (i < len && is_space(data[i]))
        i++;
    if (i == len)
        snprintf(err, err_len, "%s: not a snapshot (%s)", name,
                 len == 0 ? "empty" : "only whitespace");
    else
        snprintf(err, err_len, "%s: not a snapshot (neither a pickle nor JSON: byte %zu is 0x%02x)",
                 name, i, data[i]);
    return -CUPROF_EFORMAT;
}

static int
read_json(const unsigned char *p, size_t len, const char *name, struct snapshot **out, char *err,
          size_t err_len)
{
    char msg[512] = "";
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

int
snapshot_read_mem(const void *data, size_t len, const char *name, struct snapshot **out, char *err,
                  size_t err_len)
{
    const unsigned char *p = data;
    enum snapshot_kind kind = kind_of(p, len, true);
    if (kind == KIND_PICKLE) {
        struct pickle_input in = {.data = p, .len = len, .fd = -1};
        return read_pickle(&in, true, name, out, err, err_len);
    }
    if (kind != KIND_JSON)
        return not_a_snapshot(name, p, len, err, err_len);
    return read_json(p, len, name, out, err, err_len);
}

/* read(2) until n bytes or the end; the count, or -1 (errno set). */
static ssize_t
read_full(int fd, unsigned char *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

static int
read_error(const char *name, char *err, size_t err_len)
{
    snprintf(err, err_len, "%s: read error: %s", name, strerror(errno));
    return -CUPROF_EIO;
}

/* Bytes read from a descriptor so far (leading whitespace dropped). */
struct input_buf {
    unsigned char *data;
    size_t len, cap;
};

/* Appends up to `want` bytes read from fd (fewer at its end): 0, or an error with its line. */
static int
buf_read(struct input_buf *b, int fd, size_t want, size_t *got, const char *name, char *err,
         size_t err_len)
{
    if (want > b->cap - b->len) {
        size_t cap = b->cap ? b->cap : SNAPSHOT_READ_CHUNK;
        while (cap - b->len < want)
            cap *= 2;
        unsigned char *d = realloc(b->data, cap);
        if (d == NULL) {
            snprintf(err, err_len, "%s: out of memory", name);
            return -CUPROF_EHOSTMEM;
        }
        b->data = d;
        b->cap = cap;
    }
    ssize_t r = read_full(fd, b->data + b->len, want);
    if (r < 0)
        return read_error(name, err, err_len);
    b->len += (size_t)r;
    *got = (size_t)r;
    return 0;
}

/* Reads from fd until its first bytes tell the kind (leading whitespace is read and dropped a
 * chunk at a time, so a file of spaces takes no memory). `left` is what may be read (SIZE_MAX:
 * to the end). On KIND_PICKLE or KIND_JSON, b holds the bytes read from the first non-blank
 * one (or from the start, for a pickle). */
static int
sniff(struct input_buf *b, int fd, size_t *left, const char *name, enum snapshot_kind *kind,
      char *err, size_t err_len)
{
    bool at_start = true;
    size_t skipped = 0;
    for (;;) {
        size_t got = 0, want = *left < SNAPSHOT_READ_CHUNK ? *left : SNAPSHOT_READ_CHUNK;
        int rc = buf_read(b, fd, want, &got, name, err, err_len);
        if (rc != 0)
            return rc;
        *left -= *left == SIZE_MAX ? 0 : got;
        *kind = kind_of(b->data, b->len, at_start);
        if (*kind != KIND_MORE || got == 0)
            break;
        skipped += b->len; /* whitespace only: dropped */
        b->len = 0;
        at_start = false;
    }
    if (*kind == KIND_PICKLE || *kind == KIND_JSON)
        return 0;
    int rc = not_a_snapshot(name, b->data, b->len, err, err_len);
    if (skipped > 0 && b->len == 0)
        snprintf(err, err_len, "%s: not a snapshot (only whitespace)", name);
    return rc;
}

/* The rest of a JSON text: `left` bytes of a regular file (room made once), or a stream to its
 * end. A stream is checked as it comes: JSON holds no control byte besides whitespace, so the
 * bytes of a device or of another format stop the reading at once instead of filling memory. */
static int
read_json_rest(struct input_buf *b, int fd, size_t left, const char *name, char *err,
               size_t err_len)
{
    bool stream = left == SIZE_MAX;
    size_t checked = 0, got = 0;
    if (!stream && left > 0) {
        unsigned char *d = realloc(b->data, b->len + left);
        if (d == NULL) {
            snprintf(err, err_len, "%s: out of memory", name);
            return -CUPROF_EHOSTMEM;
        }
        b->data = d;
        b->cap = b->len + left;
        return buf_read(b, fd, left, &got, name, err, err_len);
    }
    for (; stream;) {
        for (; checked < b->len; checked++) {
            unsigned char c = b->data[checked];
            if (c < 0x20 && !is_space(c)) {
                snprintf(err, err_len, "%s: not a snapshot (JSON has no byte 0x%02x)", name, c);
                return -CUPROF_EFORMAT;
            }
        }
        int rc = buf_read(b, fd, SNAPSHOT_READ_CHUNK, &got, name, err, err_len);
        if (rc != 0 || got == 0)
            return rc;
    }
    return 0;
}

/* A snapshot from fd: a regular file of `size` bytes from its current offset, or a stream read
 * once (size SIZE_MAX). */
static int
read_fd(int fd, size_t size, const char *name, struct snapshot **out, char *err, size_t err_len)
{
    struct input_buf b = {NULL, 0, 0};
    bool seekable = size != SIZE_MAX;
    size_t left = size;
    enum snapshot_kind kind = KIND_NONE;
    off_t start = seekable ? lseek(fd, 0, SEEK_CUR) : 0;
    int rc = sniff(&b, fd, &left, name, &kind, err, err_len);
    if (rc == 0 && kind == KIND_PICKLE && seekable) {
        /* A file is read again from its start, a window at a time. */
        free(b.data);
        if (start < 0 || lseek(fd, start, SEEK_SET) != start)
            return read_error(name, err, err_len);
        struct pickle_input in = {.len = size, .fd = fd};
        return read_pickle(&in, true, name, out, err, err_len);
    }
    if (rc == 0 && kind == KIND_PICKLE) {
        /* A stream cannot be read again: one pass that builds the whole tree. */
        struct pickle_input in = {.data = b.data, .len = SIZE_MAX, .fd = fd, .head_len = b.len};
        rc = read_pickle(&in, false, name, out, err, err_len);
    } else if (rc == 0) {
        rc = read_json_rest(&b, fd, left, name, err, err_len);
        if (rc == 0)
            rc = read_json(b.data, b.len, name, out, err, err_len);
    }
    free(b.data);
    return rc;
}

/* What a file that is not regular is, for the message. */
static const char *
file_type(mode_t mode)
{
    return S_ISDIR(mode)    ? "a directory"
           : S_ISCHR(mode)  ? "a character device"
           : S_ISBLK(mode)  ? "a block device"
           : S_ISFIFO(mode) ? "a FIFO"
           : S_ISSOCK(mode) ? "a socket"
                            : "not a regular file";
}

int
snapshot_read_fd(int fd, const char *name, struct snapshot **out, char *err, size_t err_len)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return read_error(name, err, err_len);
    if (S_ISDIR(st.st_mode)) {
        snprintf(err, err_len, "%s: is a directory, not a snapshot", name);
        return -CUPROF_EIO;
    }
    if (!S_ISREG(st.st_mode))
        return read_fd(fd, SIZE_MAX, name, out, err, err_len);
    off_t at = lseek(fd, 0, SEEK_CUR);
    if (at < 0)
        return read_error(name, err, err_len);
    size_t size = st.st_size > at ? (size_t)(st.st_size - at) : 0;
    return read_fd(fd, size, name, out, err, err_len);
}

int
snapshot_read_file(const char *path, struct snapshot **out, char *err, size_t err_len)
{
    /* O_NONBLOCK: a FIFO is refused below, never waited on. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        snprintf(err, err_len, "%s: %s", path, strerror(errno));
        return -CUPROF_EIO;
    }
    struct stat st;
    int rc;
    if (fstat(fd, &st) != 0) {
        rc = read_error(path, err, err_len);
    } else if (!S_ISREG(st.st_mode)) {
        /* A device or FIFO never ends (/dev/zero) or waits forever: only `-` reads a stream. */
        snprintf(err, err_len, "%s: is %s, not a snapshot file", path, file_type(st.st_mode));
        rc = -CUPROF_EIO;
    } else {
        rc = read_fd(fd, (size_t)st.st_size, path, out, err, err_len);
    }
    close(fd);
    return rc;
}
