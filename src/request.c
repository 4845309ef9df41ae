/*
 * request.c -- the request path: rl_allow(), rl_check(), rl_check_many().
 *
 * Each call does the same steps: check the arguments (the caller's struct
 * sizes through sized.h), take the current rule set (lock-free, see
 * rcu.h), turn the request into one charge per matching rule
 * (request_collect()), hand them all to the store in one call, and let
 * decide.c fold the answers into one rl_result, which is copied into the
 * caller's as far as its size goes.  No allocation, no lock of our own;
 * the store's per-segment locks are the only ones on the path.
 * rl_check_many() does the same for many requests, handing the store up
 * to 64 of them in one call (a chunk), so Redis decides them in one round
 * trip.  With the option metrics on, the checks' time goes into the
 * latency histogram (every check on Redis, one in METRICS_SAMPLE_MEMORY
 * per thread on the memory store): rl_allow and rl_check time theirs in
 * run_timed(), out of line, so an untimed check reads no clock and keeps
 * no start time across the store's call; rl_check_many's chunks, the
 * async and reserve paths use request_timer_start/_stop.  Before the
 * store is asked, a request with a live denial in the deny cache
 * (option deny_cache, Redis stores) is answered from it (decide_cached),
 * and a request of leased rules is decided by lease_check.h (rl_allow and
 * rl_check; rl_check_many charges leased rules plainly).
 *
 * Named dimensions cost one look-up per request dimension, not one string
 * compare per rule: the rule set gave each name its rules count by a
 * small id at load (ruleset_index()), a request's names are resolved to
 * those ids once (resolve_dims(): at most 3 shortcuts + RL_DIMS_MAX
 * entries of at most RL_DIM_NAME_MAX bytes, one hash and one compare
 * each), and each rule then tests one bit of a mask.
 *
 * Nor does a request walk the rules: the set's index (rule_index.h) hands
 * over the numbers of those that match its endpoint and tier and count by
 * a dimension it carries, in rule order, the first RL_OPS_MAX + 1 of them
 * (one more than a request may match, to say so).  The endpoint is
 * bounded (RL_ENDPOINT_MAX), so no input makes matching cost more.
 */
#include "request.h"
#include "decide.h"
#include "clock.h"
#include "error.h"
#include "lease_check.h"
#include "metrics.h"
#include "rule_index.h"
#include "rule_values.h"
#include "sized.h"

#include <string.h>

void request_timer_record(rl_limiter *lim, int64_t t0, size_t count)
{
    metrics_observe(lim->latency, metrics_self()->slot,
                    clock_mono_ns() - t0, count);
}

/* One request's charges decided: from the deny cache, a lease, or the
 * store.  Untimed: no clock and no start time held across the store's
 * call (run_timed() wraps it on the checks a thread times). */
static inline __attribute__((always_inline)) int
run_plain(rl_limiter *lim, const store_op *ops, size_t n, rl_result *res)
{
    algo_decision d[RL_OPS_MAX];
    int64_t now = 0;
    int rc;

    /* One flag test each when the limiter has no deny cache or leases
     * (the memory store never has): no call. */
    if (lim->deny && decide_cached(lim, ops, n, res))
        return RL_OK;
    if (lim->lease && lease_check(lim, ops, n, res, &rc))
        return rc;
    rc = lim->store->vt->check(lim->store, ops, n, d, &now);
    return decide_settle(lim, ops, n, d, now, rc, res);
}

/* run_plain() timed into the latency histogram: out of line, so the
 * untimed path's frame and registers are not shaped by it. */
static __attribute__((noinline, cold)) int
run_timed(rl_limiter *lim, const store_op *ops, size_t n, rl_result *res)
{
    int64_t t0 = clock_mono_ns();
    int rc = run_plain(lim, ops, n, res);

    request_timer_stop(lim, t0, 1);
    return rc;
}

static int run(rl_limiter *lim, const store_op *ops, size_t n,
               rl_result *res)
{
    if (__builtin_expect(metrics_sampled(&lim->mconf), 0))
        return run_timed(lim, ops, n, res);
    return run_plain(lim, ops, n, res);
}

