/*
 * request.c -- the request path: rl_allow(), rl_check(), rl_check_many().
 *
 * Each call does the same steps: check the arguments, take the current
 * rule set (lock-free, see rcu.h), turn the request into one charge per
 * matching rule (request_collect(): the rule's match, its dimension, the
 * client key "<dimension>:<value>"), hand them all to the store in one
 * call, and let decide.c fold the answers into one rl_result.  No
 * allocation, no lock of our own; the store's per-segment locks are the
 * only ones on the path.  rl_check_many() does the same for many
 * requests, handing the store up to 64 of them in one call (a chunk), so
 * Redis decides them in one round trip.
 */
#include "request.h"
#include "decide.h"
#include "error.h"

#include <string.h>

static int run(rl_limiter *lim, const store_op *ops, size_t n,
               rl_result *res)
{
    algo_decision d[RL_OPS_MAX];
    int64_t now = 0;
    int rc = lim->store->vt->check(lim->store, ops, n, d, &now);

    return decide_settle(lim, ops, n, d, now, rc, res);
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

/* The client key for a rule's dimension, "user:123", built at buf (room
 * bytes).  Returns RL_OK, 1 when the request does not carry the dimension,
 * REQUEST_NEED_ROOM, or an error. */
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
        return REQUEST_NEED_ROOM;
    memcpy(buf, name, nlen);
    buf[nlen] = ':';
    memcpy(buf + nlen + 1, value, vlen);
    buf[nlen + 1 + vlen] = '\0';
    *len = nlen + 1 + vlen;
    return RL_OK;
}

int request_collect(const rl_limiter *lim, const rl_ruleset *rs,
                    const rl_request *req, store_op *ops, size_t max_ops,
                    char *keys, size_t keys_len, size_t *used, size_t *n)
{
    size_t k = 0, at = *used;
    int rc = check_cost(lim, req->cost);

    if (rc != RL_OK)
        return rc;
    for (size_t i = 0; i < rs->n; i++) {
        const rl_rule *rule = &rs->rules[i];
        size_t len = 0;

        if (!rule_matches(rule, req->endpoint, req->tier))
            continue;
        rc = dimension_key(lim, rule, req, keys + at, keys_len - at, &len);
        if (rc == 1)
            continue;
        if (rc != RL_OK && rc != REQUEST_NEED_ROOM)
            return rc;
        if (k == RL_OPS_MAX)
            return rl_fail(lim, RL_ERULE,
                           "the request matches more than %d rules",
                           RL_OPS_MAX);
        if (rc == REQUEST_NEED_ROOM || k == max_ops)
            return REQUEST_NEED_ROOM;
        ops[k++] = (store_op){rule, keys + at, len, req->cost,
                              rule->mode == RL_MODE_LOG};
        at += len + 1;
    }
    *n = k;
    *used = at;
    return RL_OK;
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
    rs = rcu_read_lock(&lim->rules, &t);
    rc = request_collect(lim, rs, req, ops, RL_OPS_MAX, keys, sizeof keys,
                         &used, &n);
    if (rc == RL_OK && n == 0)
        decide_no_rule(lim, res);
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
        codes[k] = decide_settle(lim, q->ops, q->n, q->out, q->now_ms, q->rc,
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
    rc = request_collect(lim, rs, req, c->ops + c->nops,
                         MANY_OPS - c->nops, c->keys, sizeof c->keys,
                         &c->used, &n);
    if (rc == REQUEST_NEED_ROOM) {
        chunk_run(lim, c, results, codes);
        rc = request_collect(lim, rs, req, c->ops, MANY_OPS, c->keys,
                             sizeof c->keys, &c->used, &n);
    }
    if (rc != RL_OK)
        return rc;
    if (n == 0) {
        decide_no_rule(lim, &results[k]);
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
    for (size_t k = 0; k < n; k++)
        codes[k] = chunk_add(lim, rs, &c, &reqs[k], k, results, codes);
    chunk_run(lim, &c, results, codes);
    rcu_read_unlock(&lim->rules, t);
    for (size_t k = 0; k < n && first == RL_OK; k++)
        first = codes[k];
    return first;
}
