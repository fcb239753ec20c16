/* alloc_lock.c: the device lock's mutex (futex system calls), bias grants and revocations (see
 * alloc_lock.h). */
#include "allocator/alloc_lock.h"

#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

_Thread_local uint64_t alloc_lock_thread_id __attribute__((tls_model("initial-exec")));
_Thread_local unsigned alloc_lock_depth __attribute__((tls_model("initial-exec")));

static _Atomic uint64_t next_thread_id = 1;

/* membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) state: 0 not asked yet, 1 registered, -1 not
 * available (old kernel, seccomp, valgrind): then no lock is ever biased. */
static _Atomic int membarrier_state;

uint64_t
alloc_lock_new_thread_id(void)
{
    alloc_lock_thread_id = atomic_fetch_add_explicit(&next_thread_id, 1, memory_order_relaxed);
    return alloc_lock_thread_id;
}

static bool
membarrier_ready(void)
{
    int s = atomic_load_explicit(&membarrier_state, memory_order_acquire);
    if (s == 0) {
        /* Registering twice is harmless, so racing threads may both do it. */
        long r = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0);
        s = r == 0 ? 1 : -1;
        atomic_store_explicit(&membarrier_state, s, memory_order_release);
    }
    return s == 1;
}

bool
alloc_lock_can_bias(void)
{
    return membarrier_ready();
}

static void
futex(struct alloc_lock *lock, int op, uint32_t value)
{
    /* EAGAIN (the state changed first) and EINTR both just send the caller round its loop. */
    (void)syscall(SYS_futex, (uint32_t *)(void *)&lock->state, op, value, NULL, NULL, 0);
}

void
alloc_lock_init(struct alloc_lock *lock)
{
    atomic_init(&lock->state, 0);
    atomic_init(&lock->owner, 0);
    for (unsigned g = 0; g < ALLOC_LOCK_MAX_GRANTS; g++)
        atomic_init(&lock->inside[g], 0);
    lock->held_grant = -1;
    lock->grants = 0;
    lock->revocations = 0;
    lock->streak = 0;
    lock->streak_thread = 0;
#ifndef NDEBUG
    lock->holder = 0;
#endif
}

void
alloc_lock_reset_after_fork(struct alloc_lock *lock)
{
    uint32_t revocations = lock->revocations, grants = lock->grants;
    alloc_lock_init(lock);
    alloc_lock_depth = 0; /* the child's one thread holds none of them now */
    lock->revocations = revocations;
    lock->grants = grants; /* grant numbers are never reused */
    /* Whether a child inherits the registration is the kernel's business: register again. */
    atomic_store_explicit(&membarrier_state, 0, memory_order_relaxed);
}

/* Takes the bias back from its owner; the mutex is held, so no one can grant it again. */
static void
revoke_bias(struct alloc_lock *lock, uint64_t grant)
{
    _Atomic uint32_t *inside = &lock->inside[grant & ((1u << ALLOC_LOCK_GRANT_BITS) - 1)];
    atomic_store_explicit(&lock->owner, 0, memory_order_relaxed);
    /* Every running thread of the process passes a full barrier: if the owner's second load of
     * `owner` came before ours, its inside-flag store is visible now; if after, it sees 0. A
     * bias is only granted after registration succeeded, so this should not fail; if it does,
     * a millisecond is far longer than any store takes to become visible. */
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0) {
        atomic_store_explicit(&membarrier_state, -1, memory_order_relaxed);
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    /* The owner leaves within its critical section's time, which may include a device
     * allocation or a synchronization (milliseconds), and it may be descheduled meanwhile: spin
     * briefly, then yield, then sleep in 50 us steps rather than burn a core. */
    for (unsigned spins = 0; atomic_load_explicit(inside, memory_order_acquire) != 0; spins++) {
        if (spins >= 1024) {
            struct timespec step = {0, 50000};
            nanosleep(&step, NULL);
        } else if (spins >= 64) {
            sched_yield();
        }
    }
    lock->revocations++;
}

static inline void
cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* The holder's critical section is a few dozen nanoseconds (a device call inside it is the rare
 * miss): watch the state for a while before paying two system calls to sleep and be woken, but
 * look less and less often, so that the holder keeps the line between its calls and runs a burst
 * of them before the lock changes hands (two threads on one device then cost about what their
 * calls cost one after the other, not a line transfer each). A spinner takes the lock 0 -> 1 and
 * never marks it contended, so the holder's release stays a plain decrement. */
static bool
spin_then_take(struct alloc_lock *lock)
{
    unsigned pauses = ALLOC_LOCK_FIRST_PAUSES;
    for (unsigned spent = 0; spent < ALLOC_LOCK_SPIN_PAUSES; spent += pauses) {
        for (unsigned k = 0; k < pauses; k++)
            cpu_relax();
        if (pauses < ALLOC_LOCK_MAX_PAUSES)
            pauses *= 2;
        uint32_t seen = atomic_load_explicit(&lock->state, memory_order_relaxed);
        if (seen == 0 && atomic_compare_exchange_weak_explicit(
                             &lock->state, &seen, 1, memory_order_acquire, memory_order_relaxed))
            return true;
        if (seen == 2)
            return false; /* someone sleeps already: queue behind them */
    }
    return false;
}

void
alloc_lock_acquire_slow(struct alloc_lock *lock, uint64_t self)
{
    uint32_t seen = 0;
    if (!atomic_compare_exchange_strong_explicit(&lock->state, &seen, 1, memory_order_acquire,
                                                 memory_order_relaxed) &&
        !spin_then_take(lock)) {
        seen = atomic_load_explicit(&lock->state, memory_order_relaxed);
        /* Mark the lock contended (2) before sleeping, so the holder's release wakes someone. */
        if (seen != 2)
            seen = atomic_exchange_explicit(&lock->state, 2, memory_order_acquire);
        while (seen != 0) {
            futex(lock, FUTEX_WAIT_PRIVATE, 2);
            seen = atomic_exchange_explicit(&lock->state, 2, memory_order_acquire);
        }
    }
    uint64_t grant = atomic_load_explicit(&lock->owner, memory_order_relaxed);
    if (grant != 0)
        revoke_bias(lock, grant);
    lock->held_grant = -1;
    if (lock->streak_thread == self) {
        lock->streak++;
    } else {
        lock->streak_thread = self;
        lock->streak = 1;
    }
}

void
alloc_lock_release_slow(struct alloc_lock *lock)
{
    /* A thread that took the mutex often enough in a row gets the bias; its next acquire is the
     * inline fast path. `owner` is only ever set to the releasing thread itself. */
    if (lock->streak >= ALLOC_LOCK_BIAS_STREAK && lock->revocations < ALLOC_LOCK_MAX_REVOCATIONS &&
        lock->grants < ALLOC_LOCK_MAX_GRANTS && lock->streak_thread == alloc_lock_thread_id &&
        membarrier_ready()) {
        lock->streak = 0;
        uint64_t grant = lock->streak_thread << ALLOC_LOCK_GRANT_BITS | lock->grants++;
        atomic_store_explicit(&lock->owner, grant, memory_order_relaxed);
    }
    /* 1 -> 0 means nobody waits; from 2 a waiter may sleep and needs a wake-up. */
    if (atomic_fetch_sub_explicit(&lock->state, 1, memory_order_release) != 1) {
        atomic_store_explicit(&lock->state, 0, memory_order_release);
        futex(lock, FUTEX_WAKE_PRIVATE, 1);
    }
}
