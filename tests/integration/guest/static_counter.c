/* static_counter: a statically linked program, so no LD_PRELOAD reaches it (cuprof cannot stand
 * in for its handlers). Counts SIGTERM and SIGINT with its own handlers, prints "ready PID", waits
 * for a line on stdin (reads interrupted by a handler go on), then prints "SIGTERM N" and
 * "SIGINT N". */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t terms, ints;

static void
on_signal(int sig)
{
    if (sig == SIGTERM)
        terms++;
    else
        ints++;
}

int
main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0)
        return 1;
    printf("ready %ld\n", (long)getpid());
    fflush(stdout);
    char line[64];
    while (fgets(line, sizeof line, stdin) == NULL && errno == EINTR && !feof(stdin))
        clearerr(stdin);
    printf("SIGTERM %d\nSIGINT %d\n", (int)terms, (int)ints);
    return 0;
}