static int check_cost(const rl_limiter *lim, int64_t cost)
{
    if (cost < 0 || cost > RL_COST_MAX)
        return rl_fail(lim, RL_EINVAL, "cost: must be 0..%lld, got %lld",
                       (long long)RL_COST_MAX, (long long)cost);
    return RL_OK;
}

/* The compact layout's hash key (option hash_key), or NULL. */
static const uint64_t *layout_key(const rl_limiter *lim)
{
    return lim->keyed_layout ? lim->layout_key : NULL;
}

/* The caller's result: its span checked, its bytes zeroed.  0 with
 * rl_fail() done when its size is too small. */
static size_t result_span(const rl_limiter *lim, const char *what,
                          rl_result *res)
{
    size_t span = sized_span(lim, what, &sized_result, res->size);

    if (span)
        sized_zero_as(res, &sized_result, span);
    return span;
}

/* Where a check builds its result: in the caller's own when that has
 * this library's size (nothing to copy after), else in *local (zeroed),
 * copied as far as span goes by result_done(). */
static rl_result *result_at(rl_result *caller, size_t span,
                            rl_result *local)
{
    if (span == sizeof *caller)
        return caller;
    memset(local, 0, sizeof *local);
    return local;
}

/* The check returned rc with its result built at res: copied to the
 * caller's when built apart; on failure the caller's stays all zeros. */
static void result_done(rl_result *caller, const rl_result *res,
                        size_t span, int rc)
{
    if (rc != RL_OK)
        sized_zero(caller, span);
    else if (res != caller)
        sized_fill(caller, res, span);
}

RL_EXPORT int rl_allow(rl_limiter *lim, const char *key, const char *rule_id,
                       int64_t cost, rl_result *result)
{
    rl_result local, *res;
    const rl_ruleset *rs;
    const rl_rule *rule;
    store_op op;
    rcu_token t;
    size_t len, span;
    int rc;

    if (!lim || !key || !rule_id || !result) {
        sized_clear(result, &sized_result);
        return rl_fail(lim, RL_EINVAL, "rl_allow: NULL argument");
    }
    if (!(span = result_span(lim, "rl_allow: result->size", result)))
        return RL_EINVAL;
    len = strnlen(key, RL_KEY_MAX + 1);
    if (len == 0 || len > RL_KEY_MAX)
        return rl_fail(lim, RL_EINVAL, "key: must be 1..%d bytes%s",
                       RL_KEY_MAX, len ? ", is longer" : ", is empty");
    if ((rc = check_cost(lim, cost)) != RL_OK)
        return rc;
    res = result_at(result, span, &local);
    rs = rcu_read_lock(&lim->rules, &t);
    if (!(rule = ruleset_find(rs, rule_id))) {
        rc = rl_fail(lim, RL_ENORULE, "no rule \"%.64s\" in rule set version "
                     "%lld", rule_id, (long long)rs->version);
    } else if (rule->unlimited) { /* charges nothing, as in rl_check */
        decide_no_rule(lim, res);
        rc = RL_OK;
    } else {
        op = (store_op){.rule = rule, .key = key, .key_len = len,
                        .cost = cost, .soft = rule->mode == RL_MODE_LOG,
                        .layout_key = layout_key(lim)};
        rc = run(lim, &op, 1, res);
    }
    rcu_read_unlock(&lim->rules, t);
    result_done(result, res, span, rc);
    return rc;
}

/* ---- a request's dimensions -------------------------------------------- */

/* rl_request's string lengths (since 1.1.0), in its order; a request of a size that holds
 * them has them read. */
typedef struct req_lens {
    size_t endpoint_len, tier_len, user_len, api_key_len, ip_len;
} req_lens;

#define REQUEST_SIZE_LENS (offsetof(rl_request, ip_len) + sizeof(size_t))
_Static_assert(offsetof(rl_request, ip_len) - offsetof(rl_request,
               endpoint_len) == offsetof(req_lens, ip_len),
               "req_lens mirrors rl_request's lengths");

/* The request's dimensions by id in the rule set (rule.h): val[id] is the
 * value of dimension id when bit id of present is set. */
