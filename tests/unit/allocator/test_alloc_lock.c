/* test_alloc_lock.c: the device lock: a thread that takes it often enough in a row gets the
 * bias, another thread takes the bias back without ever sharing the critical section, a former
 * owner that lost the bias mid-entry cannot let anyone in beside the next owner, the number of
 * revocations is bounded, a forked child starts with every lock free, and a waiter behind a long
 * hold sleeps instead of spinning. */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

/* Every 64th biased entry pauses between its first look at `owner` and its entry, so that
 * revocations land inside that window too; a thread with `stall_entry` set stops there until
 * the test lets it go. */
static _Thread_local unsigned entry_count;
static _Thread_local bool stall_entry;
static void stall_until_released(void);
#define ALLOC_LOCK_ENTRY_PAUSE()                                                                   \
    do {                                                                                           \
        if (stall_entry)                                                                           \
            stall_until_released();                                                                \
        else if ((++entry_count & 63) == 0)                                                        \
            for (volatile unsigned pause_i = 0; pause_i < 30000; pause_i++) {                      \
            }                                                                                      \
    } while (0)
#include "allocator/alloc_lock.h"

static void
take_in_a_row(struct alloc_lock *lock, int times)
{
    for (int i = 0; i < times; i++) {
        alloc_lock_acquire(lock);
        alloc_lock_release(lock);
    }
}

static void
test_bias_after_streak(void **state)
{
    (void)state;
    if (!alloc_lock_can_bias())
        skip();
    struct alloc_lock lock;
    alloc_lock_init(&lock);
    take_in_a_row(&lock, ALLOC_LOCK_BIAS_STREAK - 1);
    assert_int_equal(alloc_lock_biased_to(&lock), 0);
    take_in_a_row(&lock, 1);
    assert_int_equal(alloc_lock_biased_to(&lock), alloc_lock_self());
    /* Biased acquisitions touch neither the mutex nor the streak. */
    alloc_lock_acquire(&lock);
    assert_int_equal(atomic_load(&lock.state), 0);
    assert_int_equal(atomic_load(&lock.inside[0]), 1);
    alloc_lock_release(&lock);
    assert_int_equal(atomic_load(&lock.inside[0]), 0);
    assert_int_equal(lock.revocations, 0);
}

/* Shared state that only the lock protects: `inside` catches two holders at once. */
struct shared {
    struct alloc_lock lock;
    _Atomic int inside;
    long counter; /* plain on purpose: lost updates show a broken lock */
    _Atomic int overlaps;
    _Atomic bool stop;
};

static void
critical_section(struct shared *s, unsigned spin)
{
    alloc_lock_acquire(&s->lock);
    if (atomic_fetch_add(&s->inside, 1) != 0)
        atomic_fetch_add(&s->overlaps, 1);
    long c = s->counter;
    for (volatile unsigned i = 0; i < spin; i++) {
    }
    s->counter = c + 1;
    atomic_fetch_sub(&s->inside, 1);
    alloc_lock_release(&s->lock);
}

struct runner {
    struct shared *s;
    long rounds; /* 0: until s->stop */
    unsigned seed;
    bool intruder; /* pauses between visits, so the other thread keeps regaining the bias */
    long done;
};

static void *
run(void *arg)
{
    struct runner *r = arg;
    for (long i = 0; r->rounds == 0 ? !atomic_load(&r->s->stop) : i < r->rounds; i++) {
        r->seed = r->seed * 1103515245u + 12345u;
        /* Now and then a long stay on either side, long enough (past a membarrier) for a
         * thread that wrongly entered beside it to be caught. */
        unsigned spin = (r->seed >> 16) % 64;
        critical_section(r->s, r->intruder || spin == 0 ? 30000 : spin);
        r->done++;
        if (r->intruder)
            for (volatile unsigned k = 0; k < 100000 + (r->seed >> 16) % 50000; k++) {
            }
    }
    if (r->intruder)
        atomic_store(&r->s->stop, true);
    return NULL;
}

/* A dominant thread and an intruder on fresh locks, round after round: the owner regains the
 * bias between visits, so every round ends at the revocation bound, each revocation racing the
 * owner's entry at a different point. */
