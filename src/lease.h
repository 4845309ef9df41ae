/*
 * lease.h -- units leased from Redis, spent locally (a rule's "lease").
 *
 * A rule of a very high limit (a partner at a million a minute) costs a
 * script call per check.  With "lease": N, a limiter on a Redis store
 * charges N units (or what is left, at least the request's cost) in one
 * call, answers the request, and keeps the rest of the N in a local
 * grant per (client key, rule), spent by the next checks without a call
 * (RL_FLAG_LEASED).  A grant lives until the end of the window it was
 * charged in (fixed window) and at most LEASE_TTL_MS (every algorithm);
 * what is left of it goes back to Redis (the script's refund op, at the
 * charge's time) when a check finds it expired, when its rule changes or
 * leaves the set, and at rl_limiter_free().
 *
 * The bound: a limiter holds at most N - 1 charged, unspent units per
 * (key, rule) at any moment (a second grant for a pair that still holds
 * units is given back at once, never added), and every unit it admits
 * was charged in Redis before, at most LEASE_TTL_MS before.  So the
 * requests admitted in any span are what Redis charged in that span plus
 * at most fleet_size x (N - 1) charged before it: a fleet admits at most
 * fleet_size x (N - 1) over the rule's limit in a window (sliding window,
 * token bucket, GCRA).  A fixed window's grants end with their window, so
 * every unit admitted in a window was charged in it: never over the
 * limit; instead up to fleet_size x (N - 1) units may stay unspent at the
 * window's end (under-admission), plus per limiter what its threads'
 * simultaneous leases gave back while the limit looked spent to a check
 * denied meanwhile (up to (threads - 1) x (N - 1)).
 *
 * The table: a fixed array of slots allocated at start (option
 * lease_entries, rounded up to a power of two; 0: none), direct-mapped
 * by a SipHash fingerprint of (rule id and numbers, lease, client key)
 * under a key random to the limiter; each slot its own spin lock held for
 * a few loads and stores (no global lock, no allocation).  A slot held by
 * another pair's live grant is "full": that check goes to Redis plainly
 * (counted, ratelimit_rule_lease_full_total).  The fingerprint covers the
 * rule's numbers, so a changed rule never spends a grant taken under its
 * old numbers.
 */
#ifndef RL_LEASE_H
#define RL_LEASE_H

#include "ruleset.h"
#include "store.h"

#include <stddef.h>
#include <stdint.h>

#define LEASE_TTL_MS 1000 /* a grant's longest life (ms)               */

typedef struct lease_table lease_table;

/* A table of about `entries` slots whose grants go back to `store`
 * (which must have give_back), or NULL when out of memory. */
lease_table *lease_new(size_t entries, rl_store *store);

/* Give back every grant's unspent units, each waited for (the store's
 * timeout; after a failure the rest are only sent), then free. */
void lease_free(lease_table *t);

/* Spend op's cost from its live grant at local monotonic time now_mono:
 * 1 with *d the admission (remaining: what Redis said was left at the
 * grant plus what the grant still holds; the grant's reset), else 0.  An
 * expired grant found here is given back (sent, not waited for). */
int lease_take(lease_table *t, const store_op *op, int64_t now_mono,
               algo_decision *d);

/* Put back units lease_take() took for op (the request was denied by
 * another of its rules: nothing of it is kept). */
void lease_untake(lease_table *t, const store_op *op, int64_t units);

/* 1 if a grant for op could be kept now: its slot is empty, expired,
 * spent, or op's own; 0: another pair's live grant holds it. */
int lease_room(lease_table *t, const store_op *op, int64_t now_mono);

/* The store charged op's lease d->granted units (op->cost of them are
 * the request's), its clock reading now_store, asked at local monotonic
 * time t0_mono: keep the rest as op's grant.  When they cannot be kept
 * (the slot is another pair's, or op's grant still holds units) they go
 * back at once (sent, not waited for). */
void lease_put(lease_table *t, const store_op *op, const algo_decision *d,
               int64_t t0_mono, int64_t now_store);

/* A rule set was swapped in: grants whose rule left it or changed (its
 * numbers or lease) are dropped and given back (sent, not waited for). */
void lease_drop_changed(lease_table *t, const rl_ruleset *rs);

#endif
