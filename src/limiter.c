/*
 * limiter.c -- the handle and the request path.
 *
 * rl_allow() and rl_check() do the same four steps: check the arguments,
 * take the current rule set (lock-free, see rcu.h), turn the request into
 * one charge per rule (store_op), hand them all to the store in one call,
 * and fold the decisions into one rl_result.  No allocation, no lock of our
 * own; the store's per-segment locks are the only ones on the path.
 * rl_check_many() does the same for many requests, handing the store up to
 * 64 of them in one call (a chunk), so Redis decides them in one round trip.
 *
 * Rule loading lives in rules_load.c, the rules source's thread in
 * rules_source.c; this file creates and frees the handle they work on.
 */
#include "limiter.h"
#include "dryrun.h"
#include "options.h"
#include "error.h"
#include "rules_source.h"
#include "request.h"
#include "decide.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

RL_EXPORT int rl_version(void)
{
    return RL_VERSION_NUMBER;
}

#define STR_(x) #x
#define STR(x) STR_(x)

RL_EXPORT const char *rl_version_string(void)
{
    return STR(RL_VERSION_MAJOR) "." STR(RL_VERSION_MINOR) "." STR(
        RL_VERSION_PATCH);
}

rl_store *limiter_store(rl_limiter *lim)
{
    return lim->store;
}

/* ---- lifecycle -------------------------------------------------------- */

static int open_store(rl_limiter *lim, const rl_config *cfg)
{
    store_options opt = {cfg->memory_max_bytes, cfg->timeout_ms,
                         cfg->connect_timeout_ms, (int)cfg->redis_connections,
                         (int)cfg->degraded_start, (int)cfg->breaker_failures,
                         cfg->breaker_cooldown_ms,
                         cfg->fleet_size == 0 ? (cfg->fleet_name
                                                     ? cfg->fleet_name
                                                     : "default")
                                              : NULL,
                         &lim->fleet_size, (int)cfg->redis_compact};
    const char *uri = cfg->store ? cfg->store : "memory://";
    char err[RL_ERRMSG_MAX - 40];
    int rc;

    /* "auto" starts at 1 until the first heartbeat counts the fleet. */
    atomic_store(&lim->fleet_size, cfg->fleet_size ? cfg->fleet_size : 1);
    rc = store_open(uri, &opt, &lim->store, err, sizeof err);

    if (rc == RL_OK && strcmp(lim->store->vt->name, "memory") != 0)
        rc = store_open("memory://", &opt, &lim->fallback, err, sizeof err);
    return rc == RL_OK ? RL_OK : rl_fail(NULL, rc, "%s", err);
}

static int load_initial_rules(rl_limiter *lim, const rl_config *cfg)
{
    int rc = RL_OK;

    if (cfg->rules_source)
        return rules_source_start(lim, cfg);
    if (cfg->rules_file)
        rc = rl_rules_load_file(lim, cfg->rules_file);
    if (rc == RL_OK && cfg->rules)
        rc = rl_rules_load_string(lim, cfg->rules);
    if (rc != RL_OK) { /* re-tag the message: the caller has no handle */
        char msg[RL_ERRMSG_MAX];
        const char *colon = strchr(rl_errmsg(lim), ':');
        snprintf(msg, sizeof msg, "%s", colon ? colon + 2 : rl_errmsg(lim));
        rl_fail_msg(NULL, rc, msg);
    }
    return rc;
}

RL_EXPORT int rl_limiter_new(rl_limiter **out, const rl_config *cfg)
{
    struct rl_config defaults;
    rl_limiter *lim;
    rl_ruleset *empty;
    int rc;

    if (!out)
        return rl_fail(NULL, RL_EINVAL, "rl_limiter_new: out is NULL");
    *out = NULL;
    if (!cfg) {
        config_defaults(&defaults);
        cfg = &defaults;
    }
    /* 64-byte aligned: the rule-set readers' and the counters' shards
     * each own a cache line. */
    lim = aligned_alloc(64, (sizeof *lim + 63) / 64 * 64);
    if (lim)
        memset(lim, 0, sizeof *lim);
    if (!lim || !(empty = ruleset_empty())) {
        free(lim);
        return rl_fail(NULL, RL_ENOMEM, "creating a limiter");
    }
    rcu_init(&lim->rules, empty);
    pthread_mutex_init(&lim->load_lock, NULL);
    rules_state_init(&lim->rstate);
    lim->log_fn = cfg->log_fn;
    lim->log_arg = cfg->log_arg;
    if ((rc = open_store(lim, cfg)) != RL_OK ||
        (rc = load_initial_rules(lim, cfg)) != RL_OK) {
        rl_limiter_free(lim);
        return rc;
    }
    *out = lim;
    return RL_OK;
}

