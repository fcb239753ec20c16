/* sim_config: the SIMCUDA_* environment (devices, memory, delays, SIMCUDA_FAIL rules), parsed
 * once, and the fault-injection decisions made from it.
 * Lock: parsed under pthread_once; rule counters under a private mutex. Hot path: no. */
#ifndef SIM_CONFIG_H
#define SIM_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

enum sim_fail_op {
    SIM_FAIL_ALLOC,
    SIM_FAIL_CREATE, /* cuMemCreate only (an expandable segment's page) */
    SIM_FAIL_FREE,
    SIM_FAIL_EVENT_QUERY,
    SIM_FAIL_SYNC, /* cuCtxSynchronize: a capture that forbids it, by default */
    SIM_FAIL_PROC,
};

struct sim_config {
    int devices;
    size_t mem;
    unsigned long stream_delay_us;
    unsigned long malloc_us;
    unsigned long free_us;
    unsigned long meminfo_us;     /* SIMCUDA_MEMINFO_US: sleep per cuMemGetInfo */
    unsigned long strict_handles; /* 1: say so on stderr when a dead stream handle comes in */
    unsigned long no_vmm; /* 1: devices without virtual memory management (SIMCUDA_NO_VMM) */
    size_t context_mem;   /* device memory each live context holds (whole 2 MiB pages) */
    int error;            /* CUDA error cuInit returns when the environment is invalid, else 0 */
};

/* Parses the environment on first use; never fails (errors are kept in ->error). */
const struct sim_config *sim_config_get(void);
/* Parses a size with an optional K/M/G/T suffix (binary units); false if malformed. */
bool sim_config_parse_size(const char *s, size_t *out) __attribute__((warn_unused_result));
/* 0, or the CUDA error an injected fault makes this call return. `size` only for allocations. */
int sim_fail_check(enum sim_fail_op op, size_t size) __attribute__((warn_unused_result));
/* True when SIMCUDA_FAIL hides `name` from cuGetProcAddress. */
bool sim_fail_proc_hidden(const char *name);
/* The rule counters' lock around fork() (see sim_driver.h). */
void sim_fail_fork_lock(void);
void sim_fail_fork_unlock(void);

#endif
