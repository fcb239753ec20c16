/* alloc_lock.h: the device lock: a futex mutex (Drepper, "Futexes Are Tricky", mutex 3) that a
 *   thread using a device alone comes to own outright ("biased"), so that its acquire and
 *   release are plain loads and stores, with no atomic read-modify-write.
 * Locking: this is the lock. Another thread takes the bias back with the mutex held: it clears
 *   `owner`, runs membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) so that the owner's store of its
 *   inside flag and its second load of `owner` are ordered for it (the asymmetric Dekker of
 *   Linux's membarrier(2)), then waits for that flag to drop. A thread regains the bias after
 *   ALLOC_LOCK_BIAS_STREAK mutex acquisitions in a row, at most ALLOC_LOCK_MAX_REVOCATIONS times
 *   per lock. Each grant has its own inside flag, written only by the thread it was granted to:
 *   a former owner that read `owner` just before losing the bias may still store to its flag,
 *   and must never clear the flag of the owner after it. Without membarrier the lock is never
 *   biased. A contended waiter looks at the mutex less and less often (exponential backoff, at
 *   most ALLOC_LOCK_SPIN_PAUSES pauses in all), then sleeps in the kernel: a waiter that looked
 *   all the time would pull the lock's line away from the holder at every one of its calls, and
 *   the two threads would take turns call by call, moving the pool's lines each time.
 * Hot path: acquire/release are (inline); only the mutex and the revocation are calls. */
#ifndef CUPROF_ALLOC_LOCK_H
#define CUPROF_ALLOC_LOCK_H

#include <assert.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define ALLOC_LOCK_BIAS_STREAK     128  /* mutex acquisitions in a row that earn the bias */
#define ALLOC_LOCK_MAX_REVOCATIONS 32   /* then the lock stays a plain mutex */
#define ALLOC_LOCK_FIRST_PAUSES    4    /* pauses before a waiter's first look at the mutex */
#define ALLOC_LOCK_MAX_PAUSES      256  /* between two looks: doubles up to this */
#define ALLOC_LOCK_SPIN_PAUSES     2048 /* in all, then sleep: 6-90 us (10-140 cycles a pause) */
/* Every grant but the first follows a revocation, so a lock is granted at most this often. */
#define ALLOC_LOCK_MAX_GRANTS (ALLOC_LOCK_MAX_REVOCATIONS + 1)
#define ALLOC_LOCK_GRANT_BITS 6 /* `owner` is (thread id << GRANT_BITS) | grant number */
_Static_assert(ALLOC_LOCK_MAX_GRANTS <= (1 << ALLOC_LOCK_GRANT_BITS), "grant numbers fit");

struct alloc_lock {
    _Atomic uint32_t state; /* the mutex: 0 free, 1 held, 2 held and maybe waited for */
    _Atomic uint64_t owner; /* (thread id << GRANT_BITS) | grant the lock is biased to, or 0 */
    int32_t held_grant;     /* written by the holder: the grant it entered through, -1: mutex */
    uint32_t grants;        /* protected by the mutex: biases granted so far */
    uint32_t revocations;   /* protected by the mutex */
    uint32_t streak;        /* protected by the mutex: acquisitions in a row by ... */
    uint64_t streak_thread; /* ... this thread */
    /* inside[g]: written only by the thread of grant g: 1 while it holds the lock through it. */
    _Atomic uint32_t inside[ALLOC_LOCK_MAX_GRANTS];
#ifndef NDEBUG
    uint64_t holder; /* written by the holder: its alloc_lock_self id (0: free); debug builds */
#endif
};

/* Tests define this before including the header to widen the window between the owner's first
 * look at `owner` and its entry, where a revocation must still win. */
#ifndef ALLOC_LOCK_ENTRY_PAUSE
#define ALLOC_LOCK_ENTRY_PAUSE() ((void)0)
#endif

