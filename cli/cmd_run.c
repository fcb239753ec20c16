/* cmd_run.c: `cuprof run [options] -- PROG ARGS...`: runs PROG with libcuprof.so preloaded,
 *   reports where the snapshots went with a one-screen summary, exits with PROG's status. */
#include <dlfcn.h>
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli_commands.h"
#include "cli/cli_options.h"
#include "cli/cli_util.h"
#include "cli/frame_filter.h"
#include "cli/run_env.h"
#include "cli/run_wait.h"
#include "cli/static_cudart.h"
#include "snapshot/file_publish.h"

static const char run_text[] =
    "usage: cuprof run [OPTIONS] [--] PROG [ARGS...]\n\n"
    "Runs PROG with libcuprof.so preloaded (by absolute path; an LD_PRELOAD you already set is\n"
    "kept after it, except sanitizer runtimes, which stay first, and any other libcuprof.so,\n"
    "which is dropped with a note: one copy per process), and as PROG's NVTX tool\n"
    "(NVTX_INJECTION64_PATH: its NVTX ranges and marks become annotations in the snapshot;\n"
    "a value another tool put there is left, with a note). The shim names each snapshot\n"
    "as it writes it; when PROG exits cuprof prints a one-screen summary of the last one on\n"
    "stderr (and names the snapshots itself under CUPROF_LOG=quiet), and exits with PROG's exit\n"
    "status (128+N when a signal N killed it; a PROG that cannot start gets one line and a\n"
    "shell's status: 127 not found, 126 not runnable). SIGTERM, SIGHUP and SIGINT sent to\n"
    "cuprof itself are passed on to PROG (`docker stop`, `kill` of cuprof's pid); a request that\n"
    "reached PROG directly too (^C, timeout, Slurm) reaches it once, as it would without cuprof.\n"
    "Options set the matching CUPROF_* variables for PROG; a value the shim would refuse, in an\n"
    "option or in a CUPROF_* variable already set, stops cuprof before PROG starts:\n\n";

static const struct cli_option run_options[] = {
    {"output", 'o', "FILE",
     "CUPROF_SNAPSHOT: snapshot path template ending in .pickle or .pkl (pickle) or .json "
     "(JSON); %p pid, %r rank, %h host, %n dump number, %t time, %% a percent sign",
     0},
    {"mode", 0, "MODE", "CUPROF_MODE: cache (default), trace or off", 'm'},
    {"alloc-conf", 0, "CONF",
     "CUPROF_ALLOC_CONF: PyTorch's PYTORCH_CUDA_ALLOC_CONF syntax, e.g. "
     "max_split_size_mb:256,roundup_power2_divisions:4",
     'a'},
    {"history", 0, "H", "CUPROF_HISTORY: all (default), state or off", 'H'},
    {"stacks", 0, "S", "CUPROF_STACKS: all, alloc (default) or none", 's'},
    {"depth", 0, "N", "CUPROF_STACK_DEPTH: frames kept per stack (default 32)", 'd'},
    {"sim", 0, NULL,
     "run on the simulated CUDA device installed with cuprof (or of its build tree); also "
     "chosen, with a note, when no libcuda.so.1 can be loaded. A PROG carrying NVIDIA's own "
     "runtime (nvcc's default -cudart static) cannot run there: cuprof says so first",
     'S'},
    {"quiet", 'q', NULL, "no summary, only where the snapshots went", 0},
    {0},
};

/* The variable each option sets for PROG, and the option's name in messages. */
static const struct {
    int key;
    const char *option;
    const char *env;
} env_of[] = {{'o', "-o", "CUPROF_SNAPSHOT"},
              {'m', "--mode", "CUPROF_MODE"},
              {'a', "--alloc-conf", "CUPROF_ALLOC_CONF"},
              {'H', "--history", "CUPROF_HISTORY"},
              {'s', "--stacks", "CUPROF_STACKS"},
              {'d', "--depth", "CUPROF_STACK_DEPTH"}};

struct run_args {
    bool sim, quiet;
};

static int
run_option(void *ctx, int key, const char *value)
{
    struct run_args *a = ctx;
    if (key == 'S')
        a->sim = true;
    else if (key == 'q')
        a->quiet = true;
    /* Checked as PROG's shim will check it, before anything runs. */
    for (size_t i = 0; i < sizeof(env_of) / sizeof(env_of[0]); i++)
        if (env_of[i].key == key && run_env_option(env_of[i].option, env_of[i].env, value) != 0)
            return CLI_BADUSE;
    return CLI_OK;
}

