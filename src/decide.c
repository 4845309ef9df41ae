/*
 * decide.c -- the decision policy.
 *
 * A request's charges come back from the store as one algo_decision per
 * rule; here they become one answer.  The tightest enforced rule decides
 * (fold); rules in mode "log" decide only when no enforced rule applies
 * and never deny, and what they would have done is counted (dryrun.c).
 * When the store failed, each rule follows its failure mode instead
 * (degrade): open allows, closed denies for a second, fallback asks the
 * local memory store at limit / fleet_size, drained to match whenever
 * Redis denies (follow_denials).  Either way each charge is counted into
 * its rule's metrics (count_rules, metrics.h).  The request path
 * (request.c) and any other caller of the store hand their answers here,
 * so every way a check is made decides and counts alike.  Nothing here
 * allocates; the only lock is the fallback store's segment lock (a failed
 * store, or a fallback rule Redis denied).  Redis's denials of enforced
 * rules are kept in the deny cache (deny_cache.h) when it is on, and
 * decide_cached() answers from it before the store is asked.
 */
#include "decide.h"
#include "clock.h"
#include "deny_cache.h"
#include "dryrun.h"
#include "error.h"
#include "events.h"
#include "metrics.h"

#include <string.h>
#include <time.h>

static int64_t ceil_s(int64_t ms)
{
    return ms <= 0 ? 0 : (ms + 999) / 1000;
}

/* One decision into the caller's result.  A denial's reset time is never
 * before its retry time: a client that waits for X-RateLimit-Reset must not
 * be denied again (a sliding window's estimate can outlast its window). */
static inline __attribute__((always_inline)) void
fill_result(rl_result *res, const rl_rule *rule, const algo_decision *d,
            int enforce, int64_t now)
{
    res->allowed = d->allowed || !enforce;
    res->limit = rule->ap.limit;
    res->remaining = d->remaining < 0 ? 0 : d->remaining;
    res->reset_at_ms = d->reset_ms < 0 ? 0 : d->reset_ms;
    res->retry_after_ms = res->allowed ? 0 : d->retry_ms;
    if (!res->allowed && res->retry_after_ms < 1)
        res->retry_after_ms = 1;
    if (!d->allowed && now + d->retry_ms > res->reset_at_ms)
        res->reset_at_ms = now + d->retry_ms;
    res->reset_at = ceil_s(res->reset_at_ms);
    res->retry_after = ceil_s(res->retry_after_ms);
    res->window = rule->window_s;
    memcpy(res->rule_id, rule->id, sizeof res->rule_id);
}

/* Is decision a more restrictive than b?  A denial beats an admission; two
 * denials: the longer wait; two admissions: the fewer remaining. */
static int tighter(const algo_decision *a, const algo_decision *b)
{
    if (a->allowed != b->allowed)
        return !a->allowed;
    if (!a->allowed)
        return a->retry_ms > b->retry_ms;
    return a->remaining < b->remaining;
}

/* Fold n decisions: the tightest enforced one decides; rules in mode "log"
 * decide only when no enforced rule applies, and never deny (what they
 * would have done is counted, src/telemetry/dryrun.c).  Returns the index of the
 * deciding one. */
static inline __attribute__((always_inline)) size_t
fold(rl_result *res, const store_op *ops, const algo_decision *d, size_t n,
     int64_t now)
{
    size_t best = n;
    unsigned flags = 0;

    for (size_t i = 0; i < n; i++) {
        if (ops[i].soft) {
            dryrun_note(ops[i].rule->dry, !d[i].allowed, ops[i].key,
                        ops[i].key_len);
            if (!d[i].allowed)
                flags |= RL_FLAG_SOFT;
        }
        if (best == n || ops[best].soft > ops[i].soft ||
            (ops[best].soft == ops[i].soft && tighter(&d[i], &d[best])))
            best = i;
    }
    fill_result(res, ops[best].rule, &d[best], !ops[best].soft, now);
    res->flags = flags;
    return best;
}

