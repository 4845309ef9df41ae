/*
 * settle.h -- settling a reservation (rl_settle) in a store: what one
 * settle asks of the store (store_settle, store.h's vtable `settle`), and
 * the maths every store applies to a client's state, the same steps as
 * lua/settle.lua repeats inside Redis:
 *
 *   refund (actual < estimate): the charge's own algorithm run backwards,
 *     as of the charge's time (check.lua's "r" op: a window refunds only
 *     the window it was charged in, never below zero; a bucket never
 *     above its burst; GCRA's arrival time moves back);
 *   debt (actual > estimate): charged now, whatever the state: a window's
 *     count up to its limit; a bucket (token_bucket, gcra) down to empty
 *     and then up to one burst of debt past it, kept as a refill time (a
 *     TAT) in the future, so the state's encoding is the one checks write.
 *
 * A reservation settles each op at most once: the store keeps a marker
 * per (reservation, op) until the charge's time plus the rule's state
 * life, written only if absent, in the same atomic step as the state's
 * change; an op whose marker exists, or whose charge has outlived its
 * rule's state life, is not settled.
 */
#ifndef RL_SETTLE_H
#define RL_SETTLE_H

#include <stddef.h>
#include <stdint.h>

#include "algo.h"

struct store_op;

/* One settle: ops[0..n), each op's cost the units to give back (refund)
 * or to charge (debt), and op_id[i] its identity (settle_op_id). */
typedef struct store_settle {
    const struct store_op *ops;
    const uint64_t *op_id;
    size_t n;
    int debt;           /* 1: charge each cost now; 0: refund it      */
    int64_t at_ms;      /* the reservation's charge, the store's clock */
    uint64_t id;        /* the reservation's random id                */
} store_settle;

/* 1 when a rule of this algorithm can have part of a charge given back
 * (rl_reserve refuses a rule that cannot).  An algorithm added later
 * whose charges cannot be partly refunded answers 0 here. */
int settle_algo_ok(int algo);

/* The identity of op (its rule's id and shape, its client key): the same
 * in every process of a fleet, so a reservation names what it charged
 * without a pointer. */
uint64_t settle_op_id(const struct store_op *op);

/* Until when (store ms) the op's charge at at_ms can be settled: at_ms
 * plus its rule's state life. */
int64_t settle_until(const algo_params *ap, int64_t at_ms);

/* A local store's marker of op op_id in reservation id: a fingerprint
 * seed to combine with the client key's hash, so the marker lives in the
 * client's segment of the table. */
uint64_t settle_marker_seed(uint64_t op_id, uint64_t id);

/*
 * Settle `cost` on *st (found: the state exists; a fresh one otherwise):
 * a refund as of at_ms, or a debt at now_ms.  Returns 1 when *st changed
 * and must be written, with *expires_ms (epoch ms) when it becomes fresh
 * again; 0: nothing to write (a refund with no state, or nothing left in
 * the charge's window).
 */
int settle_state(const algo_params *ap, int debt, int64_t cost,
                 int64_t at_ms, int64_t now_ms, algo_state *st, int found,
                 int64_t *expires_ms);

#endif
