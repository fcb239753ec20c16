/* run_env.h: the environment `cuprof run` gives PROG, settled before PROG starts: each option as
 *   its CUPROF_* variable, checked by the shim's own parser (preload/config.c) so a bad value is
 *   refused naming the option, never by PROG's shim after launching; the CUPROF_* variables the
 *   user set, checked the same way; LD_PRELOAD with exactly one libcuprof.so; LD_LIBRARY_PATH;
 *   NVTX_INJECTION64_PATH naming that libcuprof.so unless another NVTX tool holds it.
 * Locking: none (single-threaded command, before the fork).
 * Hot path: no. */
#ifndef CUPROF_CLI_RUN_ENV_H
#define CUPROF_CLI_RUN_ENV_H

#include <stddef.h>

/* Sets `var` (a CUPROF_* variable) to `value` for PROG when the shim would accept it; otherwise
 * one line naming the option, `cuprof: run: --mode: bad value "fast": expected one of cache,
 * trace, off`, and -1. */
__attribute__((warn_unused_result)) int run_env_option(const char *option, const char *var,
                                                       const char *value);

/* Every CUPROF_* variable PROG will get, as the shim checks them at start-up: 0, or -1 after the
 * shim's own one-line message (`cuprof: CUPROF_MODE: bad value ...`). */
__attribute__((warn_unused_result)) int run_env_check(void);

/* LD_PRELOAD = the user's sanitizer runtimes (which must stay first), `lib`, then the rest the
 * user had, less any libcuprof.so (an entry of that file name, or the same file as `lib`): two
 * copies in one process would both interpose. Each entry dropped is named in one line. 0 or -1
 * (said why). */
__attribute__((warn_unused_result)) int run_env_preload(const char *lib);

/* NVTX_INJECTION64_PATH = `lib`, so that PROG's NVTX ranges reach cuprof, unless another tool
 * already holds the variable: then it is left as it is, with one line saying so (an empty value
 * or another libcuprof.so is replaced). 0 or -1 (said why). */
__attribute__((warn_unused_result)) int run_env_nvtx(const char *lib);

/* name = first, then the old value after `sep` when there was one. 0 or -1 (said why). */
__attribute__((warn_unused_result)) int run_env_prepend(const char *name, const char *first,
                                                        char sep);

/* setenv, or one line and -1. */
__attribute__((warn_unused_result)) int run_env_set(const char *name, const char *value);

#endif
