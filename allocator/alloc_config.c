/* alloc_config.c: parses PyTorch's PYTORCH_CUDA_ALLOC_CONF syntax into struct alloc_config.
 * The tokenizer mirrors PyTorch's: it splits on , : [ ] and drops spaces; the keys and what each
 * accepts come from alloc_config.def. */
#include "allocator/alloc_config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/cuprof_errors.h"

#define MIB               ((size_t)1 << 20)
#define CONFIG_MAX_TEXT   4096
#define CONFIG_MAX_TOKENS 512

/* An item quoted whole, plus the message around it and the list of keys. */
_Static_assert(ALLOC_CONFIG_ERR_LEN >= CONFIG_MAX_TEXT + 1024, "alloc_config: err too short");

struct config_parse {
    char text[CONFIG_MAX_TEXT]; /* the input without spaces, tokens NUL-separated */
    const char *tok[CONFIG_MAX_TOKENS];
    size_t count;
    char *err;
    size_t err_len;
};

void
alloc_config_defaults(struct alloc_config *config)
{
    memset(config, 0, sizeof(*config));
    config->caching = true;
    config->max_split_size = SIZE_MAX;
    config->max_non_split_rounding_size = 20 * MIB;
    config->free_sync = FREE_SYNC_DEVICE;
}

static bool
is_punct(const char *tok)
{
    return tok[1] == '\0' && strchr(",:[]", tok[0]) != NULL;
}

/* Splits into tokens the way PyTorch's ConfigTokenizer does. */
static int
tokenize(struct config_parse *p, const char *text)
{
    size_t out = 0;
    bool in_word = false;
    p->count = 0;
    for (const char *c = text; *c != '\0'; c++) {
        if (*c == ' ' || *c == '\t' || *c == '\n')
            continue;
        bool punct = strchr(",:[]", *c) != NULL;
        size_t need = punct ? 3 : 2;
        if (out + need >= CONFIG_MAX_TEXT || p->count + 2 >= CONFIG_MAX_TOKENS) {
            snprintf(p->err, p->err_len, "settings string too long (more than %d characters)",
                     CONFIG_MAX_TEXT / 2);
            return -CUPROF_EINVAL;
        }
        if (punct) {
            if (in_word)
                p->text[out++] = '\0';
            p->tok[p->count++] = &p->text[out];
            p->text[out++] = *c;
            p->text[out++] = '\0';
            in_word = false;
        } else {
            if (!in_word)
                p->tok[p->count++] = &p->text[out];
            p->text[out++] = *c;
            in_word = true;
        }
    }
    if (in_word)
        p->text[out++] = '\0';
    return 0;
}

/* `key:` followed by tokens [from, to) joined, as the user wrote them minus spaces. */
static void
item_text(const struct config_parse *p, const char *key, size_t from, size_t to, char *item,
          size_t len)
{
    int n = snprintf(item, len, "%s", key);
    if (from > 0 && from - 1 < p->count && strcmp(p->tok[from - 1], ":") == 0)
        n += snprintf(item + n, len - (size_t)n, ":");
    for (size_t i = from; i < to && i < p->count && (size_t)n < len; i++)
        n += snprintf(item + n, len - (size_t)n, "%s", p->tok[i]);
}

static void
bad_value(struct config_parse *p, const char *key, size_t from, size_t to, const char *what)
{
    char item[CONFIG_MAX_TEXT];
    item_text(p, key, from, to, item, sizeof(item));
    snprintf(p->err, p->err_len, "bad value \"%s\": expected %s", item, what);
}

static bool
parse_uint(const char *tok, size_t *out)
{
    size_t len = strlen(tok);
    if (len == 0 || len > 15)
        return false;
    size_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (tok[i] < '0' || tok[i] > '9')
            return false;
        v = v * 10 + (size_t)(tok[i] - '0');
    }
    *out = v;
    return true;
}

static bool
parse_double(const char *tok, double *out)
{
    char *end = NULL;
    if (tok[0] == '\0')
        return false;
    double v = strtod(tok, &end);
    if (*end != '\0' || !isfinite(v))
        return false;
    *out = v;
    return true;
}

static bool
is_pow2(size_t v)
{
    return v != 0 && (v & (v - 1)) == 0;
}

static unsigned
log2_floor(size_t v)
{
    unsigned r = 0;
    while (v >>= 1)
        r++;
    return r;
}

/* The one value token of a scalar key, or NULL (after writing the message) if there is none. */
static const char *
scalar_value(struct config_parse *p, const char *key, size_t *i, const char *what)
{
    if (*i >= p->count || is_punct(p->tok[*i])) {
        bad_value(p, key, *i, *i, what);
        return NULL;
    }
    return p->tok[(*i)++];
}

static int
parse_mib(struct config_parse *p, const char *key, size_t *i, size_t min_mib, const char *what,
          size_t *out)
{
    size_t start = *i;
    const char *v = scalar_value(p, key, i, what);
    size_t mib = 0;
    if (v == NULL)
        return -CUPROF_EINVAL;
    if (!parse_uint(v, &mib) || mib < min_mib || mib > SIZE_MAX / MIB) {
        bad_value(p, key, start, *i, what);
        return -CUPROF_EINVAL;
    }
    *out = mib * MIB;
    return 0;
}

