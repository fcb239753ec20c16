/* control.c: the control thread: one poll loop over the listening socket and up to
 * CONTROL_CLIENTS clients, each with its own buffer, one deadline for its whole request and one
 * for its whole reply (non-blocking reads and writes), so a slow or stalled client holds neither
 * the others nor the program; a sample every second for `top` (control_sample.c); the replies
 * are control_reply.c's. Every descriptor it keeps is checked to still be its own before each
 * use: a program may close any descriptor and reuse the number, and then cuprof forgets the
 * number (never closing, reading or writing it) and makes its socket anew. */
#include "preload/control.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "preload/config.h"
#include "preload/control_reply.h"
#include "preload/helper_thread.h"
#include "preload/control_sample.h"
#include "preload/runtime.h"
#include "snapshot/control_socket.h"

#define CONTROL_CLIENTS         16   /* served at once; more wait in the listen backlog */
#define CONTROL_REQUEST_MS      2000 /* a whole request, from accept */
#define CONTROL_REPLY_MS        2000 /* a whole reply, from when it is ready */
#define CONTROL_ACCEPT_GAP_MS   50   /* 20 connections a second at most: a flood waits */
#define CONTROL_DRAIN_MAX       ((size_t)1 << 20)
#define CONTROL_RELISTEN_MIN_MS 1000 /* a socket that cannot be made anew: tried again later */
#define CONTROL_RELISTEN_MAX_MS 64000

enum client_state { CLIENT_FREE, CLIENT_READING, CLIENT_WRITING, CLIENT_DRAINING };

struct control_client {
    int fd;
    struct control_socket_id id; /* what fd was at accept */
    enum client_state state;
    bool drain_after; /* the reply went out before the request was read to its end */
    int64_t deadline_ms;
    size_t used; /* request bytes read, or bytes drained */
    char *reply;
    size_t reply_len, sent;
    char request[CONTROL_REQUEST_MAX + 1];
};

/* The listening socket's identity is read by the fork-child and exit handlers while the thread
 * may be making the socket anew: each field is atomic, and a torn pair only fails the check
 * (nothing is closed or removed then), the safe side. */
struct control_listen {
    _Atomic int fd; /* -1: none */
    _Atomic uint64_t fd_dev, fd_ino, file_dev, file_ino;
};

struct control_state {
    struct cuprof_runtime *rt;
    struct control_listen listen;
    pid_t owner; /* the process that bound the socket: only it removes the file */
    char dir[256], path[108];
    bool listen_lost;                /* the socket is to be made anew */
    int64_t relisten_ms, backoff_ms; /* the next try at that, and the pause after a failure */
    bool loss_logged;
    int64_t next_accept_ms;
    struct control_client *clients; /* CONTROL_CLIENTS */
};

static struct control_state control = {.listen.fd = -1};
static atomic_bool control_exit_registered;
static atomic_bool control_closing; /* the program exits: the socket is not made anew */

static int64_t
now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- The listening socket ----------------------------------------------------------------- */

static void
listen_ids(struct control_socket_id *fd_id, struct control_socket_id *file_id)
{
    *fd_id = (struct control_socket_id){atomic_load(&control.listen.fd_dev),
                                        atomic_load(&control.listen.fd_ino)};
    *file_id = (struct control_socket_id){atomic_load(&control.listen.file_dev),
                                          atomic_load(&control.listen.file_ino)};
}

static void
listen_set(int fd, const struct control_socket_id ids[2])
{
    atomic_store(&control.listen.fd_dev, ids[0].dev);
    atomic_store(&control.listen.fd_ino, ids[0].ino);
    atomic_store(&control.listen.file_dev, ids[1].dev);
    atomic_store(&control.listen.file_ino, ids[1].ino);
    atomic_store(&control.listen.fd, fd);
}

/* A new listening socket at control.path, replacing our own file if it is still there. */
static int
listen_anew(char *err, size_t err_len)
{
    struct control_socket_id ids[2];
    listen_ids(&ids[0], &ids[1]);
    if (control_socket_check_dir(control.dir, true, err, err_len) != 0)
        return -1;
    (void)control_socket_unlink_own(control.path, &ids[1]); /* never someone else's file */
    int fd = control_socket_listen(control.path, ids, err, err_len);
    if (fd >= 0)
        listen_set(fd, ids);
    return fd;
}

/* The listening descriptor when it is still ours and its file still names it; else forgets it
 * and, when due, makes the socket anew (backing off while that fails). -1: none for now. */
