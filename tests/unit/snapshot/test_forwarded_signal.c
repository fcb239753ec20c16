/* test_forwarded_signal.c: the value `cuprof run` gives a signal it passes on
 * (snapshot/forwarded_signal.h): the sender's pid and uid come back whole, through a real
 * sigqueue(3) to this process too, and a value of another sender's is never taken for one; two
 * copies of one request are told from two requests. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "snapshot/forwarded_signal.h"

static void
expect_round_trip(pid_t pid, uid_t uid)
{
    pid_t got_pid = -1;
    uid_t got_uid = (uid_t)-1;
    assert_true(forwarded_signal_origin(forwarded_signal_value(pid, uid), &got_pid, &got_uid));
    assert_int_equal(got_pid, pid);
    assert_int_equal(got_uid, uid);
}

static void
test_round_trip(void **state)
{
    (void)state;
    expect_round_trip(0, 0);                 /* the kernel's own signal (a terminal's ^C) */
    expect_round_trip(1, 0);                 /* a container's first process */
    expect_round_trip(4194303, 4294967294u); /* the largest pid_max allows; nobody's uid */
    expect_round_trip(31337, 1000);
}

static void
test_other_values_refused(void **state)
{
    (void)state;
    pid_t pid;
    uid_t uid;
    const intptr_t others[] = {0, 1, -1, 15, 0x7fffffff, INTPTR_MIN, INTPTR_MAX};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        union sigval value;
        memset(&value, 0, sizeof value);
        value.sival_ptr = (void *)others[i];
        assert_false(forwarded_signal_origin(value, &pid, &uid));
    }
    union sigval small;
    memset(&small, 0, sizeof small);
    small.sival_int = 42; /* what a program's own sigqueue(3) usually carries */
    assert_false(forwarded_signal_origin(small, &pid, &uid));
}

static void
test_through_sigqueue(void **state)
{
    (void)state;
    sigset_t usr2, old;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    assert_int_equal(sigprocmask(SIG_BLOCK, &usr2, &old), 0);
    assert_int_equal(sigqueue(getpid(), SIGUSR2, forwarded_signal_value(4242, 77)), 0);
    siginfo_t info;
    assert_int_equal(sigwaitinfo(&usr2, &info), SIGUSR2);
    assert_int_equal(info.si_code, SI_QUEUE);
    assert_int_equal(info.si_pid, getpid());
    pid_t pid = 0;
    uid_t uid = 0;
    assert_true(forwarded_signal_origin(info.si_value, &pid, &uid));
    assert_int_equal(pid, 4242);
    assert_int_equal(uid, 77);
    assert_int_equal(sigprocmask(SIG_SETMASK, &old, NULL), 0);
}

/* Two copies of one request: the same sender, one passed on and one direct, within a second. */
static void
test_twins(void **state)
{
    (void)state;
    uint64_t direct = forwarded_signal_copy(4242, false);
    uint64_t passed = forwarded_signal_copy(4242, true);
    assert_true(direct != 0 && passed != 0);
    assert_false(forwarded_signal_is_twin(0, passed));
    assert_true(forwarded_signal_is_twin(direct, passed));
    assert_true(forwarded_signal_is_twin(passed, direct));
    /* Both direct, or both passed on: two requests. */
    assert_false(forwarded_signal_is_twin(direct, forwarded_signal_copy(4242, false)));
    assert_false(forwarded_signal_is_twin(passed, forwarded_signal_copy(4242, true)));
    /* Another sender; the kernel (pid 0) against a process. */
    assert_false(forwarded_signal_is_twin(direct, forwarded_signal_copy(4243, true)));
    assert_false(forwarded_signal_is_twin(forwarded_signal_copy(0, false), passed));
    assert_true(
        forwarded_signal_is_twin(forwarded_signal_copy(0, false), forwarded_signal_copy(0, true)));
    /* A second later: a new request. */
    struct timespec second = {1, 20 * 1000 * 1000};
    nanosleep(&second, NULL);
    assert_false(forwarded_signal_is_twin(direct, forwarded_signal_copy(4242, true)));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_twins),
        cmocka_unit_test(test_other_values_refused),
        cmocka_unit_test(test_through_sigqueue),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