typedef struct req_dims {
    uint64_t present;
    const char *val[RULESET_DIMS_MAX];
    size_t len[RULESET_DIMS_MAX];    /* val's bytes, or 0: up to its NUL */
} req_dims;

/* Names the rule set does not know, remembered to find one given twice. */
typedef struct unknown_names {
    size_t n;
    uint64_t hash[RL_DIMS_MAX];
    const char *name[RL_DIMS_MAX];
    size_t len[RL_DIMS_MAX];
} unknown_names;

/* Dimension id named with value v (of len bytes, 0: up to its NUL);
 * *given collects the ids named. */
static int take_dim(const rl_limiter *lim, req_dims *rd, uint64_t *given,
                    int id, const char *name, const char *v, size_t len)
{
    uint64_t bit = (uint64_t)1 << id;

    if (*given & bit)
        return rl_fail(lim, RL_EINVAL, "dims: \"%s\" given twice", name);
    *given |= bit;
    if (v && (len || *v)) {
        rd->present |= bit;
        rd->val[id] = v;
        rd->len[id] = len;
    }
    return RL_OK;
}

/* A name no rule counts by: only checked against the other such names. */
static int take_unknown(const rl_limiter *lim, unknown_names *u,
                        const char *name, size_t len, uint64_t h)
{
    for (size_t j = 0; j < u->n; j++)
        if (u->hash[j] == h && u->len[j] == len &&
            memcmp(u->name[j], name, len) == 0)
            return rl_fail(lim, RL_EINVAL, "dims: \"%s\" given twice", name);
    u->hash[u->n] = h;
    u->name[u->n] = name;
    u->len[u->n++] = len;
    return RL_OK;
}

/* Entry i of req->dims into rd. */
static int take_entry(const rl_limiter *lim, const rl_ruleset *rs,
                      const rl_dim *dim, size_t i, req_dims *rd,
                      uint64_t *given, unknown_names *u)
{
    size_t len = rule_dim_name_len(dim->name);
    int id;
    uint64_t h;

    if (len == 0)
        return rl_fail(lim, RL_EINVAL, "dims[%zu].name: must be 1..%d bytes "
                       "of a-z 0-9 _ . : -, starting with a letter", i,
                       RL_DIM_NAME_MAX);
    id = rule_dim_builtin(dim->name, len);
    if (id == RULE_DIM_GLOBAL)
        return rl_fail(lim, RL_EINVAL, "dims[%zu].name: \"global\" is "
                       "reserved (rules counting every request)", i);
    if (id != RULE_DIM_NAMED)
        return take_dim(lim, rd, given, id, dim->name, dim->value, 0);
    h = ruleset_dim_hash(dim->name, len);
    if ((id = ruleset_dim_id(rs, dim->name, len, h)) >= 0)
        return take_dim(lim, rd, given, id, dim->name, dim->value, 0);
    return take_unknown(lim, u, dim->name, len, h);
}

/* The request's shortcuts and dims, resolved to the rule set's ids. */
static int resolve_dims(const rl_limiter *lim, const rl_ruleset *rs,
                        const rl_request *req, const req_lens *lens,
                        req_dims *rd)
{
    unknown_names u;
    uint64_t given = 0;
    int rc = RL_OK;

    rd->present = 0;
    u.n = 0;
    if (req->user)
        take_dim(lim, rd, &given, RULE_DIM_USER, "user", req->user,
                 lens->user_len);
    if (req->api_key)
        take_dim(lim, rd, &given, RULE_DIM_API_KEY, "api_key", req->api_key,
                 lens->api_key_len);
    if (req->ip)
        take_dim(lim, rd, &given, RULE_DIM_IP, "ip", req->ip, lens->ip_len);
    if (req->ndims == 0)
        return RL_OK;
    if (req->ndims > RL_DIMS_MAX)
        return rl_fail(lim, RL_EINVAL, "ndims: %zu, more than %d",
                       req->ndims, RL_DIMS_MAX);
    if (!req->dims)
        return rl_fail(lim, RL_EINVAL, "dims: NULL with ndims %zu",
                       req->ndims);
    for (size_t i = 0; i < req->ndims && rc == RL_OK; i++)
        rc = take_entry(lim, rs, &req->dims[i], i, rd, &given, &u);
    return rc;
}