const struct cli_command cmd_run_command = {
    .name = "run",
    .text = run_text,
    .options = run_options,
    .epilog = "Example: cuprof run -o train-%p.pickle --alloc-conf max_split_size_mb:128 -- "
              "./train 20\n",
    .unknown = "unknown option or missing value",
    .operands = CLI_ONE_OR_MORE,
    .operands_error = "expected a program to run after the options",
    .in_order = true,
    .option = run_option,
};

#ifndef CUPROF_INSTALL_BINDIR
#define CUPROF_INSTALL_BINDIR "bin"
#endif
#ifndef CUPROF_INSTALL_LIBDIR
#define CUPROF_INSTALL_LIBDIR "lib"
#endif

static bool
is_file(const char *path)
{
    struct stat st;
    return path[0] != '\0' && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* out = a/b, or "" and false when it does not fit. */
static bool
path_join(char *out, size_t len, const char *a, const char *b)
{
    int n = snprintf(out, len, "%s/%s", a, b);
    if (n < 0 || (size_t)n >= len) {
        out[0] = '\0';
        return false;
    }
    return true;
}

/* Where this cuprof's companions are, found from its own location: no build path is baked in,
 * so an installed copy never reaches back into a build tree. Installed: PREFIX/BINDIR/cuprof,
 * PREFIX/LIBDIR/libcuprof.so and the simulated device in PREFIX/LIBDIR/cuprof/sim (a private
 * folder: it must not shadow a real libcuda.so.1). Build tree: BUILD/cli/cuprof,
 * BUILD/preload/libcuprof.so, BUILD/tests/sim/driver and BUILD/tests/sim/runtime. */
struct run_paths {
    char exe_dir[PATH_MAX];
    char libdir[PATH_MAX];      /* PREFIX/LIBDIR as this cuprof would be installed */
    char lib[PATH_MAX];         /* libcuprof.so (real path), "" when not found */
    char sim[2 * PATH_MAX + 1]; /* the simulated device's LD_LIBRARY_PATH entries, or "" */
};

/* PREFIX/LIBDIR for a cuprof in exe_dir = PREFIX/BINDIR (PREFIX = exe_dir/.. otherwise); ""
 * when it does not fit. */
static void
install_libdir(const char *exe_dir, char *out, size_t len)
{
    const char *bindir = CUPROF_INSTALL_BINDIR, *libdir = CUPROF_INSTALL_LIBDIR;
    size_t n = strlen(exe_dir), b = strlen(bindir);
    int w;
    if (libdir[0] == '/')
        w = snprintf(out, len, "%s", libdir);
    else if (bindir[0] != '/' && n > b && exe_dir[n - b - 1] == '/' &&
             strcmp(exe_dir + n - b, bindir) == 0)
        w = snprintf(out, len, "%.*s/%s", (int)(n - b - 1), exe_dir, libdir);
    else
        w = snprintf(out, len, "%s/../%s", exe_dir, libdir);
    if (w < 0 || (size_t)w >= len)
        out[0] = '\0';
}

/* The real path of dir when it holds the simulated driver (and, unless driver_only, the
 * simulated runtime too). */
static bool
sim_dir(const char *dir, bool driver_only, char *out)
{
    char f[PATH_MAX + 32];
    if (!path_join(f, sizeof f, dir, driver_only ? "libcuda.so.1" : "libcudart.so.13") ||
        !is_file(f) ||
        (!driver_only && !(path_join(f, sizeof f, dir, "libcuda.so.1") && is_file(f))))
        return false;
    return realpath(dir, out) != NULL;
}

static void
find_paths(struct run_paths *p)
{
    memset(p, 0, sizeof *p);
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        return;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash != NULL)
        *slash = '\0';
    snprintf(p->exe_dir, sizeof p->exe_dir, "%s", exe);
    install_libdir(p->exe_dir, p->libdir, sizeof p->libdir);
    char candidate[PATH_MAX + 64];
    const char *rel[] = {"../lib", "../lib64", "../preload"};
    bool found =
        path_join(candidate, sizeof candidate, p->libdir, "libcuprof.so") && is_file(candidate);
    for (size_t i = 0; !found && i < sizeof(rel) / sizeof(rel[0]); i++)
        found =
            snprintf(candidate, sizeof candidate, "%s/%s/libcuprof.so", p->exe_dir, rel[i]) > 0 &&
            is_file(candidate);
    if (found && realpath(candidate, p->lib) == NULL)
        p->lib[0] = '\0';
    char drv[PATH_MAX], rt[PATH_MAX];
    if (path_join(candidate, sizeof candidate, p->libdir, "cuprof/sim") &&
        sim_dir(candidate, false, drv)) {
        snprintf(p->sim, sizeof p->sim, "%s", drv);
        return;
    }
    char rt_candidate[PATH_MAX + 64];
    if (path_join(candidate, sizeof candidate, p->exe_dir, "../tests/sim/driver") &&
        path_join(rt_candidate, sizeof rt_candidate, p->exe_dir, "../tests/sim/runtime") &&
        sim_dir(candidate, true, drv) && realpath(rt_candidate, rt) != NULL &&
        path_join(candidate, sizeof candidate, rt, "libcudart.so.13") && is_file(candidate))
        snprintf(p->sim, sizeof p->sim, "%s:%s", drv, rt);
}

