/*
 * store_memory.c -- the in-process store: a hash table of rate-limit state,
 * split into 256 independently locked segments so threads working on
 * different keys never wait for each other and no lock is global.
 *
 * Each tracked (rule, key) is one 32-byte entry: a 64-bit fingerprint of the
 * rule's state seed (its id and shape, rule.h) and the key (the key bytes
 * are not kept), the algorithm's state, and an expiry in seconds.  Two
 * different (rule, key) pairs share a counter only if their 64-bit
 * fingerprints are equal: with n tracked pairs that happens with
 * probability about n^2 / 2^65 (3e-6 at 10M pairs), and then both clients
 * are limited together, never more loosely.
 *
 * The key's hash is SipHash-1-3 under a key drawn from the kernel when the
 * store is made (siphash.h): clients pick their own keys (a user id, an API
 * key), and the rule ids and windows are public (RateLimit-Policy), so an
 * unkeyed hash would let one of them compute thousands of keys that land
 * in one segment, making that segment's inserts and rebuilds, under its
 * lock, cost as much as the whole table's.  Keyed, no one can aim.
 *
 * The top 8 bits of the key's hash pick the segment, so all of a client's
 * entries (every rule, every shape) share one segment and one lock; the low
 * 32 bits of the fingerprint pick the home slot (multiply-shift, so
 * capacities need not be powers of two); collisions probe linearly.
 * Segments grow by 1.25x at 85 % load, so the table stays between 68 % and
 * 85 % full: 32 B / 0.68 = 47 B per entry at worst.
 *
 * A rule whose shape changed (ruleset_inherit) remembers its previous
 * shapes for as long as states of them can live.  A client with no entry
 * under the current shape is then looked up under those, newest first; a
 * state found there is converted (algo_convert) and decided on, and when
 * the charge is kept the new entry is written and the old one removed, in
 * the same segment, under the same lock.  Only the ops of changed rules,
 * and only on a miss, pay for it.
 *
 * Expired entries are reclaimed without a cleanup job: a probe that passes
 * an expired entry reuses its slot for a new key, and a segment that runs
 * full first rebuilds itself without its expired entries.  When growing
 * would pass memory_max_bytes the segment stops growing; a new key then
 * evicts, among the 16 slots from its home on, the entry that expires
 * soonest (that client starts afresh; evictions are counted).  Entries are
 * removed by shifting their run back, so no tombstones pile up.
 */
#include "store_memory.h"
#include "hash.h"
#include "ratelimit.h"
#include "siphash.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEG_BITS 8
#define NSEG (1u << SEG_BITS)
_Static_assert(NSEG == STORE_MEMORY_SEGMENTS, "the header says how many");
#define SEG_MIN_CAP 16u
#define LOAD_NUM 85 /* max load, percent */
#define EVICT_WINDOW 16u

typedef struct entry {
    uint64_t fp;      /* 0 = empty slot                          */
    int64_t a, b;     /* algo_state                              */
    uint32_t c;
    uint32_t expires; /* seconds since the store's epoch         */
} entry;

typedef struct segment {
    pthread_mutex_t lock;
    entry *slots;
    uint32_t cap, used, max_used;
    uint32_t full_until;  /* at the cap: don't rescan before this second */
    int64_t evictions;
} __attribute__((aligned(64))) segment;

typedef struct mem_store {
    rl_store base;
    rl_clock clock;
    int64_t epoch_s;            /* expiry times count from here         */
    int64_t max_bytes;
    uint64_t hash_key[2];       /* the client keys' SipHash key         */
    _Atomic int64_t bytes;      /* slots allocated, all segments        */
    segment seg[NSEG];
} mem_store;

static uint32_t home_of(uint64_t fp, uint32_t cap)
{
    return (uint32_t)(((uint64_t)(uint32_t)fp * cap) >> 32);
}

static uint32_t max_used_of(uint32_t cap)
{
    return (uint32_t)((uint64_t)cap * LOAD_NUM / 100);
}

static uint32_t expiry_of(const mem_store *m, int64_t expires_ms)
{
    int64_t s = (expires_ms + 999) / 1000 - m->epoch_s;

    if (s < 1)
        return 1;
    return s > (int64_t)UINT32_MAX ? UINT32_MAX : (uint32_t)s;
}

static int is_dead(const entry *e, uint32_t now_s)
{
    return e->expires < now_s;
}