/* ---- a request's charges ----------------------------------------------- */

/* The client key "<dimension>:<value>" of a rule, built at buf (room
 * bytes); value has vlen bytes, or 0: up to its NUL.  Returns RL_OK,
 * REQUEST_NEED_ROOM, or an error. */
static int dimension_key(const rl_limiter *lim, const rl_rule *rule,
                         const char *value, size_t vlen, char *buf,
                         size_t room, size_t *len)
{
    size_t nlen = rule->dim_len;

    if (vlen == 0)
        vlen = strnlen(value, RL_KEY_MAX + 1);

    if (nlen + 1 + vlen > RL_KEY_MAX)
        return rl_fail(lim, RL_EINVAL, "%s: longer than %zu bytes",
                       rule->dimension, RL_KEY_MAX - nlen - 1);
    if (nlen + 2 + vlen > room)
        return REQUEST_NEED_ROOM;
    memcpy(buf, rule->dimension, nlen);
    buf[nlen] = ':';
    memcpy(buf + nlen + 1, value, vlen);
    buf[nlen + 1 + vlen] = '\0';
    *len = nlen + 1 + vlen;
    return RL_OK;
}

_Static_assert(RL_OPS_MAX + 1 <= RULE_INDEX_MAX,
               "the index returns one match more than a request may have");

/* The endpoint's length (given, or up to its NUL); RL_EINVAL over
 * RL_ENDPOINT_MAX. */
static int endpoint_len(const rl_limiter *lim, const char *ep, size_t given,
                        size_t *len)
{
    *len = !ep ? 0 : given ? given : strnlen(ep, RL_ENDPOINT_MAX + 1);
    if (*len > RL_ENDPOINT_MAX)
        return rl_fail(lim, RL_EINVAL, "endpoint: longer than %d bytes",
                       RL_ENDPOINT_MAX);
    return RL_OK;
}

/* The tier's length (given, or up to its NUL, RL_TIER_MAX + 1 at most:
 * no rule's is longer); RL_EINVAL for a counted one over RL_ENDPOINT_MAX,
 * as for the endpoint. */
static int tier_len(const rl_limiter *lim, const char *tier, size_t given,
                    size_t *len)
{
    *len = !tier ? 0 : given ? given : strnlen(tier, RL_TIER_MAX + 1);
    if (given > RL_ENDPOINT_MAX)
        return rl_fail(lim, RL_EINVAL, "tier: longer than %d bytes",
                       RL_ENDPOINT_MAX);
    return RL_OK;
}

int request_collect(const rl_limiter *lim, const rl_ruleset *rs,
                    const rl_request *req, store_op *ops, size_t max_ops,
                    char *keys, size_t keys_len, size_t *used, size_t *n)
{
    uint32_t hit[RULE_INDEX_MAX];
    size_t k = 0, at = *used, elen = 0, tlen = 0, nhit;
    req_dims rd;
    req_lens lens = {0};
    int rc = check_cost(lim, req->cost), where;

    if (rc != RL_OK)
        return rc;
    if (req->size >= REQUEST_SIZE_LENS)
        memcpy(&lens, &req->endpoint_len, sizeof lens);
    /* Counted strings are read where they lie, no copy; a tier only when
     * a rule has one or per-value rules may (the endpoint's bound is
     * every request's). */
    where = req->tier && (rs->values || !rule_index_any_only(rs->match));
    if ((rc = endpoint_len(lim, req->endpoint, lens.endpoint_len, &elen)) !=
            RL_OK ||
        (where && (rc = tier_len(lim, req->tier, lens.tier_len, &tlen)) !=
                      RL_OK) ||
        (rc = resolve_dims(lim, rs, req, &lens, &rd)) != RL_OK)
        return rc;
    /* With per-value rules, replaced rules leave: room for them all. */
    nhit = rule_index_match(rs->match, rs->rules, req->endpoint, elen,
                            req->tier, tlen, rd.present, hit,
                            rs->values ? RULE_INDEX_MAX : RL_OPS_MAX + 1);
    if (rs->values) /* else a call that zeroes its buffers for nothing */
        nhit = rule_values_apply(rs->values, rs->rules, req->endpoint, elen,
                                 req->tier, tlen, rd.present, rd.val, rd.len,
                                 hit, nhit);
    for (size_t i = 0; i < nhit; i++) {
        const rl_rule *rule = &rs->rules[hit[i]];
        int id = rule->dim_id;
        size_t len = 0;

        int global = id == RULE_DIM_GLOBAL;

        rc = dimension_key(lim, rule, global ? "*" : rd.val[id],
                           global ? 1 : rd.len[id], keys + at, keys_len - at,
                           &len);
        if (rc != RL_OK && rc != REQUEST_NEED_ROOM)
            return rc;
        if (k == RL_OPS_MAX)
            return rl_fail(lim, RL_ERULE,
                           "the request matches more than %d rules",
                           RL_OPS_MAX);
        if (rc == REQUEST_NEED_ROOM || k == max_ops)
            return REQUEST_NEED_ROOM;
        ops[k++] = (store_op){.rule = rule, .key = keys + at, .key_len = len,
                              .cost = req->cost,
                              .soft = rule->mode == RL_MODE_LOG,
                              .layout_key = layout_key(lim)};
        at += len + 1;
    }
    *n = k;
    *used = at;
    return RL_OK;
}

