/*
 * deny_cache.c -- the table behind deny_cache.h.
 *
 * Slot i holds one denial: the fingerprint of (rule id, rule numbers,
 * client key), the local monotonic ms it ends at, the epoch ms of the
 * reset Redis reported and the cost it was denied for.  Written under a
 * per-slot sequence number (odd: being written) taken by compare-and-swap,
 * so two writers never interleave (the loser drops its entry) and a
 * reader that sees the number move retries never: it reports a miss and
 * the request goes to Redis as it would without the cache.
 */
#include "deny_cache.h"
#include "rule.h"
#include "siphash.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct deny_slot {
    _Atomic uint64_t seq;     /* odd while a writer fills the slot     */
    _Atomic uint64_t fp;      /* 0: empty                              */
    _Atomic int64_t until;    /* local monotonic ms the denial ends at  */
    _Atomic int64_t reset_ms; /* the store's reset time (epoch ms)     */
    _Atomic int64_t cost;     /* the cost denied                       */
} deny_slot;

struct deny_cache {
    uint64_t key[2];          /* SipHash key, random to the limiter    */
    size_t mask;
    deny_slot slot[];
};

deny_cache *deny_cache_new(size_t entries)
{
    size_t n = 1;
    deny_cache *c;

    while (n < entries)
        n <<= 1;
    if (!(c = calloc(1, sizeof *c + n * sizeof c->slot[0])))
        return NULL;
    siphash_random_key(c->key);
    c->mask = n - 1;
    return c;
}

void deny_cache_free(deny_cache *c)
{
    free(c);
}


void deny_cache_put(deny_cache *c, const store_op *op,
                    const algo_decision *d, int64_t now_mono,
                    int64_t now_store)
{
    int64_t reset = d->reset_ms > now_store + d->retry_ms
                        ? d->reset_ms : now_store + d->retry_ms;
    uint64_t fp, s;
    deny_slot *e;

    if (d->allowed || op->soft || op->cost <= 0 || d->retry_ms <= 0)
        return;
    fp = store_op_fingerprint(op, 0, c->key);
    e = &c->slot[fp & c->mask];
    s = atomic_load_explicit(&e->seq, memory_order_relaxed);
    if ((s & 1) || !atomic_compare_exchange_strong_explicit(
                       &e->seq, &s, s + 1, memory_order_relaxed,
                       memory_order_relaxed))
        return; /* another writer has the slot: keep its entry */
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&e->fp, fp, memory_order_relaxed);
    atomic_store_explicit(&e->until, now_mono + d->retry_ms,
                          memory_order_relaxed);
    atomic_store_explicit(&e->reset_ms, reset, memory_order_relaxed);
    atomic_store_explicit(&e->cost, op->cost, memory_order_relaxed);
    atomic_store_explicit(&e->seq, s + 2, memory_order_release);
}

int deny_cache_get(deny_cache *c, const store_op *op, int64_t now_mono,
                   algo_decision *d)
{
    uint64_t fp, s;
    int64_t until, reset, cost;
    deny_slot *e;

    if (op->soft || op->cost <= 0)
        return 0;
    fp = store_op_fingerprint(op, 0, c->key);
    e = &c->slot[fp & c->mask];
    s = atomic_load_explicit(&e->seq, memory_order_acquire);
    if ((s & 1) || atomic_load_explicit(&e->fp, memory_order_relaxed) != fp)
        return 0;
    until = atomic_load_explicit(&e->until, memory_order_relaxed);
    reset = atomic_load_explicit(&e->reset_ms, memory_order_relaxed);
    cost = atomic_load_explicit(&e->cost, memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&e->seq, memory_order_relaxed) != s ||
        until <= now_mono || op->cost < cost)
        return 0;
    *d = (algo_decision){.allowed = 0, .remaining = 0, .reset_ms = reset,
                         .retry_ms = until - now_mono};
    return 1;
}
