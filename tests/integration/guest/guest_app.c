/* guest_app: a program with habits cuprof must live with (issue 26), one per mode; each prints
 * "ready <pid>" once its first CUDA call is made, then waits for a line on stdin where a test
 * must act on it from outside. The modes:
 * - wait: cudaMalloc, ready, wait for a line, exit (the exit dump).
 * - api PATH: cudaMalloc, cuprof_dump_snapshot(PATH), print its result.
 * - closefds LOG: cudaMalloc, close every fd >= 3 (a daemon's closefrom), open LOG (it gets fd 3,
 *   duplicated up to 31), ready, wait for a line, write one line to LOG, exit.
 * - stderr FILE: cudaMalloc, close fd 2 and open FILE (it gets fd 2), ready, wait for a line,
 *   write one line to FILE, exit.
 * - eintr: its own SIGUSR1 handler without SA_RESTART, cudaMalloc, ready, then a blocking read of
 *   stdin: prints "read: EINTR" or "read: N".
 * - restart: the same with SA_RESTART: the read must go on after the signal.
 * - handlers: its own SIGTERM handler before its first CUDA call; then asks sigaction for SIGINT's
 *   disposition and signal(3) for SIGHUP's (printing "SIGINT: default" or "SIGINT: other", the
 *   same for SIGHUP), puts SIGHUP's back as signal(3) gave it, ready, then waits for a line or
 *   SIGTERM ("handled SIGTERM"), exit 0.
 * - many N: cudaMalloc, then N cudaMalloc/cudaFree pairs (a long history: a slow dump), ready,
 *   wait for a line.
 * - forkidle: cudaMalloc, fork; the child makes no CUDA call and sleeps; ready (with "child PID"
 *   first); the parent prints how the child ended ("child: signal N" or "child: exit N").
 * - counts [oneshot]: its own SA_SIGINFO handler on SIGTERM, SIGINT and SIGHUP that counts each
 *   delivery (with oneshot, SIGTERM's has SA_RESETHAND: reset to the default on entry), asks
 *   sigaction for SIGTERM's and prints whether it reads back as its own ("told: own"), ready,
 *   then waits for a line (reads interrupted by a handler go on) and prints, per signal,
 *   "SIGTERM N from PID code C" (the last delivery's sender and si_code).
 * - quick HOW: cudaMalloc (never freed), ready, wait for a line, then end without exit's handlers:
 *   `_exit` calls _exit(7), `_Exit` _Exit(8); `handler`: its own SIGTERM handler calls _exit(9)
 *   (waits for SIGTERM instead of a line); `vfork` and `fork-idle`: a vfork child, or a forked
 *   one that makes no CUDA call, calls _exit(5), the parent prints "child: exit 5" and returns 0;
 * `fork`: a forked child makes its own cudaMalloc, prints "child PID" and calls _exit(6); the
 * parent prints "child: exit 6" and returns 0; `quick_exit` calls quick_exit(3); `qhandler`: its
 * SIGTERM handler calls quick_exit(10).
 * - exit-in-handler HOW: a SIGINT handler that calls exit(3) (abort() for `abort-idle`,
 *   `abort-alloc`), cudaMalloc (never freed), ready, then `idle`: waits for signals; `alloc`:
 *   allocates ever larger blocks, never freed.
 * - abort: cudaMalloc (never freed), ready, waits for a line, then abort().
 * - fdleak PATH: cudaMalloc (never freed), opens /dev/null until no descriptor is left ("leaked
 * until EMFILE"), cuprof_dump_snapshot(PATH) ("dump: RC"), then whether one more open fails as
 * before
 *   ("after: EMFILE") and exits.
 * - cancel DIR: 50,000 cudaMalloc/cudaFree pairs, then a thread that writes snapshots into DIR
 *   without end (cuprof_dump_snapshot, then pthread_testcancel) is cancelled after 0.3 s and
 *   joined ("joined cancelled"); then one more snapshot, DIR/final.pickle ("final dump 0").
 * - late HOW: cudaMalloc, prints how SIGUSR1 reads ("before: default"), then takes it: `sigaction`
 *   (a SA_SIGINFO|SA_RESTART handler that counts deliveries), `resethand` (the same with
 *   SA_RESETHAND) or `ignore` (signal(3), printing "previous: default"); prints "after: own" (or
 *   "ignored"), ready, waits for a line, prints "handled N from PID" and how it reads now.
 * - exec HOW [ARG]: cudaMalloc (never freed), ready, wait for a line, then replace itself by
 *   `guest_app exec-after` (which makes a 2 MiB cudaMalloc, prints "after PID" and returns 0)
 *   with the exec function HOW (execv, execve, execl, execle, execvp, execvpe and execlp find
 *   ARG on PATH, fexecve, execveat); `path`: execv of ARG; `handler`: its SIGTERM handler does the
 *   execv (waits for SIGTERM instead of a line); `vfork`, `fork-idle`: a child without a CUDA call
 *   execs ARG (no arguments), the parent prints "child: exit N"; `fork`: a forked child makes its
 *   own cudaMalloc, prints "child PID" and execs ARG. An exec that returns prints
 *   "exec failed: ERRNO-TEXT" and the program returns 0. */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "preload/cuprof.h"

