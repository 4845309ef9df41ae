/*
 * store_redis.c -- the store in one Redis server: one node (redis_node.c),
 * whose I/O thread decides batches of requests, each all-or-nothing, in
 * one script call, and with fleet_size "auto" the fleet's heartbeats.
 *
 * Keys: see redis_key.h.  A single server runs a request's rules in one
 * script whatever their slots, so nothing is ever refunded here; Redis
 * Cluster, where slots must be kept apart, is store_cluster.c.  The two
 * share the node and its options (store_redis_node_opts) and nothing
 * else: what tests and benchmarks reach in either goes through the
 * store's vtable (set_clock, io_stats, shards).
 */
#include "store_redis.h"
#include "fleet.h"
#include "ratelimit.h"
#include "redis_node.h"
#include "redis_tls.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *store_redis_test_script;
size_t store_redis_test_script_len;

typedef struct redis_store {
    rl_store base;
    rnode *node;
    int64_t timeout_ms;
    rl_clock clock;            /* tests: the time passed to the script */
    fleet fl;                  /* heartbeats, with fleet_size "auto"   */
    char addr[STORE_ADDR_MAX]; /* "host:port" or the socket's path     */
} redis_store;

static int64_t deadline(const redis_store *r)
{
    return clock_mono_ns() + r->timeout_ms * 1000000;
}

static int redis_check(rl_store *s, const store_op *ops, size_t n,
                       algo_decision *out, int64_t *now_ms)
{
    redis_store *r = (redis_store *)s;

    return rnode_check(r->node, ops, n, out, now_ms, deadline(r), 0, NULL);
}

static int redis_check_many(rl_store *s, store_req *reqs, size_t n)
{
    redis_store *r = (redis_store *)s;

    return rnode_check_many(r->node, reqs, n, deadline(r), NULL);
}

static int redis_settle(rl_store *s, const store_settle *ss, size_t *settled)
{
    redis_store *r = (redis_store *)s;
    rnode_reply why;

    *settled = 0;
    return rnode_settle(r->node, ss, 0, ss->n, 0, r->timeout_ms, settled,
                        &why);
}

/* ---- started requests ----------------------------------------------------- */

_Static_assert(sizeof(rnode_async) <= STORE_ASYNC_SPACE,
               "a started request fits its store_async");

static void redis_started(rnode_async *na)
{
    store_async *a = na->arg;

    a->q.rc = na->job.rc;
    a->q.now_ms = na->job.now_ms;
    a->done(a);
}

static void redis_start(rl_store *s, store_async *a)
{
    redis_store *r = (redis_store *)s;
    rnode_async *na = (rnode_async *)(void *)a->space;

    *na = (rnode_async){.job = {.kind = RIO_CHECK, .ops = a->q.ops,
                                .n = a->q.n, .out = a->q.out,
                                .deadline_ns = deadline(r)},
                        .done = redis_started, .arg = a};
    rnode_start(r->node, na);
}

/* ---- lifecycle ------------------------------------------------------------ */

static void redis_free(rl_store *s)
{
    redis_store *r = (redis_store *)s;

    fleet_stop(&r->fl);
    rnode_close(r->node);
    free(r);
}

static int redis_breaker(rl_store *s, int64_t *opens, int64_t *closes)
{
    redis_store *r = (redis_store *)s;
    breaker *b = rnode_breaker(r->node);

    *opens = atomic_load(&b->opens);
    *closes = atomic_load(&b->closes);
    return atomic_load(&b->state);
}

static void redis_set_clock(rl_store *s, rl_clock_fn fn, void *arg)
{
    redis_store *r = (redis_store *)s;

    r->clock.fn = fn;
    r->clock.arg = arg;
}

static void redis_io_stats(rl_store *s, rnode_stats *st)
{
    rnode_stats_add(((redis_store *)s)->node, st);
}

void store_redis_shard(rnode *nd, const char *addr, store_shard *out)
{
    breaker *b = rnode_breaker(nd);
    rnode_stats st = {0};

    rnode_stats_add(nd, &st);
    snprintf(out->addr, sizeof out->addr, "%s", addr);
    out->breaker_state = atomic_load(&b->state);
    out->opens = atomic_load(&b->opens);
    out->closes = atomic_load(&b->closes);
    out->up = rnode_is_up(nd);
    out->failing = atomic_load(&b->failures) > 0;
    out->errors = st.down_fails + st.stuck;
    out->timeouts = st.timeouts;
    out->redirects = st.moved + st.asks;
    out->reconnects = st.reconnects;
}

static size_t redis_shards(rl_store *s, store_shard *out, size_t max)
{
    redis_store *r = (redis_store *)s;

    if (max)
        store_redis_shard(r->node, r->addr, out);
    return 1;
}

static int redis_give_back(rl_store *s, const store_op *op, int64_t units,
                           int64_t charged_ms, int wait)
{
    redis_store *r = (redis_store *)s;

    return rnode_give_back(r->node, op, units, charged_ms,
                           wait ? r->timeout_ms : 0);
}

static const store_vtable redis_vtable = {
    .name = "redis",
    .check = redis_check,
    .free = redis_free,
    .breaker = redis_breaker,
    .check_many = redis_check_many,
    .start = redis_start,
    .set_clock = redis_set_clock,
    .io_stats = redis_io_stats,
    .shards = redis_shards,
    .give_back = redis_give_back,
    .settle = redis_settle,
};

