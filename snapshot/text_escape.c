/* text_escape.c: one escaping rule for text from outside (see text_escape.h). */
#include "snapshot/text_escape.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

size_t
text_escape_utf8_len(const unsigned char *s, size_t len)
{
    if (len == 0)
        return 0;
    unsigned char c = s[0];
    size_t n;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        cp = c & 0x1fu;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        cp = c & 0x0fu;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        cp = c & 0x07u;
    } else {
        return 0;
    }
    if (n > len)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0u) != 0x80u)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3fu);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return n;
}

/* How the sequence at s (n bytes, n == 0 for an undecodable byte) is written: 0 as it is, else
 * the escape text in esc (NUL-terminated). */
static size_t
escape_of(const unsigned char *s, size_t n, enum text_escape_target target, char esc[8])
{
    static const char hex[] = "0123456789abcdef";
    bool control = n == 1 && (s[0] < 0x20 || s[0] == 0x7f);
    if (n == 0 || s[0] == 0 || (target == TEXT_ESCAPE_TERMINAL && control)) {
        esc[0] = '\\';
        esc[1] = 'x';
        esc[2] = hex[s[0] >> 4];
        esc[3] = hex[s[0] & 15];
        esc[4] = '\0';
        return 4;
    }
    if (target == TEXT_ESCAPE_TERMINAL && n == 2 && s[0] == 0xc2 && s[1] < 0xa0) {
        /* C1 controls (U+0080..U+009F): U+009B alone is a CSI on many terminals. */
        memcpy(esc, "\\u00", 4);
        esc[4] = hex[s[1] >> 4];
        esc[5] = hex[s[1] & 15];
        esc[6] = '\0';
        return 6;
    }
    return 0;
}

bool
text_escape_is_clean(const char *s, size_t len, enum text_escape_target target)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        if (u[i] >= 0x20 && u[i] < 0x7f) { /* printable ASCII: the common case */
            i++;
            continue;
        }
        char esc[8];
        size_t n = text_escape_utf8_len(u + i, len - i);
        if (escape_of(u + i, n, target, esc) != 0)
            return false;
        i += n;
    }
    return true;
}

size_t
text_escape(const char *s, size_t len, enum text_escape_target target, char *out, size_t cap)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t need = 0, kept = 0;
    bool cut = false; /* once a piece does not fit, nothing more is copied: no torn pieces */
    for (size_t i = 0; i < len;) {
        char esc[8];
        size_t n = text_escape_utf8_len(u + i, len - i);
        size_t elen = escape_of(u + i, n, target, esc);
        size_t plen = elen != 0 ? elen : n;
        if (!cut && kept + plen < cap) {
            memcpy(out + kept, elen != 0 ? esc : s + i, plen);
            kept += plen;
        } else {
            cut = true;
        }
        need += plen;
        i += n == 0 ? 1 : n;
    }
    if (cap > 0)
        out[kept] = '\0';
    return need;
}

char *
text_escape_dup(const char *s, size_t len, enum text_escape_target target)
{
    size_t need = text_escape(s, len, target, NULL, 0);
    char *out = malloc(need + 1);
    if (out != NULL)
        (void)text_escape(s, len, target, out, need + 1);
    return out;
}

int
text_escape_fputs(const char *s, enum text_escape_target target, FILE *out)
{
    size_t len = strlen(s);
    if (text_escape_is_clean(s, len, target))
        return fputs(s, out);
    char *escaped = text_escape_dup(s, len, target);
    if (escaped == NULL)
        return EOF;
    int rc = fputs(escaped, out);
    free(escaped);
    return rc;
}