/* Find fp's live entry, or NULL.  Expired entries count as absent. */
static entry *find(segment *g, uint64_t fp, uint32_t now_s)
{
    for (uint32_t i = home_of(fp, g->cap);; i = (i + 1 == g->cap) ? 0 : i + 1) {
        entry *e = &g->slots[i];
        if (e->fp == 0)
            return NULL;
        if (e->fp == fp)
            return is_dead(e, now_s) ? NULL : e;
    }
}

/* Copy the live entries of g into a table of new_cap slots. */
static int rebuild(mem_store *m, segment *g, uint32_t new_cap, uint32_t now_s)
{
    entry *slots = calloc(new_cap, sizeof *slots);
    uint32_t used = 0;

    if (!slots)
        return -1;
    for (uint32_t i = 0; i < g->cap; i++) {
        entry *e = &g->slots[i];
        if (e->fp == 0 || is_dead(e, now_s))
            continue;
        uint32_t j = home_of(e->fp, new_cap);
        while (slots[j].fp)
            j = (j + 1 == new_cap) ? 0 : j + 1;
        slots[j] = *e;
        used++;
    }
    atomic_fetch_add(&m->bytes,
                     ((int64_t)new_cap - (int64_t)g->cap) * (int64_t)sizeof(entry));
    free(g->slots);
    g->slots = slots;
    g->cap = new_cap;
    g->used = used;
    g->max_used = max_used_of(new_cap);
    return 0;
}

/* Make room for one more entry: drop expired ones, grow if under the cap.
 * Dropping in place is preferred whenever it frees at least 1/32 of the
 * slots (so a rebuild costs at most 32 moves per insert it makes room for);
 * growing from a table that full keeps the load near 2/3 or more.
 * Returns 0 when there is room, -1 when the segment is at the cap. */
static int make_room(mem_store *m, segment *g, uint32_t now_s)
{
    uint32_t live = 0, grown = g->cap + g->cap / 4;
    int64_t extra = (int64_t)(grown - g->cap) * (int64_t)sizeof(entry);

    for (uint32_t i = 0; i < g->cap; i++)
        live += g->slots[i].fp && !is_dead(&g->slots[i], now_s);
    if (g->used - live >= g->cap / 32 + 1)
        return rebuild(m, g, g->cap, now_s);
    if (atomic_load(&m->bytes) + extra > m->max_bytes)
        return live < g->used ? rebuild(m, g, g->cap, now_s) : -1;
    return rebuild(m, g, grown, now_s);
}

/* The slot to hold fp: its own (even if expired), else the first expired
 * slot on its path, else the empty slot ending the path. */
static entry *slot_for(segment *g, uint64_t fp, uint32_t now_s, int *is_new)
{
    entry *reuse = NULL;

    for (uint32_t i = home_of(fp, g->cap);; i = (i + 1 == g->cap) ? 0 : i + 1) {
        entry *e = &g->slots[i];
        if (e->fp == fp) {
            *is_new = 0;
            return e;
        }
        if (e->fp == 0) {
            *is_new = reuse == NULL;
            return reuse ? reuse : e;
        }
        if (!reuse && is_dead(e, now_s))
            reuse = e;
    }
}

/* Remove the entry at slot i, shifting later entries of the same probe run
 * back so every remaining key stays reachable from its home slot. */
static void delete_at(segment *g, uint32_t i)
{
    uint32_t j = i;

    for (;;) {
        g->slots[i].fp = 0;
        for (;;) {
            j = (j + 1 == g->cap) ? 0 : j + 1;
            if (g->slots[j].fp == 0) {
                g->used--;
                return;
            }
            uint32_t h = home_of(g->slots[j].fp, g->cap);
            /* Move it if its home is not cyclically within (i, j]. */
            if (i <= j ? (h <= i || h > j) : (h <= i && h > j))
                break;
        }
        g->slots[i] = g->slots[j];
        i = j;
    }
}

/* At the cap: evict the entry that expires soonest among the EVICT_WINDOW
 * slots from fp's home on (or the next occupied one if all are empty). */
static void evict_near(segment *g, uint64_t fp)
{
    uint32_t i = home_of(fp, g->cap), best = UINT32_MAX;

    for (uint32_t k = 0; k < g->cap && (k < EVICT_WINDOW || best == UINT32_MAX);
         k++) {
        if (g->slots[i].fp &&
            (best == UINT32_MAX || g->slots[i].expires < g->slots[best].expires))
            best = i;
        i = (i + 1 == g->cap) ? 0 : i + 1;
    }
    if (best != UINT32_MAX) {
        delete_at(g, best);
        g->evictions++;
    }
}