static void
test_revocation_excludes(void **state)
{
    (void)state;
    long revoked = 0;
    for (int round = 0; round < 16; round++) {
        struct shared s = {0};
        alloc_lock_init(&s.lock);
        struct runner owner = {&s, 0, 7u + (unsigned)round, false, 0};
        struct runner intruder = {&s, 100, 99u + (unsigned)round, true, 0};
        pthread_t t[2];
        assert_int_equal(pthread_create(&t[0], NULL, run, &owner), 0);
        assert_int_equal(pthread_create(&t[1], NULL, run, &intruder), 0);
        for (int i = 0; i < 2; i++)
            assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_int_equal(atomic_load(&s.overlaps), 0);
        assert_int_equal(s.counter, owner.done + intruder.done);
        assert_true(s.lock.revocations <= ALLOC_LOCK_MAX_REVOCATIONS);
        revoked += s.lock.revocations;
    }
    print_message("revocations: %ld\n", revoked);
    if (alloc_lock_can_bias())
        assert_true(revoked >= 16); /* the bias was granted and taken back, round after round */
}

/* The stalled entry of a former owner: it read `owner` (its own grant) and stopped before
 * stepping inside. Meanwhile the bias is taken back, granted to the main thread, which enters
 * through it and stays. The former owner then goes on, sees the bias gone, steps out and queues
 * on the mutex: it must wait for the main thread to leave, not find the way open. */
static struct alloc_lock stale_lock;
static _Atomic int stall_phase; /* 1: the former owner is stalled; 2: let it go */
static _Atomic int stale_entered;

static void
stall_until_released(void)
{
    stall_entry = false;
    atomic_store(&stall_phase, 1);
    while (atomic_load(&stall_phase) != 2)
        sched_yield();
}

static void *
former_owner(void *arg)
{
    (void)arg;
    take_in_a_row(&stale_lock, ALLOC_LOCK_BIAS_STREAK);
    assert_int_equal(alloc_lock_biased_to(&stale_lock), alloc_lock_self());
    stall_entry = true;
    alloc_lock_acquire(&stale_lock);
    atomic_store(&stale_entered, 1);
    alloc_lock_release(&stale_lock);
    return NULL;
}

static void
test_former_owner_waits(void **state)
{
    (void)state;
    if (!alloc_lock_can_bias())
        skip();
    alloc_lock_init(&stale_lock);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, former_owner, NULL), 0);
    while (atomic_load(&stall_phase) != 1)
        sched_yield();
    /* Revokes the stalled thread's grant (it is not inside yet), then earns a grant of its own
     * and enters through it. */
    take_in_a_row(&stale_lock, ALLOC_LOCK_BIAS_STREAK);
    assert_int_equal(alloc_lock_biased_to(&stale_lock), alloc_lock_self());
    alloc_lock_acquire(&stale_lock);
    assert_int_equal(stale_lock.held_grant, 1);
    atomic_store(&stall_phase, 2);
    struct timespec wait = {0, 100000000};
    nanosleep(&wait, NULL);
    assert_int_equal(atomic_load(&stale_entered), 0);
    alloc_lock_release(&stale_lock);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(atomic_load(&stale_entered), 1);
    assert_int_equal(stale_lock.revocations, 2);
}

/* Two threads that keep stealing the bias from each other: at most MAX_REVOCATIONS of them,
 * then the lock stays a mutex (a membarrier per steal would cost more than it saves). */
static void
test_revocations_are_bounded(void **state)
{
    (void)state;
    if (!alloc_lock_can_bias())
        skip();
    struct shared s = {0};
    alloc_lock_init(&s.lock);
    for (int phase = 0; phase < 2 * ALLOC_LOCK_MAX_REVOCATIONS + 4; phase++) {
        /* Each phase is one thread taking the lock well past the streak: a bias each time. */
        struct runner r = {&s, 2 * ALLOC_LOCK_BIAS_STREAK, (unsigned)phase, false, 0};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, run, &r), 0);
        assert_int_equal(pthread_join(t, NULL), 0);
    }
    assert_int_equal(s.lock.revocations, ALLOC_LOCK_MAX_REVOCATIONS);
    take_in_a_row(&s.lock, 4 * ALLOC_LOCK_BIAS_STREAK);
    assert_int_equal(alloc_lock_biased_to(&s.lock), 0);
    assert_int_equal(s.counter, (2 * ALLOC_LOCK_MAX_REVOCATIONS + 4) * 2 * ALLOC_LOCK_BIAS_STREAK);
}

