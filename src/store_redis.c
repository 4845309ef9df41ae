/*
 * store_redis.c -- the store in one Redis server.
 *
 * A check becomes one EVALSHA per Redis Cluster slot its keys fall in: the
 * rules of one client share the slot of the hash tag {<client key>}, so a
 * request's rules usually run in ONE script, atomically and all-or-nothing.
 * Rules on different clients (a per-IP and a per-user rule) go out in the
 * same write, pipelined; if any of them denies, the scripts that charged
 * are sent a refund, so no rule keeps a charge for a request that did not
 * pass.  Keys: rl:{<client key>}:<rule id>:<shape>, one per (client, rule), each
 * holding one integer and expiring by itself (see lua/).
 *
 * A server that lost the script (restart, failover, SCRIPT FLUSH) answers
 * NOSCRIPT; those scripts are sent again as EVAL, which also caches them,
 * within what is left of the same timeout.
 */
#include "store_redis.h"
#include "crc16.h"
#include "ratelimit.h"
#include "redis_conn.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CONNS 16
#define CMD_STACK 24576

const char *store_redis_test_script;
size_t store_redis_test_script_len;

typedef struct redis_store {
    rl_store base;
    rconn *conns[MAX_CONNS];
    int nconns;
    _Atomic unsigned next;
    int64_t timeout_ms;
    const char *script;
    size_t script_len;
    rl_clock clock;           /* tests: the time passed to the script */
    _Atomic int64_t noscript, refunds;
} redis_store;

/* ---- RESP encoding into a caller's buffer -------------------------------- */

typedef struct cmdbuf {
    char *p;
    size_t len, cap;
    int heap;                 /* p was malloc'ed (it outgrew the stack)  */
    int oom;
} cmdbuf;

static void put(cmdbuf *b, const char *s, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = (b->len + n) * 2;
        char *np = b->heap ? realloc(b->p, cap) : malloc(cap);
        if (!np) {
            b->oom = 1;
            return;
        }
        if (!b->heap)
            memcpy(np, b->p, b->len);
        b->p = np;
        b->cap = cap;
        b->heap = 1;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void put_int_raw(cmdbuf *b, char lead, int64_t v)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%c%lld\r\n", lead, (long long)v);
    put(b, tmp, (size_t)n);
}

static void put_arg(cmdbuf *b, const char *s, size_t n)
{
    put_int_raw(b, '$', (int64_t)n);
    put(b, s, n);
    put(b, "\r\n", 2);
}

static void put_num(cmdbuf *b, int64_t v)
{
    char tmp[24];
    int n = snprintf(tmp, sizeof tmp, "%lld", (long long)v);
    put_arg(b, tmp, (size_t)n);
}

/* The state key: rl:{<client key>}:<rule id>:<shape>, the shape being the
 * algorithm's letter and the window in seconds ("s60").  A rule that
 * changes algorithm or window starts from fresh keys instead of misreading
 * the old state (the memory store does the same through state_seed). */
static size_t key_name(const store_op *op, char *key)
{
    static const char letter[] = "stfg"; /* enum rl_algo order */
    size_t idlen = strlen(op->rule->id), n = 4;

    memcpy(key, "rl:{", 4);
    memcpy(key + n, op->key, op->key_len);
    n += op->key_len;
    memcpy(key + n, "}:", 2);
    n += 2;
    memcpy(key + n, op->rule->id, idlen);
    n += idlen;
    n += (size_t)sprintf(key + n, ":%c%lld", letter[op->rule->ap.algo & 3],
                         (long long)op->rule->window_s);
    return n;
}

#define KEY_NAME_MAX (RL_KEY_MAX + RL_RULE_ID_MAX + 32)

static void put_key(cmdbuf *b, const store_op *op)
{
    char key[KEY_NAME_MAX];

    put_arg(b, key, key_name(op, key));
}

static unsigned op_slot(const store_op *op)
{
    char key[KEY_NAME_MAX];

    return key_slot(key, key_name(op, key));
}

/* One script call for the ops idx[0..k): mode 'c' (charge) or 'r'
 * (refund what `charged` says was charged at `at`). */
static void put_script(redis_store *r, cmdbuf *b, const store_op *ops,
                       const int *idx, int k, char mode, int eval,
                       const algo_decision *charged, int64_t at)
{
    int64_t now = r->clock.fn ? r->clock.fn(r->clock.arg) : 0;

    put_int_raw(b, '*', 3 + k + 2 + 8 * k);
    if (eval) {
        put_arg(b, "EVAL", 4);
        put_arg(b, r->script, r->script_len);
    } else {
        put_arg(b, "EVALSHA", 7);
        put_arg(b, rconn_sha(r->conns[0]), 40);
    }
    put_num(b, k);
    for (int i = 0; i < k; i++)
        put_key(b, &ops[idx[i]]);
    put_num(b, now);
    put_arg(b, mode == 'c' ? "c" : "r", 1);
    for (int i = 0; i < k; i++) {
        const store_op *op = &ops[idx[i]];
        const algo_params *ap = &op->rule->ap;
        int64_t cost = op->cost;
        put_num(b, ap->algo);
        put_num(b, ap->limit);
        put_num(b, ap->burst);
        put_num(b, ap->window_ms);
        put_num(b, ap->p);
        put_num(b, ap->q);
        if (mode == 'r' && !(charged[idx[i]].allowed && charged[idx[i]].changed))
            cost = 0;
        put_num(b, cost);
        if (mode == 'c')
            put_num(b, op->soft);
        else
            put_num(b, at);
    }
}

