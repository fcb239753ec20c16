/* control_fork_stall.c: forks while another thread holds a mutex of libunwind's, then has the
 * child allocate (one stack walk) and exit. The program exports its own pthread_mutex_lock,
 * which libunwind (dlopen'ed by cuprof) binds to: the first lock libunwind takes once armed is
 * held until after the fork, as a thread preempted there at the fork holds it. The mutex held
 * is one libunwind took for the main thread's walks, which the child's walk takes again.
 * Usage: control_fork_stall
 * Prints libunwind=0 when libunwind.so.8 is not loaded (nothing to hold), else stalled=, then
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
main(void)
{
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
    atomic_store(&armed, true);
    pthread_t thread;
    pthread_create(&thread, NULL, fresh_thread, NULL);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += DEADLINE_S;
    bool stalled = sem_timedwait(&lock_held, &deadline) == 0;
    printf("libunwind=1\nstalled=%d\n", stalled);
    fflush(stdout);
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
