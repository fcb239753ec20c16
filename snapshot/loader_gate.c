/* loader_gate.c: a count of calls under way and a closed flag (see loader_gate.h). A call counts
 * itself in, then looks at the flag; a fork sets the flag, then looks at the count: with both
 * sequentially consistent, one of them sees the other. Waits are short naps: forks are rare, and
 * the calls waited for are a loader walk each. */
#include "snapshot/loader_gate.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#define NAP_US 50

static _Atomic unsigned g_inside; /* calls under way, in every thread */
static atomic_bool g_closed;      /* a fork is under way */
/* This thread's calls under way: a fork from inside one (a signal handler) does not wait for
 * itself. */
static _Thread_local unsigned t_depth __attribute__((tls_model("initial-exec")));

/* Not a cancellation point: the gate is on the program's allocation calls' path, and so is
 * their errno. */
static void
nap(void)
{
    int saved_errno = errno, cancel_state;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
    struct timespec ts = {0, NAP_US * 1000L};
    nanosleep(&ts, NULL);
    pthread_setcancelstate(cancel_state, NULL);
    errno = saved_errno;
}

/* Starts a wait's clock at its first call (deadline 0); true once LOADER_GATE_WAIT_MS passed. */
static bool
waited_enough(uint64_t *deadline)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
    if (*deadline == 0)
        *deadline = now + LOADER_GATE_WAIT_MS * 1000u;
    return now >= *deadline;
}

void
loader_gate_enter(void)
{
    uint64_t deadline = 0;
    for (;;) {
        atomic_fetch_add(&g_inside, 1);
        if (t_depth > 0 || !atomic_load(&g_closed) || waited_enough(&deadline))
            break;
        atomic_fetch_sub(&g_inside, 1);
        nap();
    }
    t_depth++;
}

void
loader_gate_leave(void)
{
    t_depth--;
    atomic_fetch_sub(&g_inside, 1);
}

/* The reference binds as any other: to the first definition in the global scope (another
 * preload's wrapper, a sanitizer's interceptor, else glibc's), as libunwind's own did. */
int
loader_gate_iterate(loader_gate_callback callback, void *data)
{
    loader_gate_enter();
    int rc = dl_iterate_phdr(callback, data);
    loader_gate_leave();
    return rc;
}

void
loader_gate_close_for_fork(void)
{
    atomic_store(&g_closed, true);
    uint64_t deadline = 0;
    while (atomic_load(&g_inside) > t_depth && !waited_enough(&deadline))
        nap();
}

void
loader_gate_open_after_fork(void)
{
    atomic_store(&g_closed, false);
}

void
loader_gate_reset_after_fork(void)
{
    atomic_store(&g_inside, t_depth);
    atomic_store(&g_closed, false);
}
