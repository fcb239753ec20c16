/* control_exit.c: leaves three blocks live (1 MiB, 2 MiB + 1, 512 bytes) after freeing a fourth,
 * then ends by returning from main or by calling exit() from a function.
 * Usage: control_exit return|exit */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control_cuda.h"

static void
leave(void)
{
    fflush(stdout);
    exit(0);
}

int
main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "return") != 0 && strcmp(argv[1], "exit") != 0)) {
        fprintf(stderr, "usage: control_exit return|exit\n");
        return 64;
    }
    control_cuda_init();
    (void)control_cuda_alloc(1u << 20);
    CUdeviceptr gone = control_cuda_alloc(5000);
    (void)control_cuda_alloc((2u << 20) + 1);
    (void)control_cuda_alloc(512);
    control_cuda_free(gone);
    printf("live=%zu\n", (size_t)(1u << 20) + (2u << 20) + 1 + 512);
    if (strcmp(argv[1], "exit") == 0)
        leave();
    return 0;
}