/* ---- one request -------------------------------------------------------- */

RL_EXPORT int rl_check(rl_limiter *lim, const rl_request *req,
                       rl_result *result)
{
    store_op ops[RL_OPS_MAX];
    char keys[RL_OPS_MAX * (RL_KEY_MAX + 1)];
    rl_result local, *res;
    const rl_ruleset *rs;
    rcu_token t;
    size_t n = 0, used = 0, span;
    int rc;

    if (!lim || !req || !result) {
        sized_clear(result, &sized_result);
        return rl_fail(lim, RL_EINVAL, "rl_check: NULL argument");
    }
    if (!(span = result_span(lim, "rl_check: result->size", result)) ||
        !sized_span(lim, "rl_check: req->size", &sized_request, req->size))
        return RL_EINVAL;
    res = result_at(result, span, &local);
    rs = rcu_read_lock(&lim->rules, &t);
    rc = request_collect(lim, rs, req, ops, RL_OPS_MAX, keys, sizeof keys,
                         &used, &n);
    if (rc == RL_OK && n == 0)
        decide_no_rule(lim, res);
    else if (rc == RL_OK)
        rc = run(lim, ops, n, res);
    rcu_read_unlock(&lim->rules, t);
    result_done(result, res, span, rc);
    return rc;
}

/* ---- many requests at once -------------------------------------------- */

#define MANY_OPS 64                          /* charges in one chunk   */
#define MANY_KEYS (RL_OPS_MAX * (RL_KEY_MAX + 1)) /* their keys' bytes */

/* The caller's arrays of rl_check_many(), strided by their first
 * element's size. */
typedef struct many_io {
    const char *reqs;
    char *results;
    int *codes;
    size_t req_stride, res_stride, span;
} many_io;

static const rl_request *io_req(const many_io *io, size_t k)
{
    return (const rl_request *)(const void *)(io->reqs + k * io->req_stride);
}

static rl_result *io_result(const many_io *io, size_t k)
{
    return (rl_result *)(void *)(io->results + k * io->res_stride);
}

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
static void chunk_run(rl_limiter *lim, chunk *c, const many_io *io)
{
    rl_store *st = lim->store;
    int64_t t0 = request_timer_start(lim);

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
        rl_result local, *res = result_at(io_result(io, k), io->span, &local);
        io->codes[k] = decide_settle(lim, q->ops, q->n, q->out, q->now_ms,
                                     q->rc, res);
        result_done(io_result(io, k), res, io->span, io->codes[k]);
    }
    request_timer_stop(lim, t0, c->nreq);
    c->nreq = c->nops = c->used = 0;
}

