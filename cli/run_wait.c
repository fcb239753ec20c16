/* run_wait.c: `cuprof run`'s wait for PROG, passing on the signals it is sent (run_wait.h). */
#include "cli/run_wait.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli_util.h"
#include "cli/run_env.h"
#include "cli/static_cudart.h"
#include "snapshot/forwarded_signal.h"

/* One line about prog, which cannot start; returns `status`. */
static int
run_wait_refuse(const char *prog, int status, const char *what)
{
    char safe[1024];
    fprintf(stderr, "cuprof: run: %s: %s\n", cli_term(prog, safe, sizeof safe), what);
    return status;
}

int
run_wait_check(const char *prog)
{
    char found[PATH_MAX];
    struct stat st;
    if (strchr(prog, '/') == NULL) {
        if (static_cudart_resolve(prog, found, sizeof found))
            return CLI_OK;
        /* execvp searches PATH only: a program in this folder needs its ./ as in a shell. */
        if (stat(prog, &st) == 0 && !S_ISDIR(st.st_mode)) {
            char what[PATH_MAX + 100], safe[1024];
            snprintf(what, sizeof what,
                     "not found in PATH (for the file in this folder, write ./%s)",
                     cli_term(prog, safe, sizeof safe));
            return run_wait_refuse(prog, CLI_PROG_NOT_FOUND, what);
        }
        return run_wait_refuse(prog, CLI_PROG_NOT_FOUND,
                               "not found in PATH (check the name, or give the program's path)");
    }
    if (stat(prog, &st) != 0)
        return run_wait_refuse(
            prog, errno == ENOENT || errno == ENOTDIR ? CLI_PROG_NOT_FOUND : CLI_PROG_NOT_RUNNABLE,
            errno == ENOENT ? "no such file (check the path)" : strerror(errno));
    if (S_ISDIR(st.st_mode))
        return run_wait_refuse(prog, CLI_PROG_NOT_RUNNABLE,
                               "is a directory (give the program inside it)");
    if (!S_ISREG(st.st_mode) || access(prog, X_OK) != 0)
        return run_wait_refuse(prog, CLI_PROG_NOT_RUNNABLE,
                               "is not executable (chmod +x it, or run it with its interpreter, "
                               "e.g. cuprof run -- python3 script.py)");
    return CLI_OK;
}

/* True when `lib` is mapped in process pid, by its path or by its device and inode (a file of
 * an overlay shows under either, depending on the kernel). */
static bool
run_wait_has_lib(pid_t pid, const char *lib)
{
    struct stat want;
    bool have_inode = stat(lib, &want) == 0;
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/maps", (long)pid);
    FILE *maps = fopen(path, "re");
    if (maps == NULL)
        return false;
    bool found = false;
    char line[PATH_MAX + 256];
    while (!found && fgets(line, sizeof line, maps) != NULL) {
        unsigned major_no = 0, minor_no = 0;
        unsigned long inode = 0;
        int name_at = 0;
        if (sscanf(line, "%*s %*s %*s %x:%x %lu %n", &major_no, &minor_no, &inode, &name_at) < 3)
            continue;
        char *name = line + name_at;
        name[strcspn(name, "\n")] = '\0';
        found = strcmp(name, lib) == 0 ||
                (have_inode && inode != 0 && inode == (unsigned long)want.st_ino &&
                 major_no == major(want.st_dev) && minor_no == minor(want.st_dev));
    }
    fclose(maps);
    return found;
}

/* The last copy passed on of SIGTERM, SIGINT and SIGHUP (forwarded_signal_copy), 0 when none
 * waits for its twin. */
static uint64_t run_wait_last[3];

/* Passes sig on to PROG: from its parent by sigqueue(3), the sender named in the value, so PROG's
 * cuprof takes it once with the sender's own copy if that came too. */
