/* config.c: parses the CUPROF_* variables of config.def, strictly: a typo stops the program. */
#include "preload/config.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "allocator/cuprof_errors.h"
#include "snapshot/control_socket.h"
#include "snapshot/forwarded_signal.h"

enum config_kind {
    CONFIG_KIND_ENUM,
    CONFIG_KIND_UINT,
    CONFIG_KIND_ALLOC_CONF,
    CONFIG_KIND_PATH,
    CONFIG_KIND_DIR,
    CONFIG_KIND_FLAGS,
    CONFIG_KIND_SIGNAL,
};

struct config_entry {
    const char *name;
    enum config_kind kind;
    const char *def;
    uint64_t min, max;
    const char *accepted;
};

static const struct config_entry config_table[CONFIG_VAR_COUNT] = {
#define CUPROF_VAR(name, field, kind, def, min, max, accepted, help)                               \
    {#name, CONFIG_KIND_##kind, def, min, max, accepted},
#include "preload/config.def"
#undef CUPROF_VAR
};

/* Values are quoted in messages up to this many bytes, then cut with "...". */
#define CONFIG_QUOTE_MAX 64

const char *
config_var_name(size_t index)
{
    return index < CONFIG_VAR_COUNT ? config_table[index].name : NULL;
}

/* Appends `value` to out as a quoted, one-line, length-capped string: control bytes, quotes and
 * backslashes escaped; UTF-8 kept whole (never cut inside a sequence). */
static void
config_quote(const char *value, char *out, size_t out_len)
{
    size_t used = 0;
    size_t in = 0;
    size_t len = strlen(value);
    size_t cut = len;
    if (cut > CONFIG_QUOTE_MAX) {
        cut = CONFIG_QUOTE_MAX;
        while (cut > 0 && ((unsigned char)value[cut] & 0xC0) == 0x80)
            cut--;
    }
    if (out_len == 0)
        return;
    out[0] = '\0';
    used = (size_t)snprintf(out, out_len, "\"");
    for (in = 0; in < cut && used + 8 < out_len; in++) {
        unsigned char c = (unsigned char)value[in];
        int n;
        if (c == '"' || c == '\\')
            n = snprintf(out + used, out_len - used, "\\%c", c);
        else if (c < 0x20 || c == 0x7F)
            n = snprintf(out + used, out_len - used, "\\x%02x", c);
        else
            n = snprintf(out + used, out_len - used, "%c", c);
        used += (size_t)n;
    }
    snprintf(out + used, out_len - used, "%s\"", cut < len ? "..." : "");
}

static void
config_bad_value(const struct config_entry *entry, const char *value, const char *expected,
                 char *err, size_t err_len)
{
    char quoted[CONFIG_QUOTE_MAX * 4 + 16];
    config_quote(value, quoted, sizeof quoted);
    snprintf(err, err_len, "cuprof: %s: bad value %s: expected %s", entry->name, quoted, expected);
}

/* Index of `item` (length n) in a comma list, or -1. */
static int
config_list_index(const char *list, const char *item, size_t n)
{
    int index = 0;
    const char *p = list;
    while (*p != '\0') {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, item, n) == 0)
            return index;
        p += len;
        if (*p == ',')
            p++;
        index++;
    }
    return -1;
}

/* "a,b,c" -> "a, b, c" (the accepted list as prose). */
static void
config_list_prose(const char *list, char *out, size_t out_len)
{
    size_t used = 0;
    for (const char *p = list; *p != '\0' && used + 3 < out_len; p++) {
        out[used++] = *p;
        if (*p == ',')
            out[used++] = ' ';
    }
    out[used] = '\0';
}

/* Strict unsigned decimal: digits only (no sign, space, fraction or suffix), no overflow. */
static bool
config_parse_u64(const char *text, uint64_t *out)
{
    uint64_t v = 0;
    if (*text == '\0')
        return false;
    for (const char *p = text; *p != '\0'; p++) {
        if (*p < '0' || *p > '9')
            return false;
        unsigned digit = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - digit) / 10)
            return false;
        v = v * 10 + digit;
    }
    *out = v;
    return true;
}

