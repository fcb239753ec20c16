/* control_stress.c: two threads allocate and free at full speed until stdin closes, while the
 * test sends CUPROF_SIGNAL; with "own-handler" the program first installs its own SIGUSR1
 * handler (which cuprof must keep calling). Prints "ready", then counts at exit.
 * Usage: control_stress plain|own-handler */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "control_cuda.h"

static atomic_bool stop;
static volatile sig_atomic_t own_calls;

static void
own_handler(int sig)
{
    (void)sig;
    own_calls++;
}

static void *
worker(void *arg)
{
    CUdeviceptr live[8] = {0};
    unsigned seed = (unsigned)(size_t)arg;
    unsigned long ops = 0;
    control_cuda_init(); /* the context is current per thread */
    while (!atomic_load(&stop)) {
        unsigned slot = (seed = seed * 1103515245u + 12345u) >> 16 & 7u;
        if (live[slot] != 0) {
            control_cuda_free(live[slot]);
            live[slot] = 0;
        } else {
            live[slot] = control_cuda_alloc(512u + (seed >> 8) % (4u << 20));
        }
        ops++;
    }
    for (unsigned i = 0; i < 8; i++)
        if (live[i] != 0)
            control_cuda_free(live[i]);
    return (void *)ops;
}

int
main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "plain") != 0 && strcmp(argv[1], "own-handler") != 0)) {
        fprintf(stderr, "usage: control_stress plain|own-handler\n");
        return 64;
    }
    if (strcmp(argv[1], "own-handler") == 0) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_handler = own_handler;
        sigaction(SIGUSR1, &action, NULL);
    }
    control_cuda_init();
    CUdeviceptr keep = control_cuda_alloc(1u << 20); /* starts cuprof before the threads */
    pthread_t threads[2];
    for (unsigned i = 0; i < 2; i++)
        pthread_create(&threads[i], NULL, worker, (void *)(size_t)(i + 1));
    printf("ready\n");
    fflush(stdout);
    char buf[64];
    while (read(STDIN_FILENO, buf, sizeof buf) != 0) {
    }
    atomic_store(&stop, true);
    for (unsigned i = 0; i < 2; i++) {
        void *ops;
        pthread_join(threads[i], &ops);
        printf("ops%u=%lu\n", i, (unsigned long)(size_t)ops);
    }
    control_cuda_free(keep);
    printf("own_calls=%d\n", (int)own_calls);
    return 0;
}