static void
run_wait_pass_on(pid_t pid, const char *lib, int sig, const siginfo_t *info)
{
    /* Codes <= 0 come from a process (kill, sigqueue, tgkill); the others from the kernel. */
    pid_t origin = info->si_code <= 0 ? info->si_pid : 0;
    uid_t origin_uid = info->si_code <= 0 ? info->si_uid : 0;
    /* Under another `cuprof run`, its copy names the sender, and is passed on once with the
     * sender's own. */
    bool forwarded = info->si_code == SI_QUEUE && info->si_pid == getppid() &&
                     forwarded_signal_origin(info->si_value, &origin, &origin_uid);
    uint64_t *last = &run_wait_last[sig == SIGTERM ? 0 : sig == SIGINT ? 1 : 2];
    uint64_t copy = forwarded_signal_copy(origin, forwarded);
    bool twin = forwarded_signal_is_twin(*last, copy);
    *last = twin ? 0 : copy;
    if (twin)
        return;
    if (run_wait_has_lib(pid, lib)) {
        (void)sigqueue(pid, sig, forwarded_signal_value(origin, origin_uid));
        return;
    }
    /* Without cuprof in PROG (a static or set-user-ID program it exec'd) a copy cannot be told
     * from the sender's own: as tini and uv do, SIGTERM and SIGHUP are passed on, and SIGINT, a
     * terminal's signal to the whole job, is not. */
    if (sig != SIGINT)
        (void)kill(pid, sig);
}

int
run_wait(char **prog, const char *lib, pid_t *pid_out, int *status)
{
    char self[32];
    snprintf(self, sizeof self, "%ld", (long)getpid());
    if (run_env_set(FORWARDED_SIGNAL_ENV, self) != 0)
        return -1;
    /* Inherited SIGCHLD ignored would reap PROG before cuprof could read its status. */
    struct sigaction dfl, old_chld;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGCHLD, &dfl, &old_chld);
    sigset_t waited, before, ignored;
    sigemptyset(&waited);
    sigemptyset(&ignored);
    const int taken[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD};
    for (size_t i = 0; i < sizeof taken / sizeof taken[0]; i++) {
        struct sigaction now;
        sigaddset(&waited, taken[i]);
        /* Ignored for cuprof (nohup, a background job's SIGINT): PROG ignores it too. */
        if (sigaction(taken[i], NULL, &now) == 0 && (now.sa_flags & SA_SIGINFO) == 0 &&
            now.sa_handler == SIG_IGN)
            sigaddset(&ignored, taken[i]);
    }
    /* Blocked and waited for (sigwaitinfo): a container's first process gets them too. */
    sigprocmask(SIG_BLOCK, &waited, &before);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "cuprof: run: fork: %s\n", strerror(errno));
        sigprocmask(SIG_SETMASK, &before, NULL);
        sigaction(SIGCHLD, &old_chld, NULL);
        return -1;
    }
    if (pid == 0) {
        sigaction(SIGCHLD, &old_chld, NULL);
        sigprocmask(SIG_SETMASK, &before, NULL);
        execvp(prog[0], prog);
        fprintf(stderr, "cuprof: run: %s: %s\n", prog[0], strerror(errno));
        _exit(errno == ENOENT ? CLI_PROG_NOT_FOUND : CLI_PROG_NOT_RUNNABLE);
    }
    *pid_out = pid;
    for (;;) {
        int st = 0;
        pid_t got = waitpid(-1, &st, WNOHANG);
        if (got == pid) {
            *status = st;
            break;
        }
        if (got > 0 || (got < 0 && errno == EINTR))
            continue; /* an orphan re-parented to cuprof */
        if (got < 0) {
            fprintf(stderr, "cuprof: run: waitpid: %s\n", strerror(errno));
            *status = 0;
            break;
        }
        siginfo_t info;
        int sig = sigwaitinfo(&waited, &info);
        if ((sig == SIGTERM || sig == SIGINT || sig == SIGHUP) && !sigismember(&ignored, sig))
            run_wait_pass_on(pid, lib, sig, &info);
    }
    /* A signal that came with PROG's end (^C reaches both) was PROG's to take: not cuprof's. */
    struct timespec now = {0, 0};
    siginfo_t late;
    while (sigtimedwait(&waited, &late, &now) > 0)
        ;
    sigprocmask(SIG_SETMASK, &before, NULL);
    sigaction(SIGCHLD, &old_chld, NULL);
    return 0;
}
