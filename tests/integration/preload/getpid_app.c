/* getpid_app.c: calls getpid() (through any preloaded wrapper) and checks it against the kernel. */
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

int
main(void)
{
    pid_t a = getpid();
    pid_t b = (pid_t)syscall(SYS_getpid);
    printf("getpid_app: match=%d\n", a == b);
    return a == b ? 0 : 1;
}
