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
#include <sys/mman.h>

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

/* ---- the blocks' memory --------------------------------------------------
 * Rule blocks and histograms are pieces of chunks mapped for them alone
 * (POOL_CHUNK bytes each, carved into POOL_PIECE-byte pieces, a released
 * piece kept on a free list), not heap objects among the limiter's own:
 * measured with 2 threads checking at once (bench/rlbench metrics under
 * chrt), blocks from malloc() cost the counting 3-7 % of a check against
 * ~2 % from the chunks -- the same instructions, the same lines, whatever
 * the pieces' stride (4,224 to 8,192 bytes was tried), so what differs is
 * what lies beside them in the heap; the cause was not found without
 * hardware counters.  Pieces are taken and given back on rule-set swaps
 * and limiter frees only (never on the request path), under one mutex;
 * when the last piece is back, the chunks are unmapped. */
#define POOL_SIZE_MAX (sizeof(struct rule_metrics) > sizeof(metrics_hist) \
                           ? sizeof(struct rule_metrics)                  \
                           : sizeof(metrics_hist))
#define POOL_PIECE ((POOL_SIZE_MAX + METRICS_SLOT_ALIGN - 1) /            \
                    METRICS_SLOT_ALIGN * METRICS_SLOT_ALIGN)
#define POOL_CHUNK ((size_t)1 << 20)
_Static_assert(POOL_CHUNK / POOL_PIECE >= 2, "a chunk holds pieces");

typedef union pool_piece {
    union pool_piece *next;   /* on the free list; a chunk's first piece:
                                 the chunk list's link */
    char bytes[POOL_PIECE];
} pool_piece;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pool_piece *pool_free;    /* released pieces                      */
static pool_piece *pool_chunks;  /* each chunk's first piece, linked     */
static size_t pool_live;         /* pieces handed out                    */

/* Held across fork() (as malloc's own locks are), so a child never
 * inherits it taken by a thread that does not exist there. */
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static void pool_lock_take(void) { pthread_mutex_lock(&pool_lock); }
static void pool_lock_drop(void) { pthread_mutex_unlock(&pool_lock); }
static void pool_atfork(void)
{
    (void)pthread_atfork(pool_lock_take, pool_lock_drop, pool_lock_drop);
}

/* A new chunk's pieces onto the free list, lowest address first out. */
static int pool_grow(void)
{
    pool_piece *c = mmap(NULL, POOL_CHUNK, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    size_t n = POOL_CHUNK / sizeof *c;

    if (c == MAP_FAILED)
        return -1;
    c->next = pool_chunks;
    pool_chunks = c;
    for (size_t i = n - 1; i >= 1; i--) {
        c[i].next = pool_free;
        pool_free = &c[i];
    }
    return 0;
}

/* A piece of POOL_PIECE bytes, METRICS_SLOT_ALIGN aligned, contents
 * undefined; NULL: no memory. */
static void *pool_take(void)
{
    pool_piece *p = NULL;

    pthread_once(&pool_once, pool_atfork);
    pthread_mutex_lock(&pool_lock);
    if (pool_free || pool_grow() == 0) {
        p = pool_free;
        pool_free = p->next;
        pool_live++;
    }
    pthread_mutex_unlock(&pool_lock);
    return p;
}

/* Give a piece back (NULL: nothing); the last one unmaps the chunks. */
static void pool_give(void *piece)
{
    pool_piece *p = piece;

    if (!p)
        return;
    pthread_mutex_lock(&pool_lock);
    p->next = pool_free;
    pool_free = p;
    if (--pool_live == 0) {
        while (pool_chunks) {
            pool_piece *c = pool_chunks;
            pool_chunks = c->next;
            munmap(c, POOL_CHUNK);
        }
        pool_free = NULL;
    }
    pthread_mutex_unlock(&pool_lock);
}

/* ---- the histogram ------------------------------------------------------ */

metrics_hist *metrics_hist_new(void)
{
    metrics_hist *h = pool_take();

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
    pool_give(h);
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
    struct rule_metrics *m = pool_take();

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
        pool_give(m);
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
