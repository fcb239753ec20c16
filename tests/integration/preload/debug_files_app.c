/* debug_files_app.c: built by test_debug_files.py with its debug information split off. One
 * allocation from make_buffer, a SIGUSR1 dump, then, once the dump's file exists, what that dump
 * left in the process: each descriptor opened since that a child would inherit (no FD_CLOEXEC),
 * and libdebuginfod or libcurl if mapped. Usage: debug_files_app SNAPSHOT_PATH */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define FDS 1024

int cudaMalloc(void **ptr, size_t size); /* the simulated runtime's; no CUDA header needed */

#ifdef OTHER_BUILD
int other_build = OTHER_BUILD; /* another build, so another build ID */
#endif

__attribute__((noinline)) static void *
make_buffer(size_t size)
{
    void *p = NULL;
    if (cudaMalloc(&p, size) != 0) /* the call site the test looks for */
        return NULL;
    return p;
}

int
main(int argc, char **argv)
{
    if (argc != 2)
        return 64;
    static char open_before[FDS];
    for (int fd = 0; fd < FDS; fd++)
        open_before[fd] = fcntl(fd, F_GETFD) != -1;
    if (make_buffer(1 << 20) == NULL)
        return 2;
    raise(SIGUSR1);
    for (int i = 0; i < 600 && access(argv[1], F_OK) != 0; i++)
        usleep(50000);
    if (access(argv[1], F_OK) != 0) {
        puts("no dump");
        return 3;
    }
    int inherited = 0;
    for (int fd = 3; fd < FDS; fd++) {
        int flags = open_before[fd] ? -1 : fcntl(fd, F_GETFD);
        if (flags == -1 || (flags & FD_CLOEXEC) != 0)
            continue;
        char link[64], target[512] = "";
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, target, sizeof target - 1);
        target[n > 0 ? n : 0] = '\0';
        printf("inherited %d %s\n", fd, target);
        inherited++;
    }
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[1024];
    while (maps != NULL && fgets(line, sizeof line, maps) != NULL)
        if (strstr(line, "libdebuginfod") != NULL || strstr(line, "libcurl") != NULL)
            printf("mapped %s", strchr(line, '/') != NULL ? strchr(line, '/') : line);
    if (maps != NULL)
        fclose(maps);
    printf("inherited=%d\n", inherited);
    return 0;
}