/* The metrics' name of a failure mode's flag (0: none). */
static int failure_metric(unsigned how)
{
    return how == RL_FLAG_FAIL_OPEN     ? RM_FAIL_OPEN
           : how == RL_FLAG_FALLBACK    ? RM_FALLBACK
           : how == RL_FLAG_FAIL_CLOSED ? RM_FAIL_CLOSED
           : how == RL_FLAG_CACHED      ? RM_CACHED
           : how == RL_FLAG_LEASED      ? RM_LEASED
                                        : 0;
}

/* The charges the store decided, each into its rule's metrics; shared
 * is a constant at each call (count_decided_rules), so the loop has one kind of
 * add and no failure-mode test. */
static inline __attribute__((always_inline)) void
count_decided(const store_op *ops, const algo_decision *d, size_t n,
              unsigned slot, int shared, int64_t near_pct)
{
    for (size_t i = 0; i < n; i++) {
        const rl_rule *rule = ops[i].rule;
        if (rule->met)
            metrics_note_decided(rule->met, slot, shared, &d[i],
                                 ops[i].soft, rule->ap.limit, near_pct);
    }
}

/* The charges the store decided into their rules' metrics: the common
 * case, inlined into decide_settle() (no call, no saved registers). */
static inline __attribute__((always_inline)) void
count_decided_rules(const rl_limiter *lim, const store_op *ops,
                    const algo_decision *d, size_t n)
{
    unsigned slot;

    if (!lim->mconf.on)
        return;
    slot = metrics_self()->slot;
    if (slot == METRICS_SHARED)
        count_decided(ops, d, n, slot, 1, lim->mconf.near_pct);
    else
        count_decided(ops, d, n, slot, 0, lim->mconf.near_pct);
}

/* Each charge into its rule's metrics (metrics.h): its decision d[i], and
 * how[i] the failure mode that stood in for the store, or that the deny
 * cache answered. */
static void count_rules(const rl_limiter *lim, const store_op *ops,
                        const algo_decision *d, size_t n,
                        const unsigned *how)
{
    unsigned slot;

    if (!lim->mconf.on)
        return;
    slot = metrics_self()->slot;
    for (size_t i = 0; i < n; i++)
        metrics_note(ops[i].rule->met, slot, &d[i], ops[i].soft,
                     failure_metric(how[i]), ops[i].rule->ap.limit,
                     lim->mconf.near_pct);
}

/* Each charge denied, or would-be denied, as a rejection event
 * (events.h); how as count_rules().  Inline: a limiter without events
 * pays one test. */
static inline void note_denials(const rl_limiter *lim, const store_op *ops,
                         const algo_decision *d, size_t n,
                         const unsigned *how)
{
    if (!lim->events)
        return;
    for (size_t i = 0; i < n; i++)
        if (!d[i].allowed)
            events_push(lim->events, ops[i].rule->id, ops[i].key,
                        ops[i].key_len, ops[i].cost, ops[i].soft,
                        !how                               ? EV_STORE
                        : how[i] == RL_FLAG_FAIL_CLOSED    ? EV_CLOSED
                                                           : EV_FALLBACK);
}

/* A rule's share of its limit when this limiter decides alone. */
static void fallback_rule(const rl_limiter *lim, const rl_rule *rule,
                          rl_rule *local)
{
    const algo_params *ap = &rule->ap;
    int64_t n = atomic_load(&((rl_limiter *)lim)->fleet_size), burst = 0;
    char err[8];

    *local = *rule;
    if (ap->burst && ap->burst != ap->limit)
        burst = ap->burst / n > 0 ? ap->burst / n : 1;
    algo_params_init(&local->ap, ap->algo, ap->limit / n > 0 ? ap->limit / n : 1,
                     burst, rule->window_s, err, sizeof err);
    /* Its own shape (the local numbers' units); no lazy migration here. */
    rule_shape_init(&local->shape, rule->id, &local->ap);
    local->prev = NULL;
    local->nprev = 0;
}

