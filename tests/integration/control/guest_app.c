/* guest_app.c: a program that relies on what it owns while cuprof lives inside it.
 *   guest_app umask DIR: a thread creates files in DIR in a loop (umask 022: each must be 0644)
 *     while the main thread makes the first CUDA call, which starts cuprof's control socket;
 *     prints "files=N wrong=M" (M files got another mode).
 *   guest_app closefds DIR QUIET SECONDS: the first CUDA call, then, like a daemon, closes every
 *     descriptor from 3 up and opens 32 files of its own in DIR (they get the low numbers cuprof
 *     had), each holding one line of its own; prints "closed PID", sleeps QUIET seconds and prints
 *     the CPU time the process used meanwhile ("quiet_cpu_ms=N"), sleeps SECONDS more (a client
 *     talks to it then) and prints "files ok" or what a file held that it did not write.
 * Locking: none.
 * Hot path: no (a test program). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "control_cuda.h"

#define GUEST_FILES 32

static atomic_bool guest_stop;
static const char *guest_dir;
static atomic_long guest_files, guest_wrong;

static void *
create_files(void *arg)
{
    (void)arg;
    char path[4096];
    for (long i = 0; !atomic_load(&guest_stop); i++) {
        snprintf(path, sizeof(path), "%s/f%ld", guest_dir, i % 64);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0)
            continue;
        struct stat st;
        if (fstat(fd, &st) == 0) {
            guest_files++;
            if ((st.st_mode & 0777) != 0644)
                guest_wrong++;
        }
        close(fd);
        unlink(path);
    }
    return NULL;
}

static int
run_umask(const char *dir)
{
    guest_dir = dir;
    umask(022);
    pthread_t t;
    if (pthread_create(&t, NULL, create_files, NULL) != 0)
        return 1;
    while (atomic_load(&guest_files) == 0) { /* until the thread is creating files */
        struct timespec step = {0, 100 * 1000};
        nanosleep(&step, NULL);
    }
    control_cuda_init();
    control_cuda_free(control_cuda_alloc(1 << 20));
    atomic_store(&guest_stop, true);
    pthread_join(t, NULL);
    printf("files=%ld wrong=%ld\n", atomic_load(&guest_files), atomic_load(&guest_wrong));
    return 0;
}

static long
cpu_ms(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000L +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000L;
}

static void
sleep_s(double seconds)
{
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static int
run_closefds(const char *dir, double quiet, double seconds)
{
    control_cuda_init();
    (void)control_cuda_alloc(1 << 20);
    fflush(stdout);
    long max = sysconf(_SC_OPEN_MAX);
    for (long fd = 3; fd < (max > 0 && max < 65536 ? max : 65536); fd++)
        close((int)fd); /* closefrom(3), as daemons do */
    int fds[GUEST_FILES];
    char path[4096], line[64];
    for (int i = 0; i < GUEST_FILES; i++) {
        snprintf(path, sizeof(path), "%s/own%d", dir, i);
        fds[i] = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
        int n = snprintf(line, sizeof(line), "mine %d\n", i);
        if (fds[i] < 0 || write(fds[i], line, (size_t)n) != n) {
            perror("guest_app: own file");
            return 1;
        }
    }
    printf("closed %ld (files on fds %d..%d)\n", (long)getpid(), fds[0], fds[GUEST_FILES - 1]);
    fflush(stdout);
    long before = cpu_ms();
    sleep_s(quiet);
    printf("quiet_cpu_ms=%ld\n", cpu_ms() - before);
    fflush(stdout);
    sleep_s(seconds);
    bool ok = true;
    for (int i = 0; i < GUEST_FILES; i++) {
        char got[256] = "";
        ssize_t n = pread(fds[i], got, sizeof(got) - 1, 0);
        int want = snprintf(line, sizeof(line), "mine %d\n", i);
        if (n != want || memcmp(got, line, (size_t)want) != 0) {
            got[n > 0 ? n : 0] = '\0';
            printf("file %d (fd %d) holds %zd bytes: %.60s\n", i, fds[i], n, got);
            ok = false;
        }
    }
    printf("%s\n", ok ? "files ok" : "files changed");
    return ok ? 0 : 1;
}

int
main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "umask") == 0)
        return run_umask(argv[2]);
    if (argc == 5 && strcmp(argv[1], "closefds") == 0)
        return run_closefds(argv[2], atof(argv[3]), atof(argv[4]));
    fprintf(stderr, "usage: guest_app umask DIR | closefds DIR QUIET SECONDS\n");
    return 64;
}