/* ---- grouping and replies ------------------------------------------------ */

typedef struct groups {
    int n;
    int size[RL_OPS_MAX];
    int idx[RL_OPS_MAX][RL_OPS_MAX];
} groups;

static void group_by_slot(const store_op *ops, size_t n, groups *g)
{
    unsigned slot[RL_OPS_MAX];

    g->n = 0;
    for (size_t i = 0; i < n; i++) {
        int j;
        slot[g->n] = op_slot(&ops[i]);
        for (j = 0; j < g->n && slot[j] != slot[g->n]; j++)
            ;
        if (j == g->n)
            g->size[g->n++] = 0;
        g->idx[j][g->size[j]++] = (int)i;
    }
}

/* Read one script reply into out[]; returns 1 NOSCRIPT, 0 ok, -1 error. */
static int parse_reply(const redisReply *rep, const store_op *ops,
                       const int *idx, int k, algo_decision *out,
                       int64_t *now, char *err, size_t errlen)
{
    if (rep->type == REDIS_REPLY_ERROR) {
        if (strncmp(rep->str, "NOSCRIPT", 8) == 0)
            return 1;
        snprintf(err, errlen, "script error: %.160s", rep->str);
        return -1;
    }
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != (size_t)(4 * k + 1))
        return snprintf(err, errlen, "unexpected script reply"), -1;
    for (size_t e = 0; e < rep->elements; e++)
        if (rep->element[e]->type != REDIS_REPLY_INTEGER)
            return snprintf(err, errlen, "unexpected script reply"), -1;
    for (int i = 0; i < k; i++) {
        algo_decision *d = &out[idx[i]];
        redisReply **el = &rep->element[4 * i];
        d->allowed = el[0]->integer == 1;
        d->changed = d->allowed && ops[idx[i]].cost > 0;
        d->remaining = el[1]->integer;
        d->reset_ms = el[2]->integer;
        d->retry_ms = el[3]->integer;
        d->expires_ms = d->reset_ms;
    }
    *now = rep->element[4 * k]->integer;
    return 0;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Send one script per group (EVALSHA, or EVAL for groups in `eval`), wait,
 * parse.  Groups answering NOSCRIPT are flagged in `eval` for a resend. */
static int round_trip(redis_store *r, rconn *c, const store_op *ops,
                      const groups *g, int *eval, int64_t timeout_ms,
                      algo_decision *out, int64_t *now, int *again,
                      char *err, size_t errlen)
{
    char stack[CMD_STACK];
    cmdbuf b = {stack, 0, sizeof stack, 0, 0};
    redisReply *rep[RL_OPS_MAX];
    int sent[RL_OPS_MAX], ns = 0, rc = RL_OK;

    for (int i = 0; i < g->n; i++) {
        if (eval[i] < 0)
            continue; /* already answered */
        put_script(r, &b, ops, g->idx[i], g->size[i], 'c', eval[i], NULL, 0);
        sent[ns++] = i;
    }
    if (b.oom) {
        snprintf(err, errlen, "out of memory");
        rc = RL_ENOMEM;
        goto out;
    }
    if ((rc = rconn_call(c, b.p, b.len, ns, rep, timeout_ms, err, errlen)))
        goto out;
    *again = 0;
    for (int s = 0; s < ns; s++) {
        int i = sent[s], p = rc == RL_OK
                                 ? parse_reply(rep[s], ops, g->idx[i],
                                               g->size[i], out, now, err,
                                               errlen)
                                 : 0;
        if (p < 0)
            rc = RL_ESTORE;
        if (p == 1) { /* the server lost the script: send its text */
            eval[i] = 1;
            *again = 1;
            atomic_fetch_add(&r->noscript, 1);
        } else {
            eval[i] = -1;
        }
        freeReplyObject(rep[s]);
    }
out:
    if (b.heap)
        free(b.p);
    return rc;
}

/* Some group denied: take back what the others charged. */
static void refund(redis_store *r, rconn *c, const store_op *ops,
                   const groups *g, const algo_decision *out, int64_t now)
{
    char stack[CMD_STACK];
    cmdbuf b = {stack, 0, sizeof stack, 0, 0};
    int k = 0;

    for (int i = 0; i < g->n; i++) {
        int charged = 0;
        for (int j = 0; j < g->size[i]; j++)
            charged |= out[g->idx[i][j]].allowed && out[g->idx[i][j]].changed;
        if (!charged)
            continue;
        put_script(r, &b, ops, g->idx[i], g->size[i], 'r', 0, out, now);
        k++;
    }
    if (k && !b.oom) {
        rconn_send(c, b.p, b.len, k);
        atomic_fetch_add(&r->refunds, k);
    }
    if (b.heap)
        free(b.p);
}