static void store_entry(mem_store *m, segment *g, uint64_t fp,
                        const algo_state *st, uint32_t expires, uint32_t now_s)
{
    int is_new;
    entry *e = slot_for(g, fp, now_s, &is_new);

    if (is_new && g->used + 1 > g->max_used) {
        /* At the cap a full scan finds nothing to free until entries
         * expire, so try again only once a second; evict meanwhile. */
        if (now_s < g->full_until || make_room(m, g, now_s) != 0) {
            if (now_s >= g->full_until)
                g->full_until = now_s + 1;
            evict_near(g, fp);
        }
        e = slot_for(g, fp, now_s, &is_new);
    }
    g->used += is_new;
    e->fp = fp;
    e->a = st->a;
    e->b = st->b;
    e->c = st->c;
    e->expires = expires;
}

static uint64_t fingerprint(uint64_t state_seed, uint64_t key_hash)
{
    uint64_t fp = hash_mix(state_seed, key_hash);
    return fp ? fp : 1;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Lock the segments seg[0..n) in ascending order (no deadlock); returns
 * how many distinct segments are in segs[]. */
static size_t lock_all(mem_store *m, const uint32_t *seg, size_t n,
                       uint32_t *segs)
{
    size_t k = 0;

    memcpy(segs, seg, n * sizeof *segs);
    if (n > 1)
        qsort(segs, n, sizeof *segs, cmp_u32);
    for (size_t i = 0; i < n; i++)
        if (k == 0 || segs[k - 1] != segs[i])
            segs[k++] = segs[i];
    for (size_t i = 0; i < k; i++)
        pthread_mutex_lock(&m->seg[segs[i]].lock);
    return k;
}

/* The state of op's client under its rule: its entry (fp); else, while
 * the rule's previous shapes may still hold one, the newest found there,
 * converted to the current shape as at the change (*from gets that
 * entry's fingerprint, to be dropped when the new state is written); else
 * fresh.  A client's entries of every shape share its segment. */
static void load_state(segment *g, const store_op *op, uint64_t fp,
                       uint64_t key_hash, int64_t now, uint32_t now_s,
                       algo_state *st, uint64_t *from)
{
    const rl_rule *r = op->rule;
    entry *e = find(g, fp, now_s);

    *from = 0;
    *st = e ? (algo_state){e->a, e->b, e->c} : (algo_state){0, 0, 0};
    for (int k = 0; !e && k < r->nprev; k++) {
        const rule_shape *p = &r->prev[k];
        uint64_t pfp;
        if (p->until_ms <= now)
            continue;
        pfp = fingerprint(p->state_seed, key_hash);
        if ((e = find(g, pfp, now_s))) {
            algo_state old = {e->a, e->b, e->c};
            algo_convert(&p->ap, &old, &r->ap, p->since_ms, now, st);
            *from = pfp;
        }
    }
}

/* Remove fp's entry, if any (live or expired). */
static void drop(segment *g, uint64_t fp)
{
    for (uint32_t i = home_of(fp, g->cap);; i = (i + 1 == g->cap) ? 0 : i + 1) {
        if (g->slots[i].fp == 0)
            return;
        if (g->slots[i].fp == fp) {
            delete_at(g, i);
            return;
        }
    }
}

static int mem_check(rl_store *s, const store_op *ops, size_t n,
                     algo_decision *out, int64_t *now_ms)
{
    mem_store *m = (mem_store *)s;
    uint64_t fps[RL_OPS_MAX], kh[RL_OPS_MAX], from[RL_OPS_MAX];
    uint32_t seg[RL_OPS_MAX], segs[RL_OPS_MAX];
    algo_state st[RL_OPS_MAX];
    int64_t now, rel_s;
    uint32_t now_s;
    size_t nseg, i;
    int all = 1;

    if (n == 0 || n > RL_OPS_MAX)
        return RL_EINVAL;
    for (i = 0; i < n; i++) {
        kh[i] = siphash13(ops[i].key, ops[i].key_len, m->hash_key);
        fps[i] = fingerprint(ops[i].rule->shape.state_seed, kh[i]);
        seg[i] = (uint32_t)(kh[i] >> (64 - SEG_BITS));
    }
    nseg = lock_all(m, seg, n, segs);
    /* Read the clock under the locks, so the charges to one entry are
     * decided in the order of their times. */
    now = clock_now_ms(&m->clock);
    rel_s = now / 1000 - m->epoch_s;
    now_s = rel_s < 0 ? 0 : rel_s > UINT32_MAX ? UINT32_MAX : (uint32_t)rel_s;

    /* Decide every charge on a copy of the state... */
    for (i = 0; i < n; i++) {
        load_state(&m->seg[seg[i]], &ops[i], fps[i], kh[i], now, now_s,
                   &st[i], &from[i]);
        algo_apply(&ops[i].rule->ap, &st[i], now, ops[i].cost, &out[i]);
        all &= out[i].allowed || ops[i].soft;
    }
    /* ...and keep the charges only if all of them pass (a migrated state
     * leaves its old shape's entry then, and only then). */
    for (i = 0; all && i < n; i++) {
        if (!out[i].allowed || !out[i].changed)
            continue;
        if (from[i])
            drop(&m->seg[seg[i]], from[i]);
        store_entry(m, &m->seg[seg[i]], fps[i], &st[i],
                    expiry_of(m, out[i].expires_ms), now_s);
    }
    for (i = nseg; i-- > 0;)
        pthread_mutex_unlock(&m->seg[segs[i]].lock);
    *now_ms = now;
    return RL_OK;
}

static void mem_free(rl_store *s)
{
    mem_store *m = (mem_store *)s;

    for (unsigned i = 0; i < NSEG; i++) {
        pthread_mutex_destroy(&m->seg[i].lock);
        free(m->seg[i].slots);
    }
    free(m);
}

/* No breaker, no check_many (one check each is as cheap), no start:
 * check() never blocks, so a started request is decided at once. */
static const store_vtable mem_vtable = {
    .name = "memory",
    .check = mem_check,
    .free = mem_free,
};

int store_memory_new(const store_options *opt, rl_store **out, char *err,
                     size_t errlen)
{
    mem_store *m;
    int64_t floor_bytes = (int64_t)NSEG * SEG_MIN_CAP * (int64_t)sizeof(entry);

    if (opt->memory_max_bytes < floor_bytes)
        return snprintf(err, errlen, "memory_max_bytes: at least %lld",
                        (long long)floor_bytes), RL_EOPTION;
    if (posix_memalign((void **)&m, 64, sizeof *m))
        return snprintf(err, errlen, "out of memory"), RL_ENOMEM;
    memset(m, 0, sizeof *m);
    m->base.vt = &mem_vtable;
    clock_init(&m->clock);
    m->epoch_s = clock_now_ms(&m->clock) / 1000 - 1;
    m->max_bytes = opt->memory_max_bytes;
    siphash_random_key(m->hash_key);
    for (unsigned i = 0; i < NSEG; i++) {
        segment *g = &m->seg[i];
        pthread_mutex_init(&g->lock, NULL);
        g->cap = SEG_MIN_CAP;
        g->max_used = max_used_of(g->cap);
        if (!(g->slots = calloc(g->cap, sizeof(entry)))) {
            mem_free(&m->base);
            return snprintf(err, errlen, "out of memory"), RL_ENOMEM;
        }
    }
    atomic_init(&m->bytes, floor_bytes);
    *out = &m->base;
    return RL_OK;
}

void store_memory_set_clock(rl_store *s, rl_clock_fn fn, void *arg)
{
    mem_store *m = (mem_store *)s;

    m->clock.fn = fn;
    m->clock.arg = arg;
    m->epoch_s = clock_now_ms(&m->clock) / 1000 - 1;
}

/* How far each entry of g sits from its home slot, summed: the slots a
 * look-up of every entry passes over before its own. */
static int64_t displacement(const segment *g)
{
    int64_t sum = 0;

    for (uint32_t i = 0; i < g->cap; i++) {
        uint32_t h;
        if (!g->slots[i].fp)
            continue;
        h = home_of(g->slots[i].fp, g->cap);
        sum += i >= h ? i - h : g->cap - h + i;
    }
    return sum;
}

void store_memory_stats_get(rl_store *s, store_memory_stats *st)
{
    mem_store *m = (mem_store *)s;

    memset(st, 0, sizeof *st);
    for (unsigned i = 0; i < NSEG; i++) {
        segment *g = &m->seg[i];
        pthread_mutex_lock(&g->lock);
        st->slots += g->used;
        st->capacity += g->cap;
        st->evictions += g->evictions;
        if (g->used > st->seg_max)
            st->seg_max = g->used;
        st->displacement += displacement(g);
        pthread_mutex_unlock(&g->lock);
    }
    st->bytes = atomic_load(&m->bytes) + (int64_t)sizeof *m;
}