static volatile sig_atomic_t handled;

static void
on_usr1(int sig)
{
    (void)sig;
    handled++;
}

static void *
first_cuda_call(void)
{
    void *p = NULL;
    cudaError_t rc = cudaMalloc(&p, 1 << 20);
    if (rc != cudaSuccess) {
        printf("cudaMalloc: %d\n", (int)rc);
        exit(1);
    }
    return p;
}

static void
ready(void)
{
    printf("ready %ld\n", (long)getpid());
    fflush(stdout);
}

static void
wait_line(void)
{
    char line[64];
    if (fgets(line, sizeof line, stdin) == NULL)
        return;
}

static int
handler_then_read(int flags)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR1, &sa, NULL) != 0)
        return 1;
    void *p = first_cuda_call();
    ready();
    char buf[64];
    ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
        printf("read: EINTR handled=%d\n", (int)handled);
    else
        printf("read: %zd handled=%d\n", n, (int)handled);
    cudaFree(p);
    return 0;
}

static volatile sig_atomic_t terminated;

static void
on_term(int sig)
{
    (void)sig;
    terminated = 1;
}

static void
on_hup(int sig)
{
    (void)sig;
}

/* What a program that installs its handlers late, or chains to the previous one, is told. */
static int
handlers(void)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, NULL) != 0)
        return 1;
    void *p = first_cuda_call();
    if (sigaction(SIGINT, NULL, &old) != 0)
        return 1;
    bool int_default =
        (old.sa_flags & SA_SIGINFO) == 0 && old.sa_handler == SIG_DFL && old.sa_flags == 0;
    printf("SIGINT: %s\n", int_default ? "default" : "other");
    void (*previous)(int) = signal(SIGHUP, on_hup);
    printf("SIGHUP: %s\n", previous == SIG_DFL ? "default" : "other");
    if (signal(SIGHUP, previous) != on_hup)
        return 1;
    ready();
    /* fgets restarts after the handler (no SA_RESTART: read returns EINTR, fgets NULL). */
    char line[64];
    while (!terminated && fgets(line, sizeof line, stdin) == NULL && errno == EINTR && !feof(stdin))
        ;
    if (terminated)
        printf("handled SIGTERM\n");
    cudaFree(p);
    return 0;
}

static void
on_int_exit(int sig)
{
    (void)sig;
    exit(3); /* not async-signal-safe, and common: a ^C handler that ends the program */
}

static void
on_int_abort(int sig)
{
    (void)sig;
    abort();
}

/* A SIGINT handler that calls exit, or abort with `abort-` before HOW (see the top of the
 * file). */
static int
exit_in_handler(const char *how)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    bool aborts = strncmp(how, "abort-", 6) == 0;
    sa.sa_handler = aborts ? on_int_abort : on_int_exit;
    if (aborts)
        how += 6;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, NULL) != 0)
        return 1;
    (void)first_cuda_call();
    ready();
    if (strcmp(how, "idle") == 0)
        for (;;)
            pause();
    /* `alloc`: ever larger blocks, never freed: each one a new segment, made on the device with
     * the device's lock held. */
    for (size_t mib = 2;; mib++) {
        void *p = NULL;
        if (cudaMalloc(&p, mib << 20) != cudaSuccess)
            return 1;
    }
}

/* Leaks descriptors until none is left, then asks for a snapshot (see the top of the file). */
static int
fd_leak(const char *path)
{
    (void)first_cuda_call();
    int leaked = 0;
    while (open("/dev/null", O_RDONLY) >= 0)
        leaked++;
    printf("leaked %s\n", errno == EMFILE && leaked > 0 ? "until EMFILE" : strerror(errno));
    printf("dump: %d\n", cuprof_dump_snapshot(path));
    int fd = open("/dev/null", O_RDONLY);
    printf("after: %s\n", fd < 0 && errno == EMFILE ? "EMFILE" : "a descriptor");
    return 0;
}

static const char *cancel_dir;

