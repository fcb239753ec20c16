/* control_json.c: the control thread's growing JSON text (see control_json.h). */
#include "preload/control_json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot/control_socket.h"
#include "snapshot/text_escape.h"

void
control_json_put(struct control_json *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (b->len + n + 1 > cap)
            cap *= 2;
        char *grown = cap > CONTROL_REPLY_MAX ? NULL : realloc(b->p, cap);
        if (grown == NULL) {
            b->failed = true;
            return;
        }
        b->p = grown;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void
control_json_printf(struct control_json *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(small)) {
        b->failed = true;
        return;
    }
    control_json_put(b, small, (size_t)n);
}

/* Valid UTF-8 without NUL: quotes, backslashes and control characters escaped for JSON. */
static void
put_escaped_json(struct control_json *b, const char *s, size_t len)
{
    size_t run = 0; /* bytes copied as they are, written in one piece */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c != '"' && c != '\\' && c >= 0x20)
            continue;
        control_json_put(b, s + run, i - run);
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            control_json_put(b, esc, 2);
        } else {
            control_json_printf(b, "\\u%04x", c);
        }
        run = i + 1;
    }
    control_json_put(b, s + run, len - run);
}

void
control_json_str_n(struct control_json *b, const char *s, size_t len)
{
    control_json_put(b, "\"", 1);
    if (s != NULL && text_escape_is_clean(s, len, TEXT_ESCAPE_UTF8)) {
        put_escaped_json(b, s, len);
    } else if (s != NULL) {
        char *clean = text_escape_dup(s, len, TEXT_ESCAPE_UTF8);
        if (clean == NULL)
            b->failed = true;
        else
            put_escaped_json(b, clean, strlen(clean));
        free(clean);
    }
    control_json_put(b, "\"", 1);
}

void
control_json_str(struct control_json *b, const char *s)
{
    control_json_str_n(b, s, s != NULL ? strlen(s) : 0);
}
