/* Parses SIMCUDA_* once and evaluates SIMCUDA_FAIL rules. */
#include "sim_config.h"

#include <cuda.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_MAX_RULES 16

struct sim_fail_rule {
    enum sim_fail_op op;
    unsigned long long nth, every; /* 0 = unset */
    size_t above;                  /* alloc only; 0 = unset */
    bool has_above;
    int err;
    char name[96];            /* proc only */
    unsigned long long count; /* matching calls seen; protected by fail_lock */
};

static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static struct sim_config config;
static struct sim_fail_rule rules[SIM_MAX_RULES];
static int nrules;
static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;

bool
sim_config_parse_size(const char *s, size_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return false;
    unsigned shift = 0;
    switch (*end) {
    case '\0':
        break;
    case 'K':
    case 'k':
        shift = 10;
        break;
    case 'M':
    case 'm':
        shift = 20;
        break;
    case 'G':
    case 'g':
        shift = 30;
        break;
    case 'T':
    case 't':
        shift = 40;
        break;
    default:
        return false;
    }
    if (*end && end[1] != '\0')
        return false;
    if (shift && v > (ULLONG_MAX >> shift))
        return false;
    v <<= shift;
    if (v > SIZE_MAX)
        return false;
    *out = (size_t)v;
    return true;
}

static bool
parse_ulong(const char *s, unsigned long long *out)
{
    if (!s || *s < '0' || *s > '9')
        return false;
    errno = 0;
    char *end;
    *out = strtoull(s, &end, 10);
    return errno == 0 && *end == '\0';
}

static bool
env_ulong(const char *name, unsigned long *out)
{
    const char *v = getenv(name);
    unsigned long long x;
    if (!v)
        return true;
    if (!parse_ulong(v, &x) || x > ULONG_MAX) {
        fprintf(stderr, "cuprof: sim: %s=\"%s\" is not a non-negative integer\n", name, v);
        return false;
    }
    *out = (unsigned long)x;
    return true;
}

/* One rule: "op:key=value[:key=value...]" or "proc:NAME". */
static bool
parse_rule(char *text, struct sim_fail_rule *r)
{
    *r = (struct sim_fail_rule){.err = 0};
    char *save = NULL;
    char *op = strtok_r(text, ":", &save);
    if (!op)
        return false;
    if (strcmp(op, "proc") == 0) {
        char *name = strtok_r(NULL, ":", &save);
        if (!name || strtok_r(NULL, ":", &save) || strlen(name) >= sizeof(r->name) ||
            strncmp(name, "cu", 2) != 0)
            return false;
        r->op = SIM_FAIL_PROC;
        strcpy(r->name, name);
        return true;
    }
    if (strcmp(op, "alloc") == 0) {
        r->op = SIM_FAIL_ALLOC;
        r->err = CUDA_ERROR_OUT_OF_MEMORY;
    } else if (strcmp(op, "create") == 0) {
        r->op = SIM_FAIL_CREATE;
        r->err = CUDA_ERROR_OUT_OF_MEMORY;
    } else if (strcmp(op, "free") == 0) {
        r->op = SIM_FAIL_FREE;
        r->err = CUDA_ERROR_ILLEGAL_ADDRESS;
    } else if (strcmp(op, "event_query") == 0) {
        r->op = SIM_FAIL_EVENT_QUERY;
        r->err = CUDA_ERROR_ILLEGAL_ADDRESS;
    } else if (strcmp(op, "sync") == 0) {
        r->op = SIM_FAIL_SYNC;
        r->err = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    } else {
        return false;
    }
    bool any = false;
    for (char *kv; (kv = strtok_r(NULL, ":", &save));) {
        char *eq = strchr(kv, '=');
        if (!eq)
            return false;
        *eq = '\0';
        const char *val = eq + 1;
        unsigned long long n;
        if (strcmp(kv, "nth") == 0 && parse_ulong(val, &n) && n > 0 && !r->nth) {
            r->nth = n;
        } else if (strcmp(kv, "every") == 0 && parse_ulong(val, &n) && n > 0 && !r->every) {
            r->every = n;
        } else if (strcmp(kv, "above") == 0 &&
                   (r->op == SIM_FAIL_ALLOC || r->op == SIM_FAIL_CREATE) && !r->has_above &&
                   sim_config_parse_size(val, &r->above)) {
            r->has_above = true;
        } else if (strcmp(kv, "err") == 0 && parse_ulong(val, &n) && n > 0 && n <= INT_MAX) {
            r->err = (int)n;
            continue; /* err alone does not select calls */
        } else {
            return false;
        }
        any = true;
    }
    return any;
}

