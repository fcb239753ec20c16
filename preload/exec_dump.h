/* exec_dump.h: the exec family as libcuprof exports it: an exec replaces the program's image
 *   without exit's handlers, where the exit snapshot is written, so the image's snapshot is written
 *   first (lifecycle_before_exec) when the exec will run: the file exists, is a regular file and
 *   may be executed (found on PATH for the p forms, as glibc searches it). An exec that fails
 *   anyway returns its error as it would have, and the program goes on with its dumps.
 * Locking: none of its own (the real functions are published with atomic stores); the dump lock
 *   is held across a real exec (lifecycle.h).
 * Hot path: no. A vfork child (another pid in its parent's memory) reaches the real exec after one
 *   getpid and a few atomic loads, with nothing async-signal-unsafe. */
#ifndef CUPROF_EXEC_DUMP_H
#define CUPROF_EXEC_DUMP_H

/* Finds the next execve, execv, execvp, execvpe, fexecve and execveat (the constructor's: a lookup
 * in a vfork child could deadlock on the loader's lock). */
void exec_dump_start(void);

/* The functions of the same names: the image's snapshot, then the next definition. The l forms
 * (execl, execle, execlp) reach these with their arguments gathered. */
int exec_dump_execve(const char *path, char *const argv[], char *const envp[]);
int exec_dump_execv(const char *path, char *const argv[]);
int exec_dump_execvp(const char *file, char *const argv[]);
int exec_dump_execvpe(const char *file, char *const argv[], char *const envp[]);
int exec_dump_fexecve(int fd, char *const argv[], char *const envp[]);
int exec_dump_execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
                       int flags);

#endif
