/*
 * reserve.c -- rl_reserve() and rl_settle(): charge an estimate now, the
 * real cost once it is known.
 *
 * rl_reserve() is rl_check() (the same collection of a request's charges,
 * deny cache, store call and decision, decide.c) that also writes down, in
 * the caller's rl_reservation, what it charged: the identity of each
 * enforced rule's charge (settle_op_id: rule id, shape and client key,
 * hashed; no pointer, so a reservation survives rule reloads and can
 * travel to another process), the store's time of the charge, the
 * estimate and a random id.  rl_settle() takes the same request again,
 * collects its charges under the rules in force, keeps those the
 * reservation names (a rule removed or reshaped since is not there any
 * more) and hands them to the store's `settle` (store.h), which refunds or
 * charges the difference and keeps a marker per (reservation, rule) so no
 * charge is settled twice (settle.h).  The struct itself is marked once it
 * settled, so it answers a second call without a store call.
 */
#include "decide.h"
#include "error.h"
#include "request.h"
#include "settle.h"
#include "siphash.h"
#include "sized.h"

#include <string.h>

#define RSV_MAGIC 0x31565352u /* "RSV1": this layout of the contents */
#define RSV_LIVE 1u           /* charged in the store: to be settled  */
#define RSV_DONE 2u           /* settled through this struct          */

/* What an rl_reservation holds (its opaque words). */
typedef struct rsv_body {
    uint32_t magic, flags;
    uint64_t id;             /* random: names the store's markers     */
    int64_t at_ms;           /* the charge, by the store's clock      */
    int64_t estimate;
    uint64_t n;              /* op[0..n): the charged rules            */
    uint64_t op[RL_OPS_MAX]; /* settle_op_id() of each                 */
} rsv_body;

_Static_assert(sizeof(rsv_body) <= sizeof(((rl_reservation *)0)->opaque),
               "a reservation's contents fit its opaque words");

/* A random 64-bit id: a per-thread SplitMix64 seeded from the kernel
 * once, so a reserve takes no lock and makes no system call. */
static uint64_t random_id(void)
{
    static _Thread_local uint64_t state, seeded;
    uint64_t z;

    if (!seeded) {
        uint64_t k[2];
        siphash_random_key(k);
        state = k[0] ^ k[1];
        seeded = 1;
    }
    z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return (z ^ (z >> 31)) | 1; /* never 0 */
}

/* Every rule of ops[0..n) can give back part of a charge (settle.h). */
static int settleable(const rl_limiter *lim, const store_op *ops, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!settle_algo_ok(ops[i].rule->ap.algo))
            return rl_fail(lim, RL_ERULE, "rl_reserve: rule \"%s\": its "
                           "algorithm %s cannot give back part of a charge",
                           ops[i].rule->id, algo_name(ops[i].rule->ap.algo));
    return RL_OK;
}

/* Decide ops[0..n) as rl_check() does; when admitted, what the store
 * charged into *b. */
static int reserve_run(rl_limiter *lim, const store_op *ops, size_t n,
                       rl_result *res, rsv_body *b)
{
    algo_decision d[RL_OPS_MAX];
    int64_t now = 0, t0;
    int rc, src;

    if ((rc = settleable(lim, ops, n)) != RL_OK)
        return rc;
    t0 = request_timer_start(lim);
    if (decide_cached(lim, ops, n, res)) {
        request_timer_stop(lim, t0, 1);
        return RL_OK; /* a cached denial: nothing charged */
    }
    src = lim->store->vt->check(lim->store, ops, n, d, &now);
    rc = decide_settle(lim, ops, n, d, now, src, res);
    request_timer_stop(lim, t0, 1);
    if (rc != RL_OK || !res->allowed)
        return rc;
    b->magic = RSV_MAGIC;
    b->estimate = ops[0].cost;
    if (src != RL_OK) /* a failure mode admitted it: the store kept nothing */
        return RL_OK;
    for (size_t i = 0; i < n; i++)
        if (!ops[i].soft && d[i].allowed && d[i].changed)
            b->op[b->n++] = settle_op_id(&ops[i]);
    b->flags = b->n ? RSV_LIVE : 0;
    b->at_ms = now;
    b->id = random_id();
    return RL_OK;
}

