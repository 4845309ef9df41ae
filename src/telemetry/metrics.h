/*
 * metrics.h -- the counters behind rl_metrics_write(): per rule, how its
 * charges were decided; per limiter, how long checks took.  The text they
 * are written in is metrics_text.c's; the shards' numbers (breakers, I/O)
 * are the stores' own, read at write time (store_vtable.shards).
 *
 * Per rule, a block beside the rule (rl_rule.met), as the dry-run
 * counters are (dryrun.h): made at the swap, handed to the next set's rule
 * with the same id whatever else changed (so a rule's counts survive any
 * reload, and a rule that leaves the set leaves the output), and
 * reference-counted because two sets share it across a swap.
 *
 * Counting is per thread and lock-free.  A block has METRICS_SLOTS cache
 * lines (2 KiB); a thread claims a slot of its own on its first count
 * (metrics_self()) and gives it back when it exits, so its adds are a
 * plain load and store on a line no other thread writes (no locked
 * instruction), summed over the slots at write time.  When every slot but
 * the last is taken, further threads share the last one with atomic adds.
 * A charge costs one such add (two or three when near its limit or decided
 * by a failure mode); no lock, no allocation, no system call.  A charge
 * the store decided (the common case, metrics_note_decided) picks its
 * verdict's counter by arithmetic, and its check tests the slot's kind
 * of add once, not per add: a memory-store check of 3 rules (~4,700
 * instructions under callgrind) spends ~110 of them counting, ~1.4 % of
 * its time in perf's samples (bench/rlbench metrics measures the whole).
 *
 * The latency histogram is slotted the same way, in a block of its own
 * (metrics_hist_new(), lim->latency; not in the limiter, whose lines every
 * check reads).  Each slot of a block, a rule's or the histogram's, is a
 * 128-byte aligned pair of cache lines (METRICS_SLOT_ALIGN), and every
 * block a piece of chunks mapped for the blocks alone (metrics.c's pool),
 * not a heap object beside the limiter's.  A clock
 * read costs as much as a memory-store check's counting, so on the local
 * stores (memory://, shm://) one check in METRICS_SAMPLE_MEMORY per thread
 * is timed; on the Redis stores, whose checks take a round trip, every
 * one.  Which: metrics_sampled(), one load and store of the thread's
 * tick; a timed check runs out of line (request.c's run_timed), so an
 * untimed one reads no clock and holds no start time across the store's
 * call.  The option metrics=0 gives no blocks and reads no clock: nothing
 * counted.
 *
 * The timing costs an untimed check ~7 instructions, the counting above
 * ~105 of a 3-rule check; with 2 threads running at once on distinct
 * keys the counting costs 3-7 % of a check, more than its instructions
 * (docs/BENCHMARKS.md, Metrics).
 */
#ifndef RL_METRICS_H
#define RL_METRICS_H

#include <stdatomic.h>
#include <stdint.h>

#include "algo.h"
#include "ruleset.h"

/* A rule's counters: checks are allowed + denied + would_deny. */
enum rule_metric {
    RM_ALLOWED,     /* the rule's own verdict on its charge: passed       */
    RM_DENIED,      /* denied (mode enforce)                               */
    RM_WOULD_DENY,  /* would have denied (mode log: passed)                */
    RM_NEAR,        /* passed with less than near_limit_pct % left         */
    RM_FAIL_OPEN,   /* the store failed: decided by failure mode open      */
    RM_FALLBACK,    /*   ... by the local fallback                        */
    RM_FAIL_CLOSED, /*   ... by failure mode closed                       */
    RM_CACHED,      /* a denial answered by the deny cache (deny_cache.h) */
    RM_LEASED,      /* admitted from a lease, Redis not asked (lease.h)   */
    RM_LEASE_FULL,  /* a leased rule charged plainly: its slot was taken  */
    RM_COUNT
};

#define METRICS_SLOTS 32                     /* per-thread counter slots */
#define METRICS_SHARED (METRICS_SLOTS - 1)   /* the slot threads share   */
#define METRICS_SAMPLE_MEMORY 64             /* memory store: 1 timed in */

/* A slot's alignment and least size: a 128-byte aligned pair of cache
 * lines.  x86's adjacent-line prefetcher fetches lines in such pairs, so
 * a slot sharing one with another thread's slot draws that thread's line
 * across the cores on every miss, as if they wrote the same line. */
#define METRICS_SLOT_ALIGN 128

struct rule_metrics {
    struct {
        _Atomic uint64_t n[RM_COUNT];
    } __attribute__((aligned(METRICS_SLOT_ALIGN))) shard[METRICS_SLOTS];
    _Atomic uint32_t refs;           /* rule sets holding the block       */
};

/* The check-latency histogram's upper bounds, in nanoseconds: 10 us to
 * 100 ms; one more bucket counts the rest (+Inf). */
#define METRICS_BUCKETS 13
extern const int64_t metrics_bucket_ns[METRICS_BUCKETS];

typedef struct metrics_hist {
    struct {
        _Atomic uint64_t n[METRICS_BUCKETS + 1]; /* not cumulative       */
        _Atomic uint64_t sum_ns;
    } __attribute__((aligned(METRICS_SLOT_ALIGN))) shard[METRICS_SLOTS];
} metrics_hist;