/* Dumps into cancel_dir without end, a cancellation point between dumps. */
static void *
cancel_dumper(void *arg)
{
    (void)arg;
    char path[4096];
    for (int i = 0;; i++) {
        snprintf(path, sizeof path, "%s/t-%d.pickle", cancel_dir, i % 4);
        (void)cuprof_dump_snapshot(path);
        pthread_testcancel();
    }
    return NULL;
}

/* A thread cancelled while it dumps (see the top of the file). */
static int
cancel_mode(const char *dir)
{
    cancel_dir = dir;
    for (int i = 0; i < 50000; i++) { /* a history long enough that most time goes to writing */
        void *q = NULL;
        if (cudaMalloc(&q, 512) != cudaSuccess)
            return 1;
        cudaFree(q);
    }
    pthread_t thread;
    if (pthread_create(&thread, NULL, cancel_dumper, NULL) != 0)
        return 1;
    usleep(300000);
    pthread_cancel(thread);
    void *result = NULL;
    pthread_join(thread, &result);
    printf("joined %s\n", result == PTHREAD_CANCELED ? "cancelled" : "other");
    char path[4096];
    snprintf(path, sizeof path, "%s/final.pickle", dir);
    printf("final dump %d\n", cuprof_dump_snapshot(path));
    return 0;
}

static volatile sig_atomic_t late_count, late_pid;

static void
on_late(int sig, siginfo_t *info, void *uctx)
{
    (void)sig;
    (void)uctx;
    late_count++;
    late_pid = info->si_pid;
}

/* "default", "ignored", "own" (on_late with SA_SIGINFO and `flags` among its flags), or "other":
 * SIGUSR1's disposition as sigaction reports it. */
static const char *
late_told(int flags)
{
    struct sigaction now;
    if (sigaction(SIGUSR1, NULL, &now) != 0)
        return "error";
    if ((now.sa_flags & SA_SIGINFO) != 0)
        return now.sa_sigaction == on_late && (now.sa_flags & flags) == flags ? "own" : "other";
    return now.sa_handler == SIG_DFL ? "default" : now.sa_handler == SIG_IGN ? "ignored" : "other";
}

/* A program that takes CUPROF_SIGNAL (SIGUSR1) after cuprof started (see the top of the file). */
static int
late(const char *how)
{
    void *p = first_cuda_call();
    printf("before: %s\n", late_told(0));
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_late;
    sigemptyset(&sa.sa_mask);
    int flags = SA_SIGINFO | SA_RESTART | (strcmp(how, "resethand") == 0 ? SA_RESETHAND : 0);
    sa.sa_flags = flags;
    if (strcmp(how, "ignore") == 0) {
        void (*previous)(int) = signal(SIGUSR1, SIG_IGN);
        printf("previous: %s\n", previous == SIG_DFL ? "default" : "other");
    } else if (sigaction(SIGUSR1, &sa, NULL) != 0) {
        return 1;
    }
    printf("after: %s\n", late_told(flags));
    ready();
    wait_line();
    printf("handled %d from %d\n", (int)late_count, (int)late_pid);
    printf("now: %s\n", late_told(SA_SIGINFO | SA_RESTART));
    cudaFree(p);
    return 0;
}

static volatile sig_atomic_t counted[3], counted_pid[3], counted_code[3];

static void
on_counted(int sig, siginfo_t *info, void *uctx)
{
    (void)uctx;
    int i = sig == SIGTERM ? 0 : sig == SIGINT ? 1 : 2;
    counted[i]++;
    counted_pid[i] = info->si_pid;
    counted_code[i] = info->si_code;
}

/* How many times each ending signal reached the program's own handler, and from whom. */
static int
counts(bool oneshot)
{
    static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
    static const char *const names[] = {"SIGTERM", "SIGINT", "SIGHUP"};
    struct sigaction sa, back;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_counted;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; i++) {
        sa.sa_flags = SA_SIGINFO | (oneshot && i == 0 ? SA_RESETHAND : 0);
        if (sigaction(sigs[i], &sa, NULL) != 0)
            return 1;
    }
    void *p = first_cuda_call();
    if (sigaction(SIGTERM, NULL, &back) != 0)
        return 1;
    bool own = (back.sa_flags & SA_SIGINFO) != 0 && back.sa_sigaction == on_counted &&
               ((back.sa_flags & SA_RESETHAND) != 0) == oneshot;
    printf("told: %s\n", own ? "own" : "other");
    ready();
    char line[64];
    while (fgets(line, sizeof line, stdin) == NULL && errno == EINTR && !feof(stdin))
        clearerr(stdin);
    for (int i = 0; i < 3; i++)
        printf("%s %d from %d code %d\n", names[i], (int)counted[i], (int)counted_pid[i],
               (int)counted_code[i]);
    cudaFree(p);
    return 0;
}