RL_EXPORT int rl_reserve(rl_limiter *lim, const rl_request *req,
                         rl_reservation *rsv, rl_result *result)
{
    store_op ops[RL_OPS_MAX];
    char keys[RL_OPS_MAX * (RL_KEY_MAX + 1)];
    rl_result res = {0};
    rsv_body b = {0};
    const rl_ruleset *rs;
    rcu_token t;
    size_t n = 0, used = 0, span;
    int rc;

    sized_clear(result, &sized_result); /* zero, whatever fails below */
    if (!lim || !req || !rsv || !result)
        return rl_fail(lim, RL_EINVAL, "rl_reserve: NULL argument");
    if (!(span = sized_span(lim, "rl_reserve: result->size", &sized_result,
                            result->size)) ||
        !sized_span(lim, "rl_reserve: req->size", &sized_request,
                    req->size) ||
        !sized_span(lim, "rl_reserve: rsv->size", &sized_reservation,
                    rsv->size))
        return RL_EINVAL;
    memset(rsv->opaque, 0, sizeof rsv->opaque);
    rs = rcu_read_lock(&lim->rules, &t);
    rc = request_collect(lim, rs, req, ops, RL_OPS_MAX, keys, sizeof keys,
                         &used, &n);
    if (rc == RL_OK && n == 0) {
        decide_no_rule(lim, &res);
        b.magic = RSV_MAGIC; /* admitted; nothing to settle */
        b.estimate = req->cost;
    } else if (rc == RL_OK) {
        rc = reserve_run(lim, ops, n, &res, &b);
    }
    rcu_read_unlock(&lim->rules, t);
    if (rc != RL_OK)
        return rc;
    sized_fill(result, &res, span);
    memcpy(rsv->opaque, &b, sizeof b);
    return RL_OK;
}

/* ---- settle ------------------------------------------------------------ */

static int named(const rsv_body *b, uint64_t id)
{
    for (uint64_t i = 0; i < b->n; i++)
        if (b->op[i] == id)
            return 1;
    return 0;
}

/* Settle, of the request's charges ops[0..n), those b names. */
static int settle_run(rl_limiter *lim, store_op *ops, size_t n,
                      const rsv_body *b, int64_t actual)
{
    uint64_t ids[RL_OPS_MAX];
    size_t m = 0, done = 0;
    int64_t diff = actual - b->estimate;
    store_settle ss;

    for (size_t i = 0; i < n; i++) {
        uint64_t id = settle_op_id(&ops[i]);
        if (ops[i].soft || !named(b, id))
            continue;
        ops[m] = ops[i];
        ops[m].cost = diff < 0 ? -diff : diff;
        ids[m++] = id;
    }
    if (m == 0)
        return RL_OK; /* its rules are gone or reshaped: nothing to do */
    if (!lim->store->vt->settle)
        return rl_fail(lim, RL_ESTORE, "rl_settle: the %s store cannot "
                       "settle", lim->store->vt->name);
    ss = (store_settle){.ops = ops, .op_id = ids, .n = m, .debt = diff > 0,
                        .at_ms = b->at_ms, .id = b->id};
    if (lim->store->vt->settle(lim->store, &ss, &done) != RL_OK)
        return rl_fail(lim, RL_ESTORE, "rl_settle: the %s store failed; "
                       "call again to settle", lim->store->vt->name);
    if (done == 0)
        return rl_fail(lim, RL_ESETTLED, "rl_settle: settled already (a "
                       "copy, another process) or expired");
    return RL_OK;
}

/* The request with cost 0 (rl_settle does not read it), at our size. */
static void request_copy(rl_request *to, const rl_request *from)
{
    size_t n = from->size < sizeof *to ? from->size : sizeof *to;

    memset(to, 0, sizeof *to);
    memcpy(to, from, n);
    to->size = sizeof *to;
    to->cost = 0;
}

RL_EXPORT int rl_settle(rl_limiter *lim, const rl_request *req,
                        rl_reservation *rsv, int64_t actual)
{
    store_op ops[RL_OPS_MAX];
    char keys[RL_OPS_MAX * (RL_KEY_MAX + 1)];
    rl_request r;
    rsv_body b;
    const rl_ruleset *rs;
    rcu_token t;
    size_t n = 0, used = 0;
    int rc;

    if (!lim || !req || !rsv)
        return rl_fail(lim, RL_EINVAL, "rl_settle: NULL argument");
    if (!sized_span(lim, "rl_settle: req->size", &sized_request, req->size) ||
        !sized_span(lim, "rl_settle: rsv->size", &sized_reservation,
                    rsv->size))
        return RL_EINVAL;
    memcpy(&b, rsv->opaque, sizeof b);
    if (b.magic != RSV_MAGIC || b.n > RL_OPS_MAX)
        return rl_fail(lim, RL_EINVAL, "rl_settle: rsv was not filled by "
                       "an rl_reserve() that admitted its request");
    if (b.flags & RSV_DONE)
        return rl_fail(lim, RL_ESETTLED, "rl_settle: this reservation was "
                       "settled already");
    if (actual < 0 || actual > RL_COST_MAX)
        return rl_fail(lim, RL_EINVAL, "actual: must be 0..%lld, got %lld",
                       (long long)RL_COST_MAX, (long long)actual);
    rc = RL_OK;
    if (actual != b.estimate && (b.flags & RSV_LIVE)) {
        request_copy(&r, req);
        rs = rcu_read_lock(&lim->rules, &t);
        rc = request_collect(lim, rs, &r, ops, RL_OPS_MAX, keys, sizeof keys,
                             &used, &n);
        if (rc == RL_OK)
            rc = settle_run(lim, ops, n, &b, actual);
        rcu_read_unlock(&lim->rules, t);
    }
    if (rc == RL_OK || rc == RL_ESETTLED) {
        b.flags |= RSV_DONE;
        memcpy(rsv->opaque, &b, sizeof b);
    }
    return rc;
}
