/*
 * dryrun.h -- what a rule in mode "log" would have done: per rule, the
 * checks it decided, those it would have rejected, and a HyperLogLog sketch
 * (hll.h) of the distinct client keys it would have rejected.
 *
 * The counters live in a block beside the rule (rl_rule.dry), given at
 * the swap to each rule in mode "log" (and kept by a rule flipped to
 * "enforce") and NULL for the rest, so an enforce-mode rule pays one test
 * of its soft flag and nothing more.
 * Memory is one block (about 3 KiB) per rule that counts, never per key.
 * The request path counts with no lock and no allocation: one add per
 * charge (passed or would_deny; checks are their sum) in the calling
 * thread's metrics slot (metrics_self(), as stats.h and metrics.h count: a
 * plain load and store on a cache line no other thread writes, an atomic
 * add in the shared last slot), summed over the slots by dryrun_read();
 * and a register raised with a compare-and-swap on its byte, only when the
 * key's rank is larger; keys are hashed only when the rule would deny.
 *
 * Across a rule-set swap a block is handed to the new set's rule with the
 * same id while what it counts is unchanged (dimension, match, algorithm,
 * limit, burst, window): see dryrun_inherit().  The block is then shared by
 * both sets, and is reference-counted (see dryrun.c).
 */
#ifndef RL_DRYRUN_H
#define RL_DRYRUN_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "hll.h"
#include "metrics.h"
#include "ruleset.h"

struct dryrun {
    struct {
        _Atomic uint64_t passed;     /* charges it would have let pass */
        _Atomic uint64_t would_deny; /* ... and would have denied      */
    } __attribute__((aligned(64))) shard[METRICS_SLOTS]; /* checks: both */
    _Atomic uint8_t reg[HLL_M];      /* the sketch's registers          */
    _Atomic uint32_t refs;           /* rule sets holding the block     */
    int64_t since_ms;                /* epoch ms the block was made     */
};

/* A snapshot of a block, read without stopping the counting (threads
 * counting meanwhile may be in one slot's read and not in another's). */
typedef struct dryrun_counts {
    uint64_t checks, would_deny;
    int64_t since_ms;
    hll sketch;
} dryrun_counts;

/* Register the key of a charge the rule would have denied (the slow half
 * of dryrun_note()). */
void dryrun_seen(struct dryrun *d, const char *key, size_t len);

/* Count one charge a rule in mode "log" decided.  d may be NULL (a set
 * swapped in without dryrun_inherit(): nothing is counted). */
static inline void dryrun_note(struct dryrun *d, int denied, const char *key,
                               size_t len)
{
    unsigned slot;

    if (!d)
        return;
    /* One add per charge: checks are the sum of the two. */
    slot = metrics_self()->slot;
    metrics_add(denied ? &d->shard[slot].would_deny : &d->shard[slot].passed,
                slot, 1);
    if (denied)
        dryrun_seen(d, key, len);
}

/* Give the rules of a new set their blocks, before it is swapped in for
 * `old` (on the writer side: `next` is not yet published).  A rule whose
 * predecessor in `old` (same rule_id) has a block and counts the same
 * thing shares that block, whatever either rule's mode: a rule flipped to
 * "enforce" keeps its counts, frozen, and goes on from them when flipped
 * back.  Any other rule in mode "log" gets a fresh block (so an unchanged
 * set swapped in again allocates nothing); the rest none.  RL_OK, or
 * RL_ENOMEM with no block given (the caller frees `next`). */
int dryrun_inherit(rl_ruleset *next, const rl_ruleset *old);

/* Release the set's references (ruleset_free() calls it). */
void dryrun_detach(rl_ruleset *rs);

/* Read a block (d non-NULL). */
void dryrun_read(const struct dryrun *d, dryrun_counts *out);

#endif