static void
child_ended(pid_t child)
{
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFSIGNALED(status))
        printf("child: signal %d\n", WTERMSIG(status));
    else
        printf("child: exit %d\n", WEXITSTATUS(status));
}

static int
fork_idle(void)
{
    void *p = first_cuda_call();
    fflush(stdout);
    pid_t child = fork();
    if (child < 0)
        return 1;
    if (child == 0) {
        for (;;)
            pause();
    }
    printf("child %ld\n", (long)child);
    ready();
    child_ended(child);
    cudaFree(p);
    return 0;
}

static void
on_term_exit(int sig)
{
    (void)sig;
    _exit(9);
}

/* `handler` as SIGTERM's handler, a CUDA call, ready, then waits for the signal; 1 on failure. */
static int
wait_for_term(void (*handler)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, NULL) != 0)
        return 1;
    (void)first_cuda_call();
    ready();
    for (;;)
        pause();
}

/* A CUDA call (its block never freed), ready, then waits for a line. */
static void
ready_then_wait(void)
{
    (void)first_cuda_call();
    ready();
    wait_line();
    fflush(stdout);
}

static void
on_term_quick_exit(int sig)
{
    (void)sig;
    quick_exit(10);
}

/* Ends without exit's handlers, where the exit snapshot is written. */
static int
quick(const char *how)
{
    if (strcmp(how, "handler") == 0 || strcmp(how, "qhandler") == 0)
        return wait_for_term(how[0] == 'q' ? on_term_quick_exit : on_term_exit);
    ready_then_wait();
    if (strcmp(how, "_exit") == 0)
        _exit(7);
    if (strcmp(how, "_Exit") == 0)
        _Exit(8);
    if (strcmp(how, "quick_exit") == 0)
        quick_exit(3);
    pid_t child = -1;
    if (strcmp(how, "vfork") == 0 || strcmp(how, "fork-idle") == 0) {
        child = how[0] == 'v' ? vfork() : fork();
        if (child == 0)
            _exit(5);
    } else if (strcmp(how, "fork") == 0) {
        child = fork();
        if (child == 0) {
            (void)first_cuda_call();
            printf("child %ld\n", (long)getpid());
            fflush(stdout);
            _exit(6);
        }
    }
    if (child < 0)
        return 1;
    child_ended(child);
    return 0;
}

static char *exec_self;

static void
on_term_exec(int sig)
{
    (void)sig;
    char *const after[] = {exec_self, "exec-after", NULL};
    execv(exec_self, after);
}

/* The image an exec starts: a block of its own, then the exit snapshot. */
static int
exec_after(void)
{
    void *p = NULL;
    if (cudaMalloc(&p, 2 << 20) != cudaSuccess)
        return 1;
    printf("after %ld\n", (long)getpid());
    return 0;
}

/* A child (vfork'ed, or forked with or without a CUDA call) that execs `program`. */
static int
exec_in_child(const char *how, const char *program)
{
    char *const argv[] = {(char *)program, NULL};
    pid_t child = strcmp(how, "vfork") == 0 ? vfork() : fork();
    if (child == 0) {
        if (strcmp(how, "fork") == 0) {
            (void)first_cuda_call();
            printf("child %ld\n", (long)getpid());
            fflush(stdout);
        }
        execv(program, argv);
        _exit(127);
    }
    if (child < 0)
        return 1;
    child_ended(child);
    return 0;
}

