/* stream_id.c: the calling thread's per-thread stream key (see stream_id.h). */
#include "preload/stream_id.h"

#include <sys/syscall.h>
#include <unistd.h>

static _Thread_local uint64_t thread_key __attribute__((tls_model("initial-exec")));

void
stream_id_reset_after_fork(void)
{
    thread_key = 0;
}

uint64_t
stream_id_per_thread(void)
{
    if (thread_key == 0)
        thread_key = ((uint64_t)syscall(SYS_gettid) << 3) | 2u;
    return thread_key;
}