static bool
driver_available(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (h == NULL)
        return false;
    dlclose(h);
    return true;
}

/* The snapshot template as a glob pattern: %p is the child's pid, the rest match anything. */
static void
template_pattern(const char *tmpl, pid_t pid, char *out, size_t len)
{
    size_t o = 0;
    for (const char *p = tmpl; *p && o + 24 < len; p++) {
        if (*p != '%' || p[1] == '\0') {
            out[o++] = *p;
            continue;
        }
        p++;
        if (*p == 'p')
            o += (size_t)snprintf(out + o, len - o, "%ld", (long)pid);
        else if (*p == '%')
            out[o++] = '%';
        else
            out[o++] = '*';
    }
    out[o] = '\0';
}

/* The shim announces each snapshot as it writes it ("cuprof: snapshot written to ...") unless
 * CUPROF_LOG=quiet; cuprof then does not repeat the line. */
static bool
shim_announces(void)
{
    const char *log = getenv("CUPROF_LOG");
    return log == NULL || strcmp(log, "quiet") != 0;
}

/* The shim never replaces a file: when the path exists it writes NAME.1.EXT, NAME.2.EXT, ... */
static void
variant_pattern(const char *pattern, char *out, size_t len)
{
    const char *base = strrchr(pattern, '/');
    base = base == NULL ? pattern : base + 1;
    const char *dot = strrchr(base, '.');
    if (dot == NULL)
        dot = pattern + strlen(pattern);
    snprintf(out, len, "%.*s.[0-9]*%s", (int)(dot - pattern), pattern, dot);
}

static bool
seen_before(const glob_t *g, size_t i)
{
    for (size_t j = 0; j < i; j++)
        if (strcmp(g->gl_pathv[j], g->gl_pathv[i]) == 0)
            return true;
    return false;
}

static void
report_snapshots(const char *tmpl, pid_t pid, struct timespec started, bool quiet)
{
    char pattern[PATH_MAX], variants[PATH_MAX + 16];
    char fallback[PATH_MAX + 16], fallback_variants[PATH_MAX + 32];
    template_pattern(tmpl, pid, pattern, sizeof(pattern));
    variant_pattern(pattern, variants, sizeof(variants));
    /* Where the shim puts a snapshot whose own folder could not take it. */
    char fallback_folder[PATH_MAX];
    file_publish_fallback_folder(fallback_folder, sizeof fallback_folder);
    bool moved = file_publish_in_folder(fallback_folder, pattern, fallback, sizeof fallback);
    if (moved)
        variant_pattern(fallback, fallback_variants, sizeof fallback_variants);
    glob_t g;
    const char *last = NULL;
    struct timespec last_time = {0, 0};
    int found = 0;
    bool announced = shim_announces();
    bool have = false;
    const char *const patterns[] = {pattern, variants, fallback, fallback_variants};
    for (size_t i = 0; i < (moved ? 4u : 2u); i++)
        if (glob(patterns[i], have ? GLOB_APPEND : 0, NULL, &g) == 0)
            have = true;
    if (have) {
        for (size_t i = 0; i < g.gl_pathc; i++) {
            struct stat st;
            if (stat(g.gl_pathv[i], &st) != 0 || seen_before(&g, i) ||
                st.st_mtim.tv_sec < started.tv_sec ||
                (st.st_mtim.tv_sec == started.tv_sec && st.st_mtim.tv_nsec < started.tv_nsec))
                continue;
            if (!announced)
                fprintf(stderr, "cuprof: snapshot written to %s\n", g.gl_pathv[i]);
            /* The newest one is summarized. */
            if (last == NULL || st.st_mtim.tv_sec > last_time.tv_sec ||
                (st.st_mtim.tv_sec == last_time.tv_sec &&
                 st.st_mtim.tv_nsec >= last_time.tv_nsec)) {
                last = g.gl_pathv[i];
                last_time = st.st_mtim;
            }
            found++;
        }
    }
    if (found == 0) {
        fprintf(stderr, "cuprof: no snapshot was written (looked for %s)\n", pattern);
    } else if (!quiet) {
        struct snapshot *snap;
        if (frame_filter_load(last, false, &snap) == CLI_OK) {
            /* A file the shim did not write (no cuprof section) was announced by nobody. */
            if (announced && !snap->cuprof.present)
                fprintf(stderr, "cuprof: snapshot written to %s\n", last);
            if (summary_print(stderr, last, snap, true, 5) != 0)
                fprintf(stderr, "cuprof: %s: out of memory\n", last);
            snapshot_free(snap);
        }
        fprintf(stderr, "cuprof: more: cuprof summary %s; cuprof plot %s -o report.html\n", last,
                last);
    }
    if (have)
        globfree(&g);
}