RL_EXPORT void rl_limiter_free(rl_limiter *lim)
{
    if (!lim)
        return;
    rules_source_stop(lim); /* first: its thread swaps rules in */
    store_free(lim->store);
    store_free(lim->fallback);
    ruleset_free(rcu_peek(&lim->rules));
    rcu_destroy(&lim->rules);
    pthread_mutex_destroy(&lim->load_lock);
    rules_state_destroy(&lim->rstate);
    free(lim);
}

/* ---- the request path ------------------------------------------------- */

static int64_t ceil_s(int64_t ms)
{
    return ms <= 0 ? 0 : (ms + 999) / 1000;
}

/* One decision into the caller's result.  A denial's reset time is never
 * before its retry time: a client that waits for X-RateLimit-Reset must not
 * be denied again (a sliding window's estimate can outlast its window). */
static void fill_result(rl_result *res, const rl_rule *rule,
                        const algo_decision *d, int enforce, int64_t now)
{
    res->allowed = d->allowed || !enforce;
    res->limit = rule->ap.limit;
    res->remaining = d->remaining < 0 ? 0 : d->remaining;
    res->reset_at = ceil_s(d->reset_ms);
    res->retry_after = res->allowed ? 0 : ceil_s(d->retry_ms);
    if (!res->allowed && res->retry_after < 1)
        res->retry_after = 1;
    if (!d->allowed && ceil_s(now + d->retry_ms) > res->reset_at)
        res->reset_at = ceil_s(now + d->retry_ms);
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
 * would have done is counted, src/dryrun.c).  Returns the index of the
 * deciding one. */
static size_t fold(rl_result *res, const store_op *ops,
                   const algo_decision *d, size_t n, int64_t now)
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
            d[i] = (algo_decision){1, 0, rule->ap.limit,
                                   now + rule->ap.window_ms, 0, 0};
            how[i] = RL_FLAG_FAIL_OPEN;
            break;
        case RL_FAIL_CLOSED:
            d[i] = (algo_decision){0, 0, 0, now + 1000, 1000, 0};
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
    res->flags |= how[best];
    if (how[best] == RL_FLAG_FAIL_OPEN)
        stats_add(&lim->counts, ST_FAIL_OPEN);
    else if (how[best] == RL_FLAG_FALLBACK)
        stats_add(&lim->counts, ST_FALLBACK);
    else if (how[best] == RL_FLAG_FAIL_CLOSED)
        stats_add(&lim->counts, ST_FAIL_CLOSED);
    return RL_OK;
}

/* The store's answer for one request into its result: the decisions
 * folded, or, when the store failed, each rule's failure mode. */
static int settle(rl_limiter *lim, const store_op *ops, size_t n,
                  const algo_decision *d, int64_t now, int rc,
                  rl_result *res)
{
    if (rc != RL_OK)
        stats_add(&lim->counts, ST_STORE_ERRORS);
    if (rc != RL_OK && lim->fallback)
        rc = degrade(lim, ops, n, res);
    else if (rc != RL_OK)
        return rl_fail(lim, rc, "the %s store failed", lim->store->vt->name);
    else
        fold(res, ops, d, n, now);
    if (rc == RL_OK) {
        stats_add(&lim->counts, ST_CHECKS);
        stats_add(&lim->counts, res->allowed ? ST_ALLOWED : ST_DENIED);
        if (res->flags & RL_FLAG_SOFT)
            stats_add(&lim->counts, ST_SOFT);
    }
    return rc;
}