static int
listen_check(int64_t now)
{
    int fd = atomic_load(&control.listen.fd);
    if (fd >= 0) {
        struct control_socket_id fd_id, file_id;
        listen_ids(&fd_id, &file_id);
        bool fd_ours = control_socket_fd_is(fd, &fd_id);
        if (fd_ours && control_socket_path_is(control.path, &file_id))
            return fd;
        atomic_store(&control.listen.fd, -1);
        if (fd_ours)
            close(fd); /* ours, but its file was removed or replaced: made anew below */
        control.listen_lost = true;
        control.relisten_ms = now;
        control.backoff_ms = CONTROL_RELISTEN_MIN_MS;
    }
    if (atomic_load(&control_closing) || !control.listen_lost || now < control.relisten_ms)
        return -1;
    char err[512] = "";
    fd = listen_anew(err, sizeof(err));
    if (!control.loss_logged && runtime_log_info())
        runtime_log(fd >= 0 ? "cuprof: the control socket's descriptor was closed or taken by "
                              "the program: %s made anew%s"
                            : "cuprof: the control socket's descriptor was closed or taken by "
                              "the program: %s not made anew (%s); trying again later",
                    control.path, fd >= 0 ? "" : err);
    control.loss_logged = true;
    if (fd >= 0) {
        control.listen_lost = false;
        return fd;
    }
    control.relisten_ms = now + control.backoff_ms;
    if (control.backoff_ms < CONTROL_RELISTEN_MAX_MS)
        control.backoff_ms *= 2;
    return -1;
}

/* ---- Clients ------------------------------------------------------------------------------ */

static bool
client_ours(const struct control_client *c)
{
    return control_socket_fd_is(c->fd, &c->id);
}

/* Ends a client: its descriptor is closed only while it is still ours. */
static void
client_drop(struct control_client *c)
{
    if (c->fd >= 0 && client_ours(c))
        close(c->fd);
    free(c->reply);
    c->reply = NULL;
    c->fd = -1;
    c->state = CLIENT_FREE;
}

