/* control_socket.c: Unix-domain sockets in the user's private directory, for `cuprof ps`, `dump`
 * and `top` to talk to a running program without a signal. */
#include "snapshot/control_socket.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

size_t
control_socket_dirs(char dirs[][256], size_t cap)
{
    size_t n = 0;
    const char *own = getenv("CUPROF_SOCKET_DIR");
    if (own != NULL && own[0] == '/' && strlen(own) <= CONTROL_SOCKET_DIR_MAX && cap > 0) {
        snprintf(dirs[0], 256, "%s", own); /* the one place, for both ends */
        return 1;
    }
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    if (xdg != NULL && xdg[0] == '/' && n < cap) {
        int w = snprintf(dirs[n], 256, "%s/cuprof", xdg);
        if (w > 0 && w < 256)
            n++;
    }
    if (n < cap) {
        snprintf(dirs[n], 256, "/tmp/cuprof-%lu", (unsigned long)geteuid());
        n++;
    }
    return n;
}

int
control_socket_check_dir(const char *dir, bool create, char *err, size_t err_len)
{
    struct stat st;
    if (lstat(dir, &st) != 0 && errno == ENOENT && create) {
        if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
            snprintf(err, err_len, "cannot create %s: %s", dir, strerror(errno));
            return -1;
        }
    }
    if (lstat(dir, &st) != 0) {
        snprintf(err, err_len, "%s: %s", dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, err_len, "%s is not a directory", dir);
        return -1;
    }
    if (st.st_uid != geteuid()) {
        snprintf(err, err_len, "%s belongs to uid %lu, not to this user", dir,
                 (unsigned long)st.st_uid);
        return -1;
    }
    if ((st.st_mode & 077) != 0) {
        snprintf(err, err_len, "%s is open to other users (mode %03o; 700 expected)", dir,
                 (unsigned)(st.st_mode & 0777));
        return -1;
    }
    return 0;
}

int
control_socket_path(const char *dir, pid_t pid, char *out, size_t len)
{
    int n = snprintf(out, len, "%s/%ld.sock", dir, (long)pid);
    return n < 0 || (size_t)n >= len || (size_t)n >= sizeof(((struct sockaddr_un *)0)->sun_path)
               ? -1
               : 0;
}

pid_t
control_socket_pid_of(const char *name)
{
    char *end;
    errno = 0;
    long pid = strtol(name, &end, 10);
    if (name[0] < '1' || name[0] > '9' || errno != 0 || strcmp(end, ".sock") != 0 || pid <= 0 ||
        pid > 0x7fffffffL)
        return 0;
    return (pid_t)pid;
}

static int
address(const char *path, struct sockaddr_un *sa)
{
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(sa->sun_path))
        return -1;
    memcpy(sa->sun_path, path, strlen(path) + 1);
    return 0;
}

/* True when a socket file is there and a server accepts on it. */
static bool
answered(const char *path)
{
    struct sockaddr_un sa;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || address(path, &sa) != 0) {
        if (fd >= 0)
            close(fd);
        return false;
    }
    bool ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return ok;
}

bool
control_socket_fd_id(int fd, struct control_socket_id *id)
{
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0)
        return false;
    *id = (struct control_socket_id){(uint64_t)st.st_dev, (uint64_t)st.st_ino};
    return true;
}

bool
control_socket_fd_is(int fd, const struct control_socket_id *id)
{
    struct control_socket_id now;
    return control_socket_fd_id(fd, &now) && now.dev == id->dev && now.ino == id->ino;
}

bool
control_socket_path_is(const char *path, const struct control_socket_id *id)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISSOCK(st.st_mode) && (uint64_t)st.st_dev == id->dev &&
           (uint64_t)st.st_ino == id->ino;
}

int
control_socket_unlink_own(const char *path, const struct control_socket_id *id)
{
    /* Between the check and the unlink only this user can act: the directory is theirs, 0700. */
    return control_socket_path_is(path, id) && unlink(path) == 0 ? 0 : -1;
}

/* One line naming the socket and errno's reason; the file bind made is removed with `made`. */
static int
listen_failed(const char *path, int fd, bool made, char *err, size_t err_len)
{
    int saved = errno;
    snprintf(err, err_len, "%.108s: %s", path, strerror(saved));
    if (made)
        unlink(path);
    close(fd);
    return -1;
}

int
control_socket_listen(const char *path, struct control_socket_id ids[2], char *err, size_t err_len)
{
    struct sockaddr_un sa;
    if (address(path, &sa) != 0) {
        snprintf(err, err_len, "%s is too long for a socket address", path);
        return -1;
    }
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode) || answered(path)) {
            snprintf(err, err_len, "%s is taken", path);
            return -1;
        }
        unlink(path); /* a dead process's socket (a pid reused) */
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, err_len, "socket: %s", strerror(errno));
        return -1;
    }
    /* The umask is the program's (a process-wide setting its other threads rely on, so it is
     * never changed here): bind may create the file with a looser mode, which chmod narrows to
     * 0600 at once. Nobody else can reach it meanwhile: the directory is ours and 0700
     * (control_socket_check_dir). */
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
        return listen_failed(sa.sun_path, fd, false, err, err_len);
    struct stat file;
    if (chmod(path, 0600) != 0 || listen(fd, 64) != 0 || lstat(path, &file) != 0 ||
        (ids != NULL && !control_socket_fd_id(fd, &ids[0])))
        return listen_failed(sa.sun_path, fd, true, err, err_len);
    if (ids != NULL)
        ids[1] = (struct control_socket_id){(uint64_t)file.st_dev, (uint64_t)file.st_ino};
    return fd;
}

bool
control_socket_peer_allowed(int fd)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof(cred))
        return false;
    return cred.uid == geteuid() || cred.uid == 0;
}

void
control_socket_set_timeouts(int fd, int milliseconds)
{
    struct timeval tv = {milliseconds / 1000, (milliseconds % 1000) * 1000};
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static int
send_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -(errno != 0 ? errno : EIO);
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

int
control_socket_request(const char *path, const char *request, int timeout_ms, char **reply)
{
    *reply = NULL;
    struct sockaddr_un sa;
    if (address(path, &sa) != 0)
        return -ENAMETOOLONG;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    control_socket_set_timeouts(fd, timeout_ms);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    size_t rlen = strlen(request);
    char *line = malloc(rlen + 2);
    if (line == NULL) {
        close(fd);
        return -ENOMEM;
    }
    memcpy(line, request, rlen);
    line[rlen] = '\n';
    int rc = send_all(fd, line, rlen + 1);
    free(line);
    size_t cap = 4096, used = 0;
    char *buf = rc == 0 ? malloc(cap) : NULL;
    if (rc == 0 && buf == NULL)
        rc = -ENOMEM;
    while (rc == 0) {
        if (used + 1 >= cap) {
            char *grown = cap >= CONTROL_REPLY_MAX ? NULL : realloc(buf, cap * 2);
            if (grown == NULL) {
                rc = -EMSGSIZE;
                break;
            }
            buf = grown;
            cap *= 2;
        }
        ssize_t n = recv(fd, buf + used, cap - 1 - used, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            rc = -(errno == EAGAIN ? ETIMEDOUT : errno);
        else if (n == 0)
            break;
        else
            used += (size_t)n;
    }
    close(fd);
    if (rc != 0) {
        free(buf);
        return rc;
    }
    while (used > 0 && (buf[used - 1] == '\n' || buf[used - 1] == '\r'))
        used--;
    buf[used] = '\0';
    *reply = buf;
    return 0;
}