static int
parse_bool(struct config_parse *p, const char *key, size_t *i, const char *what, bool *out)
{
    size_t start = *i;
    const char *v = scalar_value(p, key, i, what);
    if (v == NULL)
        return -CUPROF_EINVAL;
    /* PyTorch compares against exactly "True" and "False". */
    if (strcmp(v, "True") == 0) {
        *out = true;
    } else if (strcmp(v, "False") == 0) {
        *out = false;
    } else {
        bad_value(p, key, start, *i, what);
        return -CUPROF_EINVAL;
    }
    return 0;
}

static int
parse_max_split_size(struct config_parse *p, const char *key, size_t *i, const char *what,
                     struct alloc_config *c)
{
    return parse_mib(p, key, i, 20, what, &c->max_split_size);
}

static int
parse_max_non_split(struct config_parse *p, const char *key, size_t *i, const char *what,
                    struct alloc_config *c)
{
    return parse_mib(p, key, i, 20, what, &c->max_non_split_rounding_size);
}

static int
parse_release_threshold(struct config_parse *p, const char *key, size_t *i, const char *what,
                        struct alloc_config *c)
{
    int rc = parse_mib(p, key, i, 0, what, &c->release_threshold);
    if (rc == 0)
        c->release_threshold_set = true;
    return rc;
}

static int
parse_expandable(struct config_parse *p, const char *key, size_t *i, const char *what,
                 struct alloc_config *c)
{
    return parse_bool(p, key, i, what, &c->expandable_segments);
}

static int
parse_release_lock(struct config_parse *p, const char *key, size_t *i, const char *what,
                   struct alloc_config *c)
{
    return parse_bool(p, key, i, what, &c->release_lock_on_cudamalloc);
}

static int
parse_gc_threshold(struct config_parse *p, const char *key, size_t *i, const char *what,
                   struct alloc_config *c)
{
    size_t start = *i;
    const char *v = scalar_value(p, key, i, what);
    double x = 0;
    if (v == NULL)
        return -CUPROF_EINVAL;
    if (!parse_double(v, &x) || !(x > 0.0 && x < 1.0)) {
        bad_value(p, key, start, *i, what);
        return -CUPROF_EINVAL;
    }
    c->garbage_collection_threshold = x;
    return 0;
}

static int
parse_fraction(struct config_parse *p, const char *key, size_t *i, const char *what,
               struct alloc_config *c)
{
    size_t start = *i;
    const char *v = scalar_value(p, key, i, what);
    double x = 0;
    if (v == NULL)
        return -CUPROF_EINVAL;
    if (!parse_double(v, &x) || !(x > 0.0 && x <= 1.0)) {
        bad_value(p, key, start, *i, what);
        return -CUPROF_EINVAL;
    }
    c->per_process_memory_fraction = x;
    return 0;
}

static int
parse_free_sync(struct config_parse *p, const char *key, size_t *i, const char *what,
                struct alloc_config *c)
{
    size_t start = *i;
    const char *v = scalar_value(p, key, i, what);
    if (v == NULL)
        return -CUPROF_EINVAL;
    if (strcmp(v, "device") == 0) {
        c->free_sync = FREE_SYNC_DEVICE;
    } else if (strcmp(v, "events") == 0) {
        c->free_sync = FREE_SYNC_EVENTS;
    } else if (strcmp(v, "none") == 0) {
        c->free_sync = FREE_SYNC_NONE;
    } else {
        bad_value(p, key, start, *i, what);
        return -CUPROF_EINVAL;
    }
    return 0;
}

static int
parse_backend(struct config_parse *p, const char *key, size_t *i, const char *what,
              struct alloc_config *c)
{
    (void)c;
    size_t start = *i;
    const char *v = scalar_value(p, key, i, what);
    if (v == NULL)
        return -CUPROF_EINVAL;
    if (strcmp(v, "native") == 0)
        return 0;
    if (strcmp(v, "cudaMallocAsync") == 0) {
        bad_value(p, key, start, *i,
                  "native: cuprof serves every allocation with its own copy of PyTorch's native "
                  "caching allocator and cannot profile the cudaMallocAsync backend");
    } else {
        bad_value(p, key, start, *i, what);
    }
    return -CUPROF_EINVAL;
}

