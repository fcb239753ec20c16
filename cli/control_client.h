/* control_client.h: the command line's side of the control socket: finds the user's processes
 *   running under cuprof (and cleans the sockets dead processes left), sends one request and
 *   parses the `OK <json>` reply into the readers' value tree.
 * Locking: none (single-threaded command).
 * Hot path: no. */
#ifndef CUPROF_CLI_CONTROL_CLIENT_H
#define CUPROF_CLI_CONTROL_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "snapshot/sval.h"

#define CONTROL_CLIENT_TIMEOUT_MS 5000

/* One parsed reply; its strings and containers live until control_reply_free. */
struct control_reply {
    struct sval value;
    struct snapshot *strings;
    struct snapshot_arena *tree;
};
void control_reply_free(struct control_reply *r);

/* Sends `request` (e.g. "INFO") to the process behind `socket_path`. Returns 0 with *out filled;
 * an errno value (ECONNREFUSED: nobody serves the socket) when it could not be asked; -1 when
 * the process answered ERROR or garbage. err holds one line in both failure cases. */
int control_client_ask(const char *socket_path, const char *request, struct control_reply *out,
                       char *err, size_t err_len);

/* Sends `TOP sites` and copies the reply's JSON text, as the process wrote it, to `out` (one
 * line). Returns 0, or -1 with one line on stderr. */
int control_client_print_raw(const char *socket_path, size_t sites, FILE *out);

/* A running process under cuprof, as its INFO reply describes it. */
struct control_process {
    pid_t pid;
    char socket_path[256];
    struct control_reply info;
};

/* Every process of this user that answers INFO, sorted by rank then pid. Sockets of processes
 * that are gone are removed (`removed` counts them). A socket directory that exists but is
 * refused or unreadable, and a live process that does not answer, get one line on stderr each,
 * prefixed `cuprof: WHO: `. Returns 0, or -1 when out of memory. */
int control_client_list(const char *who, struct control_process **out, size_t *count,
                        size_t *removed);
void control_client_list_free(struct control_process *list, size_t count);

/* The socket of `pid` in the user's directories, or -1 with one line in err. */
int control_client_find(pid_t pid, char *path, size_t len, char *err, size_t err_len);

/* Text from a reply (the program's argv, host, frame and file names, paths, messages) made safe
 * for a terminal: control characters shown as \xHH (text_escape.h), never sent raw. Writes into
 * buf (cut at a whole character when it does not fit) and returns it. */
const char *control_term(const char *text, char *buf, size_t len);

/* Small accessors over a reply's dicts: 0 / "" when the key is missing or of another type. */
int64_t control_int(const struct sval *dict, const char *key);
const char *control_str(const struct sval *dict, const char *key);

#endif
