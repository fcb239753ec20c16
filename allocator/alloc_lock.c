/* alloc_lock.c: the futex system calls behind a contended device lock (see alloc_lock.h). */
#include "allocator/alloc_lock.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

static void
futex(struct alloc_lock *lock, int op, uint32_t value)
{
    /* EAGAIN (the state changed first) and EINTR both just send the caller round its loop. */
    (void)syscall(SYS_futex, (uint32_t *)(void *)&lock->state, op, value, NULL, NULL, 0);
}

void
alloc_lock_wait(struct alloc_lock *lock, uint32_t seen)
{
    /* Mark the lock contended (2) before sleeping, so the holder's release wakes someone. */
    if (seen != 2)
        seen = atomic_exchange_explicit(&lock->state, 2, memory_order_acquire);
    while (seen != 0) {
        futex(lock, FUTEX_WAIT_PRIVATE, 2);
        seen = atomic_exchange_explicit(&lock->state, 2, memory_order_acquire);
    }
}

void
alloc_lock_wake(struct alloc_lock *lock)
{
    atomic_store_explicit(&lock->state, 0, memory_order_release);
    futex(lock, FUTEX_WAKE_PRIVATE, 1);
}