/* Signals a dump may be tied to: the two left to applications and the real-time ones. Every other
 * signal has a default action people rely on (SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGALRM stop the
 * program; SIGCHLD, SIGWINCH, SIGCONT tell it something) or is a fault the program must see. */
static bool
config_signal_allowed(int sig)
{
    return sig == SIGUSR1 || sig == SIGUSR2 || (sig >= SIGRTMIN && sig <= SIGRTMAX);
}

/* "RTMIN", "RTMIN+N", "RTMAX", "RTMAX-N" (after an optional SIG): a real-time signal, or 0. */
static int
config_realtime_signal(const char *name)
{
    int base, sign;
    if (strncmp(name, "RTMIN", 5) == 0) {
        base = SIGRTMIN;
        sign = 1;
    } else if (strncmp(name, "RTMAX", 5) == 0) {
        base = SIGRTMAX;
        sign = -1;
    } else {
        return 0;
    }
    uint64_t offset = 0;
    if (name[5] != '\0' &&
        (name[5] != (sign > 0 ? '+' : '-') || !config_parse_u64(name + 6, &offset) ||
         offset > (uint64_t)(SIGRTMAX - SIGRTMIN)))
        return 0;
    return base + sign * (int)offset;
}

static bool
config_parse_signal(const char *text, int *out)
{
    uint64_t number = 0;
    if (config_parse_u64(text, &number)) {
        if (number > (uint64_t)SIGRTMAX || !config_signal_allowed((int)number))
            return false;
        *out = (int)number;
        return true;
    }
    const char *name = strncmp(text, "SIG", 3) == 0 ? text + 3 : text;
    int sig = strcmp(name, "USR1") == 0   ? SIGUSR1
              : strcmp(name, "USR2") == 0 ? SIGUSR2
                                          : config_realtime_signal(name);
    if (sig == 0 || !config_signal_allowed(sig))
        return false;
    *out = sig;
    return true;
}

/* Comma list of accepted values (each at most once is not required), or "none". */
static bool
config_parse_flags(const char *text, const char *accepted, unsigned *out)
{
    unsigned flags = 0;
    if (strcmp(text, "none") == 0) {
        *out = 0;
        return true;
    }
    const char *p = text;
    for (;;) {
        size_t len = strcspn(p, ",");
        int index = config_list_index(accepted, p, len);
        if (len == 0 || index < 0)
            return false;
        flags |= 1u << index;
        p += len;
        if (*p == '\0')
            break;
        p++; /* a trailing comma leaves an empty item: refused above */
    }
    *out = flags;
    return true;
}

static bool
config_ends_with(const char *text, const char *suffix)
{
    size_t n = strlen(text), m = strlen(suffix);
    return n >= m && strcmp(text + n - m, suffix) == 0;
}

static bool
config_parse_path(const char *text)
{
    if (*text == '\0' || strlen(text) >= CONFIG_VALUE_MAX)
        return false;
    for (const char *p = text; *p != '\0'; p++) {
        if (*p != '%')
            continue;
        p++;
        if (*p == '\0' || strchr("prhnt%", *p) == NULL)
            return false;
    }
    return config_ends_with(text, ".pickle") || config_ends_with(text, ".pkl") ||
           config_ends_with(text, ".json");
}

/* Empty (the default directories), or an absolute directory short enough for a socket address
 * with `/<pid>.sock` after it. */
static bool
config_parse_dir(const char *text)
{
    return *text == '\0' || (text[0] == '/' && strlen(text) <= CONTROL_SOCKET_DIR_MAX);
}

/* A value checked against its kind, in the form its field takes. */
struct config_value {
    int as_int;      /* ENUM: the index in `accepted`; SIGNAL: the signal number */
    unsigned flags;  /* FLAGS: bit i = accepted value i */
    uint64_t number; /* UINT */
};

