/* emitter.c: the buffered output and lifetime shared by the pickle and JSON emitters. */
#include "snapshot/emitter.h"

#include <stdlib.h>

#include "allocator/cuprof_errors.h"

struct emitter *
emitter_create(const struct emitter_ops *ops, int (*write)(void *ctx, const void *buf, size_t len),
               void *ctx)
{
    struct emitter *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return NULL;
    e->ops = ops;
    e->write = write;
    e->write_ctx = ctx;
    e->buf = e->storage;
    return e;
}

void
emitter_exchange_buffers(struct emitter *e,
                         int (*exchange)(void *ctx, unsigned char **buf, size_t len))
{
    e->exchange = exchange;
}

void
emitter_flush(struct emitter *e)
{
    if (e->len == 0)
        return;
    if (e->error == 0)
        e->error = e->exchange != NULL ? e->exchange(e->write_ctx, &e->buf, e->len)
                                       : e->write(e->write_ctx, e->buf, e->len);
    e->bytes_written += e->len;
    e->len = 0;
}

void
emitter_put_large(struct emitter *e, const void *p, size_t n)
{
    if (e->exchange == NULL) { /* written straight from where it is */
        emitter_flush(e);
        if (e->error == 0)
            e->error = e->write(e->write_ctx, p, n);
        e->bytes_written += n;
        return;
    }
    const unsigned char *s = p; /* an exchange takes only its own buffers: copied through them */
    while (n > 0) {
        size_t k = EMITTER_BUFFER - e->len < n ? EMITTER_BUFFER - e->len : n;
        memcpy(e->buf + e->len, s, k);
        e->len += k;
        s += k;
        n -= k;
        if (e->len == EMITTER_BUFFER)
            emitter_flush(e);
    }
}

int
emitter_finish(struct emitter *e)
{
    if (e->error == 0 && e->depth != 0)
        e->error = -CUPROF_EINVAL; /* unbalanced begin/end: a walker bug */
    e->ops->finish(e);
    emitter_flush(e);
    return e->error;
}

void
emitter_destroy(struct emitter *e)
{
    if (e == NULL)
        return;
    if (e->ops->destroy != NULL)
        e->ops->destroy(e);
    for (int k = 0; k < EMITTER_MEMO_KINDS; k++)
        free(e->memo[k]);
    free(e);
}
