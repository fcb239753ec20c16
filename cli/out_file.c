/* out_file.c: a command's output file, replaced only when whole (see out_file.h). */
#include "cli/out_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli_util.h"

/* Standard output, written through the same kind of stream as a file (out_file_stdout_begin), so
 * the errno of a lost write is known; its loss is said once. */
static struct out_file stdout_file = {.path = "-", .fd = STDOUT_FILENO};
static bool stdout_said;

static int
say(const struct out_file *o, const char *what, int err)
{
    char safe[1024];
    fprintf(stderr, "cuprof: %s: %s%s%s\n", cli_term(o->path, safe, sizeof safe), what,
            err != 0 ? ": " : "", err != 0 ? strerror(err) : "");
    return -1;
}

/* The FILE's writes go straight to the descriptor, the first failure's errno kept: a message
 * can then say why the output was lost however late it is noticed. */
static ssize_t
cookie_write(void *ctx, const char *buf, size_t len)
{
    struct out_file *o = ctx;
    size_t done = 0;
    while (done < len && o->error == 0) {
        ssize_t n = write(o->fd, buf + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            o->error = n < 0 ? errno : EIO;
        else
            done += (size_t)n;
    }
    return o->error != 0 ? 0 : (ssize_t)done;
}

static int
open_stream(struct out_file *o)
{
    cookie_io_functions_t io = {.write = cookie_write};
    o->f = fopencookie(o, "w", io);
    if (o->f == NULL)
        return say(o, "cannot write", errno);
    (void)setvbuf(o->f, NULL, _IOFBF, 1u << 16);
    return 0;
}

/* A new file's mode: 0666 less the umask (the command's own: it is no guest here). */
static mode_t
new_file_mode(void)
{
    mode_t mask = umask(0);
    umask(mask);
    return 0666 & ~mask;
}

/* An exclusive temporary file beside o->dest: ".NAME.XXXXXX" in its directory. */
static int
open_temp(struct out_file *o)
{
    const char *slash = strrchr(o->dest, '/');
    size_t dir = slash != NULL ? (size_t)(slash - o->dest) + 1 : 0;
    size_t len = strlen(o->dest) + 16;
    o->tmp = malloc(len);
    if (o->tmp == NULL)
        return say(o, "out of memory", 0);
    /* A name near NAME_MAX leaves no room for the suffix: the temporary is then .cuprof.XXXXXX. */
    const char *base = strlen(o->dest + dir) > 200 ? "cuprof" : o->dest + dir;
    snprintf(o->tmp, len, "%.*s.%s.XXXXXX", (int)dir, o->dest, base);
    /* mkostemp: O_CREAT|O_EXCL (never follows a link), mode 0600, an unpredictable name. */
    o->fd = mkostemp(o->tmp, O_CLOEXEC);
    if (o->fd < 0) {
        int err = errno;
        free(o->tmp);
        o->tmp = NULL;
        return say(o, "cannot create a temporary file beside it", err);
    }
    return open_stream(o);
}

/* A regular file, or a link to one, to be replaced: its mode and owner are kept. */
static int
open_replace(struct out_file *o, const struct stat *st, bool link)
{
    o->dest = link ? realpath(o->path, NULL) : strdup(o->path);
    if (o->dest == NULL)
        return say(o, link ? "cannot follow the link" : "out of memory", link ? errno : 0);
    o->mode = st->st_mode & 07777;
    o->uid = st->st_uid;
    o->gid = st->st_gid;
    o->replacing = true;
    return open_temp(o);
}

/* A character device or FIFO: written as it is (no O_CREAT, no O_TRUNC). */
static int
open_in_place(struct out_file *o)
{
    o->fd = open(o->path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (o->fd < 0)
        return say(o, "cannot write", errno);
    struct stat st;
    if (fstat(o->fd, &st) != 0 || !(S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) {
        close(o->fd);
        o->fd = -1;
        return say(o, "changed while it was opened", 0);
    }
    return open_stream(o);
}

/* /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N: this process's descriptor N, written
 * through, never reopened (a reopened file is written from its start, or as a regular file
 * replaced, where the shell's `>> log` appends). -1 when path names none. */
static int
fd_alias(const char *path)
{
    if (strcmp(path, "/dev/stdout") == 0)
        return STDOUT_FILENO;
    if (strcmp(path, "/dev/stderr") == 0)
        return STDERR_FILENO;
    const char *n = strncmp(path, "/dev/fd/", 8) == 0          ? path + 8
                    : strncmp(path, "/proc/self/fd/", 14) == 0 ? path + 14
                                                               : NULL;
    if (n == NULL || *n < '0' || *n > '9')
        return -1;
    char *end;
    long v = strtol(n, &end, 10);
    return *end == '\0' && v <= INT_MAX ? (int)v : -1;
}

static const char *
refused_kind(mode_t mode)
{
    return S_ISDIR(mode)    ? "is a directory"
           : S_ISBLK(mode)  ? "is a block device: not written"
           : S_ISSOCK(mode) ? "is a socket: not written"
                            : "is not a file cuprof writes";
}

int
out_file_open(struct out_file *o, const char *path)
{
    memset(o, 0, sizeof *o);
    o->fd = -1;
    o->path = path != NULL ? path : "-";
    int alias = fd_alias(o->path);
    if (strcmp(o->path, "-") == 0 || alias == STDOUT_FILENO) {
        o->f = stdout;
        return 0;
    }
    if (alias >= 0) {
        o->fd = fcntl(alias, F_DUPFD_CLOEXEC, 3);
        return o->fd >= 0 ? open_stream(o) : say(o, "cannot write", errno);
    }
    struct stat st;
    if (lstat(o->path, &st) != 0) {
        if (errno != ENOENT)
            return say(o, "cannot write", errno);
        o->dest = strdup(o->path);
        if (o->dest == NULL)
            return say(o, "out of memory", 0);
        o->mode = new_file_mode();
        return open_temp(o);
    }
    bool link = S_ISLNK(st.st_mode);
    if (link && stat(o->path, &st) != 0)
        return say(o, errno == ENOENT ? "is a dangling symbolic link: not written" : "cannot write",
                   errno == ENOENT ? 0 : errno);
    if (S_ISREG(st.st_mode))
        return open_replace(o, &st, link);
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))
        return open_in_place(o);
    return say(o, refused_kind(st.st_mode), 0);
}

static void
out_file_free(struct out_file *o)
{
    free(o->dest);
    free(o->tmp);
    o->dest = o->tmp = NULL;
    o->f = NULL;
    o->fd = -1;
}

/* Standard output: flushed and checked. */
static int
stdout_check(void)
{
    errno = 0;
    int rc = fflush(stdout);
    int err = stdout_file.error != 0 ? stdout_file.error : errno != 0 ? errno : EIO;
    if (rc == 0 && !ferror(stdout) && stdout_file.error == 0)
        return 0;
    if (!stdout_said) {
        stdout_said = true;
        fprintf(stderr, "cuprof: %s: write failed: %s\n", OUT_FILE_STDOUT_NAME, strerror(err));
    }
    return -1;
}

/* The temporary file made whole and put in place; on failure, unlinked. */
static int
publish(struct out_file *o)
{
    const char *what = NULL;
    int err = 0;
    /* Owner first: chown clears the set-user-ID bits the mode may then give back. A user who
     * may not give a file away makes it theirs, as any editor's save does. */
    if (o->replacing && fchown(o->fd, o->uid, o->gid) != 0 && errno != EPERM)
        what = "cannot keep its owner";
    else if (fchmod(o->fd, o->mode) != 0)
        what = "cannot set its mode";
    else if (fsync(o->fd) != 0)
        what = "write failed";
    if (what != NULL)
        err = errno;
    if (close(o->fd) != 0 && what == NULL) {
        what = "write failed";
        err = errno;
    }
    o->fd = -1;
    if (what == NULL && rename(o->tmp, o->dest) != 0) {
        what = "cannot replace it";
        err = errno;
    }
    if (what == NULL)
        return 0;
    unlink(o->tmp);
    return say(o, what, err);
}

int
out_file_commit(struct out_file *o)
{
    if (o->f == stdout) {
        out_file_free(o);
        return stdout_check();
    }
    if (fclose(o->f) != 0 && o->error == 0)
        o->error = errno != 0 ? errno : EIO;
    o->f = NULL;
    int rc = 0;
    if (o->error != 0) {
        rc = say(o, "write failed", o->error);
        close(o->fd);
        o->fd = -1;
        if (o->tmp != NULL)
            unlink(o->tmp);
    } else if (o->tmp != NULL) {
        rc = publish(o);
    } else if (close(o->fd) != 0) {
        rc = say(o, "write failed", errno);
    }
    out_file_free(o);
    return rc;
}

void
out_file_abort(struct out_file *o)
{
    if (o->f != NULL && o->f != stdout)
        fclose(o->f);
    if (o->fd >= 0)
        close(o->fd);
    if (o->tmp != NULL)
        unlink(o->tmp);
    out_file_free(o);
}

int
out_file_end(struct out_file *o, bool ok)
{
    if (ok || o->error != 0)
        return out_file_commit(o);
    out_file_abort(o);
    return -1;
}

void
out_file_stdout_begin(void)
{
    cookie_io_functions_t io = {.write = cookie_write};
    FILE *f = fopencookie(&stdout_file, "w", io);
    if (f == NULL)
        return; /* stdio's own stream stays: a lost write is still noticed, its errno maybe not */
    fflush(stdout);
    (void)setvbuf(f, NULL, isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF, BUFSIZ);
    stdout = f;
}

int
out_file_stdout_done(void)
{
    return stdout_check();
}
