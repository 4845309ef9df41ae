/*
 * lease.c -- the table of grants behind lease.h.
 *
 * Slot i holds one grant: the fingerprint of (rule id and numbers,
 * lease, client key), the units left, the local monotonic ms it ends at,
 * and what Redis said when it charged it (its clock then, what was left,
 * the reset).  Giving units back needs the rule's key in Redis, so the
 * slot also keeps the rule's id and shape and the client key: a copy,
 * because the rule set the grant was taken under may be freed before the
 * grant ends.  Each slot is guarded by its own spin lock, held for a few
 * loads and stores (a copy of the key and shape when a grant is kept or
 * handed back); a give back is built and sent after the lock is dropped.
 */
#include "lease.h"
#include "siphash.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct lease_slot {
    _Atomic int lock;
    uint64_t fp;              /* 0: empty                              */
    int64_t left;             /* units held                            */
    int64_t until;            /* local monotonic ms it ends at         */
    int64_t charged_ms;       /* the store's clock at the charge       */
    int64_t remaining;        /* what the store said was left then     */
    int64_t reset_ms;         /* the store's reset for it              */
    const uint64_t *layout_key;
    rule_shape shape;         /* the rule's numbers and key name part  */
    int64_t window_s;
    int64_t lease;            /* the rule's lease then                 */
    char id[RL_RULE_ID_MAX + 1];
    size_t key_len;
    char key[RL_KEY_MAX + 1];
} __attribute__((aligned(64))) lease_slot;

struct lease_table {
    uint64_t key[2];          /* SipHash key, random to the limiter    */
    size_t mask;
    rl_store *store;
    lease_slot *slot;         /* 64-byte aligned, inside mem           */
    void *mem;
};

/* What a slot gave up, to go back to the store once its lock is dropped. */
typedef struct lease_back {
    int64_t units, charged_ms;
    rl_rule rule;
    const uint64_t *layout_key;
    size_t key_len;
    char key[RL_KEY_MAX + 1];
} lease_back;

lease_table *lease_new(size_t entries, rl_store *store)
{
    size_t n = 1;
    lease_table *t = calloc(1, sizeof *t);

    while (n < entries)
        n <<= 1;
    /* calloc: a large table's pages stay untouched (not resident) until
     * a grant lands in them; one slot more to align the first to 64 */
    if (!t || !(t->mem = calloc(n + 1, sizeof t->slot[0]))) {
        free(t);
        return NULL;
    }
    t->slot = (lease_slot *)(((uintptr_t)t->mem + 63) & ~(uintptr_t)63);
    siphash_random_key(t->key);
    t->mask = n - 1;
    t->store = store;
    return t;
}

static void slot_lock(lease_slot *e)
{
    for (unsigned spins = 0;; spins++) {
        int free_ = 0;
        if (!atomic_load_explicit(&e->lock, memory_order_relaxed) &&
            atomic_compare_exchange_weak_explicit(
                &e->lock, &free_, 1, memory_order_acquire,
                memory_order_relaxed))
            return;
        if (spins > 64)
            sched_yield(); /* the holder is off its CPU */
    }
}

static void slot_unlock(lease_slot *e)
{
    atomic_store_explicit(&e->lock, 0, memory_order_release);
}


/* *b: `units` charged at charged_ms under the rule (id, shape, window)
 * for the client key, to go back to the store. */
static void back_set(lease_back *b, const char *id, const rule_shape *shape,
                     int64_t window_s, const uint64_t *layout_key,
                     const char *key, size_t key_len, int64_t units,
                     int64_t charged_ms)
{
    memset(&b->rule, 0, sizeof b->rule);
    memcpy(b->rule.id, id, sizeof b->rule.id);
    b->rule.shape = *shape;
    b->rule.ap = shape->ap;
    b->rule.window_s = window_s;
    b->units = units;
    b->charged_ms = charged_ms;
    b->layout_key = layout_key;
    b->key_len = key_len;
    memcpy(b->key, key, key_len);
    b->key[key_len] = '\0';
}

/* Empty slot e (locked), its unspent units into *b (b->units 0: none). */
static void slot_release(lease_slot *e, lease_back *b)
{
    b->units = 0;
    if (e->fp && e->left > 0)
        back_set(b, e->id, &e->shape, e->window_s, e->layout_key, e->key,
                 e->key_len, e->left, e->charged_ms);
    e->fp = 0;
    e->left = 0;
}

/* Hand b's units back to the store (after the slot's lock is dropped). */
static int give_back(lease_table *t, lease_back *b, int wait)
{
    store_op op;

    if (b->units <= 0)
        return RL_OK;
    op = (store_op){.rule = &b->rule, .key = b->key, .key_len = b->key_len,
                    .cost = b->units, .layout_key = b->layout_key};
    return t->store->vt->give_back(t->store, &op, b->units, b->charged_ms,
                                   wait);
}

void lease_free(lease_table *t)
{
    int wait = 1;

    if (!t)
        return;
    for (size_t i = 0; i <= t->mask; i++) {
        lease_back b;
        slot_release(&t->slot[i], &b);
        if (give_back(t, &b, wait) != RL_OK)
            wait = 0; /* the store is away: do not wait for each */
    }
    free(t->mem);
    free(t);
}

