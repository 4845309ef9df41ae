/*
 * store_redis.c -- the store in one Redis server: one node (redis_node.c),
 * whose batches decide each request all-or-nothing in one script call, and
 * with fleet_size "auto" the fleet's heartbeats.
 *
 * Keys: see redis_key.h.  A single server runs a request's rules in one
 * script whatever their slots, so nothing is ever refunded here; Redis
 * Cluster, where slots must be kept apart, is store_cluster.c.
 */
#include "store_redis.h"
#include "fleet.h"
#include "ratelimit.h"
#include "redis_node.h"
#include "store_cluster.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *store_redis_test_script;
size_t store_redis_test_script_len;

typedef struct redis_store {
    rl_store base;
    rnode *node;
    int64_t timeout_ms;
    rl_clock clock;            /* tests: the time passed to the script */
    fleet fl;                  /* heartbeats, with fleet_size "auto"   */
} redis_store;

static int64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int redis_check(rl_store *s, const store_op *ops, size_t n,
                       algo_decision *out, int64_t *now_ms)
{
    redis_store *r = (redis_store *)s;

    return rnode_check(r->node, ops, n, out, now_ms,
                       mono_ns() + r->timeout_ms * 1000000, 0, NULL);
}

static int redis_check_many(rl_store *s, store_req *reqs, size_t n)
{
    redis_store *r = (redis_store *)s;

    return rnode_check_many(r->node, reqs, n,
                            mono_ns() + r->timeout_ms * 1000000, NULL);
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

static const store_vtable redis_vtable = {"redis", redis_check, redis_free,
                                          redis_breaker, redis_check_many};

void store_redis_node_opts(rnode_opts *o, const store_options *opt,
                           const rl_clock *clock)
{
    memset(o, 0, sizeof *o);
    o->connections = opt->redis_connections;
    o->breaker_failures = opt->breaker_failures;
    o->breaker_cooldown_ms = opt->breaker_cooldown_ms;
    o->degraded = opt->degraded_start;
    o->compact = opt->compact;
    o->clock = clock;
    o->conn.connect_timeout_ms = opt->connect_timeout_ms;
    /* Reconnect tries at most half a breaker cooldown apart (and at most a
     * second): once Redis is back, a connection is up before the breaker's
     * next probe is due, so it closes within one cooldown. */
    o->conn.max_backoff_ms = opt->breaker_cooldown_ms / 2;
    if (o->conn.max_backoff_ms > 1000)
        o->conn.max_backoff_ms = 1000;
    if (o->conn.max_backoff_ms < 10)
        o->conn.max_backoff_ms = 10;
    o->conn.script = store_redis_test_script ? store_redis_test_script
                                             : rl_lua_check;
    o->conn.script_len = store_redis_test_script ? store_redis_test_script_len
                                                 : rl_lua_check_len;
}

static rconn *fleet_conn(void *arg)
{
    return rnode_conn(((redis_store *)arg)->node);
}

int store_redis_new(const char *uri, const store_options *opt,
                    rl_store **out, char *err, size_t errlen)
{
    redis_store *r = calloc(1, sizeof *r);
    rnode_opts no;
    char why[200], shown[128];
    int rc;

    *out = NULL;
    if (!r)
        return snprintf(err, errlen, "out of memory"), RL_ENOMEM;
    r->base.vt = &redis_vtable;
    r->timeout_ms = opt->timeout_ms;
    store_redis_node_opts(&no, opt, &r->clock);
    redis_uri_redact(uri, shown, sizeof shown);
    if (redis_uri_parse(uri, &no.conn.uri, why, sizeof why)) {
        free(r);
        return snprintf(err, errlen, "store \"%s\": %s", shown, why),
               RL_ESTORE;
    }
    if ((rc = rnode_open(&r->node, &no, why, sizeof why)) != RL_OK) {
        free(r);
        return snprintf(err, errlen, "store \"%s\": %s", shown, why), rc;
    }
    if (opt->fleet_name && fleet_start(&r->fl, fleet_conn, r,
                                       opt->fleet_name, opt->fleet_size,
                                       1000) != 0) {
        redis_free(&r->base);
        return snprintf(err, errlen, "cannot start the fleet heartbeat"),
               RL_ESTORE;
    }
    *out = &r->base;
    return RL_OK;
}

void store_redis_set_clock(rl_store *s, rl_clock_fn fn, void *arg)
{
    if (strcmp(s->vt->name, "redis") != 0) {
        store_cluster_set_clock(s, fn, arg);
        return;
    }
    redis_store *r = (redis_store *)s;

    r->clock.fn = fn;
    r->clock.arg = arg;
}

void store_redis_stats_get(rl_store *s, store_redis_stats *st)
{
    memset(st, 0, sizeof *st);
    if (strcmp(s->vt->name, "redis") != 0) {
        store_cluster_stats_get(s, st);
        return;
    }
    rnode_stats_add(((redis_store *)s)->node, st);
}
