/* snapshot_arena.c: chunked bump allocator and string interning for snapshot models. */
#include "snapshot/snapshot_arena.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "snapshot/text_escape.h"

/* Chunks start small and double up to the largest: most models are small (a command reading one
 * snapshot makes three arenas, a fuzzer thousands), and a 256 KiB chunk is a fresh mmap with 64
 * pages to map in for each of them; big models still fill 256 KiB chunks. */
#define ARENA_FIRST_CHUNK (16u * 1024u)
#define ARENA_CHUNK       (256u * 1024u)

struct arena_chunk {
    struct arena_chunk *next;
    size_t size; /* usable bytes after the header */
    size_t used;
    _Alignas(16) unsigned char data[];
};

struct intern_slot {
    uint64_t hash;
    const char *str; /* NULL: empty slot */
    size_t len;
};

struct snapshot_arena {
    struct arena_chunk *chunks; /* newest first; allocation happens in the newest */
    size_t next_chunk;          /* the size of the next regular chunk (0: the first) */
    size_t bytes;
    struct intern_slot *slots;
    size_t slot_cap; /* power of two */
    size_t slot_used;
};

struct snapshot_arena *
snapshot_arena_create(void)
{
    return calloc(1, sizeof(struct snapshot_arena));
}

void
snapshot_arena_destroy(struct snapshot_arena *arena)
{
    if (arena == NULL)
        return;
    struct arena_chunk *c = arena->chunks;
    while (c != NULL) {
        struct arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    free(arena->slots);
    free(arena);
}

void *
snapshot_arena_alloc_bytes(struct snapshot_arena *arena, size_t size)
{
    size = (size + 15u) & ~(size_t)15u;
    if (size == 0)
        size = 16;
    struct arena_chunk *c = arena->chunks;
    if (c == NULL || c->size - c->used < size) {
        size_t regular = arena->next_chunk != 0 ? arena->next_chunk : ARENA_FIRST_CHUNK;
        bool one_off = size > regular / 4;
        size_t want = one_off ? size : regular;
        if (want > SIZE_MAX - sizeof(struct arena_chunk))
            return NULL;
        struct arena_chunk *n = malloc(sizeof(struct arena_chunk) + want);
        if (n == NULL)
            return NULL;
        snapshot_arena_prefault(n, sizeof(struct arena_chunk) + want); /* filled front to back */
        n->size = want;
        n->used = 0;
        arena->bytes += sizeof(struct arena_chunk) + want;
        if (!one_off)
            arena->next_chunk = regular < ARENA_CHUNK ? regular * 2 : ARENA_CHUNK;
        if (c != NULL && one_off) {
            /* A big one-off block goes behind the current chunk, which keeps serving. */
            n->next = c->next;
            c->next = n;
        } else {
            n->next = c;
            arena->chunks = n;
        }
        c = n;
    }
    void *p = c->data + c->used;
    c->used += size;
    return p;
}

void *
snapshot_arena_alloc(struct snapshot_arena *arena, size_t size)
{
    void *p = snapshot_arena_alloc_bytes(arena, size);
    if (p != NULL)
        memset(p, 0, size);
    return p;
}

void
snapshot_arena_reset(struct snapshot_arena *arena)
{
    struct arena_chunk *keep = arena->chunks;
    if (keep == NULL)
        return;
    struct arena_chunk *c = keep->next;
    while (c != NULL) {
        struct arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    keep->next = NULL;
    keep->used = 0;
    arena->bytes = sizeof(struct arena_chunk) + keep->size;
    if (arena->slot_used > 0) {
        memset(arena->slots, 0, arena->slot_cap * sizeof(*arena->slots));
        arena->slot_used = 0;
    }
}

void
snapshot_arena_prefault(void *p, size_t len)
{
#ifdef MADV_POPULATE_WRITE
    static long page;
    if (page == 0)
        page = sysconf(_SC_PAGESIZE) > 0 ? sysconf(_SC_PAGESIZE) : 4096;
    uintptr_t mask = (uintptr_t)page - 1;
    uintptr_t lo = ((uintptr_t)p + mask) & ~mask, hi = ((uintptr_t)p + len) & ~mask;
    if (hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE); /* a refusal changes nothing */
#else
    (void)p;
    (void)len;
#endif
}

size_t
snapshot_arena_bytes(const struct snapshot_arena *arena)
{
    return arena->bytes + arena->slot_cap * sizeof(struct intern_slot);
}

/* 8 bytes a step (a hash of every interned string: the readers intern each one they meet). */
static uint64_t
hash_bytes(const char *s, size_t len)
{
    uint64_t h = (uint64_t)len * 0x9e3779b97f4a7c15ull, x;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        memcpy(&x, s + i, 8);
        h = (h ^ x) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    x = 0;
    memcpy(&x, s + i, len - i);
    h = (h ^ x) * 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 29);
}

/* ASCII without NUL: valid as it is (nearly every string; checked 8 bytes a step). */
static bool
plain_ascii(const unsigned char *s, size_t len)
{
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t x;
        memcpy(&x, s + i, 8);
        if ((x & highs) != 0 || ((x - ones) & ~x & highs) != 0)
            return false;
    }
    for (; i < len; i++)
        if (s[i] == 0 || s[i] >= 0x80)
            return false;
    return true;
}

static bool
intern_grow(struct snapshot_arena *arena)
{
    size_t cap = arena->slot_cap ? arena->slot_cap * 2 : 1024;
    struct intern_slot *slots = calloc(cap, sizeof(*slots));
    if (slots == NULL)
        return false;
    snapshot_arena_prefault(slots, cap * sizeof(*slots)); /* hashing touches every page */
    for (size_t i = 0; i < arena->slot_cap; i++) {
        struct intern_slot *o = &arena->slots[i];
        if (o->str == NULL)
            continue;
        size_t j = (size_t)o->hash & (cap - 1);
        while (slots[j].str != NULL)
            j = (j + 1) & (cap - 1);
        slots[j] = *o;
    }
    free(arena->slots);
    arena->slots = slots;
    arena->slot_cap = cap;
    return true;
}

const char *
snapshot_arena_intern(struct snapshot_arena *arena, const char *s, size_t len)
{
    /* Bytes that are not UTF-8 (and NULs, which a C string cannot hold) become \xHH first: the
     * one rule of text_escape.h, shared with the control replies. */
    char *fixed = NULL;
    if (!plain_ascii((const unsigned char *)s, len) &&
        !text_escape_is_clean(s, len, TEXT_ESCAPE_UTF8)) {
        if ((fixed = text_escape_dup(s, len, TEXT_ESCAPE_UTF8)) == NULL)
            return NULL;
        s = fixed;
        len = strlen(fixed);
    }
    if (arena->slot_used * 2 >= arena->slot_cap && !intern_grow(arena)) {
        free(fixed);
        return NULL;
    }
    uint64_t h = hash_bytes(s, len);
    size_t j = (size_t)h & (arena->slot_cap - 1);
    while (arena->slots[j].str != NULL) {
        struct intern_slot *sl = &arena->slots[j];
        if (sl->hash == h && sl->len == len && memcmp(sl->str, s, len) == 0) {
            free(fixed);
            return sl->str;
        }
        j = (j + 1) & (arena->slot_cap - 1);
    }
    char *copy = snapshot_arena_alloc_bytes(arena, len + 1);
    if (copy == NULL) {
        free(fixed);
        return NULL;
    }
    memcpy(copy, s, len);
    copy[len] = '\0';
    free(fixed);
    arena->slots[j] = (struct intern_slot){.hash = h, .str = copy, .len = len};
    arena->slot_used++;
    return copy;
}