static int run(rl_limiter *lim, const store_op *ops, size_t n,
               rl_result *res)
{
    algo_decision d[RL_OPS_MAX];
    int64_t now = 0;
    int rc = lim->store->vt->check(lim->store, ops, n, d, &now);

    return settle(lim, ops, n, d, now, rc, res);
}

RL_EXPORT int rl_stats_get(const rl_limiter *lim, rl_stats *out)
{
    int64_t opens = 0, closes = 0;

    if (!lim || !out)
        return rl_fail(lim, RL_EINVAL, "rl_stats_get: NULL argument");
    memset(out, 0, sizeof *out);
    out->checks = stats_sum(&lim->counts, ST_CHECKS);
    out->allowed = stats_sum(&lim->counts, ST_ALLOWED);
    out->denied = stats_sum(&lim->counts, ST_DENIED);
    out->soft = stats_sum(&lim->counts, ST_SOFT);
    out->fail_open = stats_sum(&lim->counts, ST_FAIL_OPEN);
    out->fallback = stats_sum(&lim->counts, ST_FALLBACK);
    out->fail_closed = stats_sum(&lim->counts, ST_FAIL_CLOSED);
    out->store_errors = stats_sum(&lim->counts, ST_STORE_ERRORS);
    out->breaker_state = RL_BREAKER_NONE;
    if (lim->store->vt->breaker)
        out->breaker_state = lim->store->vt->breaker(lim->store, &opens,
                                                     &closes);
    out->fleet_size = (uint64_t)atomic_load(&((rl_limiter *)lim)->fleet_size);
    out->breaker_opens = (uint64_t)opens;
    out->breaker_closes = (uint64_t)closes;
    return RL_OK;
}

static int check_cost(const rl_limiter *lim, int64_t cost)
{
    if (cost < 0 || cost > RL_COST_MAX)
        return rl_fail(lim, RL_EINVAL, "cost: must be 0..%lld, got %lld",
                       (long long)RL_COST_MAX, (long long)cost);
    return RL_OK;
}

RL_EXPORT int rl_allow(rl_limiter *lim, const char *key, const char *rule_id,
                       int64_t cost, rl_result *res)
{
    const rl_ruleset *rs;
    const rl_rule *rule;
    store_op op;
    rcu_token t;
    size_t len;
    int rc;

    if (res)
        memset(res, 0, sizeof *res);
    if (!lim || !key || !rule_id || !res)
        return rl_fail(lim, RL_EINVAL, "rl_allow: NULL argument");
    len = strnlen(key, RL_KEY_MAX + 1);
    if (len == 0 || len > RL_KEY_MAX)
        return rl_fail(lim, RL_EINVAL, "key: must be 1..%d bytes%s",
                       RL_KEY_MAX, len ? ", is longer" : ", is empty");
    if ((rc = check_cost(lim, cost)) != RL_OK)
        return rc;
    rs = rcu_read_lock(&lim->rules, &t);
    if (!(rule = ruleset_find(rs, rule_id))) {
        rc = rl_fail(lim, RL_ENORULE, "no rule \"%.64s\" in rule set version "
                     "%lld", rule_id, (long long)rs->version);
    } else {
        op = (store_op){rule, key, len, cost, rule->mode == RL_MODE_LOG};
        rc = run(lim, &op, 1, res);
    }
    rcu_read_unlock(&lim->rules, t);
    return rc;
}

#define NEED_ROOM 2 /* collect(): the keys do not fit; nothing was kept */

/* The client key for a rule's dimension, "user:123", built at buf (room
 * bytes).  Returns RL_OK, 1 when the request does not carry the dimension,
 * NEED_ROOM, or an error. */