/* PyTorch: scalar N sets all 16 intervals; [mib:d,...,>:d] sets them per power-of-two interval. */
static int
parse_roundup(struct config_parse *p, const char *key, size_t *i, const char *what,
              struct alloc_config *c)
{
    static const char list_what[] =
        "a list of <MiB, a power of two>:<divisions, 0 or a power of two> pairs like "
        "[256:1,512:2,>:8]";
    uint32_t *div = c->roundup_power2_divisions;
    size_t start = *i;
    if (*i < p->count && strcmp(p->tok[*i], "[") != 0) {
        const char *v = scalar_value(p, key, i, what);
        size_t d = 0;
        if (v == NULL)
            return -CUPROF_EINVAL;
        if (!parse_uint(v, &d) || !is_pow2(d) || d > UINT32_MAX) {
            bad_value(p, key, start, *i, what);
            return -CUPROF_EINVAL;
        }
        for (size_t k = 0; k < ALLOC_CONFIG_ROUNDUP_INTERVALS; k++)
            div[k] = (uint32_t)d;
        return 0;
    }
    if (*i >= p->count) {
        bad_value(p, key, start, *i, what);
        return -CUPROF_EINVAL;
    }
    size_t end = *i + 1;
    while (end < p->count && strcmp(p->tok[end], "]") != 0)
        end++;
    if (end >= p->count) {
        bad_value(p, key, start, end, "a closing ]");
        return -CUPROF_EINVAL;
    }
    size_t last_index = 0;
    bool first = true;
    size_t k = *i + 1;
    while (k < end) {
        size_t mib = 0, d = 0;
        const char *lhs = p->tok[k];
        bool ok = k + 2 < end && strcmp(p->tok[k + 1], ":") == 0 && parse_uint(p->tok[k + 2], &d) &&
                  (d == 0 || is_pow2(d)) && d <= UINT32_MAX;
        if (ok && strcmp(lhs, ">") == 0) {
            /* PyTorch (newest parser): fills every interval after the last explicit one. */
            for (size_t x = last_index + 1; x < ALLOC_CONFIG_ROUNDUP_INTERVALS; x++)
                div[x] = (uint32_t)d;
        } else if (ok && parse_uint(lhs, &mib) && is_pow2(mib)) {
            size_t idx = log2_floor(mib);
            if (idx >= ALLOC_CONFIG_ROUNDUP_INTERVALS)
                idx = ALLOC_CONFIG_ROUNDUP_INTERVALS - 1;
            if (first) {
                for (size_t x = 0; x < idx; x++)
                    div[x] = (uint32_t)d;
                first = false;
            }
            div[idx] = (uint32_t)d;
            last_index = idx;
        } else {
            bad_value(p, key, start, end + 1, list_what);
            return -CUPROF_EINVAL;
        }
        k += 3;
        if (k < end && strcmp(p->tok[k], ",") != 0) {
            bad_value(p, key, start, end + 1, list_what);
            return -CUPROF_EINVAL;
        }
        if (k < end)
            k++;
    }
    *i = end + 1;
    return 0;
}

typedef int (*config_key_parser)(struct config_parse *, const char *, size_t *, const char *,
                                 struct alloc_config *);

struct config_key {
    const char *name;
    config_key_parser parse;
    const char *what;
};

static const struct config_key config_keys[] = {
#define ALLOC_CONF_KEY(name, parser, expected) {#name, parser, expected},
#include "allocator/alloc_config.def"
#undef ALLOC_CONF_KEY
};

static void
unknown_key(struct config_parse *p, const char *key)
{
    int n = snprintf(p->err, p->err_len, "unknown key \"%s\": expected one of ", key);
    for (size_t k = 0; k < sizeof(config_keys) / sizeof(config_keys[0]); k++) {
        if (n < 0 || (size_t)n >= p->err_len)
            return;
        n += snprintf(p->err + n, p->err_len - (size_t)n, "%s%s", k ? ", " : "",
                      config_keys[k].name);
    }
}

int
alloc_config_parse(const char *text, struct alloc_config *config, char *err, size_t err_len)
{
    struct config_parse parse;
    struct config_parse *p = &parse;
    char scratch[8];
    int rc = 0;
    if (err == NULL || err_len == 0) {
        err = scratch;
        err_len = sizeof(scratch);
    }
    err[0] = '\0';
    alloc_config_defaults(config);
    memset(p, 0, sizeof(*p));
    p->err = err;
    p->err_len = err_len;
    if (text == NULL)
        text = "";
    snprintf(config->raw, sizeof(config->raw), "%s", text);
    rc = tokenize(p, text);
    for (size_t i = 0; rc == 0 && i < p->count;) {
        const char *key = p->tok[i];
        const struct config_key *found = NULL;
        if (strcmp(key, ",") == 0) { /* PyTorch tolerates empty items ("a:1,,b:2", "a:1,") */
            i++;
            continue;
        }
        for (size_t k = 0; k < sizeof(config_keys) / sizeof(config_keys[0]); k++) {
            if (strcmp(config_keys[k].name, key) == 0)
                found = &config_keys[k];
        }
        if (found == NULL) {
            unknown_key(p, key);
            rc = -CUPROF_EINVAL;
            break;
        }
        size_t key_at = i++;
        if (i >= p->count || strcmp(p->tok[i], ":") != 0) {
            bad_value(p, key, i, i, found->what);
            rc = -CUPROF_EINVAL;
            break;
        }
        i++;
        rc = found->parse(p, key, &i, found->what, config);
        if (rc == 0 && i < p->count && strcmp(p->tok[i], ",") != 0) {
            char item[CONFIG_MAX_TEXT];
            item_text(p, key, key_at + 2, i, item, sizeof(item));
            snprintf(err, err_len, "expected \",\" after \"%s\"", item);
            rc = -CUPROF_EINVAL;
        }
    }
    return rc;
}
