/* helper_thread.c: cuprof's own long-lived threads (see helper_thread.h). */
#include "preload/helper_thread.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>

/* What the new thread needs, on the starter's stack: the starter waits until it was copied. */
struct start_request {
    void *(*run)(void *);
    void *arg;
    sem_t running;
};

static void *
trampoline(void *arg)
{
    struct start_request *request = arg;
    void *(*run)(void *) = request->run;
    void *run_arg = request->arg;
    (void)sem_post(&request->running); /* the request is gone once this returns */
    return run(run_arg);
}

int
helper_thread_start(const char *name, void *(*run)(void *), void *arg)
{
    struct start_request request = {.run = run, .arg = arg};
    if (sem_init(&request.running, 0, 0) != 0)
        return errno;
    pthread_attr_t attr;
    int rc = pthread_attr_init(&attr);
    if (rc != 0) {
        sem_destroy(&request.running);
        return rc;
    }
    (void)pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t thread;
    rc = pthread_create(&thread, &attr, trampoline, &request);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc == 0) {
        (void)pthread_setname_np(thread, name);
        /* Not bounded: the new thread's first step takes no lock the starter could hold. */
        while (sem_wait(&request.running) != 0 && errno == EINTR) {
        }
    }
    sem_destroy(&request.running);
    return rc;
}
