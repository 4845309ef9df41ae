/*
 * metrics.c -- the per-rule metric blocks and the latency histogram (see
 * metrics.h): the threads' counter slots, making blocks, carrying them
 * across rule-set swaps, and summing the slots when the metrics are
 * written.
 *
 * Ownership under RCU, as dryrun.c: a block is reference-counted by the
 * rule sets that point to it; metrics_inherit() gives the new set's rule
 * one more reference to its predecessor's block (or a fresh block with
 * one), metrics_detach() (from ruleset_free()) drops each set's.  Request
 * threads reach a block only through a set they hold under the RCU read
 * lock, and a set is freed only after its last reader, so no thread
 * counts into a freed block.  Unlike the dry-run block, a rule keeps its
 * block whatever changed in it: the counters say what the rule of that id
 * decided, and a rule's limit is itself a metric (rl_metrics_write(3)).
 */
#include "metrics.h"
#include "error.h"

#include <pthread.h>
#include <stdlib.h>

const int64_t metrics_bucket_ns[METRICS_BUCKETS] = {
    10000,    25000,    50000,    100000,   250000,    500000,   1000000,
    2500000,  5000000,  10000000, 25000000, 50000000, 100000000,
};

/* ---- the threads' slots --------------------------------------------------
 * A bit per slot but the shared one, set while the slot is free.  A thread
 * claims the lowest free slot on its first count and, through a pthread
 * key's destructor, frees it when it exits; the next owner's claim
 * (acquire) follows the last owner's release, so it goes on from the
 * counts the last owner stored.  The process's slots are the limiters'
 * alike: a thread counts in the same slot of every block. */
_Static_assert(METRICS_SHARED <= 32, "the free slots fit one mask");
static _Atomic uint32_t free_slots = (uint32_t)((1ULL << METRICS_SHARED) - 1);
static pthread_key_t slot_key;
static pthread_once_t slot_once = PTHREAD_ONCE_INIT;
_Thread_local metrics_thread metrics_me
    __attribute__((tls_model("initial-exec"))) = {.slot = ~0u};

static void slot_free(void *arg)
{
    unsigned slot = (unsigned)(uintptr_t)arg - 1;

    atomic_fetch_or_explicit(&free_slots, 1u << slot, memory_order_acq_rel);
}

static void slot_key_make(void)
{
    (void)pthread_key_create(&slot_key, slot_free);
}

static unsigned slot_claim(void)
{
    uint32_t mask = atomic_load_explicit(&free_slots, memory_order_acquire);

    while (mask) {
        unsigned slot = (unsigned)__builtin_ctz(mask);
        if (atomic_compare_exchange_weak_explicit(
                &free_slots, &mask, mask & ~(1u << slot),
                memory_order_acq_rel, memory_order_acquire)) {
            pthread_once(&slot_once, slot_key_make);
            if (pthread_setspecific(slot_key,
                                    (void *)(uintptr_t)(slot + 1)) == 0)
                return slot;
            slot_free((void *)(uintptr_t)(slot + 1)); /* never freed: */
            return METRICS_SHARED;                     /* share instead */
        }
    }
    return METRICS_SHARED;
}

void metrics_claim(void)
{
    metrics_me.slot = slot_claim();
}

/* ---- the histogram ------------------------------------------------------ */

metrics_hist *metrics_hist_new(void)
{
    metrics_hist *h = aligned_alloc(METRICS_SLOT_ALIGN, sizeof *h);

    if (!h)
        return NULL;
    for (int s = 0; s < METRICS_SLOTS; s++) {
        for (int b = 0; b <= METRICS_BUCKETS; b++)
            atomic_init(&h->shard[s].n[b], 0);
        atomic_init(&h->shard[s].sum_ns, 0);
    }
    return h;
}

void metrics_hist_free(metrics_hist *h)
{
    free(h);
}

void metrics_observe(metrics_hist *h, unsigned slot, int64_t ns,
                     uint64_t count)
{
    unsigned b = 0;

    if (ns < 0)
        ns = 0;
    while (b < METRICS_BUCKETS && ns > metrics_bucket_ns[b])
        b++;
    metrics_add(&h->shard[slot].n[b], slot, count);
    metrics_add(&h->shard[slot].sum_ns, slot, (uint64_t)ns * count);
}

/* ---- the rules' blocks -------------------------------------------------- */

static struct rule_metrics *block_new(void)
{
    struct rule_metrics *m = aligned_alloc(METRICS_SLOT_ALIGN, sizeof *m);

    if (!m)
        return NULL;
    for (int s = 0; s < METRICS_SLOTS; s++)
        for (int k = 0; k < RM_COUNT; k++)
            atomic_init(&m->shard[s].n[k], 0);
    atomic_init(&m->refs, 1);
    return m;
}

static void block_release(struct rule_metrics *m)
{
    if (m && atomic_fetch_sub_explicit(&m->refs, 1,
                                       memory_order_acq_rel) == 1)
        free(m);
}

void metrics_detach(rl_ruleset *rs)
{
    for (size_t i = 0; i < rs->n; i++) {
        block_release(rs->rules[i].met);
        rs->rules[i].met = NULL;
    }
}

int metrics_inherit(rl_ruleset *next, const rl_ruleset *old)
{
    for (size_t i = 0; i < next->n; i++) {
        rl_rule *r = &next->rules[i];
        const rl_rule *o = old ? ruleset_find(old, r->id) : NULL;

        if (r->met) /* given already */
            continue;
        if (o && o->met) {
            atomic_fetch_add_explicit(&o->met->refs, 1, memory_order_relaxed);
            r->met = o->met;
        } else if (!(r->met = block_new())) {
            metrics_detach(next);
            return RL_ENOMEM;
        }
    }
    return RL_OK;
}

void metrics_read(const struct rule_metrics *m, uint64_t out[RM_COUNT])
{
    for (int k = 0; k < RM_COUNT; k++)
        out[k] = 0;
    for (int s = 0; s < METRICS_SLOTS; s++)
        for (int k = 0; k < RM_COUNT; k++)
            out[k] += atomic_load_explicit(&m->shard[s].n[k],
                                           memory_order_relaxed);
}

void metrics_hist_read(const metrics_hist *h,
                       uint64_t out[METRICS_BUCKETS + 1], uint64_t *sum_ns)
{
    *sum_ns = 0;
    for (int b = 0; b <= METRICS_BUCKETS; b++)
        out[b] = 0;
    for (int s = 0; h && s < METRICS_SLOTS; s++) {
        for (int b = 0; b <= METRICS_BUCKETS; b++)
            out[b] += atomic_load_explicit(&h->shard[s].n[b],
                                           memory_order_relaxed);
        *sum_ns += atomic_load_explicit(&h->shard[s].sum_ns,
                                        memory_order_relaxed);
    }
}
