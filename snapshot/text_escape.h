/* text_escape.h: text that came from outside (argv, paths, host names, frame names, snapshot
 *   strings) made safe for where it goes. One rule everywhere: a byte that is not part of valid
 *   UTF-8 becomes the four characters \xHH (lower-case hex), so JSON and pickle strings are
 *   valid UTF-8 and a reader can still tell which byte it was; on a terminal, control
 *   characters (C0, DEL, and C1 written as UTF-8) are shown the same way (\x1b, \u009b), never
 *   sent raw.
 * Locking: none (pure functions).
 * Hot path: no (dump time, the control thread and the command line). */
#ifndef CUPROF_TEXT_ESCAPE_H
#define CUPROF_TEXT_ESCAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum text_escape_target {
    TEXT_ESCAPE_UTF8,     /* JSON and pickle: undecodable bytes and NUL escaped */
    TEXT_ESCAPE_TERMINAL, /* a terminal or log line: also every control character */
};

/* Length of the valid UTF-8 sequence (no overlong forms, no surrogates, nothing past U+10FFFF)
 * at s[0..len), or 0 when s[0] does not start one. */
size_t text_escape_utf8_len(const unsigned char *s, size_t len);

/* True when s[0..len) needs no escaping for `target`. */
bool text_escape_is_clean(const char *s, size_t len, enum text_escape_target target);

/* Writes the escaped form of s[0..len) into out (at most cap bytes, always NUL-terminated when
 * cap > 0, never cut inside an escape or a UTF-8 sequence) and returns the length the whole
 * escaped text needs (without the NUL): a return >= cap means it was cut. */
size_t text_escape(const char *s, size_t len, enum text_escape_target target, char *out,
                   size_t cap);

/* The escaped form of s[0..len) in a new malloc'd string, or NULL without memory. */
char *text_escape_dup(const char *s, size_t len, enum text_escape_target target);

/* fputs of a NUL-terminated string escaped for `target`; returns what fputs returns. */
int text_escape_fputs(const char *s, enum text_escape_target target, FILE *out);

#endif
