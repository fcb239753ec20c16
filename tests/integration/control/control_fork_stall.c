/* control_fork_stall.c: forks while another thread is stopped where a fork must not catch it,
 * then has the child allocate (one stack walk) and exit (the exit snapshot).
 * Usage: control_fork_stall mutex   the other thread holds a mutex of libunwind's across the
 *                                   fork. The program exports its own pthread_mutex_lock, which
 *                                   libunwind (dlopen'ed by cuprof) binds to: the first lock
 *                                   libunwind takes once armed, of those it took for the main
 *                                   thread's walks (which the child's walk takes again), is held
 *                                   until after the fork.
 *        control_fork_stall loader  the other thread's first stack walk stops for 300 ms inside
 *                                   dl_iterate_phdr, holding the loader's lock (the program
 *                                   exports its own dl_iterate_phdr, which libunwind and cuprof
 *                                   bind to); the fork comes 10 ms into it.
 * Prints libunwind=0 when libunwind.so.8 is not loaded (nothing to stop in), else stalled=, then
 * child_pid=, child_exited=, child_status= and hung= (a child still running after 20 s). */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "control_cuda.h"

#define DEADLINE_S 20

typedef int (*mutex_lock_fn)(pthread_mutex_t *);
static _Atomic(mutex_lock_fn) real_lock;
static uintptr_t libunwind_lo, libunwind_hi;
static atomic_bool armed;
/* The mutexes libunwind took while the main thread walked its first stacks (its rule cache's
 * among them): the ones a stack walk in the child will take again. */
#define NOTED_MAX 16
static atomic_bool learning;
static _Atomic(pthread_mutex_t *) noted[NOTED_MAX];

static void
note_mutex(pthread_mutex_t *mutex)
{
    for (int i = 0; i < NOTED_MAX; i++) {
        pthread_mutex_t *expected = NULL;
        if (atomic_load(&noted[i]) == mutex ||
            atomic_compare_exchange_strong(&noted[i], &expected, mutex))
            return;
    }
}

static bool
is_noted(pthread_mutex_t *mutex)
{
    for (int i = 0; i < NOTED_MAX; i++)
        if (atomic_load(&noted[i]) == mutex)
            return true;
    return false;
}
static sem_t lock_held, lock_release;

/* ---- loader mode */
#define LOADER_STALL_MS 300
typedef int (*iterate_fn)(int (*)(struct dl_phdr_info *, size_t, void *), void *);
static atomic_bool loader_armed;
static pthread_t stalling_thread;

struct stalled_walk {
    int (*callback)(struct dl_phdr_info *, size_t, void *);
    void *data;
    bool stopped;
};

static int
stall_once(struct dl_phdr_info *info, size_t size, void *data)
{
    struct stalled_walk *w = data;
    if (!w->stopped) {
        w->stopped = true;
        sem_post(&lock_held);
        struct timespec ts = {0, LOADER_STALL_MS * 1000L * 1000L};
        nanosleep(&ts, NULL);
    }
    return w->callback(info, size, w->data);
}

/* Also called by a sanitizer runtime's start-up, before its shadow memory exists: nothing in
 * here may be instrumented. */
__attribute__((visibility("default"), no_sanitize("address", "undefined"))) int
dl_iterate_phdr(int (*callback)(struct dl_phdr_info *, size_t, void *), void *data)
{
    union {
        void *sym;
        iterate_fn fn;
    } real = {dlsym(RTLD_NEXT, "dl_iterate_phdr")};
    if (atomic_load(&loader_armed) && pthread_equal(pthread_self(), stalling_thread) &&
        atomic_exchange(&loader_armed, false)) {
        struct stalled_walk w = {callback, data, false};
        return real.fn(stall_once, &w);
    }
    return real.fn(callback, data);
}

static mutex_lock_fn
resolve_real_lock(void)
{
    mutex_lock_fn fn = atomic_load(&real_lock);
    if (fn == NULL) {
        void *sym = dlsym(RTLD_NEXT, "pthread_mutex_lock");
        memcpy(&fn, &sym, sizeof(fn));
        atomic_store(&real_lock, fn);
    }
    return fn;
}

