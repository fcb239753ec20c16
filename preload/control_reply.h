/* control_reply.h: the control protocol's answers: one request line (`CUPROF/1 CMD [ARG]`) in,
 *   one reply line out, `OK <json>` or `ERROR <message>`, built in host memory.
 * Locking: the control thread only; it takes a device lock just to copy the stats or the block
 *   table, and the dump lock through dumper_dump_named; never while talking to a client.
 * Hot path: no. */
#ifndef CUPROF_CONTROL_REPLY_H
#define CUPROF_CONTROL_REPLY_H

#include <stddef.h>

struct cuprof_runtime;

/* The reply to `request` (one line, its newline removed; the text is modified): a malloc'd line
 * ending in a newline, its length in *len. NULL when even an ERROR line finds no host memory. */
char *control_reply_answer(struct cuprof_runtime *rt, char *request, size_t *len);

/* `ERROR <message>\n`, malloc'd; NULL without host memory. */
char *control_reply_error(const char *message, size_t *len);

#endif