static bool
parse_fail(const char *spec)
{
    char *copy = strdup(spec);
    if (!copy)
        return false;
    bool ok = true;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
        char rule_text[256];
        snprintf(rule_text, sizeof(rule_text), "%s", tok);
        if (nrules == SIM_MAX_RULES || !parse_rule(tok, &rules[nrules])) {
            fprintf(stderr, "cuprof: sim: SIMCUDA_FAIL: bad rule \"%s\"%s\n", rule_text,
                    nrules == SIM_MAX_RULES ? " (too many rules)" : "");
            ok = false;
            break;
        }
        nrules++;
    }
    free(copy);
    return ok;
}

static void
config_parse(void)
{
    config = (struct sim_config){.devices = 1, .mem = (size_t)80 << 30};
    const char *v = getenv("SIMCUDA_DEVICES");
    unsigned long long n;
    if (v && (!parse_ulong(v, &n) || n > 64)) {
        fprintf(stderr, "cuprof: sim: SIMCUDA_DEVICES=\"%s\" is not a device count (0-64)\n", v);
        config.error = CUDA_ERROR_INVALID_VALUE;
    } else if (v) {
        config.devices = (int)n;
    }
    v = getenv("SIMCUDA_MEM");
    if (v && (!sim_config_parse_size(v, &config.mem) || config.mem < ((size_t)2 << 20) ||
              config.mem > ((size_t)1 << 44))) {
        fprintf(stderr,
                "cuprof: sim: SIMCUDA_MEM=\"%s\" is not a size between 2M and 16T "
                "(digits with an optional K/M/G/T suffix)\n",
                v);
        config.error = CUDA_ERROR_INVALID_VALUE;
    }
    if (!env_ulong("SIMCUDA_STREAM_DELAY_US", &config.stream_delay_us) ||
        !env_ulong("SIMCUDA_MALLOC_US", &config.malloc_us) ||
        !env_ulong("SIMCUDA_FREE_US", &config.free_us) ||
        !env_ulong("SIMCUDA_MEMINFO_US", &config.meminfo_us))
        config.error = CUDA_ERROR_INVALID_VALUE;
    if (!env_ulong("SIMCUDA_STRICT_HANDLES", &config.strict_handles) || config.strict_handles > 1) {
        if (config.strict_handles > 1)
            fprintf(stderr, "cuprof: sim: SIMCUDA_STRICT_HANDLES=\"%s\" is not 0 or 1\n",
                    getenv("SIMCUDA_STRICT_HANDLES"));
        config.error = CUDA_ERROR_INVALID_VALUE;
    }
    if (!env_ulong("SIMCUDA_NO_VMM", &config.no_vmm) || config.no_vmm > 1) {
        if (config.no_vmm > 1)
            fprintf(stderr, "cuprof: sim: SIMCUDA_NO_VMM=\"%s\" is not 0 or 1\n",
                    getenv("SIMCUDA_NO_VMM"));
        config.error = CUDA_ERROR_INVALID_VALUE;
    }
    /* A real context holds device memory of its own (code, stacks, printf buffer: hundreds of
     * MiB); charged in whole pages like everything else. 0 by default, so capacity arithmetic in
     * tests stays exact unless a test asks for it. */
    v = getenv("SIMCUDA_CONTEXT_MEM");
    if (v && (!sim_config_parse_size(v, &config.context_mem) ||
              config.context_mem > ((size_t)1 << 44))) {
        fprintf(stderr,
                "cuprof: sim: SIMCUDA_CONTEXT_MEM=\"%s\" is not a size up to 16T "
                "(digits with an optional K/M/G/T suffix)\n",
                v);
        config.error = CUDA_ERROR_INVALID_VALUE;
    }
    v = getenv("SIMCUDA_FAIL");
    if (v && *v && !parse_fail(v))
        config.error = CUDA_ERROR_INVALID_VALUE;
}

const struct sim_config *
sim_config_get(void)
{
    pthread_once(&config_once, config_parse);
    return &config;
}

void
sim_fail_fork_lock(void)
{
    pthread_mutex_lock(&fail_lock);
}

void
sim_fail_fork_unlock(void)
{
    pthread_mutex_unlock(&fail_lock);
}

int
sim_fail_check(enum sim_fail_op op, size_t size)
{
    sim_config_get();
    if (nrules == 0) /* set once, before any call gets here: most runs inject no failure */
        return 0;
    int err = 0;
    pthread_mutex_lock(&fail_lock);
    for (int i = 0; i < nrules; i++) {
        struct sim_fail_rule *r = &rules[i];
        if (r->op != op || (r->has_above && size <= r->above))
            continue;
        unsigned long long c = ++r->count;
        bool hit =
            (!r->nth && !r->every) || (r->nth && c == r->nth) || (r->every && c % r->every == 0);
        if (hit && !err)
            err = r->err;
    }
    pthread_mutex_unlock(&fail_lock);
    return err;
}

bool
sim_fail_proc_hidden(const char *name)
{
    sim_config_get();
    for (int i = 0; i < nrules; i++)
        if (rules[i].op == SIM_FAIL_PROC && strcmp(rules[i].name, name) == 0)
            return true;
    return false;
}
