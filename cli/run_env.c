/* run_env.c: PROG's environment under `cuprof run` (see run_env.h). */
#include "cli/run_env.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli_util.h"
#include "preload/config.h"

extern char **environ;

int
run_env_set(const char *name, const char *value)
{
    if (setenv(name, value, 1) != 0) {
        fprintf(stderr, "cuprof: run: cannot set %s: %s\n", name, strerror(errno));
        return -1;
    }
    return 0;
}

/* The shim's parser over `envp`; its message (one line, "cuprof: VAR: ...") in err. */
static int
check_env(char *const *envp, char *err, size_t len)
{
    struct cuprof_config *config = malloc(sizeof *config);
    if (config == NULL) {
        snprintf(err, len, "cuprof: run: out of memory");
        return -1;
    }
    int rc = config_parse(envp, config, err, len);
    free(config);
    return rc == 0 ? 0 : -1;
}

int
run_env_option(const char *option, const char *var, const char *value)
{
    size_t n = strlen(var) + strlen(value) + 2;
    char *entry = malloc(n);
    if (entry == NULL) {
        fprintf(stderr, "cuprof: run: out of memory\n");
        return -1;
    }
    snprintf(entry, n, "%s=%s", var, value);
    char *envp[] = {entry, NULL};
    char err[1024];
    int rc = check_env(envp, err, sizeof err);
    free(entry);
    if (rc != 0) {
        /* "cuprof: CUPROF_MODE: bad value ..." names the variable: the user gave an option. */
        size_t skip = strlen("cuprof: ") + strlen(var) + strlen(": ");
        char safe[1024];
        fprintf(stderr, "cuprof: run: %s: %s\n", option,
                cli_term(strlen(err) > skip ? err + skip : err, safe, sizeof safe));
        return -1;
    }
    return run_env_set(var, value);
}

int
run_env_check(void)
{
    char err[1024], safe[1024];
    if (check_env(environ, err, sizeof err) == 0)
        return 0;
    fprintf(stderr, "%s\n", cli_term(err, safe, sizeof safe));
    return -1;
}

int
run_env_prepend(const char *name, const char *first, char sep)
{
    const char *old = getenv(name);
    if (old == NULL || old[0] == '\0')
        return run_env_set(name, first);
    size_t len = strlen(first) + strlen(old) + 2;
    char *value = malloc(len);
    if (value == NULL) {
        fprintf(stderr, "cuprof: run: out of memory\n");
        return -1;
    }
    snprintf(value, len, "%s%c%s", first, sep, old);
    int rc = run_env_set(name, value);
    free(value);
    return rc;
}

/* The file name of path[0..len). */
static const char *
base_name(const char *path, size_t len, size_t *base_len)
{
    const char *base = path;
    for (size_t i = 0; i < len; i++)
        if (path[i] == '/')
            base = path + i + 1;
    *base_len = len - (size_t)(base - path);
    return base;
}

/* A sanitizer runtime must stay first in LD_PRELOAD (it refuses to start otherwise). */
static bool
is_sanitizer_runtime(const char *path, size_t len)
{
    static const char *const names[] = {"libasan", "libtsan", "libubsan", "liblsan", "libhwasan"};
    size_t n;
    const char *base = base_name(path, len, &n);
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (n >= strlen(names[i]) && strncmp(base, names[i], strlen(names[i])) == 0)
            return true;
    return false;
}

/* Whether path[0..len) is a libcuprof.so: by its file name, or the same file as `lib`. */
static bool
is_cuprof(const char *path, size_t len, const struct stat *lib)
{
    size_t n;
    const char *base = base_name(path, len, &n);
    if (n == strlen("libcuprof.so") && strncmp(base, "libcuprof.so", n) == 0)
        return true;
    char *copy = strndup(path, len);
    struct stat st;
    bool same = copy != NULL && stat(copy, &st) == 0 && st.st_dev == lib->st_dev &&
                st.st_ino == lib->st_ino;
    free(copy);
    return same;
}

int
run_env_preload(const char *lib)
{
    const char *old = getenv("LD_PRELOAD");
    if (old == NULL)
        old = "";
    struct stat lib_st;
    if (stat(lib, &lib_st) != 0)
        memset(&lib_st, 0, sizeof lib_st);
    size_t cap = strlen(old) + strlen(lib) + 4;
    char *value = malloc(cap);
    if (value == NULL) {
        fprintf(stderr, "cuprof: run: out of memory\n");
        return -1;
    }
    size_t len = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)
            len += (size_t)snprintf(value + len, cap - len, "%s%s", len ? ":" : "", lib);
        for (const char *p = old; *p;) {
            size_t n = strcspn(p, ": ");
            if (n > 0 && pass == 1 && is_cuprof(p, n, &lib_st)) {
                char safe[1024], *entry = strndup(p, n);
                fprintf(stderr,
                        "cuprof: run: LD_PRELOAD already named %s: dropped (one libcuprof.so per "
                        "process: this cuprof's)\n",
                        cli_term(entry != NULL ? entry : "libcuprof.so", safe, sizeof safe));
                free(entry);
            } else if (n > 0 && is_sanitizer_runtime(p, n) == (pass == 0)) {
                len +=
                    (size_t)snprintf(value + len, cap - len, "%s%.*s", len ? ":" : "", (int)n, p);
            }
            p += n;
            p += strspn(p, ": ");
        }
    }
    int rc = run_env_set("LD_PRELOAD", value);
    free(value);
    return rc;
}

int
run_env_nvtx(const char *lib)
{
    const char *old = getenv("NVTX_INJECTION64_PATH");
    struct stat lib_st;
    if (stat(lib, &lib_st) != 0)
        memset(&lib_st, 0, sizeof lib_st);
    if (old != NULL && old[0] != '\0' && !is_cuprof(old, strlen(old), &lib_st)) {
        char safe[1024];
        fprintf(stderr,
                "cuprof: run: NVTX_INJECTION64_PATH already names %s: left as it is, so "
                "PROG's NVTX ranges go to that tool, not to cuprof\n",
                cli_term(old, safe, sizeof safe));
        return 0;
    }
    return run_env_set("NVTX_INJECTION64_PATH", lib);
}
