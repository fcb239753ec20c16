/* pickle_data.c: Python ints of any size and cuprof's plain records, decoded without the VM. */
#include "snapshot/pickle_data.h"

#include <endian.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static inline uint64_t
le(const unsigned char *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) /* n is a constant where it matters: the loop unrolls */
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Two's complement of n <= 8 bytes (u holds them) to int64, without an implementation-defined
 * conversion. */
static int64_t
to_int64(uint64_t u, size_t n, bool negative)
{
    if (n < 8 && negative)
        u |= ~(uint64_t)0 << (8 * n); /* sign-extend */
    return u <= INT64_MAX ? (int64_t)u : -(int64_t)(~u) - 1;
}

/* The n <= 8 bytes at p as an int64: one load when 8 bytes are readable. */
static int64_t
small_long(const unsigned char *p, size_t n, size_t avail)
{
    uint64_t u;
    if (avail >= 8) {
        memcpy(&u, p, 8);
        u = le64toh(u) & (n == 8 ? ~(uint64_t)0 : ((uint64_t)1 << (8 * n)) - 1);
    } else {
        u = le(p, n);
    }
    return to_int64(u, n, (p[n - 1] & 0x80u) != 0);
}

/* Decimal text of the two's-complement little-endian integer p[0..n) (n <= BIG_TEXT_BYTES). */
#define BIG_TEXT_BYTES 48
static void
big_text(const unsigned char *p, size_t n, char *out, size_t out_len)
{
    unsigned char mag[BIG_TEXT_BYTES];
    bool neg = (p[n - 1] & 0x80u) != 0;
    unsigned carry = 1;
    for (size_t i = 0; i < n; i++) { /* magnitude: negate if negative */
        unsigned b = neg ? (unsigned)(uint8_t)~p[i] + carry : p[i];
        mag[i] = (unsigned char)b;
        carry = neg ? b >> 8 : 0;
    }
    char digits[BIG_TEXT_BYTES * 3 + 2];
    size_t nd = 0, top = n;
    while (top > 0) { /* repeated division by 10, most significant byte first */
        unsigned rem = 0;
        for (size_t i = top; i-- > 0;) {
            unsigned cur = (rem << 8) | mag[i];
            mag[i] = (unsigned char)(cur / 10);
            rem = cur % 10;
        }
        digits[nd++] = (char)('0' + rem);
        while (top > 0 && mag[top - 1] == 0)
            top--;
    }
    if (nd == 0)
        digits[nd++] = '0';
    size_t o = 0;
    if (neg && o + 1 < out_len)
        out[o++] = '-';
    while (nd > 0 && o + 1 < out_len)
        out[o++] = digits[--nd];
    out[o] = '\0';
}

void
pickle_data_long(const unsigned char *p, size_t n, size_t avail, struct sval *out, char *text,
                 size_t text_len)
{
    *out = (struct sval){.type = SVAL_INT};
    if (n == 0)
        return;
    if (n <= 8) { /* any int64: what cuprof writes for addresses and times */
        out->u.i = small_long(p, n, avail);
        return;
    }
    /* Drop sign-extension bytes CPython would not have written (a hand-made file might). */
    size_t len = n;
    while (len > 1 && ((p[len - 1] == 0x00 && !(p[len - 2] & 0x80u)) ||
                       (p[len - 1] == 0xff && (p[len - 2] & 0x80u))))
        len--;
    if (len <= 8) {
        out->u.i = to_int64(le(p, len), len, (p[len - 1] & 0x80u) != 0);
    } else if (len == 9 && p[8] == 0x00) {
        *out = (struct sval){.type = SVAL_UINT, .u.u = le(p, 8)};
    } else {
        out->type = SVAL_BIGINT;
        if (len <= BIG_TEXT_BYTES)
            big_text(p, len, text, text_len);
        else
            snprintf(text, text_len, "a %s integer of %zu bytes",
                     (p[len - 1] & 0x80u) ? "negative" : "positive", len);
    }
}

/* One plain value at p (see pickle_data_record) into *v: its length in bytes, or 0 for anything
 * else. `left` bytes are readable at p (at least 1). Tested in the order of their frequency in
 * cuprof's entries (keys and strings are memo fetches): this runs a dozen times per entry of a
 * 10^7-entry history, where a jump table's indirect branch cost more than the tests. */
static inline size_t
plain_value(const unsigned char *p, size_t left, const struct sval *memo, size_t memo_cap,
            struct sval *v)
{
    unsigned op = p[0];
    if (op == 'h' || op == 'j') { /* BINGET, LONG_BINGET: a set slot, no container placed */
        size_t n = op == 'h' ? 2 : 5;
        if (left < n)
            return 0;
        size_t index = n == 2 ? p[1] : (size_t)le(p + 1, 4);
        if (index >= memo_cap || !(memo[index].flags & SVAL_MEMO) || memo[index].place != 0)
            return 0;
        *v = memo[index];
        return n;
    }
    int64_t i;
    size_t n;
    if (op == 0x8a) { /* LONG1 of 1 to 8 bytes */
        if (left < 2 || p[1] == 0 || p[1] > 8 || left < 2u + p[1])
            return 0;
        i = small_long(p + 2, p[1], left - 2);
        n = 2u + p[1];
    } else if (op == 'J') { /* BININT: signed 32-bit */
        if (left < 5)
            return 0;
        i = (int32_t)(uint32_t)le(p + 1, 4);
        n = 5;
    } else if (op == 'K' || op == 'M') { /* BININT1, BININT2: unsigned */
        n = op == 'K' ? 2 : 3;
        if (left < n)
            return 0;
        i = n == 2 ? p[1] : (int64_t)(p[1] | (unsigned)p[2] << 8);
    } else if (op == 'N') {
        *v = (struct sval){.type = SVAL_NONE};
        return 1;
    } else {
        return 0;
    }
    *v = (struct sval){.type = SVAL_INT, .u.i = i};
    return n;
}

size_t
pickle_data_record(const unsigned char *p, const unsigned char *end, const struct sval *memo,
                   size_t memo_cap, struct sval *items, const unsigned char **after)
{
    if (p == end || *p != '(')
        return 0;
    p++;
    size_t n = 0;
    while (p < end && *p != 'u') {
        size_t len = n < PICKLE_DATA_RECORD_ITEMS
                         ? plain_value(p, (size_t)(end - p), memo, memo_cap, &items[n])
                         : 0;
        if (len == 0)
            return 0;
        p += len;
        n++;
    }
    if (p == end || n == 0 || n % 2 != 0)
        return 0;
    *after = p + 1;
    return n;
}
