/* fuzz_config: libFuzzer target for the configuration parsers: alloc_config_parse (PyTorch's
 * PYTORCH_CUDA_ALLOC_CONF syntax) and config_parse (every CUPROF_* variable from an environ).
 * Oracle: no crash or sanitizer report; a refusal has exactly one non-empty line that names the
 * problem; an accepted configuration satisfies PyTorch's documented ranges.
 * Lock: none. Hot path: n/a (fuzzing). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/alloc_config.h"
#include "allocator/cuprof_errors.h"
#include "preload/config.h"

#define MAX_VARS 16

static void
check_message(const char *err, const char *prefix)
{
    size_t n = strlen(err);
    if (n == 0 || strchr(err, '\n') != NULL || strncmp(err, prefix, strlen(prefix)) != 0) {
        fprintf(stderr, "fuzz_config: bad message \"%s\" (want one line starting \"%s\")\n", err,
                prefix);
        abort();
    }
}

static void
check_alloc_config(const struct alloc_config *c)
{
    const size_t mib = (size_t)1 << 20;
    int bad = 0;
    bad |= c->max_split_size != SIZE_MAX && c->max_split_size < 20 * mib;
    bad |= c->garbage_collection_threshold < 0.0 || c->garbage_collection_threshold >= 1.0;
    bad |= c->per_process_memory_fraction < 0.0 || c->per_process_memory_fraction > 1.0;
    bad |= c->free_sync != FREE_SYNC_DEVICE && c->free_sync != FREE_SYNC_EVENTS &&
           c->free_sync != FREE_SYNC_NONE;
    for (int i = 0; i < ALLOC_CONFIG_ROUNDUP_INTERVALS; i++) {
        uint32_t d = c->roundup_power2_divisions[i];
        bad |= d != 0 && (d & (d - 1)) != 0; /* PyTorch: divisions are powers of two */
    }
    bad |= memchr(c->raw, '\0', sizeof c->raw) == NULL;
    if (bad) {
        fprintf(stderr, "fuzz_config: accepted configuration out of range (raw \"%.*s\")\n",
                (int)sizeof c->raw, c->raw);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';

    /* 1. The whole input as PYTORCH_CUDA_ALLOC_CONF text. */
    struct alloc_config ac;
    char err[512];
    err[0] = '\0';
    int rc = alloc_config_parse(text, &ac, err, sizeof err);
    if (rc == 0)
        check_alloc_config(&ac);
    else if (rc != -CUPROF_EINVAL)
        abort();
    else
        check_message(err, "");

    /* 2. Lines as an environment (NAME=value), up to MAX_VARS of them. */
    char *envp[MAX_VARS + 1];
    int n = 0;
    for (char *line = text, *next; line && n < MAX_VARS; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        if (strchr(line, '=') != NULL)
            envp[n++] = line;
    }
    envp[n] = NULL;
    struct cuprof_config *cfg = malloc(sizeof *cfg);
    if (cfg) {
        err[0] = '\0';
        rc = config_parse(envp, cfg, err, sizeof err);
        if (rc == 0)
            check_alloc_config(&cfg->alloc_conf);
        else if (rc != -CUPROF_EINVAL)
            abort();
        else
            check_message(err, "cuprof: CUPROF_");
        free(cfg);
    }
    free(text);
    return 0;
}