void store_redis_node_opts(rnode_opts *o, const store_options *opt,
                           const rl_clock *clock)
{
    memset(o, 0, sizeof *o);
    o->io.connections = opt->redis_connections;
    o->breaker_failures = opt->breaker_failures;
    o->breaker_cooldown_ms = opt->breaker_cooldown_ms;
    o->timeout_ms = opt->timeout_ms;
    o->io.degraded = opt->degraded_start;
    o->io.compact = opt->compact;
    o->io.oldest = opt->oldest;
    o->io.clock = clock;
    o->io.connect_timeout_ms = opt->connect_timeout_ms;
    o->io.log_fn = opt->log_fn;
    o->io.log_arg = opt->log_arg;
    /* Reconnect tries at most half a breaker cooldown apart (and at most a
     * second): once Redis is back, a connection is up before the breaker's
     * next probe is due, so it closes within one cooldown. */
    o->io.max_backoff_ms = opt->breaker_cooldown_ms / 2;
    if (o->io.max_backoff_ms > 1000)
        o->io.max_backoff_ms = 1000;
    if (o->io.max_backoff_ms < 10)
        o->io.max_backoff_ms = 10;
    o->io.script = store_redis_test_script ? store_redis_test_script
                                           : rl_lua_check;
    o->io.script_len = store_redis_test_script ? store_redis_test_script_len
                                               : rl_lua_check_len;
    /* The test build of the script has no library: EVALSHA, as asked. */
    o->io.library = opt->functions && !store_redis_test_script
                        ? rl_lua_library : NULL;
    o->io.library_len = o->io.library ? rl_lua_library_len : 0;
    o->io.command = opt->command;
}

int store_redis_tls(const redis_uri *u, const store_options *opt,
                    SSL_CTX **ctx, char *err, size_t errlen)
{
    rtls_opts t = {.ca_file = opt->tls_ca_file, .ca_dir = opt->tls_ca_dir,
                   .cert_file = opt->tls_cert_file,
                   .key_file = opt->tls_key_file, .verify = opt->tls_verify};

    *ctx = NULL;
    if (!u->tls)
        return 0;
    return (*ctx = rtls_ctx_new(&t, err, errlen)) ? 0 : -1;
}

static rio *fleet_io(void *arg)
{
    return rnode_io(((redis_store *)arg)->node);
}

int store_redis_open(const redis_uri *u, const store_options *opt,
                     int need_master, const char *shown, rl_store **out,
                     char *err, size_t errlen)
{
    redis_store *r = calloc(1, sizeof *r);
    rnode_opts no;
    char why[200];
    int rc;

    *out = NULL;
    if (!r)
        return snprintf(err, errlen, "out of memory"), RL_ENOMEM;
    r->base.vt = &redis_vtable;
    r->timeout_ms = opt->timeout_ms;
    store_redis_node_opts(&no, opt, &r->clock);
    no.io.uri = *u;
    no.io.need_master = need_master;
    if (store_redis_tls(&no.io.uri, opt, &no.io.tls, why, sizeof why)) {
        free(r);
        return snprintf(err, errlen, "store \"%s\": %s", shown, why),
               RL_ESTORE;
    }
    if (no.io.uri.is_unix)
        snprintf(r->addr, sizeof r->addr, "%s", no.io.uri.path);
    else
        snprintf(r->addr, sizeof r->addr, "%s:%d", no.io.uri.host,
                 no.io.uri.port);
    rc = rnode_open(&r->node, &no, why, sizeof why);
    SSL_CTX_free(no.io.tls); /* the node's I/O holds its own reference */
    if (rc != RL_OK) {
        free(r);
        return snprintf(err, errlen, "store \"%s\": %s", shown, why), rc;
    }
    if (opt->fleet_name && fleet_start(&r->fl, fleet_io, r,
                                       opt->fleet_name, opt->fleet_size,
                                       1000) != 0) {
        redis_free(&r->base);
        return snprintf(err, errlen, "cannot start the fleet heartbeat"),
               RL_ESTORE;
    }
    *out = &r->base;
    return RL_OK;
}

int store_redis_new(const char *uri, const store_options *opt,
                    rl_store **out, char *err, size_t errlen)
{
    redis_uri u;
    char why[200], shown[128];

    *out = NULL;
    redis_uri_redact(uri, shown, sizeof shown);
    if (redis_uri_parse(uri, &u, why, sizeof why))
        return snprintf(err, errlen, "store \"%s\": %s", shown, why),
               RL_ESTORE;
    return store_redis_open(&u, opt, 0, shown, out, err, errlen);
}

rnode *store_redis_node(rl_store *s)
{
    return s->vt == &redis_vtable ? ((redis_store *)s)->node : NULL;
}

void store_redis_set_clock(rl_store *s, rl_clock_fn fn, void *arg)
{
    if (s->vt->set_clock)
        s->vt->set_clock(s, fn, arg);
}

void store_redis_stats_get(rl_store *s, store_redis_stats *st)
{
    memset(st, 0, sizeof *st);
    if (s->vt->io_stats)
        s->vt->io_stats(s, st);
}
