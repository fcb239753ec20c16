/* json_reader.c: JSON text -> value tree, parsed here rather than by jansson because a snapshot's
 * integers can be any size (PyTorch's size_t -1 is 18446744073709551615; other tools write wider
 * ones) and jansson refuses the whole document at the first integer beyond int64. Objects keep
 * their key order; numbers follow Python's json: a fraction or an exponent makes a float. */
#include "snapshot/json_reader.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/cuprof_errors.h"
#include "snapshot/snapshot_model.h"

struct jctx {
    const unsigned char *p, *start, *end;
    struct snapshot_arena *tree;
    struct snapshot *strings;
    char *buf; /* scratch for strings with escapes and for number text */
    size_t buf_len, buf_cap;
    char *err;
    size_t err_len;
};

/* One line for a syntax error at the current position, in jansson's words. */
static int
syntax(struct jctx *c, const char *what)
{
    int line = 1, col = 1;
    for (const unsigned char *q = c->start; q < c->p && q < c->end; q++) {
        if (*q == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    snprintf(c->err, c->err_len, "JSON error at line %d, column %d: %s", line, col, what);
    return -CUPROF_EFORMAT;
}

static int
oom(struct jctx *c)
{
    snprintf(c->err, c->err_len, "out of memory");
    return -CUPROF_EHOSTMEM;
}

static void
skip_space(struct jctx *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static int
buf_put(struct jctx *c, const void *bytes, size_t n)
{
    if (c->buf_len + n + 1 > c->buf_cap) {
        size_t cap = c->buf_cap ? c->buf_cap : 256;
        while (cap < c->buf_len + n + 1)
            cap *= 2;
        char *b = realloc(c->buf, cap);
        if (b == NULL)
            return -CUPROF_EHOSTMEM;
        c->buf = b;
        c->buf_cap = cap;
    }
    memcpy(c->buf + c->buf_len, bytes, n);
    c->buf_len += n;
    c->buf[c->buf_len] = '\0';
    return 0;
}

static int
hex4(struct jctx *c, unsigned *out)
{
    if (c->end - c->p < 4)
        return syntax(c, "invalid escape");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char h = c->p[i];
        unsigned d = h >= '0' && h <= '9'   ? h - '0'
                     : h >= 'a' && h <= 'f' ? h - 'a' + 10
                     : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                            : 16;
        if (d == 16)
            return syntax(c, "invalid escape");
        v = v * 16 + d;
    }
    c->p += 4;
    *out = v;
    return 0;
}

/* \uXXXX (a surrogate pair when it takes two) to UTF-8; a lone surrogate is refused. */
static int
unicode_escape(struct jctx *c)
{
    unsigned cp;
    int rc = hex4(c, &cp);
    if (rc != 0)
        return rc;
    if (cp == 0) /* model strings are C strings; jansson refuses it too */
        return syntax(c, "\\u0000 is not allowed");
    if (cp >= 0xd800 && cp < 0xdc00 && c->end - c->p >= 6 && c->p[0] == '\\' && c->p[1] == 'u') {
        const unsigned char *save = c->p;
        unsigned lo;
        c->p += 2;
        if (hex4(c, &lo) == 0 && lo >= 0xdc00 && lo < 0xe000)
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        else
            c->p = save;
    }
    if (cp >= 0xd800 && cp < 0xe000)
        return syntax(c, "lone surrogate in a \\u escape");
    unsigned char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (unsigned char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (unsigned char)(0xc0 | cp >> 6);
        u[1] = (unsigned char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (unsigned char)(0xe0 | cp >> 12);
        u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        u[2] = (unsigned char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        u[0] = (unsigned char)(0xf0 | cp >> 18);
        u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
        u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        u[3] = (unsigned char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    return buf_put(c, u, n) == 0 ? 0 : oom(c);
}

/* Length of the UTF-8 sequence at p (no overlong forms, surrogates or code points past
 * U+10FFFF), or 0 when it is invalid. */
static size_t
utf8_len(const unsigned char *p, const unsigned char *end)
{
    size_t n = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;
    if (n == 0 || p[0] > 0xf4 || (size_t)(end - p) < n)
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0) ||
        (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90))
        return 0;
    return n;
}

/* A string after its opening quote; must be valid UTF-8, as in Python's json. */
static int
string(struct jctx *c, const char **out)
{
    const unsigned char *run = c->p;
    bool escaped = false;
    c->buf_len = 0;
    for (;;) {
        if (c->p == c->end)
            return syntax(c, "premature end of input");
        unsigned char ch = *c->p;
        if (ch == '"')
            break;
        if (ch < 0x20)
            return syntax(c, "control character in a string");
        if (ch >= 0x80) { /* JSON text is UTF-8 (RFC 8259); Python and jansson refuse the rest */
            size_t n = utf8_len(c->p, c->end);
            if (n == 0)
                return syntax(c, "invalid UTF-8 in a string");
            c->p += n;
            continue;
        }
        if (ch != '\\') {
            c->p++;
            continue;
        }
        if (buf_put(c, run, (size_t)(c->p - run)) != 0)
            return oom(c);
        escaped = true;
        if (c->end - c->p < 2)
            return syntax(c, "premature end of input");
        unsigned char e = c->p[1];
        c->p += 2;
        char one = e == 'b'                              ? '\b'
                   : e == 'f'                            ? '\f'
                   : e == 'n'                            ? '\n'
                   : e == 'r'                            ? '\r'
                   : e == 't'                            ? '\t'
                   : (e == '"' || e == '\\' || e == '/') ? (char)e
                                                         : 0;
        int rc;
        if (e == 'u')
            rc = unicode_escape(c);
        else if (one != 0)
            rc = buf_put(c, &one, 1) == 0 ? 0 : oom(c);
        else
            rc = syntax(c, "invalid escape");
        if (rc != 0)
            return rc;
        run = c->p;
    }
    const char *s;
    if (escaped) {
        if (buf_put(c, run, (size_t)(c->p - run)) != 0)
            return oom(c);
        s = snapshot_intern_n(c->strings, c->buf, c->buf_len);
    } else {
        s = snapshot_intern_n(c->strings, (const char *)run, (size_t)(c->p - run));
    }
    c->p++; /* the closing quote */
    if (s == NULL)
        return oom(c);
    *out = s;
    return 0;
}

static size_t
digits(struct jctx *c)
{
    const unsigned char *q = c->p;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9')
        c->p++;
    return (size_t)(c->p - q);
}

/* Integers are exact at any size: int64, then uint64, then SVAL_BIGINT (its text kept for
 * messages); with a fraction or an exponent the number is a float, as Python reads it. */
static int
number(struct jctx *c, struct sval *out)
{
    const unsigned char *tok = c->p;
    bool neg = c->p < c->end && *c->p == '-';
    if (neg)
        c->p++;
    const unsigned char *int_start = c->p;
    size_t nint = digits(c);
    if (nint == 0 || (nint > 1 && *int_start == '0'))
        return syntax(c, "invalid number");
    bool real = false;
    if (c->p < c->end && *c->p == '.') {
        c->p++;
        if (digits(c) == 0)
            return syntax(c, "invalid number");
        real = true;
    }
    if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
        c->p++;
        if (c->p < c->end && (*c->p == '+' || *c->p == '-'))
            c->p++;
        if (digits(c) == 0)
            return syntax(c, "invalid number");
        real = true;
    }
    size_t tok_len = (size_t)(c->p - tok);
    c->buf_len = 0;
    if (real) {
        if (buf_put(c, tok, tok_len) != 0)
            return oom(c);
        *out = (struct sval){.type = SVAL_FLOAT, .u.f = strtod(c->buf, NULL)};
        return 0;
    }
    uint64_t mag = 0;
    bool wide = false;
    for (size_t i = 0; i < nint && !wide; i++) {
        unsigned d = (unsigned)(int_start[i] - '0');
        if (mag > (UINT64_MAX - d) / 10)
            wide = true;
        else
            mag = mag * 10 + d;
    }
    if (!wide && !neg && mag <= INT64_MAX)
        *out = (struct sval){.type = SVAL_INT, .u.i = (int64_t)mag};
    else if (!wide && !neg)
        *out = (struct sval){.type = SVAL_UINT, .u.u = mag};
    else if (!wide && mag <= (uint64_t)INT64_MAX + 1)
        *out = (struct sval){.type = SVAL_INT, .u.i = mag == 0 ? 0 : -(int64_t)(mag - 1) - 1};
    else {
        char text[96];
        if (tok_len <= 80)
            snprintf(text, sizeof(text), "%.*s", (int)tok_len, (const char *)tok);
        else
            snprintf(text, sizeof(text), "a %s integer of %zu digits",
                     neg ? "negative" : "positive", nint);
        const char *s = snapshot_intern(c->strings, text);
        if (s == NULL)
            return oom(c);
        *out = (struct sval){.type = SVAL_BIGINT, .u.s = s};
    }
    return 0;
}

static int
literal(struct jctx *c, const char *word, struct sval v, struct sval *out)
{
    size_t n = strlen(word);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0)
        return syntax(c, "invalid token");
    c->p += n;
    *out = v;
    return 0;
}

static int value(struct jctx *c, int depth, struct sval *out);

/* An array or object after its opening bracket. */
static int
container(struct jctx *c, int depth, bool dict, struct sval *out)
{
    struct sval_seq *seq = sval_seq_new(c->tree);
    if (seq == NULL)
        return oom(c);
    *out = (struct sval){.type = dict ? SVAL_DICT : SVAL_LIST, .u.seq = seq};
    char close = dict ? '}' : ']';
    skip_space(c);
    if (c->p < c->end && *c->p == close) {
        c->p++;
        return 0;
    }
    for (;;) {
        struct sval kv[2];
        int rc, n = 0;
        skip_space(c);
        if (dict) {
            if (c->p == c->end || *c->p != '"')
                return syntax(c, "string or '}' expected");
            c->p++;
            kv[0].type = SVAL_STR;
            if ((rc = string(c, &kv[0].u.s)) != 0)
                return rc;
            skip_space(c);
            if (c->p == c->end || *c->p != ':')
                return syntax(c, "':' expected");
            c->p++;
            n = 1;
        }
        if ((rc = value(c, depth + 1, &kv[n])) != 0)
            return rc;
        if (sval_seq_append(c->tree, seq, kv, (size_t)n + 1, dict) != 0)
            return oom(c);
        skip_space(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            continue;
        }
        if (c->p < c->end && *c->p == close) {
            c->p++;
            return 0;
        }
        return syntax(c, dict ? "',' or '}' expected" : "',' or ']' expected");
    }
}

static int
value(struct jctx *c, int depth, struct sval *out)
{
    if (depth > JSON_READER_MAX_DEPTH) {
        snprintf(c->err, c->err_len, "nesting deeper than %d levels", JSON_READER_MAX_DEPTH);
        return -CUPROF_EFORMAT;
    }
    skip_space(c);
    if (c->p == c->end)
        return syntax(c, "premature end of input");
    switch (*c->p) {
    case '{':
    case '[':
        return container(c, depth, *c->p++ == '{', out);
    case '"':
        c->p++;
        out->type = SVAL_STR;
        return string(c, &out->u.s);
    case 't':
        return literal(c, "true", (struct sval){.type = SVAL_BOOL, .u.b = true}, out);
    case 'f':
        return literal(c, "false", (struct sval){.type = SVAL_BOOL, .u.b = false}, out);
    case 'n':
        return literal(c, "null", (struct sval){.type = SVAL_NONE}, out);
    /* Python's json writes these for float('nan') and the infinities. */
    case 'N':
        return literal(c, "NaN", (struct sval){.type = SVAL_FLOAT, .u.f = NAN}, out);
    case 'I':
        return literal(c, "Infinity", (struct sval){.type = SVAL_FLOAT, .u.f = INFINITY}, out);
    default:
        if (c->end - c->p >= 9 && memcmp(c->p, "-Infinity", 9) == 0)
            return literal(c, "-Infinity", (struct sval){.type = SVAL_FLOAT, .u.f = -INFINITY},
                           out);
        if (*c->p == '-' || (*c->p >= '0' && *c->p <= '9'))
            return number(c, out);
        return syntax(c, "invalid token");
    }
}

int
json_read(const unsigned char *data, size_t len, struct snapshot_arena *tree,
          struct snapshot *strings, struct sval *out, char *err, size_t err_len)
{
    struct jctx c = {.p = data,
                     .start = data,
                     .end = data + len,
                     .tree = tree,
                     .strings = strings,
                     .err = err,
                     .err_len = err_len};
    int rc = value(&c, 0, out);
    if (rc == 0) {
        skip_space(&c);
        if (c.p != c.end)
            rc = syntax(&c, "end of file expected");
    }
    free(c.buf);
    return rc;
}
