/* stderr_out.c: lines on the process's own standard error only (see stderr_out.h). */
#include "preload/stderr_out.h"

#include <errno.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <unistd.h>

enum { NOT_YET, CLOSED, KNOWN };

static _Atomic int g_state = NOT_YET;
/* Stored before g_state becomes KNOWN; atomics since two first callers may both store them. */
static _Atomic unsigned long long g_dev, g_ino;

void
stderr_out_remember(void)
{
    if (atomic_load_explicit(&g_state, memory_order_acquire) != NOT_YET)
        return;
    int saved_errno = errno;
    struct stat st;
    int state = CLOSED;
    if (fstat(STDERR_FILENO, &st) == 0) {
        atomic_store_explicit(&g_dev, (unsigned long long)st.st_dev, memory_order_relaxed);
        atomic_store_explicit(&g_ino, (unsigned long long)st.st_ino, memory_order_relaxed);
        state = KNOWN;
    }
    /* Two first callers see the same descriptor, so store the same identity. */
    int expected = NOT_YET;
    atomic_compare_exchange_strong_explicit(&g_state, &expected, state, memory_order_release,
                                            memory_order_relaxed);
    errno = saved_errno;
}

/* Before main and every other constructor of the program's own: descriptor 2 as it was given. */
__attribute__((constructor(101))) static void
stderr_out_at_start(void)
{
    stderr_out_remember();
}

bool
stderr_out_write(const char *line, size_t len)
{
    stderr_out_remember();
    if (atomic_load_explicit(&g_state, memory_order_acquire) != KNOWN)
        return false;
    int saved_errno = errno;
    struct stat st;
    bool same =
        fstat(STDERR_FILENO, &st) == 0 &&
        (unsigned long long)st.st_dev == atomic_load_explicit(&g_dev, memory_order_relaxed) &&
        (unsigned long long)st.st_ino == atomic_load_explicit(&g_ino, memory_order_relaxed);
    bool written = same && write(STDERR_FILENO, line, len) == (ssize_t)len;
    errno = saved_errno;
    return written;
}