/* The next connection in turn that is up (or the next one, if none is:
 * the call then fails at once). */
static rconn *pick(redis_store *r)
{
    unsigned start = atomic_fetch_add(&r->next, 1);

    for (int i = 0; i < r->nconns; i++) {
        rconn *c = r->conns[(start + (unsigned)i) % (unsigned)r->nconns];
        if (rconn_is_up(c))
            return c;
    }
    return r->conns[start % (unsigned)r->nconns];
}

/* The URI for messages, with any password replaced by "***". */
static void redact(const char *uri, char *out, size_t len)
{
    const char *scheme = strstr(uri, "://"), *at = strchr(uri, '@');

    if (!scheme || !at || at < scheme) {
        snprintf(out, len, "%.100s", uri);
        return;
    }
    const char *colon = memchr(scheme + 3, ':', (size_t)(at - scheme - 3));
    if (!colon)
        colon = at;
    snprintf(out, len, "%.*s:***%.80s", (int)(colon - uri), uri, at);
}

static int redis_check(rl_store *s, const store_op *ops, size_t n,
                       algo_decision *out, int64_t *now_ms)
{
    redis_store *r = (redis_store *)s;
    rconn *c = pick(r);
    int eval[RL_OPS_MAX] = {0}, again = 1, rc = RL_OK, denied = 0;
    int64_t start = mono_ms(), left = r->timeout_ms;
    char err[200];
    groups g;

    group_by_slot(ops, n, &g);
    *now_ms = 0;
    while (again && rc == RL_OK) {
        rc = round_trip(r, c, ops, &g, eval, left, out, now_ms, &again, err,
                        sizeof err);
        left = r->timeout_ms - (mono_ms() - start);
        if (again && left <= 0)
            rc = RL_ESTORE;
    }
    if (rc != RL_OK)
        return rc;
    for (size_t i = 0; i < n; i++)
        denied |= !out[i].allowed && !ops[i].soft;
    if (denied && g.n > 1)
        refund(r, c, ops, &g, out, *now_ms);
    if (denied) /* nothing counts as charged now */
        for (size_t i = 0; i < n; i++)
            out[i].changed = 0;
    return RL_OK;
}

/* ---- lifecycle ------------------------------------------------------------ */

static void redis_free(rl_store *s)
{
    redis_store *r = (redis_store *)s;

    for (int i = 0; i < r->nconns; i++)
        rconn_close(r->conns[i]);
    free(r);
}

static const store_vtable redis_vtable = {"redis", redis_check, redis_free};

int store_redis_new(const char *uri, const store_options *opt,
                    rl_store **out, char *err, size_t errlen)
{
    redis_store *r = calloc(1, sizeof *r);
    rconn_opts co;
    char why[200], shown[128];
    int rc;

    *out = NULL;
    if (!r)
        return snprintf(err, errlen, "out of memory"), RL_ENOMEM;
    r->base.vt = &redis_vtable;
    r->timeout_ms = opt->timeout_ms;
    r->script = store_redis_test_script ? store_redis_test_script : rl_lua_check;
    r->script_len = store_redis_test_script ? store_redis_test_script_len
                                            : rl_lua_check_len;
    memset(&co, 0, sizeof co);
    redact(uri, shown, sizeof shown);
    if (redis_uri_parse(uri, &co.uri, why, sizeof why)) {
        free(r);
        return snprintf(err, errlen, "store \"%s\": %s", shown, why),
               RL_ESTORE;
    }
    co.connect_timeout_ms = opt->connect_timeout_ms;
    co.script = r->script;
    co.script_len = r->script_len;
    for (int i = 0; i < opt->redis_connections && i < MAX_CONNS; i++) {
        rc = rconn_open(&r->conns[i], &co, opt->degraded_start, why,
                        sizeof why);
        if (rc != RL_OK) {
            redis_free(&r->base);
            return snprintf(err, errlen, "store \"%s\": %s", shown, why), rc;
        }
        r->nconns++;
    }
    *out = &r->base;
    return RL_OK;
}

void store_redis_set_clock(rl_store *s, rl_clock_fn fn, void *arg)
{
    redis_store *r = (redis_store *)s;

    r->clock.fn = fn;
    r->clock.arg = arg;
}

void store_redis_stats_get(rl_store *s, store_redis_stats *st)
{
    redis_store *r = (redis_store *)s;
    rconn_stats cs;

    memset(st, 0, sizeof *st);
    for (int i = 0; i < r->nconns; i++) {
        rconn_stats_get(r->conns[i], &cs);
        st->calls += cs.calls;
        st->writes += cs.writes;
        st->timeouts += cs.timeouts;
        st->reconnects += cs.reconnects;
        st->down_fails += cs.down_fails;
    }
    st->noscript = atomic_load(&r->noscript);
    st->refunds = atomic_load(&r->refunds);
}
