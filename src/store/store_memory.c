/*
 * store_memory.c -- the in-process store: a hash table of rate-limit state,
 * split into 256 independently locked segments so threads working on
 * different keys never wait for each other and no lock is global.  A
 * segment's lock is one word (wordlock.h): one locked instruction to take
 * it and one to let it go when no one else wants it; a waiter spins a
 * bounded while, then sleeps.
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
 * state found there is converted (algo_convert) and decided on (none
 * found under a replaced bucket shape: the least it may have held,
 * algo_convert_unknown), and when
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
 * removed by shifting their run back, so no tombstones pile up.  The
 * table's entry and probing code is slots.c, which the shared-memory store
 * (store_shm.c) uses too; growing, and the cap, are this file's.
 *
 * A check has two halves.  place() hashes each op's key, picks its
 * segment and starts loading its home slot (prefetch_home), with no lock
 * held; decide_placed() then takes the segments' locks, reads the clock,
 * decides every op on a copy of its state and keeps the charges only if
 * all pass.  One body serves every request, inlined once for one charge
 * on a slot (the compiler drops the loops, the lock ordering and the log
 * steps) and once for any.  check_many (rl_check_many) places the ops of
 * up to MANY_AHEAD charges of many requests before deciding any of them,
 * so the misses of a batch overlap, as a bare table's lookups in a loop do.
 *
 * A sliding_log rule's state is a log of times, not a slot: each segment
 * keeps those in a log_table beside its slots (log_table.c), under the
 * same lock and within the same memory_max_bytes.  A log starts fresh
 * when its rule's shape changes (algo_convert).
 */
#include "store_memory.h"
#include "log_table.h"
#include "ratelimit.h"
#include "siphash.h"
#include "slots.h"
#include "slots_settle.h"
#include "wordlock.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEG_BITS 8
#define NSEG (1u << SEG_BITS)
_Static_assert(NSEG == STORE_MEMORY_SEGMENTS, "the header says how many");
#define SEG_MIN_CAP 16u
#define LOAD_NUM 85 /* max load, percent */

typedef slot_entry entry;

/* slots and cap, read before the lock (prefetch_home) and written only
 * by a rebuild, sit on a line apart from the lock, which every check
 * writes: two threads checking keys of one segment then pass the lock's
 * line between their cores, but each finds slots and cap in its own
 * cache and starts its slot's miss without waiting for that transfer. */
