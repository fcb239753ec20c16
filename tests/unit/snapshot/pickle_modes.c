/* pickle_modes.c: test tool: reads one pickle snapshot the three ways the reader can (from the
 * file a window at a time with the history streamed, from memory streamed, and as a whole value
 * tree imported afterwards) and fails unless all three give the same model (as JSON), the same
 * warnings or the same error. Prints `taken=N one_by_one=M again=0|1`: the items the streaming
 * pass handed to the importer, how many of them were records handed over one at a time as soon
 * as read (take_record), and whether the importer asked for a second, tree-only pass.
 * Usage: pickle_modes FILE */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot/pickle_reader.h"
#include "snapshot/snapshot_arena.h"
#include "snapshot/snapshot_import.h"
#include "snapshot/snapshot_read.h"
#include "snapshot/snapshot_write.h"

struct outcome {
    int rc;
    char err[512];
    unsigned char *json;
    size_t json_len;
    char *warnings; /* one per line */
};

static void
describe(struct snapshot *s, int rc, const char *err, struct outcome *o)
{
    o->rc = rc;
    snprintf(o->err, sizeof(o->err), "%s", rc != 0 ? err : "");
    o->json = NULL;
    o->json_len = 0;
    o->warnings = NULL;
    if (rc != 0)
        return;
    if (snapshot_write_mem(s, SNAPSHOT_FORMAT_JSON, &o->json, &o->json_len) != 0) {
        fprintf(stderr, "pickle_modes: cannot write the model\n");
        exit(2);
    }
    size_t len = 1;
    for (size_t i = 0; i < s->warning_count; i++)
        len += strlen(s->warnings[i]) + 1;
    o->warnings = calloc(1, len);
    for (size_t i = 0; i < s->warning_count; i++) {
        strcat(o->warnings, s->warnings[i]);
        strcat(o->warnings, "\n");
    }
    snapshot_free(s);
}

/* The tree-only pass, as the reader did it before streaming. */
static void
tree_only(const unsigned char *data, size_t len, const char *name, struct outcome *o)
{
    struct snapshot *s = snapshot_create(0);
    struct snapshot_arena *tree = snapshot_arena_create();
    char msg[512] = "", err[600] = "";
    struct sval root;
    int rc = pickle_read(data, len, tree, s, &root, msg, sizeof(msg));
    if (rc == 0)
        rc = snapshot_import(s, &root, name, msg, sizeof(msg));
    snapshot_arena_destroy(tree);
    for (char *c = msg; *c != '\0'; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    snprintf(err, sizeof(err), "%s: %s", name, msg);
    if (rc != 0) {
        snapshot_free(s);
        s = NULL;
    }
    describe(s, rc, err, o);
}

struct probe {
    struct snapshot_importer *im;
    size_t taken;
    size_t one_by_one; /* of them, records taken as soon as read (take_record) */
};

static int
count_take(void *ctx, enum pickle_list which, uint32_t d, const struct sval_seq *list,
           const struct sval *items, size_t n)
{
    struct probe *p = ctx;
    int rc = snapshot_import_take(p->im, which, d, list, items, n);
    if (rc == 0)
        p->taken += n;
    return rc;
}

static int
count_take_record(void *ctx, uint32_t d, const struct sval_seq *list, const struct sval *items,
                  size_t n)
{
    struct probe *p = ctx;
    int rc = snapshot_import_take_record(p->im, d, list, items, n);
    if (rc == 0) {
        p->taken++;
        p->one_by_one++;
    }
    return rc;
}

/* The streaming pass alone: how many items it took and whether the importer wants it again. */
static void
probe(const unsigned char *data, size_t len, const char *name)
{
    struct snapshot *s = snapshot_create(0);
    struct snapshot_arena *tree = snapshot_arena_create();
    char msg[512] = "";
    struct probe p = {.im = snapshot_import_begin(s, name, msg, sizeof(msg))};
    struct pickle_stream st = {.take = count_take, .take_record = count_take_record, .ctx = &p};
    struct pickle_input in = {.data = data, .len = len, .fd = -1};
    struct sval root;
    int rc = pickle_read_input(&in, tree, s, &st, &root, msg, sizeof(msg));
    if (rc == 0)
        rc = snapshot_import_end(p.im, &root, st.shared);
    printf("taken=%zu one_by_one=%zu again=%d\n", p.taken, p.one_by_one,
           rc == SNAPSHOT_IMPORT_AGAIN);
    snapshot_import_free(p.im);
    snapshot_arena_destroy(tree);
    snapshot_free(s);
}

static int
same(const char *what, const struct outcome *a, const struct outcome *b)
{
    const char *differs = a->rc != b->rc                ? "status"
                          : strcmp(a->err, b->err) != 0 ? "error"
                          : a->json_len != b->json_len ||
                                  (a->json_len > 0 && memcmp(a->json, b->json, a->json_len) != 0)
                              ? "model"
                          : (a->warnings == NULL) != (b->warnings == NULL) ||
                                  (a->warnings != NULL && strcmp(a->warnings, b->warnings) != 0)
                              ? "warnings"
                              : NULL;
    if (differs == NULL)
        return 1;
    fprintf(stderr, "pickle_modes: %s: the %s differs\n  rc %d / %d\n  err '%s' / '%s'\n", what,
            differs, a->rc, b->rc, a->err, b->err);
    if (a->warnings != NULL && b->warnings != NULL)
        fprintf(stderr, "  warnings:\n%s  /\n%s", a->warnings, b->warnings);
    return 0;
}

int
main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: pickle_modes FILE\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (f == NULL || fseek(f, 0, SEEK_END) != 0) {
        perror(argv[1]);
        return 2;
    }
    long len = ftell(f);
    unsigned char *data = malloc((size_t)len + 1);
    rewind(f);
    if (data == NULL || fread(data, 1, (size_t)len, f) != (size_t)len) {
        perror(argv[1]);
        return 2;
    }
    fclose(f);
    struct outcome from_file, from_mem, tree;
    struct snapshot *s = NULL;
    char err[600] = "";
    int rc = snapshot_read_file(argv[1], &s, err, sizeof(err));
    describe(s, rc, err, &from_file);
    s = NULL;
    rc = snapshot_read_mem(data, (size_t)len, argv[1], &s, err, sizeof(err));
    describe(s, rc, err, &from_mem);
    tree_only(data, (size_t)len, argv[1], &tree);
    probe(data, (size_t)len, argv[1]);
    int ok = same("file (streamed) vs tree", &from_file, &tree) &&
             same("memory (streamed) vs tree", &from_mem, &tree);
    struct outcome *all[] = {&from_file, &from_mem, &tree};
    for (int i = 0; i < 3; i++) {
        free(all[i]->json);
        free(all[i]->warnings);
    }
    free(data);
    return ok ? 0 : 1;
}
