/* emitter.c: the buffered output and lifetime shared by the pickle and JSON emitters. */
#include "snapshot/emitter.h"

#include <stdlib.h>

#include "allocator/cuprof_errors.h"

void
emitter_flush(struct emitter *e)
{
    if (e->len == 0)
        return;
    if (e->error == 0)
        e->error = e->write(e->write_ctx, e->buf, e->len);
    e->bytes_written += e->len;
    e->len = 0;
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
