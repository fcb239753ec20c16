/* label_table.c: interned annotation labels; lock-free lookup, locked insert. */
#include "snapshot/label_table.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct label {
    uint32_t hash;
    uint32_t id; /* a range's START; its END is id + 1 and has no entry of its own */
    uint8_t stage;
    char text[];
};

/* One open-addressing table; a grown one replaces it and the old one stays readable. */
struct label_slots {
    size_t mask;
    struct label_slots *older; /* protected by label_table.lock: freed at destroy */
    _Atomic(struct label *) slot[];
};

struct label_table {
    _Atomic(struct label_slots *) slots;
    pthread_mutex_t lock;
    struct label **by_id; /* protected by lock: by_id[id - 1] (an END shares its START's) */
    uint32_t count, cap;  /* protected by lock */
};

#define LABEL_SLOTS_FIRST 256u

/* FNV-1a over the text, then the stage mixed in: a mark and a range may share a text. */
static uint32_t
label_hash(const char *text, enum snap_stage stage)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)text; *p != '\0'; p++)
        h = (h ^ *p) * 16777619u;
    h ^= (uint32_t)stage * 0x9e3779b9u;
    return h ^ (h >> 15);
}

static struct label_slots *
slots_create(size_t count)
{
    struct label_slots *s = calloc(1, sizeof(*s) + count * sizeof(s->slot[0]));
    if (s != NULL)
        s->mask = count - 1;
    return s;
}

struct label_table *
label_table_create(void)
{
    struct label_table *t = calloc(1, sizeof(*t));
    struct label_slots *s = slots_create(LABEL_SLOTS_FIRST);
    if (t == NULL || s == NULL) {
        free(t);
        free(s);
        return NULL;
    }
    atomic_init(&t->slots, s);
    pthread_mutex_init(&t->lock, NULL);
    return t;
}

void
label_table_destroy(struct label_table *t)
{
    if (t == NULL)
        return;
    for (uint32_t i = 0; i < t->count; i++)
        if (i == 0 || t->by_id[i] != t->by_id[i - 1])
            free(t->by_id[i]);
    free(t->by_id);
    struct label_slots *s = atomic_load(&t->slots);
    while (s != NULL) {
        struct label_slots *older = s->older;
        free(s);
        s = older;
    }
    pthread_mutex_destroy(&t->lock);
    free(t);
}

static struct label *
slots_find(struct label_slots *s, const char *text, enum snap_stage stage, uint32_t hash)
{
    for (size_t i = hash & s->mask;; i = (i + 1) & s->mask) {
        struct label *l = atomic_load_explicit(&s->slot[i], memory_order_acquire);
        if (l == NULL)
            return NULL;
        if (l->hash == hash && l->stage == (uint8_t)stage && strcmp(l->text, text) == 0)
            return l;
    }
}

static void
slots_put(struct label_slots *s, struct label *l)
{
    size_t i = l->hash & s->mask;
    while (atomic_load_explicit(&s->slot[i], memory_order_relaxed) != NULL)
        i = (i + 1) & s->mask;
    atomic_store_explicit(&s->slot[i], l, memory_order_release);
}

/* Keeps the table at most half full: a grown copy is filled, then published. */
static bool
slots_make_room_locked(struct label_table *t, size_t entries)
{
    struct label_slots *s = atomic_load_explicit(&t->slots, memory_order_relaxed);
    if ((entries + 1) * 2 <= s->mask + 1)
        return true;
    struct label_slots *grown = slots_create((s->mask + 1) * 2);
    if (grown == NULL)
        return false;
    for (size_t i = 0; i <= s->mask; i++) {
        struct label *l = atomic_load_explicit(&s->slot[i], memory_order_relaxed);
        if (l != NULL)
            slots_put(grown, l);
    }
    grown->older = s; /* readers may still be probing it */
    atomic_store_explicit(&t->slots, grown, memory_order_release);
    return true;
}

static bool
by_id_room_locked(struct label_table *t, uint32_t more)
{
    if (t->count + more <= t->cap)
        return true;
    uint32_t cap = t->cap == 0 ? 64 : t->cap * 2;
    struct label **grown = realloc(t->by_id, (size_t)cap * sizeof(*grown));
    if (grown == NULL)
        return false;
    t->by_id = grown;
    t->cap = cap;
    return true;
}

static uint32_t
insert_locked(struct label_table *t, const char *text, enum snap_stage stage, uint32_t hash)
{
    struct label *l =
        slots_find(atomic_load_explicit(&t->slots, memory_order_relaxed), text, stage, hash);
    if (l != NULL)
        return l->id;
    uint32_t ids = stage == SNAP_STAGE_START ? 2 : 1;
    size_t len = strlen(text);
    if (t->count + ids > LABEL_TABLE_MAX || !by_id_room_locked(t, ids) ||
        !slots_make_room_locked(t, t->count + ids))
        return 0;
    l = malloc(sizeof(*l) + len + 1);
    if (l == NULL)
        return 0;
    memcpy(l->text, text, len + 1);
    l->hash = hash;
    l->stage = (uint8_t)stage;
    l->id = t->count + 1;
    for (uint32_t k = 0; k < ids; k++)
        t->by_id[t->count++] = l;
    slots_put(atomic_load_explicit(&t->slots, memory_order_relaxed), l);
    return l->id;
}

uint32_t
label_table_intern(struct label_table *t, const char *text, enum snap_stage stage)
{
    if (t == NULL || text == NULL)
        return 0;
    bool end = stage == SNAP_STAGE_END;
    if (end)
        stage = SNAP_STAGE_START; /* the pair is filed under its start */
    uint32_t hash = label_hash(text, stage);
    struct label *l =
        slots_find(atomic_load_explicit(&t->slots, memory_order_acquire), text, stage, hash);
    uint32_t id = l != NULL ? l->id : 0;
    if (id == 0) {
        pthread_mutex_lock(&t->lock);
        id = insert_locked(t, text, stage, hash);
        pthread_mutex_unlock(&t->lock);
    }
    return id != 0 && end ? id + 1 : id;
}

const char *
label_table_text(struct label_table *t, uint32_t id, enum snap_stage *stage)
{
    if (t == NULL || id == 0)
        return NULL;
    const char *text = NULL;
    pthread_mutex_lock(&t->lock);
    if (id <= t->count) {
        const struct label *l = t->by_id[id - 1];
        text = l->text;
        if (stage != NULL)
            *stage = l->id == id ? (enum snap_stage)l->stage : SNAP_STAGE_END;
    }
    pthread_mutex_unlock(&t->lock);
    return text;
}

void
label_table_reset_after_fork(struct label_table *t)
{
    if (t != NULL)
        pthread_mutex_init(&t->lock, NULL);
}
