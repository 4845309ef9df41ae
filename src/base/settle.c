/*
 * settle.c -- see settle.h: the maths of settling one op of a reservation
 * on a client's state, and the names (identities, markers) a settle uses.
 * Pure functions on integers, like algo.c; lua/settle.lua repeats the same
 * steps inside Redis, with every product kept below 2^53 (a debt is at
 * most one burst, or a window's limit).
 */
#include "settle.h"
#include "hash.h"
#include "store.h"

#define OP_ID_SEED 0x7e5e7e5e7e5eULL /* settle_op_id's key hash seed */

int settle_algo_ok(int algo)
{
    /* The four counting algorithms give back part of a charge in
     * settle.lua and here.  sliding_log (a time per unit) has no settle
     * maths yet: rl_reserve() refuses its rules (RL_ERULE). */
    return algo == RL_ALGO_SLIDING_WINDOW || algo == RL_ALGO_TOKEN_BUCKET ||
           algo == RL_ALGO_FIXED_WINDOW || algo == RL_ALGO_GCRA;
}

uint64_t settle_op_id(const store_op *op)
{
    return hash_mix(op->rule->shape.state_seed,
                    hash_bytes(op->key, op->key_len, OP_ID_SEED));
}

int64_t settle_until(const algo_params *ap, int64_t at_ms)
{
    return at_ms + algo_state_life_ms(ap);
}

uint64_t settle_marker_seed(uint64_t op_id, uint64_t id)
{
    return hash_mix(op_id ^ 0x5e771edULL, id);
}

static int64_t ceil_div(int64_t a, int64_t b) /* a >= 0, b > 0 */
{
    return a / b + (a % b != 0);
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* When *st is fresh again (epoch ms), as a check would have saved it. */
static int64_t expiry(const algo_params *ap, const algo_state *st)
{
    switch (ap->algo) {
    case RL_ALGO_TOKEN_BUCKET:
        return st->b + ceil_div(ap->burst * ap->p - st->a, ap->q);
    case RL_ALGO_GCRA: return st->a + (st->b > 0);
    case RL_ALGO_FIXED_WINDOW: return (st->a + 1) * ap->window_ms;
    default: return (st->a + 2) * ap->window_ms;
    }
}

/* A bucket's level at now, from (level, refill time) kept in debt form:
 * below empty it is a refill time in the future, and what is left of the
 * debt then counts against a refund or a new debt. */
static void bucket_normal(const algo_params *ap, algo_state *st, int64_t now,
                          int64_t avail)
{
    int64_t cap = ap->burst * ap->p;

    if (avail > cap)
        avail = cap;
    if (avail < -cap)
        avail = -cap;
    st->a = avail >= 0 ? avail : 0;
    st->b = avail >= 0 ? now : now + ceil_div(-avail, ap->q);
}

/* Give back cost charged at at_ms (lua: each algorithm's _refund).  A
 * bucket's refund is taken at now: its level then (GCRA's rule, also on a
 * clock gone back; a debt paid first) plus cost, capped at the burst, so
 * the two forms of one state (lua/token_bucket.lua) end alike. */
static int refund(const algo_params *ap, algo_state *st, int64_t cost,
                  int64_t at, int64_t now)
{
    int64_t idx = at / ap->window_ms, owed, ms;

    switch (ap->algo) {
    case RL_ALGO_TOKEN_BUCKET:
        bucket_normal(ap, st, now, algo_bucket_refill(ap, st->a, st->b, now) +
                                       cost * ap->p);
        return 1;
    case RL_ALGO_GCRA: /* TAT - cost*p/q, exactly */
        owed = cost * ap->p - st->b;
        if (owed <= 0) {
            st->b = -owed;
            return 1;
        }
        ms = ceil_div(owed, ap->q);
        st->a -= ms;
        st->b = ms * ap->q - owed;
        return 1;
    case RL_ALGO_FIXED_WINDOW:
        if (st->a != idx)
            return 0;
        st->b = st->b > cost ? st->b - cost : 0;
        return 1;
    default:
        if (st->a == idx)
            st->b = st->b > cost ? st->b - cost : 0;
        else if (st->a == idx + 1)
            st->c = st->c > cost ? (uint32_t)(st->c - cost) : 0;
        else
            return 0;
        return 1;
    }
}

/* A bucket's debt: refilled to now, less cost; below empty the refill
 * time moves into the future, at most one burst's refill. */
static void bucket_debt(const algo_params *ap, algo_state *st, int64_t now,
                        int64_t cost)
{
    bucket_normal(ap, st, now,
                  algo_bucket_refill(ap, st->a, st->b, now) - cost * ap->p);
}

/* GCRA's debt: the arrival time moves on by cost, at most two bursts
 * (one past the point where checks are denied) ahead of now. */
static void gcra_debt(const algo_params *ap, algo_state *st, int64_t now,
                      int64_t cost)
{
    int64_t cap = ap->burst * ap->p, span = cap / ap->q + 1, debt = 0;
    int64_t tat = st->a, frac = st->b < ap->q ? st->b : ap->q - 1;

    if (tat - now > 2 * span)
        debt = 2 * cap;
    else if (tat > now || (tat == now && frac > 0))
        debt = (tat - now) * ap->q + frac;
    debt = min64(debt + cost * ap->p, 2 * cap);
    st->a = now + debt / ap->q;
    st->b = debt % ap->q;
}

/* A window's debt: counted now, up to the limit. */
static void window_debt(const algo_params *ap, algo_state *st, int64_t now,
                        int64_t cost)
{
    int64_t idx = now / ap->window_ms, curr = 0, prev = 0;

    if (st->a > idx)
        idx = st->a;
    if (st->a == idx) {
        curr = st->b;
        prev = st->c;
    } else if (st->a == idx - 1 && ap->algo == RL_ALGO_SLIDING_WINDOW) {
        prev = st->b;
    }
    st->a = idx;
    st->b = min64(curr + cost, ap->limit);
    st->c = ap->algo == RL_ALGO_SLIDING_WINDOW ? (uint32_t)prev : 0;
}

int settle_state(const algo_params *ap, int debt, int64_t cost,
                 int64_t at_ms, int64_t now_ms, algo_state *st, int found,
                 int64_t *expires_ms)
{
    int64_t burst = ap->burst ? ap->burst : ap->limit;

    if (!found)
        *st = (algo_state){0};
    if (!debt && (!found || !refund(ap, st, cost, at_ms, now_ms)))
        return 0;
    if (debt) {
        cost = min64(cost, burst); /* more is never kept: bounds the maths */
        if (ap->algo == RL_ALGO_TOKEN_BUCKET)
            bucket_debt(ap, st, now_ms, cost);
        else if (ap->algo == RL_ALGO_GCRA)
            gcra_debt(ap, st, now_ms, cost);
        else
            window_debt(ap, st, now_ms, cost);
    }
    *expires_ms = expiry(ap, st);
    return 1;
}