static void
client_write(struct control_client *c)
{
    while (c->sent < c->reply_len) {
        if (!client_ours(c)) {
            client_drop(c);
            return;
        }
        ssize_t n =
            send(c->fd, c->reply + c->sent, c->reply_len - c->sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return; /* the rest when the client reads, until its deadline */
        if (n <= 0) {
            client_drop(c);
            return;
        }
        c->sent += (size_t)n;
    }
    if (!c->drain_after) {
        client_drop(c);
        return;
    }
    /* Replied before the request was read to its end: read what the client still sends (thrown
     * away) before closing, since closing with unread bytes resets the connection and can lose
     * the reply on its way. */
    (void)shutdown(c->fd, SHUT_WR);
    c->state = CLIENT_DRAINING;
    c->used = 0;
}

static void
client_reply(struct control_client *c, char *reply, size_t len, bool drain_after)
{
    if (reply == NULL) { /* not even an ERROR line fits in host memory: the client sees EOF */
        client_drop(c);
        return;
    }
    c->reply = reply;
    c->reply_len = len;
    c->sent = 0;
    c->drain_after = drain_after;
    c->state = CLIENT_WRITING;
    c->deadline_ms = now_ms() + CONTROL_REPLY_MS;
    client_write(c);
}

/* The request is c->request[0..end): answered now. */
static void
client_answer(struct control_client *c, size_t end)
{
    c->request[end] = '\0';
    if (end > 0 && c->request[end - 1] == '\r')
        c->request[end - 1] = '\0';
    size_t len = 0;
    char *reply = control_reply_answer(control.rt, c->request, &len);
    client_reply(c, reply, len, false);
}

static void
client_read(struct control_client *c)
{
    if (!client_ours(c)) {
        client_drop(c);
        return;
    }
    size_t room = CONTROL_REQUEST_MAX - c->used;
    ssize_t n = recv(c->fd, c->request + c->used, room, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    if (n <= 0) {
        if (n == 0 && c->used > 0)
            client_answer(c, c->used); /* no newline before the end: take what came */
        else
            client_drop(c);
        return;
    }
    char *nl = memchr(c->request + c->used, '\n', (size_t)n);
    c->used += (size_t)n;
    if (nl != NULL) {
        client_answer(c, (size_t)(nl - c->request));
    } else if (c->used == CONTROL_REQUEST_MAX) {
        size_t len = 0;
        char *reply = control_reply_error("request longer than 4096 bytes", &len);
        client_reply(c, reply, len, true);
    }
}

static void
client_drain(struct control_client *c)
{
    for (;;) {
        if (!client_ours(c)) {
            client_drop(c);
            return;
        }
        ssize_t n = recv(c->fd, c->request, CONTROL_REQUEST_MAX, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0 || (c->used += (size_t)n) > CONTROL_DRAIN_MAX) {
            client_drop(c);
            return;
        }
    }
}

/* A client past its deadline is dropped; one still sending its request is told why first (one
 * try, never waiting). */
static void
client_expire(struct control_client *c)
{
    if (c->state == CLIENT_READING && client_ours(c)) {
        static const char late[] = "ERROR the request did not arrive within 2 s\n";
        (void)send(c->fd, late, sizeof(late) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    client_drop(c);
}

static void
accept_one(int listen_fd, int64_t now)
{
    control.next_accept_ms = now + CONTROL_ACCEPT_GAP_MS; /* after a failure too: no spinning */
    struct control_client *c = NULL;
    for (int i = 0; i < CONTROL_CLIENTS && c == NULL; i++)
        if (control.clients[i].state == CLIENT_FREE)
            c = &control.clients[i];
    int fd = c == NULL ? -1 : accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0)
        return;
    if (!control_socket_fd_id(fd, &c->id)) {
        close(fd);
        return;
    }
    c->fd = fd;
    c->used = 0;
    c->state = CLIENT_READING;
    c->deadline_ms = now + CONTROL_REQUEST_MS;
    if (!control_socket_peer_allowed(fd)) {
        size_t len = 0;
        char *reply =
            control_reply_error("permission denied: the client runs as another user", &len);
        client_reply(c, reply, len, true);
    }
}

/* ---- The loop ----------------------------------------------------------------------------- */

/* Drops the clients past their deadline; returns the earliest deadline left (or `until`). */
static int64_t
expire_clients(int64_t now, int64_t until)
{
    for (int i = 0; i < CONTROL_CLIENTS; i++) {
        struct control_client *c = &control.clients[i];
        if (c->state == CLIENT_FREE)
            continue;
        if (now >= c->deadline_ms)
            client_expire(c);
        else if (c->deadline_ms < until)
            until = c->deadline_ms;
    }
    return until;
}

static bool
have_free_client(void)
{
    for (int i = 0; i < CONTROL_CLIENTS; i++)
        if (control.clients[i].state == CLIENT_FREE)
            return true;
    return false;
}

/* One round: the descriptors to watch and how long to wait; then what they say. */
static void
control_round(struct cuprof_runtime *rt)
{
    int64_t now = now_ms();
    int64_t until = now + control_sample_tick(rt, now);
    int listen_fd = listen_check(now);
    if (listen_fd < 0 && control.listen_lost && control.relisten_ms < until)
        until = control.relisten_ms;
    until = expire_clients(now, until);
    struct pollfd p[CONTROL_CLIENTS + 1];
    struct control_client *owner[CONTROL_CLIENTS + 1];
    nfds_t n = 0;
    if (listen_fd >= 0 && have_free_client()) {
        if (now >= control.next_accept_ms) {
            owner[n] = NULL;
            p[n++] = (struct pollfd){.fd = listen_fd, .events = POLLIN};
        } else if (control.next_accept_ms < until) {
            until = control.next_accept_ms;
        }
    }
    for (int i = 0; i < CONTROL_CLIENTS; i++) {
        struct control_client *c = &control.clients[i];
        if (c->state == CLIENT_FREE)
            continue;
        owner[n] = c;
        p[n++] =
            (struct pollfd){.fd = c->fd, .events = c->state == CLIENT_WRITING ? POLLOUT : POLLIN};
    }
    int64_t wait = until - now;
    int r = poll(p, n, wait < 0 ? 0 : wait > 1000 ? 1000 : (int)wait);
    if (r < 0 && errno != EINTR) {
        struct timespec pause = {0, 100 * 1000000L}; /* never a busy loop, whatever poll says */
        nanosleep(&pause, NULL);
    }
    for (nfds_t i = 0; r > 0 && i < n; i++) {
        struct control_client *c = owner[i];
        if (p[i].revents == 0)
            continue;
        if (c == NULL) {
            /* Still ours after the wait? A number the program took is never accepted on. */
            if ((p[i].revents & POLLIN) != 0 && listen_check(now_ms()) == listen_fd)
                accept_one(listen_fd, now_ms());
        } else if ((p[i].revents & POLLNVAL) != 0) {
            c->fd = -1; /* closed by the program: nothing of it is ours to close */
            client_drop(c);
        } else if (c->state == CLIENT_READING) {
            client_read(c);
        } else if (c->state == CLIENT_WRITING) {
            client_write(c);
        } else {
            client_drain(c);
        }
    }
}

static void *
control_thread(void *arg)
{
    for (;;)
        control_round(arg);
    return NULL;
}

void
control_stop(void)
{
    atomic_store(&control_closing, true);
    struct control_socket_id fd_id, file_id;
    listen_ids(&fd_id, &file_id);
    if (control.owner == getpid())
        (void)control_socket_unlink_own(control.path, &file_id);
}

/* Clients left from before a fork (their descriptors already closed in the child). */
static bool
clients_ready(void)
{
    if (control.clients == NULL)
        control.clients = calloc(CONTROL_CLIENTS, sizeof(*control.clients));
    if (control.clients == NULL)
        return false;
    for (int i = 0; i < CONTROL_CLIENTS; i++) {
        free(control.clients[i].reply);
        control.clients[i] = (struct control_client){.fd = -1, .state = CLIENT_FREE};
    }
    return true;
}

/* The first socket: the first usable directory of control_socket_dirs. */
static int
listen_first(char *err, size_t err_len)
{
    char dirs[2][256];
    size_t ndirs = control_socket_dirs(dirs, 2);
    for (size_t i = 0; i < ndirs; i++) {
        if (control_socket_check_dir(dirs[i], true, err, err_len) != 0 ||
            control_socket_path(dirs[i], getpid(), control.path, sizeof(control.path)) != 0)
            continue;
        struct control_socket_id ids[2];
        int fd = control_socket_listen(control.path, ids, err, err_len);
        if (fd >= 0) {
            snprintf(control.dir, sizeof(control.dir), "%s", dirs[i]);
            listen_set(fd, ids);
            return fd;
        }
    }
    return -1;
}

void
control_start(struct cuprof_runtime *rt)
{
    if (rt->config->control != 0) /* "on" is choice 0 */
        return;
    char err[512] = "";
    if (!clients_ready()) {
        runtime_log("cuprof: no control socket (out of host memory): `cuprof ps`, `dump` and "
                    "`top` cannot see this process");
        return;
    }
    int fd = listen_first(err, sizeof(err));
    if (fd < 0) {
        runtime_log("cuprof: no control socket (%s): `cuprof ps`, `dump` and `top` cannot see "
                    "this process",
                    err[0] ? err : "no usable directory");
        return;
    }
    control.rt = rt;
    control.owner = getpid();
    control.listen_lost = false;
    control.next_accept_ms = 0;
    (void)control_sample_start(rt); /* without memory for it `top` shows no history */
    int rc = helper_thread_start("cuprof-control", control_thread, rt);
    if (rc != 0) {
        runtime_log("cuprof: cannot start the control thread: %s", strerror(rc));
        struct control_socket_id fd_id, file_id;
        listen_ids(&fd_id, &file_id);
        (void)control_socket_unlink_own(control.path, &file_id);
        close(fd);
        atomic_store(&control.listen.fd, -1);
        return;
    }
    if (!atomic_exchange(&control_exit_registered, true) && atexit(control_stop) != 0)
        runtime_log("cuprof: atexit failed: %s stays after exit", control.path);
    if (runtime_log_debug())
        runtime_log("cuprof: control socket %s", control.path);
}

void
control_fork_child(void)
{
    /* The child has no control thread: the parent's descriptors are closed here, each only if
     * it is still ours (the program may have closed it and reused the number). */
    struct control_socket_id fd_id, file_id;
    listen_ids(&fd_id, &file_id);
    int fd = atomic_exchange(&control.listen.fd, -1);
    if (fd >= 0 && control_socket_fd_is(fd, &fd_id))
        close(fd);
    for (int i = 0; control.clients != NULL && i < CONTROL_CLIENTS; i++) {
        struct control_client *c = &control.clients[i];
        if (c->state != CLIENT_FREE && client_ours(c))
            close(c->fd);
        c->fd = -1; /* the reply buffer is freed by control_start (not async-signal-safe) */
        c->state = CLIENT_FREE;
    }
}

void
control_resume(struct cuprof_runtime *rt)
{
    if (control.owner != 0 && control.owner != getpid())
        control_start(rt);
}