/* A thread holds the lock through its bias when the process forks: the child must not wait for
 * that thread, which it does not have. */
static struct alloc_lock fork_lock;
static pthread_barrier_t fork_barrier;

static void *
hold_biased(void *arg)
{
    (void)arg;
    take_in_a_row(&fork_lock, ALLOC_LOCK_BIAS_STREAK + 1);
    alloc_lock_acquire(&fork_lock);
    pthread_barrier_wait(&fork_barrier); /* holding it */
    pthread_barrier_wait(&fork_barrier); /* the parent forked */
    alloc_lock_release(&fork_lock);
    return NULL;
}

static void
test_fork_child_starts_free(void **state)
{
    (void)state;
    const char *sanitized = getenv("SANITIZER_BUILD");
    if (sanitized != NULL && sanitized[0] == '1')
        skip(); /* libasan's own locks are not fork-safe with other threads running */
    if (!alloc_lock_can_bias())
        skip();
    alloc_lock_init(&fork_lock);
    assert_int_equal(pthread_barrier_init(&fork_barrier, NULL, 2), 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, hold_biased, NULL), 0);
    pthread_barrier_wait(&fork_barrier);
    assert_int_not_equal(alloc_lock_biased_to(&fork_lock), 0);
    assert_int_equal(atomic_load(&fork_lock.inside[0]), 1);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alloc_lock_reset_after_fork(&fork_lock);
        take_in_a_row(&fork_lock, 2 * ALLOC_LOCK_BIAS_STREAK); /* and a bias of its own */
        _exit(alloc_lock_biased_to(&fork_lock) == alloc_lock_self() ? 0 : 1);
    }
    pthread_barrier_wait(&fork_barrier);
    assert_int_equal(pthread_join(t, NULL), 0);
    int status = -1;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    pthread_barrier_destroy(&fork_barrier);
}

/* A waiter behind a long critical section (a device allocation, a synchronization) looks at the
 * lock for a bounded while, then sleeps in the kernel: it neither burns its core for the whole
 * wait nor gets in while the holder is inside. */
static struct alloc_lock long_lock;
static _Atomic int long_waiter_inside;
static double long_waiter_cpu_ms;

static double
thread_cpu_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void *
wait_behind_long_hold(void *arg)
{
    (void)arg;
    double t0 = thread_cpu_ms();
    alloc_lock_acquire(&long_lock);
    long_waiter_cpu_ms = thread_cpu_ms() - t0;
    atomic_store(&long_waiter_inside, 1);
    alloc_lock_release(&long_lock);
    return NULL;
}

static void
test_long_hold_waiter_sleeps(void **state)
{
    (void)state;
    alloc_lock_init(&long_lock);
    alloc_lock_acquire(&long_lock);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_behind_long_hold, NULL), 0);
    /* State 2: the waiter gave up looking and is about to sleep (or sleeps). */
    struct timespec ms = {0, 1000000};
    for (int i = 0; i < 5000 && atomic_load(&long_lock.state) != 2; i++)
        nanosleep(&ms, NULL);
    assert_int_equal(atomic_load(&long_lock.state), 2);
    struct timespec hold = {0, 200000000};
    nanosleep(&hold, NULL);
    assert_int_equal(atomic_load(&long_waiter_inside), 0);
    alloc_lock_release(&long_lock);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(atomic_load(&long_waiter_inside), 1);
    /* Waited 200 ms or more; looking took a few tens of microseconds of it. */
    assert_true(long_waiter_cpu_ms < 100.0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bias_after_streak),
        cmocka_unit_test(test_revocation_excludes),
        cmocka_unit_test(test_former_owner_waits),
        cmocka_unit_test(test_revocations_are_bounded),
        cmocka_unit_test(test_fork_child_starts_free),
        cmocka_unit_test(test_long_hold_waiter_sleeps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