/* Checks `value` against the entry's kind; true when it is acceptable (ALLOC_CONF is checked
 * when it is stored, by alloc_config_parse). */
static bool
config_check_value(const struct config_entry *e, const char *value, struct config_value *v)
{
    switch (e->kind) {
    case CONFIG_KIND_ENUM:
        /* Also refuses "" and "a,b": list items are non-empty, comma-free. */
        v->as_int = config_list_index(e->accepted, value, strlen(value));
        return v->as_int >= 0;
    case CONFIG_KIND_UINT:
        return config_parse_u64(value, &v->number) && v->number >= e->min && v->number <= e->max;
    case CONFIG_KIND_FLAGS:
        return config_parse_flags(value, e->accepted, &v->flags);
    case CONFIG_KIND_SIGNAL:
        return config_parse_signal(value, &v->as_int);
    case CONFIG_KIND_PATH:
        return config_parse_path(value);
    case CONFIG_KIND_DIR:
        return config_parse_dir(value);
    case CONFIG_KIND_ALLOC_CONF:
        break;
    }
    return true;
}

/* What a value of the entry's kind must be, for the bad-value message: `buf`, or e->accepted. */
static const char *
config_expected(const struct config_entry *e, const char *value, char *buf, size_t len)
{
    char prose[128];
    switch (e->kind) {
    case CONFIG_KIND_ENUM:
        config_list_prose(e->accepted, prose, sizeof prose);
        snprintf(buf, len, "one of %s", prose);
        return buf;
    case CONFIG_KIND_UINT:
        snprintf(buf, len, "an integer from %llu to %llu", (unsigned long long)e->min,
                 (unsigned long long)e->max);
        return buf;
    case CONFIG_KIND_FLAGS:
        config_list_prose(e->accepted, prose, sizeof prose);
        snprintf(buf, len, "a comma list of %s, or none", prose);
        return buf;
    case CONFIG_KIND_PATH:
        if (strlen(value) >= CONFIG_VALUE_MAX)
            snprintf(buf, len, "at most %d bytes", CONFIG_VALUE_MAX - 1);
        else
            snprintf(buf, len, "%s", e->accepted);
        return buf;
    case CONFIG_KIND_DIR:
    case CONFIG_KIND_SIGNAL:
    case CONFIG_KIND_ALLOC_CONF:
        break;
    }
    return e->accepted;
}

/* CUPROF_ALLOC_CONF: PyTorch's syntax, parsed by the allocator's own parser into `out`. */
static bool
config_store_alloc_conf(const struct config_entry *e, const char *value, struct alloc_config *out,
                        char *err, size_t err_len)
{
    /* Room for any message about a value that fits `raw`: the value quoted, then every key. */
    char why[sizeof(out->raw) + 512];
    if (strlen(value) >= sizeof(out->raw)) {
        char expected[64];
        snprintf(expected, sizeof expected, "at most %zu bytes", sizeof(out->raw) - 1);
        config_bad_value(e, value, expected, err, err_len);
        return false;
    }
    if (alloc_config_parse(value, out, why, sizeof why) != 0) {
        snprintf(err, err_len, "cuprof: %s: %s", e->name, why);
        return false;
    }
    return true;
}

