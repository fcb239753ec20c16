/* control_client.c: scanning the socket directories, one exchange per request, stale-socket
 * cleanup (a socket nobody accepts on whose process is gone). */
#include "cli/control_client.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "snapshot/control_socket.h"
#include "snapshot/json_reader.h"
#include "snapshot/snapshot_arena.h"
#include "snapshot/snapshot_model.h"
#include "snapshot/text_escape.h"

void
control_reply_free(struct control_reply *r)
{
    if (r->tree != NULL)
        snapshot_arena_destroy(r->tree);
    if (r->strings != NULL)
        snapshot_free(r->strings);
    r->tree = NULL;
    r->strings = NULL;
}

int
control_client_ask(const char *socket_path, const char *request, struct control_reply *out,
                   char *err, size_t err_len)
{
    memset(out, 0, sizeof(*out));
    char line[CONTROL_REQUEST_MAX];
    snprintf(line, sizeof(line), "%s %s", CONTROL_PROTOCOL, request);
    char *text = NULL;
    int rc = control_socket_request(socket_path, line, CONTROL_CLIENT_TIMEOUT_MS, &text);
    if (rc != 0) {
        snprintf(err, err_len, "%s: %s", socket_path,
                 rc == -ETIMEDOUT ? "no answer within 5 s" : strerror(-rc));
        return -rc;
    }
    if (strncmp(text, "ERROR ", 6) == 0 || strncmp(text, "OK ", 3) != 0) {
        /* The message is the process's: shown escaped, as everything it sends. */
        control_term(strncmp(text, "ERROR ", 6) == 0 ? text + 6 : "bad reply", err, err_len);
        free(text);
        return -1;
    }
    out->strings = snapshot_create(0);
    out->tree = snapshot_arena_create();
    char msg[256] = "";
    if (out->strings == NULL || out->tree == NULL ||
        json_read((const unsigned char *)text + 3, strlen(text + 3), out->tree, out->strings,
                  &out->value, msg, sizeof(msg)) != 0 ||
        out->value.type != SVAL_DICT) {
        snprintf(err, err_len, "unreadable reply from %s: %s", socket_path,
                 msg[0] ? msg : "not a JSON object");
        control_reply_free(out);
        free(text);
        return -1;
    }
    free(text);
    return 0;
}

const char *
control_term(const char *text, char *buf, size_t len)
{
    if (len > 0)
        (void)text_escape(text, strlen(text), TEXT_ESCAPE_TERMINAL, buf, len);
    return buf;
}

int64_t
control_int(const struct sval *dict, const char *key)
{
    const struct sval *v = sval_get(dict, key);
    return v != NULL && v->type == SVAL_INT ? v->u.i : 0;
}

const char *
control_str(const struct sval *dict, const char *key)
{
    const struct sval *v = sval_get(dict, key);
    return v != NULL && v->type == SVAL_STR ? v->u.s : "";
}

/* A socket whose process is gone, or that nobody accepts on while a process of that pid runs
 * something else: the file is left over. */
static bool
stale(pid_t pid, int ask_rc)
{
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return true;
    return ask_rc == ECONNREFUSED;
}

