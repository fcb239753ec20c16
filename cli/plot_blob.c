/* plot_blob.c: varint rows and their base64 (see plot_blob.h). */
#include "cli/plot_blob.h"

#include <stdlib.h>
#include <string.h>

void
plot_blob_init(struct plot_blob *b)
{
    memset(b, 0, sizeof(*b));
}

void
plot_blob_free(struct plot_blob *b)
{
    free(b->data);
    plot_blob_init(b);
}

static bool
reserve(struct plot_blob *b, size_t more)
{
    if (b->failed)
        return false;
    if (b->len + more <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more)
        cap *= 2;
    uint8_t *data = realloc(b->data, cap);
    if (data == NULL) {
        b->failed = true;
        return false;
    }
    b->data = data;
    b->cap = cap;
    return true;
}

void
plot_blob_uint(struct plot_blob *b, uint64_t v)
{
    if (!reserve(b, 10))
        return;
    while (v >= 0x80) {
        b->data[b->len++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b->data[b->len++] = (uint8_t)v;
}

void
plot_blob_sint(struct plot_blob *b, int64_t v)
{
    plot_blob_uint(b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

uint64_t
plot_blob_delta(uint64_t a, uint64_t b)
{
    /* |a - b| doubled, plus one when negative: zigzag without forming a signed difference. */
    return a >= b ? (a - b) << 1 : ((b - a) << 1) - 1;
}

void
plot_blob_append(struct plot_blob *b, const struct plot_blob *other)
{
    if (other->failed)
        b->failed = true;
    if (other->len == 0 || !reserve(b, other->len))
        return;
    memcpy(b->data + b->len, other->data, other->len);
    b->len += other->len;
}

bool
plot_blob_base64(FILE *out, const uint8_t *data, size_t len)
{
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char buf[4096];
    size_t used = 0;
    bool ok = true;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)data[i] << 16;
        if (i + 1 < len)
            v |= (uint32_t)data[i + 1] << 8;
        if (i + 2 < len)
            v |= data[i + 2];
        buf[used++] = digits[(v >> 18) & 63];
        buf[used++] = digits[(v >> 12) & 63];
        buf[used++] = i + 1 < len ? digits[(v >> 6) & 63] : '=';
        buf[used++] = i + 2 < len ? digits[v & 63] : '=';
        if (used + 4 > sizeof(buf)) {
            ok = fwrite(buf, 1, used, out) == used && ok;
            used = 0;
        }
    }
    return fwrite(buf, 1, used, out) == used && ok;
}