/* Replaces itself by `exec-after` with the exec function `how` (see the top of the file). */
static int
exec_mode(const char *how, const char *arg)
{
    extern char **environ;
    char *const after[] = {exec_self, "exec-after", NULL};
    if (strcmp(how, "handler") == 0)
        return wait_for_term(on_term_exec);
    ready_then_wait();
    if (strcmp(how, "vfork") == 0 || strcmp(how, "fork-idle") == 0 || strcmp(how, "fork") == 0)
        return arg != NULL ? exec_in_child(how, arg) : 2;
    const char *slash = strrchr(exec_self, '/');
    if (strcmp(how, "execv") == 0) {
        execv(exec_self, after);
    } else if (strcmp(how, "execve") == 0) {
        execve(exec_self, after, environ);
    } else if (strcmp(how, "execl") == 0) {
        execl(exec_self, exec_self, "exec-after", (char *)NULL);
    } else if (strcmp(how, "execle") == 0) {
        execle(exec_self, exec_self, "exec-after", (char *)NULL, environ);
    } else if (strcmp(how, "execvp") == 0 && arg != NULL) {
        execvp(arg, after);
    } else if (strcmp(how, "execvpe") == 0 && arg != NULL) {
        execvpe(arg, after, environ);
    } else if (strcmp(how, "execlp") == 0 && arg != NULL) {
        execlp(arg, arg, "exec-after", (char *)NULL);
    } else if (strcmp(how, "fexecve") == 0) {
        int fd = open(exec_self, O_RDONLY | O_CLOEXEC);
        if (fd >= 0)
            fexecve(fd, after, environ);
    } else if (strcmp(how, "execveat") == 0 && slash != NULL) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - exec_self), exec_self);
        int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dirfd >= 0)
            execveat(dirfd, slash + 1, after, environ, 0);
    } else if (strcmp(how, "path") == 0 && arg != NULL) {
        execv(arg, after);
    } else {
        return 2;
    }
    printf("exec failed: %s\n", strerror(errno));
    return 0;
}

int
main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    const char *mode = argv[1];
    if (strcmp(mode, "wait") == 0) {
        void *p = first_cuda_call();
        ready();
        wait_line();
        cudaFree(p);
        return 0;
    }
    if (strcmp(mode, "api") == 0 && argc == 3) {
        void *p = first_cuda_call();
        printf("dump: %d\n", cuprof_dump_snapshot(argv[2]));
        cudaFree(p);
        return 0;
    }
    if (strcmp(mode, "closefds") == 0 && argc == 3) {
        void *p = first_cuda_call();
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
        int log = open(argv[2], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (log < 0)
            return 1;
        /* Every low number is the program's file now, whichever cuprof held before. */
        for (int fd = log + 1; fd < 32; fd++)
            if (dup2(log, fd) != fd)
                return 1;
        printf("log fd %d\n", log);
        ready();
        wait_line();
        static const char line[] = "program line\n";
        if (write(log, line, sizeof line - 1) != (ssize_t)(sizeof line - 1))
            return 1;
        close(log);
        cudaFree(p);
        return 0;
    }
    if (strcmp(mode, "stderr") == 0 && argc == 3) {
        void *p = first_cuda_call();
        close(STDERR_FILENO);
        int file = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (file != STDERR_FILENO)
            return 1;
        printf("file fd %d\n", file);
        ready();
        wait_line();
        static const char line[] = "program line\n";
        if (write(file, line, sizeof line - 1) != (ssize_t)(sizeof line - 1))
            return 1;
        cudaFree(p);
        return 0; /* the exit dump, and the destructors' lines, with the file still at fd 2 */
    }
    if (strcmp(mode, "eintr") == 0)
        return handler_then_read(0);
    if (strcmp(mode, "restart") == 0)
        return handler_then_read(SA_RESTART);
    if (strcmp(mode, "handlers") == 0)
        return handlers();
    if (strcmp(mode, "forkidle") == 0)
        return fork_idle();
    if (strcmp(mode, "quick") == 0 && argc == 3)
        return quick(argv[2]);
    if (strcmp(mode, "exec") == 0 && (argc == 3 || argc == 4)) {
        exec_self = argv[0];
        return exec_mode(argv[2], argc == 4 ? argv[3] : NULL);
    }
    if (strcmp(mode, "exec-after") == 0)
        return exec_after();
    if (strcmp(mode, "exit-in-handler") == 0 && argc == 3)
        return exit_in_handler(argv[2]);
    if (strcmp(mode, "abort") == 0) {
        (void)first_cuda_call();
        ready();
        wait_line();
        abort();
    }
    if (strcmp(mode, "fdleak") == 0 && argc == 3)
        return fd_leak(argv[2]);
    if (strcmp(mode, "cancel") == 0 && argc == 3)
        return cancel_mode(argv[2]);
    if (strcmp(mode, "late") == 0 && argc == 3)
        return late(argv[2]);
    if (strcmp(mode, "counts") == 0)
        return counts(argc == 3 && strcmp(argv[2], "oneshot") == 0);
    if (strcmp(mode, "many") == 0 && argc == 3) {
        void *p = first_cuda_call();
        long pairs = atol(argv[2]);
        for (long i = 0; i < pairs; i++) {
            void *q = NULL;
            if (cudaMalloc(&q, 512 + (size_t)(i % 64) * 512) != cudaSuccess)
                return 1;
            cudaFree(q);
        }
        ready();
        wait_line();
        cudaFree(p);
        return 0;
    }
    return 2;
}