static int
by_rank_then_pid(const void *a, const void *b)
{
    const struct control_process *x = a, *y = b;
    int64_t rx = control_int(&x->info.value, "rank"), ry = control_int(&y->info.value, "rank");
    if (rx != ry)
        return rx < ry ? -1 : 1;
    return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* Why a socket directory that exists cannot be listed, on stderr: a directory that is absent
 * holds nothing of ours and is not worth a line. */
static bool
dir_usable(const char *who, const char *dir)
{
    char err[512];
    struct stat st;
    if (lstat(dir, &st) != 0 && errno == ENOENT)
        return false;
    if (control_socket_check_dir(dir, false, err, sizeof(err)) != 0) {
        fprintf(stderr, "cuprof: %s: not looking in %s: %s\n", who, dir, err);
        return false;
    }
    return true;
}

int
control_client_list(const char *who, struct control_process **out, size_t *count, size_t *removed)
{
    *out = NULL;
    *count = 0;
    *removed = 0;
    size_t cap = 0;
    char dirs[2][256], err[512];
    size_t ndirs = control_socket_dirs(dirs, 2);
    for (size_t d = 0; d < ndirs; d++) {
        if (!dir_usable(who, dirs[d]))
            continue;
        DIR *dir = opendir(dirs[d]);
        if (dir == NULL) {
            fprintf(stderr, "cuprof: %s: cannot list %s: %s\n", who, dirs[d], strerror(errno));
            continue;
        }
        struct dirent *e;
        while ((e = readdir(dir)) != NULL) {
            pid_t pid = control_socket_pid_of(e->d_name);
            char path[256];
            struct stat st;
            if (pid == 0 || control_socket_path(dirs[d], pid, path, sizeof(path)) != 0 ||
                lstat(path, &st) != 0 || !S_ISSOCK(st.st_mode))
                continue;
            bool seen = false; /* the same pid in both directories: the first one wins */
            for (size_t i = 0; i < *count; i++)
                seen = seen || (*out)[i].pid == pid;
            if (seen)
                continue;
            struct control_reply info;
            int rc = control_client_ask(path, "INFO", &info, err, sizeof(err));
            if (rc != 0) {
                if (stale(pid, rc)) {
                    if (unlink(path) == 0)
                        (*removed)++;
                } else { /* err is already escaped where the process wrote it */
                    fprintf(stderr, "cuprof: %s: process %ld did not answer: %s\n", who, (long)pid,
                            err);
                }
                continue;
            }
            if (*count == cap) {
                size_t c = cap ? cap * 2 : 16;
                struct control_process *grown = realloc(*out, c * sizeof(*grown));
                if (grown == NULL) {
                    control_reply_free(&info);
                    closedir(dir);
                    return -1;
                }
                *out = grown;
                cap = c;
            }
            struct control_process *p = &(*out)[(*count)++];
            p->pid = pid;
            snprintf(p->socket_path, sizeof(p->socket_path), "%s", path);
            p->info = info;
        }
        closedir(dir);
    }
    if (*count > 1)
        qsort(*out, *count, sizeof(**out), by_rank_then_pid);
    return 0;
}

void
control_client_list_free(struct control_process *list, size_t count)
{
    for (size_t i = 0; i < count; i++)
        control_reply_free(&list[i].info);
    free(list);
}

int
control_client_find(pid_t pid, char *path, size_t len, char *err, size_t err_len)
{
    char dirs[2][256];
    size_t ndirs = control_socket_dirs(dirs, 2);
    for (size_t d = 0; d < ndirs; d++) {
        struct stat st;
        if (control_socket_check_dir(dirs[d], false, err, err_len) == 0 &&
            control_socket_path(dirs[d], pid, path, len) == 0 && lstat(path, &st) == 0 &&
            S_ISSOCK(st.st_mode))
            return 0;
    }
    snprintf(err, err_len,
             "no process %ld under cuprof answers here (`cuprof ps` lists them; a process shows "
             "up after its first CUDA call, with CUPROF_CONTROL=on)",
             (long)pid);
    return -1;
}

int
control_client_print_raw(const char *socket_path, size_t sites, FILE *out)
{
    char line[64];
    snprintf(line, sizeof(line), "%s TOP %zu", CONTROL_PROTOCOL, sites);
    char *text = NULL;
    int rc = control_socket_request(socket_path, line, CONTROL_CLIENT_TIMEOUT_MS, &text);
    if (rc != 0 || strncmp(text, "OK ", 3) != 0) {
        char shown[512];
        fprintf(stderr, "cuprof: top: %s: %s\n", socket_path,
                rc != 0                           ? strerror(-rc)
                : strncmp(text, "ERROR ", 6) == 0 ? control_term(text + 6, shown, sizeof(shown))
                                                  : control_term(text, shown, sizeof(shown)));
        free(text);
        return -1;
    }
    fprintf(out, "%s\n", text + 3);
    free(text);
    return 0;
}