/* This thread's id for the bias: never 0, never reused within the process. */
extern _Thread_local uint64_t alloc_lock_thread_id __attribute__((tls_model("initial-exec")));
/* How many of cuprof's locks this thread holds or is taking (the device locks here; the history's
 * rings count theirs in too): raised before a lock is taken, lowered once it is released. An exit
 * in a signal handler that interrupted this thread must not wait for them (preload/lifecycle.c). */
extern _Thread_local unsigned alloc_lock_depth __attribute__((tls_model("initial-exec")));
uint64_t alloc_lock_new_thread_id(void);

/* The mutex halves and the revocation (alloc_lock.c). */
void alloc_lock_acquire_slow(struct alloc_lock *lock, uint64_t self);
void alloc_lock_release_slow(struct alloc_lock *lock);

void alloc_lock_init(struct alloc_lock *lock);
/* In a forked child: every lock free and unbiased (the parent's threads are gone), and
 * membarrier registered afresh before the next bias. */
void alloc_lock_reset_after_fork(struct alloc_lock *lock);

static inline uint64_t
alloc_lock_self(void)
{
    uint64_t id = alloc_lock_thread_id;
    return id != 0 ? id : alloc_lock_new_thread_id();
}

static inline void
alloc_lock_acquire(struct alloc_lock *lock)
{
    alloc_lock_depth++;
    uint64_t self = alloc_lock_self();
    uint64_t grant = atomic_load_explicit(&lock->owner, memory_order_relaxed);
    if (grant >> ALLOC_LOCK_GRANT_BITS == self) {
        uint32_t number = (uint32_t)(grant & ((1u << ALLOC_LOCK_GRANT_BITS) - 1));
        ALLOC_LOCK_ENTRY_PAUSE();
        atomic_store_explicit(&lock->inside[number], 1, memory_order_relaxed);
        /* A compiler barrier only: a revoker's membarrier stands in for the hardware fence. */
        atomic_signal_fence(memory_order_seq_cst);
        if (atomic_load_explicit(&lock->owner, memory_order_relaxed) == grant) {
            lock->held_grant = (int32_t)number;
#ifndef NDEBUG
            lock->holder = self;
#endif
            return;
        }
        /* Revoked meanwhile: step out (the revoker waits for this) and queue on the mutex. */
        atomic_store_explicit(&lock->inside[number], 0, memory_order_release);
    }
    alloc_lock_acquire_slow(lock, self);
#ifndef NDEBUG
    lock->holder = self;
#endif
}

static inline void
alloc_lock_release(struct alloc_lock *lock)
{
#ifndef NDEBUG
    lock->holder = 0;
#endif
    int32_t number = lock->held_grant;
    if (number >= 0) {
        /* held_grant may stay set: whoever takes the lock next sets it. Release order: a
         * revoker that reads 0 here sees the whole critical section. */
        atomic_store_explicit(&lock->inside[number], 0, memory_order_release);
    } else {
        alloc_lock_release_slow(lock);
    }
    alloc_lock_depth--;
}

/* Debug builds: true when the calling thread holds `lock` (every `*_locked` helper asserts it
 * through ALLOC_ASSERT_HELD); release builds (NDEBUG) track nothing and check nothing. */
#ifndef NDEBUG
static inline bool
alloc_lock_held(const struct alloc_lock *lock)
{
    return lock->holder != 0 && lock->holder == alloc_lock_self();
}
#define ALLOC_ASSERT_HELD(lock) assert(alloc_lock_held(lock))
#else
#define ALLOC_ASSERT_HELD(lock) ((void)0)
#endif

/* True when locks can be biased here (membarrier registered; asks the kernel once). */
bool alloc_lock_can_bias(void);

/* For tests and benches: the thread id the lock is biased to (0: none). */
static inline uint64_t
alloc_lock_biased_to(struct alloc_lock *lock)
{
    return atomic_load_explicit(&lock->owner, memory_order_relaxed) >> ALLOC_LOCK_GRANT_BITS;
}

#endif