typedef struct segment {
    entry *slots;
    uint32_t cap;
    wordlock lock __attribute__((aligned(64)));
    uint32_t used, max_used;
    uint32_t full_until;  /* at the cap: don't rescan before this second */
    int64_t evictions;
    log_table logs;       /* sliding_log rules' logs (log_table.h)      */
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

/* A zeroed table of cap slots starting on a cache line, so no 32-byte
 * entry straddles two lines (calloc's 16-byte alignment split every other
 * one: two misses for one look-up at 1M keys). */
static entry *slots_alloc(uint32_t cap)
{
    size_t bytes = ((size_t)cap * sizeof(entry) + 63) / 64 * 64;
    entry *s = aligned_alloc(64, bytes);

    if (s)
        memset(s, 0, bytes);
    return s;
}

/* Copy the live entries of g into a table of new_cap slots.  slots and
 * cap are stored atomically (relaxed): mem_check() reads them before it
 * takes the lock, only to prefetch (see prefetch_home). */
static int rebuild(mem_store *m, segment *g, uint32_t new_cap, uint32_t now_s)
{
    entry *slots = slots_alloc(new_cap);
    uint32_t used = 0;

    if (!slots)
        return -1;
    for (uint32_t i = 0; i < g->cap; i++) {
        entry *e = &g->slots[i];
        if (e->fp == 0 || slots_dead(e, now_s))
            continue;
        uint32_t j = slots_home(e->fp, new_cap);
        while (slots[j].fp)
            j = (j + 1 == new_cap) ? 0 : j + 1;
        slots[j] = *e;
        used++;
    }
    atomic_fetch_add(&m->bytes,
                     ((int64_t)new_cap - (int64_t)g->cap) * (int64_t)sizeof(entry));
    free(g->slots);
    __atomic_store_n(&g->slots, slots, __ATOMIC_RELAXED);
    __atomic_store_n(&g->cap, new_cap, __ATOMIC_RELAXED);
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
        live += g->slots[i].fp && !slots_dead(&g->slots[i], now_s);
    if (g->used - live >= g->cap / 32 + 1)
        return rebuild(m, g, g->cap, now_s);
    if (atomic_load(&m->bytes) + extra > m->max_bytes)
        return live < g->used ? rebuild(m, g, g->cap, now_s) : -1;
    return rebuild(m, g, grown, now_s);
}

/* At the cap: evict near fp's home (slots_evict_near), counted. */
static void evict_near(segment *g, uint64_t fp)
{
    if (slots_evict_near(g->slots, g->cap, fp)) {
        g->used--;
        g->evictions++;
    }
}

/* A state and its expiry into an entry that holds the same client. */
static void keep_state(entry *e, const algo_state *st, uint32_t expires)
{
    e->a = st->a;
    e->b = st->b;
    e->c = st->c;
    e->expires = expires;
}

static void store_entry(mem_store *m, segment *g, uint64_t fp,
                        const algo_state *st, uint32_t expires, uint32_t now_s)
{
    int is_new;
    entry *e = slots_for(g->slots, g->cap, fp, now_s, &is_new);

    if (is_new && g->used + 1 > g->max_used) {
        /* At the cap a full scan finds nothing to free until entries
         * expire, so try again only once a second; evict meanwhile. */
        if (now_s < g->full_until || make_room(m, g, now_s) != 0) {
            if (now_s >= g->full_until)
                g->full_until = now_s + 1;
            evict_near(g, fp);
        }
        e = slots_for(g->slots, g->cap, fp, now_s, &is_new);
    }
    g->used += is_new;
    e->fp = fp;
    keep_state(e, st, expires);
}

/* Start loading fp's home slot into the cache before the segment's lock
 * is taken, so the miss (the table is far larger than the cache at 1M
 * keys) overlaps taking the lock and reading the clock.  Read without the
 * lock: a rebuild may swap the table meanwhile, and then this only warms
 * a line for nothing (a prefetch never faults). */
static void prefetch_home(const segment *g, uint64_t fp)
{
    const entry *slots = __atomic_load_n(&g->slots, __ATOMIC_RELAXED);
    uint32_t cap = __atomic_load_n(&g->cap, __ATOMIC_RELAXED);

    __builtin_prefetch(&slots[slots_home(fp, cap)]);
}

static int is_log(const store_op *op)
{
    return op->rule->ap.algo == RL_ALGO_SLIDING_LOG;
}

/* A sliding_log op: decided on its log (*need: the times it holds if
 * the charge is kept; drop, at: for log_table_commit). */
static void decide_log(segment *g, const store_op *op, uint64_t fp,
                       int64_t now, uint32_t now_s, algo_decision *d,
                       size_t *need, size_t *drop, int64_t *at)
{
    const log_slot *l = log_table_find(&g->logs, fp, now_s);
    size_t n = l ? l->n : 0;

    algo_log_apply(&op->rule->ap, l ? l->t : NULL, n, now, op->cost, d,
                   drop, at);
    *need = n - *drop + (size_t)op->cost;
}

/* The store's clock in ms, and in seconds since its epoch (*now_s). */
static int64_t store_now(const mem_store *m, uint32_t *now_s)
{
    int64_t now = clock_now_ms(&m->clock);
    int64_t rel_s = now / 1000 - m->epoch_s;

    *now_s = rel_s < 0 ? 0 : rel_s > UINT32_MAX ? UINT32_MAX : (uint32_t)rel_s;
    return now;
}

/* Where an op's state lives: its key's SipHash, its fingerprint under
 * the op's rule, its segment. */
typedef struct placed {
    uint64_t kh, fp;
    uint32_t seg;
} placed;

/* Hash op's key and start loading its home slot (prefetch_home): the
 * first half of a check, done for every op of a call (for every request
 * of a check_many) before any lock is taken, so their misses overlap. */
static inline __attribute__((always_inline)) void
place(mem_store *m, const store_op *op, placed *p)
{
    p->kh = siphash13(op->key, op->key_len, m->hash_key);
    p->fp = slots_fingerprint(op->rule->shape.state_seed, p->kh);
    p->seg = (uint32_t)(p->kh >> (64 - SEG_BITS));
    prefetch_home(&m->seg[p->seg], p->fp);
}

/* Lock the segments of p[0..n) in ascending order (no deadlock) into
 * segs[]; returns how many distinct ones. */
static inline __attribute__((always_inline)) size_t
lock_all(mem_store *m, const placed *p, size_t n, uint32_t *segs)
{
    uint32_t seg[RL_OPS_MAX];
    size_t k = 1;

    if (n == 1) { /* the usual request: one rule */
        segs[0] = p[0].seg;
    } else {
        for (size_t i = 0; i < n; i++)
            seg[i] = p[i].seg;
        k = slots_lock_order(seg, n, segs);
    }
    for (size_t i = 0; i < k; i++)
        wordlock_lock(&m->seg[segs[i]].lock);
    return k;
}

/* Room, before anything is kept, for every log that is charged: all or
 * nothing holds even when memory runs out. */
static int reserve_logs(mem_store *m, const store_op *ops, size_t n,
                        const placed *p, const algo_decision *out,
                        const size_t *need, uint32_t now_s)
{
    log_budget b = {.bytes = &m->bytes, .max_bytes = m->max_bytes};

    for (size_t i = 0; i < n; i++)
        if (is_log(&ops[i]) && out[i].allowed && out[i].changed &&
            log_table_reserve(&m->seg[p[i].seg].logs, p[i].fp, need[i],
                              now_s, &b) != 0)
            return -1;
    return 0;
}

/* A charge's new state into its entry (hit: the live entry it was read
 * from, when nothing was written to the table since; from: an entry of a
 * previous shape to drop, or 0). */
static inline __attribute__((always_inline)) void
keep_charge(mem_store *m, const placed *p, const algo_state *st, entry *hit,
            uint64_t from, uint32_t expires, uint32_t now_s)
{
    segment *g = &m->seg[p->seg];

    if (hit) {
        keep_state(hit, st, expires);
        return;
    }
    if (from)
        g->used -= (uint32_t)slots_drop(g->slots, g->cap, from);
    store_entry(m, g, p->fp, st, expires, now_s);
}

/* The second half of a check: ops[0..n), placed at p[], decided under
 * their segments' locks, all-or-nothing (logs 0: the caller knows none
 * is a sliding log).  One body for every request; inlined twice by
 * check_placed(), for one charge on a slot (n and logs constant: no
 * loops, no lock ordering, no log steps) and for any. */
static inline __attribute__((always_inline)) int
decide_placed(mem_store *m, const store_op *ops, const placed *p, size_t n,
              int logs, algo_decision *out, int64_t *now_ms)
{
    uint64_t from[RL_OPS_MAX];
    uint32_t segs[RL_OPS_MAX];
    algo_state st[RL_OPS_MAX];
    entry *hit[RL_OPS_MAX];
    size_t need[RL_OPS_MAX], drop[RL_OPS_MAX];
    int64_t now, at[RL_OPS_MAX];
    uint32_t now_s;
    size_t nseg, i;
    int all = 1, rc = RL_OK;

    nseg = lock_all(m, p, n, segs);
    /* Read the clock under the locks, so the charges to one entry are
     * decided in the order of their times. */
    now = store_now(m, &now_s);

    /* Decide every charge on a copy of the state... */
    for (i = 0; i < n; i++) {
        segment *g = &m->seg[p[i].seg];
        if (logs && is_log(&ops[i])) {
            hit[i] = NULL;
            decide_log(g, &ops[i], p[i].fp, now, now_s, &out[i], &need[i],
                       &drop[i], &at[i]);
        } else {
            hit[i] = slots_load_state(g->slots, g->cap, &ops[i], p[i].fp,
                                      p[i].kh, now, now_s, &st[i], &from[i]);
            algo_apply(&ops[i].rule->ap, &st[i], now, ops[i].cost, &out[i]);
        }
        all &= out[i].allowed || ops[i].soft;
    }
    if (logs && all && reserve_logs(m, ops, n, p, out, need, now_s) != 0)
        all = 0, rc = RL_ESTORE; /* out of memory: nothing kept */
    /* ...and keep the charges only if all of them pass (a migrated state
     * leaves its old shape's entry then, and only then).  A one-charge
     * request writes into the entry it read; with more, an earlier
     * charge's write may have moved it. */
    for (i = 0; i < n; i++) {
        if (!all || !out[i].allowed || !out[i].changed)
            continue;
        uint32_t expires = expiry_of(m, out[i].expires_ms);
        if (logs && is_log(&ops[i]))
            log_table_commit(&m->seg[p[i].seg].logs, p[i].fp, drop[i], at[i],
                             ops[i].cost, expires);
        else
            keep_charge(m, &p[i], &st[i], n == 1 ? hit[i] : NULL, from[i],
                        expires, now_s);
    }
    for (i = nseg; i-- > 0;)
        wordlock_unlock(&m->seg[segs[i]].lock);
    *now_ms = now;
    return rc;
}

/* decide_placed() for one charge on a slot (the usual request) or any. */
static inline __attribute__((always_inline)) int
check_placed(mem_store *m, const store_op *ops, const placed *p, size_t n,
             algo_decision *out, int64_t *now_ms)
{
    if (n == 1 && !is_log(&ops[0]))
        return decide_placed(m, ops, p, 1, 0, out, now_ms);
    return decide_placed(m, ops, p, n, 1, out, now_ms);
}

/* A check: its ops placed, then decided. */
static inline __attribute__((always_inline)) int
check_ops(mem_store *m, const store_op *ops, size_t n, algo_decision *out,
          int64_t *now_ms)
{
    placed p[RL_OPS_MAX];

    for (size_t i = 0; i < n; i++)
        place(m, &ops[i], &p[i]);
    return check_placed(m, ops, p, n, out, now_ms);
}

static int mem_check(rl_store *s, const store_op *ops, size_t n,
                     algo_decision *out, int64_t *now_ms)
{
    mem_store *m = (mem_store *)s;

    if (n == 0 || n > RL_OPS_MAX)
        return RL_EINVAL;
    if (n == 1) /* the usual request: one rule (n constant in the copy) */
        return check_ops(m, ops, 1, out, now_ms);
    return check_ops(m, ops, n, out, now_ms);
}

/* How many ops a check_many places ahead of deciding them: enough
 * misses in flight to fill the core's miss buffers (10-12 on x86), few
 * enough that the lines are still in the cache when decided. */
#define MANY_AHEAD 32

/* Many requests: the ops of up to MANY_AHEAD at a time placed first (their
 * keys hashed, their home slots' misses started together), then each
 * request decided in order, as check() would, under its own locks and
 * clock.  The table's misses then overlap across requests instead of
 * each request's waiting alone. */
static int mem_check_many(rl_store *s, store_req *reqs, size_t n)
{
    mem_store *m = (mem_store *)s;
    placed p[MANY_AHEAD + RL_OPS_MAX];
    size_t next = 0;

    while (next < n) {
        size_t from = next, k = 0, at = 0;
        for (; next < n && (k == 0 || k + reqs[next].n <= MANY_AHEAD);
             next++) {
            if (reqs[next].n == 0 || reqs[next].n > RL_OPS_MAX)
                continue;
            for (size_t j = 0; j < reqs[next].n; j++)
                place(m, &reqs[next].ops[j], &p[k + j]);
            k += reqs[next].n;
        }
        for (size_t r = from; r < next; r++) {
            store_req *q = &reqs[r];
            if (q->n == 0 || q->n > RL_OPS_MAX) {
                q->rc = RL_EINVAL;
                continue;
            }
            q->rc = check_placed(m, q->ops, &p[at], q->n, q->out, &q->now_ms);
            at += q->n;
        }
    }
    return RL_OK;
}

static void mem_free(rl_store *s)
{
    mem_store *m = (mem_store *)s;

    log_budget b = {.bytes = &m->bytes, .max_bytes = m->max_bytes};

    for (unsigned i = 0; i < NSEG; i++) {
        free(m->seg[i].slots);
        log_table_free(&m->seg[i].logs, &b);
    }
    free(m);
}

/* ---- settling a reservation (settle.h) ---------------------------------- */

/* The op's segment, as slots_settle_op finds and writes in it (looked up
 * anew each time: writing may rebuild the segment's table). */
typedef struct mem_seg_ref {
    mem_store *m;
    segment *g;
} mem_seg_ref;

static slot_entry *mem_settle_find(void *arg, uint64_t fp, uint32_t now_s)
{
    const mem_seg_ref *r = arg;

    return slots_find(r->g->slots, r->g->cap, fp, now_s);
}

static void mem_settle_put(void *arg, uint64_t fp, const algo_state *st,
                           int64_t expires_ms, uint32_t keep, uint32_t now_s)
{
    const mem_seg_ref *r = arg;
    uint32_t x = expiry_of(r->m, expires_ms);

    store_entry(r->m, r->g, fp, st, x > keep ? x : keep, now_s);
}

static int mem_settle(rl_store *s, const store_settle *ss, size_t *settled)
{
    mem_store *m = (mem_store *)s;
    placed p[RL_OPS_MAX];
    uint32_t segs[RL_OPS_MAX], now_s;
    int64_t now;
    size_t nseg, i;

    *settled = 0;
    if (ss->n == 0 || ss->n > RL_OPS_MAX)
        return RL_EINVAL;
    for (i = 0; i < ss->n; i++)
        place(m, &ss->ops[i], &p[i]);
    nseg = lock_all(m, p, ss->n, segs);
    now = store_now(m, &now_s);
    for (i = 0; i < ss->n; i++) {
        mem_seg_ref r = {.m = m, .g = &m->seg[p[i].seg]};
        slots_settle_io io = {.find = mem_settle_find, .put = mem_settle_put,
                              .arg = &r};

        *settled += (size_t)slots_settle_op(&io, ss, i, p[i].kh, now, now_s);
    }
    for (i = nseg; i-- > 0;)
        wordlock_unlock(&m->seg[segs[i]].lock);
    return RL_OK;
}

/* No breaker, no start: check() never blocks, so a started request is
 * decided at once.  check_many places every request's ops before
 * deciding any (mem_check_many). */
static const store_vtable mem_vtable = {
    .name = "memory",
    .local = 1,
    .check = mem_check,
    .free = mem_free,
    .check_many = mem_check_many,
    .settle = mem_settle,
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
        g->lock = (wordlock)WORDLOCK_INIT;
        g->cap = SEG_MIN_CAP;
        g->max_used = max_used_of(g->cap);
        if (!(g->slots = slots_alloc(g->cap))) {
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
        h = slots_home(g->slots[i].fp, g->cap);
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
        wordlock_lock(&g->lock);
        st->slots += g->used;
        st->capacity += g->cap;
        st->evictions += g->evictions + g->logs.evictions;
        if (g->used > st->seg_max)
            st->seg_max = g->used;
        st->displacement += displacement(g);
        wordlock_unlock(&g->lock);
    }
    st->bytes = atomic_load(&m->bytes) + (int64_t)sizeof *m;
}