/* Writes a checked value into variable `index`'s field (config.def names the field). */
static bool
config_store_field(struct cuprof_config *config, size_t index, const char *value,
                   const struct config_value *v, char *err, size_t err_len)
{
    switch (index) {
#define CUPROF_VAR(name, field, kind, def, min, max, accepted, help)                               \
    case CONFIG_VAR_##name:                                                                        \
        CONFIG_STORE_##kind(config->field);                                                        \
        break;
#define CONFIG_STORE_ENUM(f)   (f) = v->as_int
#define CONFIG_STORE_UINT(f)   (f) = v->number
#define CONFIG_STORE_FLAGS(f)  (f) = v->flags
#define CONFIG_STORE_SIGNAL(f) (f) = v->as_int
#define CONFIG_STORE_PATH(f)   snprintf((f), sizeof(f), "%s", value)
#define CONFIG_STORE_DIR(f)    snprintf((f), sizeof(f), "%s", value)
#define CONFIG_STORE_ALLOC_CONF(f)                                                                 \
    do {                                                                                           \
        if (!config_store_alloc_conf(&config_table[index], value, &(f), err, err_len))             \
            return false;                                                                          \
    } while (0)
#include "preload/config.def"
#undef CUPROF_VAR
#undef CONFIG_STORE_ENUM
#undef CONFIG_STORE_UINT
#undef CONFIG_STORE_FLAGS
#undef CONFIG_STORE_SIGNAL
#undef CONFIG_STORE_PATH
#undef CONFIG_STORE_DIR
#undef CONFIG_STORE_ALLOC_CONF
    default:
        break;
    }
    return true;
}

/* Stores one variable's value into its field; returns false after writing the message. */
static bool
config_store(struct cuprof_config *config, size_t index, const char *value, char *err,
             size_t err_len)
{
    const struct config_entry *e = &config_table[index];
    struct config_value v = {0};
    if (!config_check_value(e, value, &v)) {
        char expected[256];
        config_bad_value(e, value, config_expected(e, value, expected, sizeof expected), err,
                         err_len);
        return false;
    }
    if (!config_store_field(config, index, value, &v, err, err_len))
        return false;
    snprintf(config->text[index], sizeof config->text[index], "%s", value);
    return true;
}

/* The value of `name` in envp, or NULL. */
static const char *
config_lookup(char *const *envp, const char *name)
{
    size_t n = strlen(name);
    for (char *const *p = envp; p != NULL && *p != NULL; p++)
        if (strncmp(*p, name, n) == 0 && (*p)[n] == '=')
            return *p + n + 1;
    return NULL;
}

static bool
config_check_names(char *const *envp, char *err, size_t err_len)
{
    for (char *const *p = envp; p != NULL && *p != NULL; p++) {
        const char *entry = *p;
        if (strncmp(entry, "CUPROF_", 7) != 0)
            continue;
        size_t n = strcspn(entry, "=");
        /* Not a setting: `cuprof run` names itself to its program (forwarded_signal.h). */
        bool known =
            strlen(FORWARDED_SIGNAL_ENV) == n && strncmp(entry, FORWARDED_SIGNAL_ENV, n) == 0;
        for (size_t i = 0; i < CONFIG_VAR_COUNT && !known; i++)
            known =
                strlen(config_table[i].name) == n && strncmp(config_table[i].name, entry, n) == 0;
        if (known)
            continue;
        char name[CONFIG_QUOTE_MAX + 8];
        char names[512];
        size_t used = 0;
        snprintf(name, sizeof name, "%.*s%s", (int)(n > CONFIG_QUOTE_MAX ? CONFIG_QUOTE_MAX : n),
                 entry, n > CONFIG_QUOTE_MAX ? "..." : "");
        for (char *c = name; *c != '\0'; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7F)
                *c = '?';
        names[0] = '\0';
        for (size_t i = 0; i < CONFIG_VAR_COUNT; i++)
            used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "",
                                     config_table[i].name);
        snprintf(err, err_len, "cuprof: %s: unknown variable: expected one of %s", name, names);
        return false;
    }
    return true;
}

int
config_parse(char *const *envp, struct cuprof_config *config, char *err, size_t err_len)
{
    memset(config, 0, sizeof *config);
    alloc_config_defaults(&config->alloc_conf);
    if (!config_check_names(envp, err, err_len))
        return -CUPROF_EINVAL;
    for (size_t i = 0; i < CONFIG_VAR_COUNT; i++) {
        const char *value = config_lookup(envp, config_table[i].name);
        if (value == NULL)
            value = config_table[i].def;
        if (!config_store(config, i, value, err, err_len))
            return -CUPROF_EINVAL;
    }
    return 0;
}
