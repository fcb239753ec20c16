/* control_json.h: the control thread's growing JSON text (a reply under construction), with
 *   strings from outside escaped by text_escape's one rule, so every reply is valid UTF-8 JSON.
 * Locking: none (one buffer belongs to the thread that builds it).
 * Hot path: no (the control thread). */
#ifndef CUPROF_CONTROL_JSON_H
#define CUPROF_CONTROL_JSON_H

#include <stdbool.h>
#include <stddef.h>

/* A reply's text; NUL-terminated while not failed. failed: out of host memory or past
 * CONTROL_REPLY_MAX, and everything after the failure is ignored. */
struct control_json {
    char *p;
    size_t len, cap;
    bool failed;
};

void control_json_put(struct control_json *b, const char *s, size_t n);
__attribute__((format(printf, 2, 3))) void control_json_printf(struct control_json *b,
                                                               const char *fmt, ...);

/* A JSON string: bytes that are not valid UTF-8 (and NUL) become the four characters \xHH
 * (text_escape.h), then quotes, backslashes and control characters are escaped for JSON. NULL
 * is written as "". */
void control_json_str(struct control_json *b, const char *s);
void control_json_str_n(struct control_json *b, const char *s, size_t len);

#endif