__attribute__((visibility("default"))) int
pthread_mutex_lock(pthread_mutex_t *mutex)
{
    uintptr_t caller = (uintptr_t)__builtin_return_address(0);
    int rc = resolve_real_lock()(mutex);
    if (rc != 0 || caller < libunwind_lo || caller >= libunwind_hi)
        return rc;
    if (atomic_load(&learning)) {
        note_mutex(mutex);
    } else if (is_noted(mutex) && atomic_exchange(&armed, false)) {
        sem_post(&lock_held);
        while (sem_wait(&lock_release) != 0)
            ;
    }
    return rc;
}

static int
find_libunwind(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    if (info->dlpi_name == NULL || strstr(info->dlpi_name, "libunwind.so.8") == NULL)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) != 0) {
            libunwind_lo = info->dlpi_addr + ph->p_vaddr;
            libunwind_hi = libunwind_lo + ph->p_memsz;
        }
    }
    return 1;
}

/* A fresh thread: its first stack walk is libunwind's slow path, which takes its locks. */
static void *
fresh_thread(void *arg)
{
    (void)arg;
    control_cuda_init();
    control_cuda_free(control_cuda_alloc(4096));
    return NULL;
}

/* The same, once the main thread has armed the loader stall for it. */
static void *
fresh_thread_after(void *start)
{
    pthread_mutex_lock(start);
    pthread_mutex_unlock(start);
    return fresh_thread(NULL);
}

static bool
wait_child(pid_t pid, int *status)
{
    struct timespec nap = {0, 2 * 1000 * 1000};
    for (long waited_ms = 0; waited_ms < DEADLINE_S * 1000L; waited_ms += 2) {
        if (waitpid(pid, status, WNOHANG) == pid)
            return true;
        nanosleep(&nap, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, status, 0);
    return false;
}

int
main(int argc, char **argv)
{
    bool loader = argc > 1 && strcmp(argv[1], "loader") == 0;
    resolve_real_lock();
    control_cuda_init();
    control_cuda_free(control_cuda_alloc(1u << 20)); /* cuprof has chosen its unwinder */
    dl_iterate_phdr(find_libunwind, NULL);
    if (libunwind_hi == 0) {
        printf("libunwind=0\n");
        return 0;
    }
    atomic_store(&learning, true);
    control_cuda_free(control_cuda_alloc(2u << 20)); /* a call site libunwind has not seen */
    atomic_store(&learning, false);
    sem_init(&lock_held, 0, 0);
    sem_init(&lock_release, 0, 0);
    pthread_t thread;
    if (loader) {
        /* Armed for the new thread only, once it exists. */
        pthread_mutex_t start = PTHREAD_MUTEX_INITIALIZER;
        resolve_real_lock()(&start);
        pthread_create(&thread, NULL, fresh_thread_after, &start);
        stalling_thread = thread;
        atomic_store(&loader_armed, true);
        pthread_mutex_unlock(&start);
    } else {
        atomic_store(&armed, true);
        pthread_create(&thread, NULL, fresh_thread, NULL);
    }
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += DEADLINE_S;
    bool stalled = sem_timedwait(&lock_held, &deadline) == 0;
    printf("libunwind=1\nstalled=%d\n", stalled);
    fflush(stdout);
    if (loader) {
        struct timespec ts = {0, 10 * 1000L * 1000L};
        nanosleep(&ts, NULL);
    }
    pid_t pid = fork();
    if (pid == 0) {
        control_cuda_free(control_cuda_alloc(8192));
        exit(0);
    }
    atomic_store(&armed, false);
    sem_post(&lock_release);
    int status = 0;
    bool ended = wait_child(pid, &status);
    pthread_join(thread, NULL);
    printf("child_pid=%d\nchild_exited=%d\nchild_status=%d\nhung=%d\n", (int)pid, WIFEXITED(status),
           WIFEXITED(status) ? WEXITSTATUS(status) : -1, !ended);
    return 0;
}
