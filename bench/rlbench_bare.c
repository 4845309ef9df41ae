/*
 * rlbench_bare.c -- rlbench's reference: a bare open-addressing hash table
 * of the same keys, the least any store must do to find a key's state.
 * Method: docs/BENCHMARKS.md, "How each bench measures".
 */
#include "rlbench.h"

static uint64_t bare_hash(const char *key)
{
    uint64_t h = 0xCBF29CE484222325ULL; /* FNV-1a 64 ...            */

    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 0x100000001B3ULL;
    h ^= h >> 33; /* ... with murmur3's finalizer so low bits mix */
    h *= 0xFF51AFD7ED558CCDULL;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ULL;
    h ^= h >> 33;
    return h != 0 ? h : 1;
}

/* The smallest power of two holding n keys at a load factor <= 0.75. */
int bare_init(bare_table *t, size_t n)
{
    size_t cap = 16;

    while (cap * 3 < n * 4)
        cap <<= 1;
    t->slots = calloc(cap, sizeof *t->slots);
    t->mask = cap - 1;
    t->count = 0;
    return t->slots != NULL ? 0 : -1;
}

void bare_free(bare_table *t)
{
    free(t->slots);
    t->slots = NULL;
}

void bare_insert(bare_table *t, const char *key)
{
    uint64_t h = bare_hash(key);
    size_t i = (size_t)h & t->mask;

    while (t->slots[i].h != 0 && t->slots[i].h != h)
        i = (i + 1) & t->mask;
    if (t->slots[i].h == 0) {
        t->slots[i].h = h;
        t->count++;
    }
    t->slots[i].s[0]++;
    t->slots[i].s[1] = h;
}

static const bare_slot *bare_lookup(const bare_table *t, const char *key)
{
    uint64_t h = bare_hash(key);
    size_t i = (size_t)h & t->mask;

    for (;;) {
        const bare_slot *s = &t->slots[i];
        if (s->h == h)
            return s;
        if (s->h == 0)
            return NULL;
        i = (i + 1) & t->mask;
    }
}

int bare_touch(const bare_table *t, const char *key, uint64_t *sink,
               char *err)
{
    const bare_slot *s = bare_lookup(t, key);

    if (s == NULL) {
        snprintf(err, ERRLEN, "bare table lost key %s", key);
        return -1;
    }
    *sink += s->s[0];
    return 0;
}