/* The store failed: each rule follows its failure mode.  open: allow;
 * closed: deny for a second; fallback: the local memory store at
 * limit / fleet_size.  Still all-or-nothing: if a closed rule denies, the
 * fallback rules are only looked at (cost 0), not charged.  The result's
 * flags say how the deciding rule was decided. */
static int degrade(rl_limiter *lim, const store_op *ops, size_t n,
                   rl_result *res)
{
    rl_rule local[RL_OPS_MAX];
    store_op fops[RL_OPS_MAX];
    algo_decision d[RL_OPS_MAX], fd[RL_OPS_MAX];
    unsigned how[RL_OPS_MAX];
    size_t map[RL_OPS_MAX], nf = 0, best;
    int64_t now = (int64_t)time(NULL) * 1000, fnow;
    int closed = 0;

    for (size_t i = 0; i < n; i++)
        closed |= ops[i].rule->failure == RL_FAIL_CLOSED && !ops[i].soft;
    for (size_t i = 0; i < n; i++) {
        const rl_rule *rule = ops[i].rule;
        how[i] = 0;
        switch (rule->failure) {
        case RL_FAIL_OPEN:
            d[i] = (algo_decision){.allowed = 1,
                                   .remaining = rule->ap.limit,
                                   .reset_ms = now + rule->ap.window_ms};
            how[i] = RL_FLAG_FAIL_OPEN;
            break;
        case RL_FAIL_CLOSED:
            d[i] = (algo_decision){.reset_ms = now + 1000,
                                   .retry_ms = 1000};
            how[i] = RL_FLAG_FAIL_CLOSED;
            break;
        default:
            fallback_rule(lim, rule, &local[nf]);
            fops[nf] = ops[i];
            fops[nf].rule = &local[nf];
            if (closed)
                fops[nf].cost = 0;
            how[i] = RL_FLAG_FALLBACK;
            map[nf++] = i;
        }
    }
    if (nf && lim->fallback->vt->check(lim->fallback, fops, nf, fd, &fnow))
        return rl_fail(lim, RL_ESTORE, "the fallback store failed");
    for (size_t k = 0; k < nf; k++)
        d[map[k]] = fd[k];
    best = fold(res, ops, d, n, now);
    count_rules(lim, ops, d, n, how);
    note_denials(lim, ops, d, n, how);
    res->flags |= how[best];
    if (how[best] == RL_FLAG_FAIL_OPEN)
        stats_add(&lim->counts, ST_FAIL_OPEN);
    else if (how[best] == RL_FLAG_FALLBACK)
        stats_add(&lim->counts, ST_FALLBACK);
    else if (how[best] == RL_FLAG_FAIL_CLOSED)
        stats_add(&lim->counts, ST_FAIL_CLOSED);
    return RL_OK;
}

/* Redis denied a fallback rule: the local store, which decides that rule
 * should Redis go away, is drained to match (what it has left is charged),
 * so an outage starts from the state Redis reported for a client it had
 * exhausted instead of a fresh local quota.  Only on denials, the case
 * where a fresh quota over-admits most: one look (cost 0) at the local
 * state, and a charge only when the two disagree. */
static void follow_denials(rl_limiter *lim, const store_op *ops, size_t n,
                           const algo_decision *d)
{
    for (size_t i = 0; i < n; i++) {
        rl_rule local;
        store_op op;
        algo_decision ld;
        int64_t lnow;

        if (d[i].allowed || ops[i].soft ||
            ops[i].rule->failure != RL_FAIL_FALLBACK)
            continue;
        fallback_rule(lim, ops[i].rule, &local);
        op = ops[i];
        op.rule = &local;
        op.cost = 0;
        if (lim->fallback->vt->check(lim->fallback, &op, 1, &ld, &lnow) ||
            ld.remaining <= 0)
            continue;
        op.cost = ld.remaining;
        (void)lim->fallback->vt->check(lim->fallback, &op, 1, &ld, &lnow);
    }
}

/* The store's denials of enforced charges (its clock read now_store)
 * into the deny cache. */
