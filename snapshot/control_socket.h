/* control_socket.h: where a profiled process's control socket lives and how both ends open it:
 *   the user's own directory ($XDG_RUNTIME_DIR/cuprof, else /tmp/cuprof-UID; mode 0700, refused
 *   when another user owns it or anyone else may write it), `<pid>.sock` inside (mode 0600), the
 *   peer check (same uid, or root), and one request/reply exchange with timeouts.
 * Locking: none (plain functions over file descriptors).
 * Hot path: no. */
#ifndef CUPROF_CONTROL_SOCKET_H
#define CUPROF_CONTROL_SOCKET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Every request is one line: `CUPROF/1 COMMAND [ARGUMENT]\n`; every reply one line: `OK <json>`
 * or `ERROR <message>`. A line longer than CONTROL_REQUEST_MAX is refused. */
#define CONTROL_PROTOCOL    "CUPROF/1"
#define CONTROL_REQUEST_MAX 4096
#define CONTROL_REPLY_MAX   ((size_t)16 << 20)

/* The longest CUPROF_SOCKET_DIR: room for "/<pid>.sock" in a socket address. */
#define CONTROL_SOCKET_DIR_MAX 90

/* The directories to look in, most preferred first: CUPROF_SOCKET_DIR alone when it is set (an
 * absolute path), else $XDG_RUNTIME_DIR/cuprof when that variable names an absolute directory,
 * then /tmp/cuprof-UID. Returns how many were written (at most 2). */
size_t control_socket_dirs(char dirs[][256], size_t cap);

/* Checks (and with `create`, makes) one socket directory: a real directory (not a link) owned by
 * this user with no access for group or others. 0, or -1 with one line in err. */
int control_socket_check_dir(const char *dir, bool create, char *err, size_t err_len);

/* `<dir>/<pid>.sock`; -1 when it does not fit a socket address. */
int control_socket_path(const char *dir, pid_t pid, char *out, size_t len);

/* The pid a socket file name stands for (`1234.sock`), or 0 for any other name. */
pid_t control_socket_pid_of(const char *name);

/* What a descriptor or a file is (device and inode): a program may close any descriptor and
 * reuse its number, or replace a file, so cuprof checks that its own are still what it made
 * before it uses them. */
struct control_socket_id {
    uint64_t dev, ino;
};

/* A listening socket bound at `path` (mode 0600, close-on-exec); a file already there is
 * replaced only when it is a socket nobody answers on. Returns the fd or -1 with err set. With
 * ids, ids[0] is what the descriptor is and ids[1] the socket file bind made. */
int control_socket_listen(const char *path, struct control_socket_id ids[2], char *err,
                          size_t err_len);

/* The identity of an open descriptor (fstat); false when fd is not open. Async-signal-safe. */
bool control_socket_fd_id(int fd, struct control_socket_id *id);

/* True when fd is still the descriptor `id` was taken of (not closed, not a number the program
 * reused for something else). Async-signal-safe. */
bool control_socket_fd_is(int fd, const struct control_socket_id *id);

/* True when `path` is still the socket file `id` was taken of (lstat). */
bool control_socket_path_is(const char *path, const struct control_socket_id *id);

/* Removes `path` only when it is still the socket file `id` was taken of: never a file someone
 * else put there. 0 when removed, -1 otherwise. */
int control_socket_unlink_own(const char *path, const struct control_socket_id *id);

/* True when the connected peer runs as this user or as root (SO_PEERCRED). */
bool control_socket_peer_allowed(int fd);

/* Gives a connected socket send and receive timeouts, so a stalled peer cannot hold us. */
void control_socket_set_timeouts(int fd, int milliseconds);

/* Client: connects to `path`, sends `request` (one line, newline added), reads the reply until
 * the server closes. *reply is malloc'd and NUL-terminated (newline stripped). Returns 0,
 * -ECONNREFUSED / -ENOENT for a socket nobody serves (stale), or another -errno. */
int control_socket_request(const char *path, const char *request, int timeout_ms, char **reply);

#endif