/* Request k into the chunk (its result now if it needs no store). */
static int chunk_add(rl_limiter *lim, const rl_ruleset *rs, chunk *c,
                     const many_io *io, size_t k)
{
    const rl_request *req = io_req(io, k);
    size_t n = 0, used;
    int rc;

    if (req->size != io->req_stride || io_result(io, k)->size !=
                                           io->res_stride) {
        sized_clear(io_result(io, k), &sized_result); /* by its own size */
        return rl_fail(lim, RL_EINVAL, "rl_check_many: reqs[%zu] or "
                       "results[%zu]: size differs from element 0's", k, k);
    }
    sized_zero_as(io_result(io, k), &sized_result, io->span);
    if (c->nreq == STORE_MANY_MAX)
        chunk_run(lim, c, io);
    used = c->used;
    rc = request_collect(lim, rs, req, c->ops + c->nops,
                         MANY_OPS - c->nops, c->keys, sizeof c->keys,
                         &c->used, &n);
    if (rc == REQUEST_NEED_ROOM) {
        chunk_run(lim, c, io);
        used = c->used;
        rc = request_collect(lim, rs, req, c->ops, MANY_OPS, c->keys,
                             sizeof c->keys, &c->used, &n);
    }
    if (rc != RL_OK)
        return rc;
    if (n == 0 || lim->deny) { /* no store needed? */
        rl_result res = {0};
        if (n == 0 || decide_cached(lim, c->ops + c->nops, n, &res)) {
            if (n == 0)
                decide_no_rule(lim, &res);
            c->used = used; /* a cached denial: its keys are not needed */
            sized_fill(io_result(io, k), &res, io->span);
            return RL_OK;
        }
    }
    c->req[c->nreq] = (store_req){c->ops + c->nops, n, c->d + c->nops, 0,
                                  RL_ESTORE};
    c->from[c->nreq++] = k;
    c->nops += n;
    return RL_OK;
}

/* The arrays' strides from their first elements. */
static int many_io_init(const rl_limiter *lim, many_io *io,
                        const rl_request *reqs, rl_result *results,
                        int *codes)
{
    io->reqs = (const char *)reqs;
    io->results = (char *)results;
    io->codes = codes;
    io->req_stride = reqs->size;
    io->res_stride = results->size;
    if (!sized_stride(lim, "rl_check_many: reqs[0].size", &sized_request,
                      reqs->size) ||
        !(io->span = sized_stride(lim, "rl_check_many: results[0].size",
                                  &sized_result, results->size)))
        return RL_EINVAL;
    return RL_OK;
}

/* A failed rl_check_many() before any request was looked at: each result
 * zeroed when element 0's size is a stride the array can be walked by
 * (sized_stride's test, without its message). */
static void many_clear(rl_result *results, size_t n)
{
    size_t stride = results ? results->size : 0;

    if (stride < sized_result.min || stride % sized_result.align)
        return;
    for (size_t k = 0; k < n; k++)
        sized_zero_as((char *)results + k * stride, &sized_result,
                      stride < sizeof *results ? stride : sizeof *results);
}

RL_EXPORT int rl_check_many(rl_limiter *lim, const rl_request *reqs,
                            rl_result *results, int *codes, size_t n)
{
    chunk c;
    many_io io;
    const rl_ruleset *rs;
    rcu_token t;
    int first = RL_OK;

    if (!lim || (n && (!reqs || !results || !codes))) {
        many_clear(results, n);
        return rl_fail(lim, RL_EINVAL, "rl_check_many: NULL argument");
    }
    if (n == 0)
        return RL_OK;
    if (many_io_init(lim, &io, reqs, results, codes) != RL_OK) {
        for (size_t k = 0; k < n; k++)
            codes[k] = RL_EINVAL;
        many_clear(results, n);
        return RL_EINVAL;
    }
    c.nreq = c.nops = c.used = 0;
    rs = rcu_read_lock(&lim->rules, &t);
    for (size_t k = 0; k < n; k++)
        codes[k] = chunk_add(lim, rs, &c, &io, k);
    chunk_run(lim, &c, &io);
    rcu_read_unlock(&lim->rules, t);
    for (size_t k = 0; k < n && first == RL_OK; k++)
        first = codes[k];
    return first;
}