static void remember_denials(rl_limiter *lim, const store_op *ops, size_t n,
                             const algo_decision *d, int64_t now_store)
{
    int64_t now = clock_mono_ms();

    for (size_t i = 0; i < n; i++)
        if (!d[i].allowed)
            deny_cache_put(lim->deny, &ops[i], &d[i], now, now_store);
}

int decide_cached(rl_limiter *lim, const store_op *ops, size_t n,
                  rl_result *res)
{
    algo_decision d, best = {0};
    size_t at = n;
    int64_t now;
    const unsigned how = RL_FLAG_CACHED;

    if (!lim->deny)
        return 0;
    now = clock_mono_ms();
    for (size_t i = 0; i < n; i++)
        if (deny_cache_get(lim->deny, &ops[i], now, &d) &&
            (at == n || d.retry_ms > best.retry_ms)) {
            best = d;
            at = i;
        }
    if (at == n)
        return 0;
    /* now 0: the stored reset is already never before the retry's end */
    fill_result(res, ops[at].rule, &best, 1, 0);
    res->flags = RL_FLAG_CACHED;
    count_rules(lim, &ops[at], &best, 1, &how);
    if (lim->events) /* each denial an event, this one told apart */
        events_push(lim->events, ops[at].rule->id, ops[at].key,
                    ops[at].key_len, ops[at].cost, 0, EV_CACHE);
    stats_add(&lim->counts, ST_CHECKS);
    stats_add(&lim->counts, ST_DENIED);
    return 1;
}

/* The store's decisions for one request into its result, counted and
 * remembered where the limiter asks for it.  Inlined twice into
 * decide_settle(): once for one charge (n constant: no loops, no
 * comparisons of decisions), once for many. */
static inline __attribute__((always_inline)) void
settle_decided(rl_limiter *lim, const store_op *ops, size_t n,
               const algo_decision *d, int64_t now, rl_result *res)
{
    fold(res, ops, d, n, now);
    count_decided_rules(lim, ops, d, n);
    note_denials(lim, ops, d, n, NULL);
    if (lim->deny && !res->allowed)
        remember_denials(lim, ops, n, d, now);
    if (lim->fallback && !res->allowed)
        follow_denials(lim, ops, n, d);
}

/* The store's answer for one request into its result: the decisions
 * folded, or, when the store failed, each rule's failure mode. */
int decide_settle(rl_limiter *lim, const store_op *ops, size_t n,
                  const algo_decision *d, int64_t now, int rc,
                  rl_result *res)
{
    if (rc != RL_OK)
        stats_add(&lim->counts, ST_STORE_ERRORS);
    if (rc != RL_OK && lim->fallback)
        rc = degrade(lim, ops, n, res);
    else if (rc != RL_OK)
        return rl_fail(lim, rc, "the %s store failed", lim->store->vt->name);
    else if (n == 1) /* the usual request: one rule */
        settle_decided(lim, ops, 1, d, now, res);
    else
        settle_decided(lim, ops, n, d, now, res);
    if (rc == RL_OK) {
        stats_add(&lim->counts, ST_CHECKS);
        stats_add(&lim->counts, res->allowed ? ST_ALLOWED : ST_DENIED);
        if (res->flags & RL_FLAG_SOFT)
            stats_add(&lim->counts, ST_SOFT);
    }
    return rc;
}

void decide_leased(rl_limiter *lim, const store_op *ops, size_t n,
                   const algo_decision *d, rl_result *res)
{
    unsigned how[RL_OPS_MAX];

    for (size_t i = 0; i < n; i++)
        how[i] = RL_FLAG_LEASED;
    fold(res, ops, d, n, 0); /* all admitted: the time is not read */
    count_rules(lim, ops, d, n, how);
    res->flags |= RL_FLAG_LEASED;
    stats_add(&lim->counts, ST_CHECKS);
    stats_add(&lim->counts, ST_ALLOWED);
}

/* A request no rule matches passes. */
void decide_no_rule(rl_limiter *lim, rl_result *res)
{
    res->allowed = 1;
    res->flags = RL_FLAG_NO_RULE;
    stats_add(&lim->counts, ST_CHECKS);
    stats_add(&lim->counts, ST_ALLOWED);
}