int lease_take(lease_table *t, const store_op *op, int64_t now_mono,
               algo_decision *d)
{
    uint64_t fp = store_op_fingerprint(op, op->rule->lease, t->key);
    lease_slot *e = &t->slot[fp & t->mask];
    lease_back b = {.units = 0};
    int hit = 0;

    slot_lock(e);
    if (e->fp == fp && e->until <= now_mono) {
        slot_release(e, &b); /* ended: what is left goes back */
    } else if (e->fp == fp && e->left >= op->cost) {
        e->left -= op->cost;
        *d = (algo_decision){.allowed = 1, .changed = op->cost > 0,
                             .remaining = e->remaining + e->left,
                             .reset_ms = e->reset_ms,
                             .expires_ms = e->reset_ms};
        hit = 1;
    }
    slot_unlock(e);
    give_back(t, &b, 0);
    return hit;
}

void lease_untake(lease_table *t, const store_op *op, int64_t units)
{
    uint64_t fp = store_op_fingerprint(op, op->rule->lease, t->key);
    lease_slot *e = &t->slot[fp & t->mask];

    slot_lock(e);
    if (e->fp == fp) /* else replaced meanwhile: the units stay unspent */
        e->left += units;
    slot_unlock(e);
}

int lease_room(lease_table *t, const store_op *op, int64_t now_mono)
{
    uint64_t fp = store_op_fingerprint(op, op->rule->lease, t->key);
    lease_slot *e = &t->slot[fp & t->mask];
    int room;

    slot_lock(e);
    room = !e->fp || e->fp == fp || e->left <= 0 || e->until <= now_mono;
    slot_unlock(e);
    return room;
}

/* How long a grant charged by d (the store's clock now_store) may be
 * spent, from t0_mono: LEASE_TTL_MS at most, never past its window's
 * end for a fixed window (t0_mono is no later than the store's charge,
 * so the local end comes no later than the store's). */
static int64_t grant_until(const store_op *op, const algo_decision *d,
                           int64_t t0_mono, int64_t now_store)
{
    int64_t life = LEASE_TTL_MS;

    if (op->rule->ap.window_ms < life)
        life = op->rule->ap.window_ms;
    if (op->rule->ap.algo == RL_ALGO_FIXED_WINDOW &&
        d->reset_ms - now_store < life)
        life = d->reset_ms - now_store;
    return t0_mono + life;
}

/* Fill empty slot e (locked) with op's grant of `units`. */
static void slot_fill(lease_slot *e, uint64_t fp, const store_op *op,
                      const algo_decision *d, int64_t units, int64_t until,
                      int64_t now_store)
{
    e->fp = fp;
    e->left = units;
    e->until = until;
    e->charged_ms = now_store;
    e->remaining = d->remaining;
    e->reset_ms = d->reset_ms;
    e->layout_key = op->layout_key;
    e->shape = op->rule->shape;
    e->window_s = op->rule->window_s;
    e->lease = op->rule->lease;
    memcpy(e->id, op->rule->id, sizeof e->id);
    e->key_len = op->key_len;
    memcpy(e->key, op->key, op->key_len);
    e->key[op->key_len] = '\0';
}

void lease_put(lease_table *t, const store_op *op, const algo_decision *d,
               int64_t t0_mono, int64_t now_store)
{
    uint64_t fp = store_op_fingerprint(op, op->rule->lease, t->key);
    lease_slot *e = &t->slot[fp & t->mask];
    int64_t units = d->granted - op->cost;
    int64_t until = grant_until(op, d, t0_mono, now_store);
    lease_back old = {.units = 0};
    lease_back mine = {.units = 0};
    int kept = 0;

    if (units <= 0)
        return;
    slot_lock(e);
    if (!e->fp || e->left <= 0 || e->until <= t0_mono) {
        slot_release(e, &old);
        slot_fill(e, fp, op, d, units, until, now_store);
        kept = 1;
    }
    slot_unlock(e);
    give_back(t, &old, 0);
    if (!kept) { /* the slot is another's, or op's still holds units */
        back_set(&mine, op->rule->id, &op->rule->shape, op->rule->window_s,
                 op->layout_key, op->key, op->key_len, units, now_store);
        give_back(t, &mine, 0);
    }
}

void lease_drop_changed(lease_table *t, const rl_ruleset *rs)
{
    for (size_t i = 0; i <= t->mask; i++) {
        lease_slot *e = &t->slot[i];
        lease_back b = {.units = 0};
        const rl_rule *r;

        slot_lock(e);
        if (e->fp && e->left > 0) {
            r = ruleset_find(rs, e->id);
            if (!r || memcmp(&r->ap, &e->shape.ap, sizeof r->ap) != 0 ||
                r->lease != e->lease || strcmp(r->shape.name, e->shape.name) != 0)
                slot_release(e, &b);
        }
        slot_unlock(e);
        give_back(t, &b, 0);
    }
}