/* Where PROG's CUDA calls go: the driver, or the simulated device (asked for, or when no driver
 * loads). Returns CLI_OK or CLI_BADUSE (said why). */
static int
choose_device(const struct run_paths *paths, bool sim, const char *prog)
{
    if (!sim && !driver_available()) {
        sim = true;
        fprintf(stderr, "cuprof: no CUDA driver (libcuda.so.1) could be loaded: running on the "
                        "simulated device\n");
    }
    if (!sim)
        return CLI_OK;
    if (paths->sim[0] == '\0') {
        fprintf(stderr,
                "cuprof: run: the simulated device (libcuda.so.1, libcudart.so.13) is "
                "neither installed next to this cuprof (%s/cuprof/sim) nor built in its "
                "build tree (tests/sim)\n",
                paths->libdir);
        return CLI_BADUSE;
    }
    if (run_env_prepend("LD_LIBRARY_PATH", paths->sim, ':') != 0)
        return CLI_BADUSE;
    /* NVIDIA's runtime inside PROG never reaches the simulated runtime: say why every CUDA
     * call will fail, once; the simulated driver would otherwise say it when refused. */
    char resolved[PATH_MAX];
    if (static_cudart_resolve(prog, resolved, sizeof resolved) && static_cudart_linked(resolved)) {
        fprintf(stderr, "cuprof: %s " STATIC_CUDART_NOTE "\n", prog);
        if (run_env_set("SIMCUDA_EXPORT_TABLE_NOTE", "0") != 0)
            return CLI_BADUSE;
    }
    return CLI_OK;
}

/* Runs PROG (prog[0]) and waits for it, then reports its snapshots. Returns its exit status as a
 * shell gives it (128+N when signal N killed it). */
static int
run_program(char **prog, const char *lib, bool quiet)
{
    const char *tmpl = getenv("CUPROF_SNAPSHOT");
    if (tmpl == NULL || tmpl[0] == '\0')
        tmpl = "cuprof-%p-%n.pickle";
    /* File times come from the kernel's coarse clock: a file PROG writes is never older. */
    struct timespec started;
    clock_gettime(CLOCK_REALTIME_COARSE, &started);
    pid_t pid = 0;
    int status = 0;
    if (run_wait(prog, lib, &pid, &status) != 0)
        return CLI_BADUSE;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (WIFSIGNALED(status))
        fprintf(stderr, "cuprof: %s was killed by signal %d\n", prog[0], WTERMSIG(status));
    report_snapshots(tmpl, pid, started, quiet);
    return code;
}

int
cmd_run(int argc, char **argv)
{
    struct run_args args = {0};
    struct cli_input in;
    if (!cli_parse(&cmd_run_command, argc, argv, &args, &in))
        return in.status;
    /* The CUPROF_* variables the user set are PROG's too: checked before anything runs. */
    if (run_env_check() != 0)
        return CLI_BADUSE;
    /* Said before anything else (the device note, the missing snapshot) in one clear line. */
    int startable = run_wait_check(in.paths[0]);
    if (startable != CLI_OK)
        return startable;
    static struct run_paths paths;
    find_paths(&paths);
    if (paths.lib[0] == '\0') {
        fprintf(stderr,
                "cuprof: run: libcuprof.so not found next to this cuprof (%s) or in its "
                "build tree\n",
                paths.libdir[0] ? paths.libdir : CUPROF_INSTALL_LIBDIR);
        return CLI_BADUSE;
    }
    int rc = choose_device(&paths, args.sim, in.paths[0]);
    if (rc != CLI_OK)
        return rc;
    if (run_env_preload(paths.lib) != 0 || run_env_nvtx(paths.lib) != 0)
        return CLI_BADUSE;
    return run_program(in.paths, paths.lib, args.quiet);
}
