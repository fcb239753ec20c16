/* json_reader.c: jansson document -> value tree (objects keep their key order). */
#include "snapshot/json_reader.h"

#include <jansson.h>
#include <stdio.h>

#include "allocator/cuprof_errors.h"
#include "snapshot/snapshot_model.h"

struct jctx {
    struct snapshot_arena *tree;
    struct snapshot *strings;
    char *err;
    size_t err_len;
};

static int
convert(struct jctx *c, json_t *j, int depth, struct sval *out)
{
    if (depth > JSON_READER_MAX_DEPTH) {
        snprintf(c->err, c->err_len, "nesting deeper than %d levels", JSON_READER_MAX_DEPTH);
        return -CUPROF_EFORMAT;
    }
    switch (json_typeof(j)) {
    case JSON_NULL:
        *out = (struct sval){.type = SVAL_NONE};
        return 0;
    case JSON_TRUE:
    case JSON_FALSE:
        *out = (struct sval){.type = SVAL_BOOL, .u.b = json_is_true(j)};
        return 0;
    case JSON_INTEGER:
        *out = (struct sval){.type = SVAL_INT, .u.i = (int64_t)json_integer_value(j)};
        return 0;
    case JSON_REAL:
        *out = (struct sval){.type = SVAL_FLOAT, .u.f = json_real_value(j)};
        return 0;
    case JSON_STRING: {
        const char *s = snapshot_intern_n(c->strings, json_string_value(j), json_string_length(j));
        if (s == NULL)
            break;
        *out = (struct sval){.type = SVAL_STR, .u.s = s};
        return 0;
    }
    case JSON_ARRAY:
    case JSON_OBJECT: {
        bool dict = json_is_object(j);
        struct sval_seq *seq = sval_seq_new(c->tree);
        if (seq == NULL)
            break;
        *out = (struct sval){.type = dict ? SVAL_DICT : SVAL_LIST, .u.seq = seq};
        if (dict) {
            const char *key;
            json_t *value;
            json_object_foreach(j, key, value)
            {
                struct sval kv[2] = {{.type = SVAL_STR, .u.s = snapshot_intern(c->strings, key)}};
                if (kv[0].u.s == NULL)
                    return -CUPROF_EHOSTMEM;
                int rc = convert(c, value, depth + 1, &kv[1]);
                if (rc == 0)
                    rc = sval_seq_append(c->tree, seq, kv, 2, true);
                if (rc != 0)
                    return rc;
            }
        } else {
            size_t i;
            json_t *value;
            json_array_foreach(j, i, value)
            {
                struct sval item;
                int rc = convert(c, value, depth + 1, &item);
                if (rc == 0)
                    rc = sval_seq_append(c->tree, seq, &item, 1, false);
                if (rc != 0)
                    return rc;
            }
        }
        return 0;
    }
    }
    snprintf(c->err, c->err_len, "out of memory");
    return -CUPROF_EHOSTMEM;
}

int
json_read(const unsigned char *data, size_t len, struct snapshot_arena *tree,
          struct snapshot *strings, struct sval *out, char *err, size_t err_len)
{
    json_error_t je;
    json_t *root = json_loadb((const char *)data, len, JSON_DECODE_ANY, &je);
    if (root == NULL) {
        snprintf(err, err_len, "JSON error at line %d, column %d: %s", je.line, je.column, je.text);
        return -CUPROF_EFORMAT;
    }
    struct jctx c = {.tree = tree, .strings = strings, .err = err, .err_len = err_len};
    int rc = convert(&c, root, 0, out);
    json_decref(root);
    return rc;
}
