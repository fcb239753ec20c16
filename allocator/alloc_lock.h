/* alloc_lock.h: the device lock, a futex mutex (Drepper, "Futexes Are Tricky", mutex 3) whose
 *   uncontended acquire and release are one atomic each, inlined into the malloc/free path.
 * Locking: this is the lock; a contended waiter sleeps in the kernel (no spinning, no sleeps).
 * Hot path: acquire/release are; only the contended cases make a futex system call. */
#ifndef CUPROF_ALLOC_LOCK_H
#define CUPROF_ALLOC_LOCK_H

#include <stdatomic.h>
#include <stdint.h>

struct alloc_lock {
    _Atomic uint32_t state; /* 0 free, 1 held, 2 held and maybe waited for */
};

/* Contended halves of acquire and release (futex wait and wake). */
void alloc_lock_wait(struct alloc_lock *lock, uint32_t seen);
void alloc_lock_wake(struct alloc_lock *lock);

static inline void
alloc_lock_init(struct alloc_lock *lock)
{
    atomic_init(&lock->state, 0);
}

static inline void
alloc_lock_acquire(struct alloc_lock *lock)
{
    uint32_t seen = 0;
    if (!atomic_compare_exchange_strong_explicit(&lock->state, &seen, 1, memory_order_acquire,
                                                 memory_order_relaxed))
        alloc_lock_wait(lock, seen);
}

static inline void
alloc_lock_release(struct alloc_lock *lock)
{
    /* 1 -> 0 means nobody waits; from 2 a waiter may sleep and needs a wake-up. */
    if (atomic_fetch_sub_explicit(&lock->state, 1, memory_order_release) != 1)
        alloc_lock_wake(lock);
}

#endif