static int dimension_key(const rl_limiter *lim, const rl_rule *rule,
                         const rl_request *req, char *buf, size_t room,
                         size_t *len)
{
    const char *name = rule_dimension_name(rule->dimension);
    const char *value = rule_dimension_value(rule->dimension, req);
    size_t nlen = strlen(name), vlen;

    if (!value || !*value)
        return 1; /* the request does not carry this dimension */
    vlen = strnlen(value, RL_KEY_MAX + 1);
    if (nlen + 1 + vlen > RL_KEY_MAX)
        return rl_fail(lim, RL_EINVAL, "%s: longer than %zu bytes", name,
                       RL_KEY_MAX - nlen - 1);
    if (nlen + 2 + vlen > room)
        return NEED_ROOM;
    memcpy(buf, name, nlen);
    buf[nlen] = ':';
    memcpy(buf + nlen + 1, value, vlen);
    buf[nlen + 1 + vlen] = '\0';
    *len = nlen + 1 + vlen;
    return RL_OK;
}

/* A request's charges, one per matching rule, into ops[0..*n) (room for
 * max_ops), their keys packed into keys[*used..room).  Returns RL_OK,
 * NEED_ROOM (ops or keys do not fit: *n and *used unchanged) or an
 * error. */
static int collect(const rl_limiter *lim, const rl_ruleset *rs,
                   const rl_request *req, store_op *ops, size_t max_ops,
                   char *keys, size_t room, size_t *used, size_t *n)
{
    size_t k = 0, at = *used;

    for (size_t i = 0; i < rs->n; i++) {
        const rl_rule *rule = &rs->rules[i];
        size_t len = 0;
        int rc;

        if (!rule_matches(rule, req->endpoint, req->tier))
            continue;
        rc = dimension_key(lim, rule, req, keys + at, room - at, &len);
        if (rc == 1)
            continue;
        if (rc != RL_OK && rc != NEED_ROOM)
            return rc;
        if (k == RL_OPS_MAX)
            return rl_fail(lim, RL_ERULE,
                           "the request matches more than %d rules",
                           RL_OPS_MAX);
        if (rc == NEED_ROOM || k == max_ops)
            return NEED_ROOM;
        ops[k++] = (store_op){rule, keys + at, len, req->cost,
                              rule->mode == RL_MODE_LOG};
        at += len + 1;
    }
    *n = k;
    *used = at;
    return RL_OK;
}

/* A request no rule matches passes. */
static void no_rule(rl_limiter *lim, rl_result *res)
{
    res->allowed = 1;
    res->flags = RL_FLAG_NO_RULE;
    stats_add(&lim->counts, ST_CHECKS);
    stats_add(&lim->counts, ST_ALLOWED);
}

RL_EXPORT int rl_check(rl_limiter *lim, const rl_request *req,
                       rl_result *res)
{
    store_op ops[RL_OPS_MAX];
    char keys[RL_OPS_MAX * (RL_KEY_MAX + 1)];
    const rl_ruleset *rs;
    rcu_token t;
    size_t n = 0, used = 0;
    int rc;

    if (res)
        memset(res, 0, sizeof *res);
    if (!lim || !req || !res)
        return rl_fail(lim, RL_EINVAL, "rl_check: NULL argument");
    if ((rc = check_cost(lim, req->cost)) != RL_OK)
        return rc;
    rs = rcu_read_lock(&lim->rules, &t);
    rc = collect(lim, rs, req, ops, RL_OPS_MAX, keys, sizeof keys, &used,
                 &n);
    if (rc == RL_OK && n == 0)
        no_rule(lim, res);
    else if (rc == RL_OK)
        rc = run(lim, ops, n, res);
    rcu_read_unlock(&lim->rules, t);
    return rc;
}

/* ---- many requests at once -------------------------------------------- */

#define MANY_OPS 64                          /* charges in one chunk   */
#define MANY_KEYS (RL_OPS_MAX * (RL_KEY_MAX + 1)) /* their keys' bytes */

/* A chunk of rl_check_many(): the requests whose charges go to the store
 * in one check_many call.  An empty chunk always has room for one request
 * (RL_OPS_MAX charges with keys of RL_KEY_MAX bytes). */
typedef struct chunk {
    store_req req[STORE_MANY_MAX];
    size_t from[STORE_MANY_MAX];             /* the caller's index     */
    store_op ops[MANY_OPS];
    algo_decision d[MANY_OPS];
    char keys[MANY_KEYS];
    size_t nreq, nops, used;
} chunk;

_Static_assert(MANY_OPS >= RL_OPS_MAX, "a chunk holds any one request");

