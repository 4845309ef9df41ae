/*
 * lease_check.c -- a request whose rules lease (lease.h), on the request
 * path.
 *
 * The request's charges of leased rules are taken from their grants
 * first; when every charge was, the request is decided here, with no
 * store call (RL_FLAG_LEASED).  Otherwise the charges left go to the
 * store in one call as usual, all-or-nothing, a leased rule's as a lease
 * (its lease in units, or what is left, at least the request's cost);
 * when the store keeps the request, the units beyond its cost become the
 * rule's grant; when it does not (another rule denied, the store failed),
 * the units taken from grants are put back.  Only enforced charges of a
 * cost above 0 lease; a store failure follows each rule's failure mode
 * as for any request (decide.c), while grants already held keep serving.
 */
#include "lease_check.h"
#include "clock.h"
#include "decide.h"
#include "lease.h"
#include "metrics.h"

#include <string.h>

/* Does op lease?  Its rule has a lease, it is enforced, and it charges
 * less than a lease (a larger cost gains nothing from one). */
static int leases(const store_op *op)
{
    return op->rule->lease > 0 && !op->soft && op->cost > 0 &&
           op->cost < op->rule->lease;
}

/* A leased charge sent plainly because its slot was taken: counted. */
static void count_full(const rl_limiter *lim, const store_op *op)
{
    struct rule_metrics *m = op->rule->met;
    unsigned slot;

    if (!lim->mconf.on || !m)
        return;
    slot = metrics_self()->slot;
    metrics_add(&m->shard[slot].n[RM_LEASE_FULL], slot, 1);
}

/* Put back what was taken from grants (taken[i]: op i's). */
static void untake_all(rl_limiter *lim, const store_op *ops, size_t n,
                       const int *taken)
{
    for (size_t i = 0; i < n; i++)
        if (taken[i])
            lease_untake(lim->lease, &ops[i], ops[i].cost);
}

/* The charges not taken from grants (taken[i] 0) into sops[0..*m),
 * leased ones as leases when their slot has room; map[k]: op of sops[k]. */
static size_t store_ops(rl_limiter *lim, const store_op *ops, size_t n,
                        const int *taken, int64_t now, store_op *sops,
                        size_t *map)
{
    size_t m = 0;

    for (size_t i = 0; i < n; i++) {
        if (taken[i])
            continue;
        sops[m] = ops[i];
        if (leases(&ops[i]) && lease_room(lim->lease, &ops[i], now)) {
            sops[m].cost = ops[i].rule->lease;
            sops[m].lease_min = (int)ops[i].cost; /* <= RL_COST_MAX */
        } else if (leases(&ops[i])) {
            count_full(lim, &ops[i]);
        }
        map[m++] = i;
    }
    return m;
}

/* The store's answers sd[0..m) for sops into d (the request's view: a
 * lease's remaining counts the units this limiter now holds); 1 when
 * the store kept the request (every enforced charge passed). */
static int merge(const store_op *ops, const store_op *sops,
                 const algo_decision *sd, size_t m, const size_t *map,
                 algo_decision *d)
{
    int kept = 1;

    for (size_t k = 0; k < m; k++) {
        size_t i = map[k];
        d[i] = sd[k];
        if (sops[k].lease_min && sd[k].granted)
            d[i].remaining += sd[k].granted - ops[i].cost;
        if (!sd[k].allowed && !sops[k].soft)
            kept = 0;
    }
    return kept;
}

/* The store asked for what grants did not cover. */
static int ask_store(rl_limiter *lim, const store_op *ops, size_t n,
                     const int *taken, algo_decision *d, int64_t now,
                     rl_result *res)
{
    store_op sops[RL_OPS_MAX];
    algo_decision sd[RL_OPS_MAX];
    size_t map[RL_OPS_MAX], m = store_ops(lim, ops, n, taken, now, sops, map);
    int64_t now_store = 0;
    int rc = lim->store->vt->check(lim->store, sops, m, sd, &now_store);

    if (rc != RL_OK) {
        untake_all(lim, ops, n, taken);
        return decide_settle(lim, ops, n, d, 0, rc, res);
    }
    if (!merge(ops, sops, sd, m, map, d))
        untake_all(lim, ops, n, taken);
    else
        for (size_t k = 0; k < m; k++)
            if (sops[k].lease_min && sd[k].granted)
                lease_put(lim->lease, &ops[map[k]], &sd[k], now, now_store);
    return decide_settle(lim, ops, n, d, now_store, RL_OK, res);
}

int lease_check(rl_limiter *lim, const store_op *ops, size_t n,
                rl_result *res, int *rc)
{
    algo_decision d[RL_OPS_MAX];
    int taken[RL_OPS_MAX], any = 0, all = 1;
    int64_t now;

    if (!lim->lease)
        return 0;
    for (size_t i = 0; i < n && !any; i++)
        any = leases(&ops[i]);
    if (!any)
        return 0;
    /* Zeroed here, not at the declaration: a request of no leased rule
     * (every memory-store check) must not pay for clearing 32 of them. */
    memset(d, 0, n * sizeof d[0]);
    now = clock_mono_ms();
    for (size_t i = 0; i < n; i++) {
        taken[i] = leases(&ops[i]) &&
                   lease_take(lim->lease, &ops[i], now, &d[i]);
        all &= taken[i];
    }
    if (all) {
        decide_leased(lim, ops, n, d, res);
        *rc = RL_OK;
    } else {
        *rc = ask_store(lim, ops, n, taken, d, now, res);
    }
    return 1;
}
