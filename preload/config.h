/* config.h: cuprof's settings from the CUPROF_* environment variables (table in config.def).
 * Locking: none: parsed once (runtime.c holds it behind pthread_once), read-only afterwards.
 * Hot path: no (start-up only). */
#ifndef CUPROF_CONFIG_H
#define CUPROF_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "allocator/alloc_config.h"

/* Longest value kept for any variable (bytes, without the NUL); longer paths are refused. */
#define CONFIG_VALUE_MAX 1024

enum config_var {
#define CUPROF_VAR(name, field, kind, def, min, max, accepted, help) CONFIG_VAR_##name,
#include "preload/config.def"
#undef CUPROF_VAR
    CONFIG_VAR_COUNT
};

/* CUPROF_DUMP_ON bits, in the order of its `accepted` list. */
enum config_dump_on {
    CONFIG_DUMP_ON_EXIT = 1u << 0,
    CONFIG_DUMP_ON_SIGNAL = 1u << 1,
    CONFIG_DUMP_ON_OOM = 1u << 2,
    CONFIG_DUMP_ON_TERM = 1u << 3,
};

/* CUPROF_LOG, in the order of its `accepted` list. */
enum config_log {
    CONFIG_LOG_QUIET = 0,
    CONFIG_LOG_INFO = 1,
    CONFIG_LOG_DEBUG = 2,
};

#define CONFIG_FIELD_ENUM(field)       int field
#define CONFIG_FIELD_UINT(field)       uint64_t field
#define CONFIG_FIELD_ALLOC_CONF(field) struct alloc_config field
#define CONFIG_FIELD_PATH(field)       char field[CONFIG_VALUE_MAX]
#define CONFIG_FIELD_DIR(field)        char field[CONFIG_VALUE_MAX]
#define CONFIG_FIELD_FLAGS(field)      unsigned field
#define CONFIG_FIELD_SIGNAL(field)     int field

struct cuprof_config {
#define CUPROF_VAR(name, field, kind, def, min, max, accepted, help) CONFIG_FIELD_##kind(field);
#include "preload/config.def"
#undef CUPROF_VAR
    /* The effective value of every variable as text (the default when unset), for the
     * snapshot's cuprof.config section. */
    char text[CONFIG_VAR_COUNT][CONFIG_VALUE_MAX];
};

/* Fills *config from `envp` (an environ-style NULL-terminated array; unset variables take their
 * default). Returns 0, or -CUPROF_EINVAL with the one-line message (no newline) in `err`:
 *   cuprof: CUPROF_MODE: bad value "x": expected one of cache, trace, off
 *   cuprof: CUPROF_FOO: unknown variable: expected one of CUPROF_MODE, ...
 * An unknown name is reported before any bad value. */
__attribute__((warn_unused_result)) int
config_parse(char *const *envp, struct cuprof_config *config, char *err, size_t err_len);

/* The variable's name ("CUPROF_MODE"), or NULL past the end. */
const char *config_var_name(size_t index);

#endif
