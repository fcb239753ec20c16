/* control_fork.c: forks while a second thread allocates at full speed; the child allocates,
 * frees and exits; the parent reports the child's pid and exit status.
 * Usage: control_fork */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "control_cuda.h"

static atomic_bool stop;

static void *
churn(void *arg)
{
    (void)arg;
    control_cuda_init();
    while (!atomic_load(&stop))
        control_cuda_free(control_cuda_alloc(4096));
    return NULL;
}

int
main(void)
{
    control_cuda_init();
    CUdeviceptr parent_block = control_cuda_alloc(1u << 20);
    pthread_t thread;
    pthread_create(&thread, NULL, churn, NULL);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        CUdeviceptr child_block = control_cuda_alloc(3u << 20);
        control_cuda_free(control_cuda_alloc(8192));
        (void)child_block;
        return 0; /* exit(): the child's own exit dump */
    }
    int status = 0;
    waitpid(pid, &status, 0);
    atomic_store(&stop, true);
    pthread_join(thread, NULL);
    control_cuda_free(parent_block);
    printf("child_pid=%d\nchild_exited=%d\nchild_status=%d\n", (int)pid, WIFEXITED(status),
           WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}