_Static_assert(sizeof(((metrics_hist *)0)->shard[0]) == METRICS_SLOT_ALIGN &&
               sizeof(((struct rule_metrics *)0)->shard[0]) ==
                   METRICS_SLOT_ALIGN,
               "a slot's counters fit its pair of lines");

/* The limiter's switches (options metrics, near_limit_pct) and which
 * checks are timed: those whose thread's tick & sample_mask is 0. */
typedef struct metrics_conf {
    int on;
    int64_t near_pct;
    unsigned sample_mask;
} metrics_conf;

/* This thread's counting state: its slot (claimed on the first call) and
 * the tick that picks the checks it times. */
typedef struct metrics_thread {
    unsigned slot;
    unsigned tick;
    unsigned event_tick;  /* picks the denials sampled (events.h) */
} metrics_thread;

/* Initial-exec: one %fs-relative load, no __tls_get_addr call on the
 * request path (8 bytes of the static TLS surplus if dlopen()ed). */
extern _Thread_local metrics_thread metrics_me
    __attribute__((tls_model("initial-exec")));
void metrics_claim(void);

static inline metrics_thread *metrics_self(void)
{
    if (__builtin_expect(metrics_me.slot == ~0u, 0))
        metrics_claim();
    return &metrics_me;
}

/* Whether the calling thread times this check (metrics on, and its tick
 * & sample_mask is 0): one load and store of the thread's tick, no slot
 * claimed (metrics_observe's caller claims it, on timed checks only). */
static inline int metrics_sampled(const metrics_conf *mc)
{
    return mc->on && (metrics_me.tick++ & mc->sample_mask) == 0;
}

/* Add v to counter c of a slot: a plain load and store in a thread's own
 * slot (its thread alone writes it), an atomic add in the shared one.
 * Callers that count several charges test `shared` once, so each of
 * their loops is compiled with one kind of add and no test per add. */
static inline void metrics_add_as(_Atomic uint64_t *c, int shared,
                                  uint64_t v)
{
    if (shared)
        atomic_fetch_add_explicit(c, v, memory_order_relaxed);
    else
        atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed)
                                     + v, memory_order_relaxed);
}

/* Add v to a counter of slot `slot`. */
static inline void metrics_add(_Atomic uint64_t *c, unsigned slot,
                               uint64_t v)
{
    metrics_add_as(c, slot == METRICS_SHARED, v);
}

_Static_assert(RM_ALLOWED == 0 && RM_WOULD_DENY == RM_DENIED + 1,
               "a verdict's counter is (!allowed) * (RM_DENIED + soft)");

/* Count a charge the store decided (no failure mode, no cache) in slot
 * `slot` of m (not NULL): its verdict's counter, picked by arithmetic
 * rather than branches, and RM_NEAR when it passed with less than
 * near_pct % of its limit left.  One add; two when near. */
static inline void metrics_note_decided(struct rule_metrics *m,
                                        unsigned slot, int shared,
                                        const algo_decision *d, int soft,
                                        int64_t limit, int64_t near_pct)
{
    _Atomic uint64_t *n = m->shard[slot].n;
    unsigned denied = d->allowed == 0;

    metrics_add_as(&n[denied * (RM_DENIED + (unsigned)(soft != 0))], shared,
                   1);
    if (!denied && d->remaining * 100 < limit * near_pct)
        metrics_add_as(&n[RM_NEAR], shared, 1);
}

/* Count one charge of a rule in slot `slot` (m NULL: metrics off,
 * nothing counted): the store's decision d, whether the rule is in mode
 * log (soft), and how a failed store was stood in for (RM_FAIL_OPEN,
 * RM_FALLBACK, RM_FAIL_CLOSED), or that the deny cache answered
 * (RM_CACHED); 0: the store decided. */
static inline void metrics_note(struct rule_metrics *m, unsigned slot,
                                const algo_decision *d, int soft, int how,
                                int64_t limit, int64_t near_pct)
{
    if (!m)
        return;
    metrics_note_decided(m, slot, slot == METRICS_SHARED, d, soft, limit,
                         near_pct);
    if (how)
        metrics_add(&m->shard[slot].n[how], slot, 1);
}

/* A limiter's histogram, zeroed, in a block of its own (not beside the
 * limiter's other fields, whose lines every check reads); NULL: out of
 * memory.  metrics_hist_free() frees it (NULL: nothing). */
metrics_hist *metrics_hist_new(void);
void metrics_hist_free(metrics_hist *h);

/* Count `count` checks that took ns nanoseconds each, in slot `slot`. */
void metrics_observe(metrics_hist *h, unsigned slot, int64_t ns,
                     uint64_t count);

/* Give the rules of a new set their blocks before it is swapped in for
 * `old` (writer side): the old set's rule with the same id shares its
 * block; any other rule gets a fresh one.  RL_OK, or RL_ENOMEM with no
 * block given (the caller frees `next`). */
int metrics_inherit(rl_ruleset *next, const rl_ruleset *old);

/* Release the set's references (ruleset_free() calls it). */
void metrics_detach(rl_ruleset *rs);

/* A block's counts, summed over the shards (not one instant's). */
void metrics_read(const struct rule_metrics *m, uint64_t out[RM_COUNT]);

/* The histogram's counts per bucket (not cumulative) and sum; h NULL
 * (metrics off): zeros. */
void metrics_hist_read(const metrics_hist *h,
                       uint64_t out[METRICS_BUCKETS + 1], uint64_t *sum_ns);

#endif