/* Decide the chunk's requests: one store call when the store gains from
 * it, else one check each. */
static void chunk_run(rl_limiter *lim, chunk *c, rl_result *results,
                      int *codes)
{
    rl_store *st = lim->store;

    if (c->nreq && st->vt->check_many &&
        st->vt->check_many(st, c->req, c->nreq) != RL_OK)
        for (size_t i = 0; i < c->nreq; i++)
            c->req[i].rc = RL_ESTORE;
    else if (c->nreq && !st->vt->check_many)
        for (size_t i = 0; i < c->nreq; i++)
            c->req[i].rc = st->vt->check(st, c->req[i].ops, c->req[i].n,
                                         c->req[i].out, &c->req[i].now_ms);
    for (size_t i = 0; i < c->nreq; i++) {
        store_req *q = &c->req[i];
        size_t k = c->from[i];
        codes[k] = settle(lim, q->ops, q->n, q->out, q->now_ms, q->rc,
                          &results[k]);
    }
    c->nreq = c->nops = c->used = 0;
}

/* Request k into the chunk (its result now if it needs no store). */
static int chunk_add(rl_limiter *lim, const rl_ruleset *rs, chunk *c,
                     const rl_request *req, size_t k, rl_result *results,
                     int *codes)
{
    size_t n = 0;
    int rc;

    if (c->nreq == STORE_MANY_MAX)
        chunk_run(lim, c, results, codes);
    rc = collect(lim, rs, req, c->ops + c->nops, MANY_OPS - c->nops,
                 c->keys, sizeof c->keys, &c->used, &n);
    if (rc == NEED_ROOM) {
        chunk_run(lim, c, results, codes);
        rc = collect(lim, rs, req, c->ops, MANY_OPS, c->keys,
                     sizeof c->keys, &c->used, &n);
    }
    if (rc != RL_OK)
        return rc;
    if (n == 0) {
        no_rule(lim, &results[k]);
        return RL_OK;
    }
    c->req[c->nreq] = (store_req){c->ops + c->nops, n, c->d + c->nops, 0,
                                  RL_ESTORE};
    c->from[c->nreq++] = k;
    c->nops += n;
    return RL_OK;
}

RL_EXPORT int rl_check_many(rl_limiter *lim, const rl_request *reqs,
                            rl_result *results, int *codes, size_t n)
{
    chunk c;
    const rl_ruleset *rs;
    rcu_token t;
    int first = RL_OK;

    if (!lim || (n && (!reqs || !results || !codes)))
        return rl_fail(lim, RL_EINVAL, "rl_check_many: NULL argument");
    if (n)
        memset(results, 0, n * sizeof *results);
    c.nreq = c.nops = c.used = 0;
    rs = rcu_read_lock(&lim->rules, &t);
    for (size_t k = 0; k < n; k++) {
        if ((codes[k] = check_cost(lim, reqs[k].cost)) == RL_OK)
            codes[k] = chunk_add(lim, rs, &c, &reqs[k], k, results, codes);
    }
    chunk_run(lim, &c, results, codes);
    rcu_read_unlock(&lim->rules, t);
    for (size_t k = 0; k < n && first == RL_OK; k++)
        first = codes[k];
    return first;
}

/* ---- contract C (issue 12): the request path's steps, by name --------- */

int request_collect(const rl_limiter *lim, const rl_ruleset *rs,
                    const rl_request *req, store_op *ops, size_t max_ops,
                    char *keys, size_t keys_len, size_t *used, size_t *n)
{
    int rc = check_cost(lim, req->cost);

    if (rc != RL_OK)
        return rc;
    rc = collect(lim, rs, req, ops, max_ops, keys, keys_len, used, n);
    return rc == NEED_ROOM ? REQUEST_NEED_ROOM : rc;
}

int decide_settle(rl_limiter *lim, const store_op *ops, size_t n,
                  const algo_decision *d, int64_t now_ms, int rc,
                  rl_result *res)
{
    return settle(lim, ops, n, d, now_ms, rc, res);
}

void decide_no_rule(rl_limiter *lim, rl_result *res)
{
    no_rule(lim, res);
}
