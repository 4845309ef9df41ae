/*
 * check_cluster.c -- the Redis Cluster store against a real cluster of
 * redis-servers on loopback (3 masters, 3 replicas, started by
 * tests/redis_harness.c with redis-cli --cluster create): routing by slot
 * with exact limits, a request's rules on two masters refunded when one
 * denies, a slot resharded while checks run (ASK and MOVED followed, no
 * count lost or doubled), a cluster that goes down (degraded, counted), a
 * node restarted empty (NOSCRIPT), a seed list whose first node is down,
 * and the bad starts: a seed that is not a cluster (a plain Redis, an HTTP
 * server; first or last in the list), a cluster that is down.  Each test
 * starts its own cluster, since most break it.  The failovers (a master
 * killed, a hung master, planned failovers), timed against the cluster's
 * own timeouts, are check_cluster_failover.c; cluster_fixture.h is what
 * both share.  Exits 77 (skip) without redis-cli.
 */
#include <check.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cluster_fixture.h"
#include "limiter.h"
#include "ratelimit.h"
#include "redis_harness.h"
#include "store_cluster.h"
#include "store_redis.h"
#include "testutil.h"
#include "timeutil.h"

static long long dbsize(int node)
{
    redisContext *ctx = rh_connect(&cl.node[node]);
    redisReply *r = ctx ? redisCommand(ctx, "DBSIZE") : NULL;
    long long n = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;

    if (r)
        freeReplyObject(r);
    if (ctx)
        redisFree(ctx);
    return n;
}

/* rl_check_many(): 7 requests of each of 300 more clients in one call
 * (their turns interleaved, so each client's requests span the call's
 * chunks), plus 6 requests of a user and an ip whose keys live on two
 * masters: each client gets exactly its 5, the ip its 2, and the requests
 * went out batched per master. */
static void many_routes(rl_limiter *lim)
{
    enum { U = 300, K = 7, N = U * K + 6 };
    static rl_request req[N];
    static rl_result res[N];
    static int codes[N];
    static char user[U][16];
    char both[32];
    int from = 0, ok[U] = {0}, passed = 0, ip_node;
    store_redis_stats s0, s1;

    results_init(res, N);
    for (int u = 0; u < U; u++)
        snprintf(user[u], sizeof user[u], "%d", 100000 + u);
    for (int k = 0; k < K; k++)
        for (int u = 0; u < U; u++)
            req[k * U + u] = (rl_request){.size = sizeof(rl_request), .endpoint = "/one",
                                          .user = user[u], .cost = 1};
    ip_node = rh_cluster_master_of(&cl, (int)slot_of("ip:10.7.7.7"));
    user_where(both, sizeof both, &from, -1, first_master(ip_node));
    for (int i = U * K; i < N; i++)
        req[i] = (rl_request){.size = sizeof(rl_request), .endpoint = "/both", .user = both + 5,
                              .ip = "10.7.7.7", .cost = 1};
    store_redis_stats_get(limiter_store(lim), &s0);
    ck_assert_int_eq(rl_check_many(lim, req, res, codes, N), RL_OK);
    store_redis_stats_get(limiter_store(lim), &s1);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(codes[i], RL_OK);
        ck_assert_int_eq(res[i].flags & (RL_FLAG_FALLBACK | RL_FLAG_FAIL_OPEN),
                         0);
        if (i < U * K)
            ok[i % U] += res[i].allowed;
        else
            passed += res[i].allowed;
    }
    for (int u = 0; u < U; u++)
        ck_assert_msg(ok[u] == 5, "%s admitted %d of 5", user[u], ok[u]);
    ck_assert_int_eq(passed, 2);
    /* 2100 single-slot requests in chunks of 64: a call per chunk and
     * master (~100), not one per request */
    ck_assert_int_le(s1.batches - s0.batches, U * K / 8);
}

/* Every master gets keys, and each of 300 clients gets exactly its 5. */
static void routes(const char *layout)
{
    rl_limiter *lim;
    store_redis_stats st;
    char masters[512], user[32];
    int degraded = 0, total = 0;

    up(2000);
    lim = open_with(uri, "redis_layout", layout, NULL, NULL);
    ck_assert_int_eq(store_cluster_masters(limiter_store(lim), masters,
                                           sizeof masters), 3);
    for (int u = 0; u < 300; u++) {
        snprintf(user, sizeof user, "user:%d", u);
        total += admitted(lim, user, 7, &degraded);
    }
    ck_assert_int_eq(degraded, 0);
    ck_assert_int_eq(total, 300 * 5);
    for (int i = 0; i < cl.n; i++)
        if (rh_cluster_is_master(&cl, i) == 1)
            ck_assert_int_gt(dbsize(i), 0);
    store_redis_stats_get(limiter_store(lim), &st);
    ck_assert_int_eq(st.moved + st.asks, 0);
    many_routes(lim);
    rl_limiter_free(lim);
    rh_cluster_stop(&cl);
}

START_TEST(routes_by_slot_with_exact_limits)
{
    routes("plain");
}
END_TEST

START_TEST(routes_by_slot_with_exact_limits_compact)
{
    routes("compact");
}
END_TEST

/* A per-user rule and a per-IP rule whose keys live on two masters: the IP
 * rule's denials leave the user rule charged only for what passed. */
START_TEST(no_rule_charged_across_masters)
{
    rl_limiter *lim;
    rl_request req = {.size = sizeof(rl_request), .endpoint = "/both", .ip = "10.0.0.1", .cost = 1};
    char user[32], key[64];
    int from = 0, passed = 0, a, ip_node;
    store_redis_stats st;
    rl_result res = RL_RESULT_INIT;

    up(2000);
    ip_node = rh_cluster_master_of(&cl, (int)slot_of("ip:10.0.0.1"));
    a = first_master(ip_node);
    user_where(user, sizeof user, &from, -1, a);
    req.user = user + 5;
    lim = open_with(uri, NULL, NULL, NULL, NULL);
    for (int i = 0; i < 6; i++) {
        ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
        ck_assert_int_eq(res.flags & RL_FLAG_FALLBACK, 0);
        passed += res.allowed;
    }
    ck_assert_int_eq(passed, 2);
    ck_assert_str_eq(res.rule_id, "pi");
    snprintf(key, sizeof key, "rl:{%s}:pu:s60", user);
    redisContext *ctx = rh_connect(&cl.node[a]);
    redisReply *r = NULL;
    for (int i = 0; i < 200; i++) { /* refunds are not waited for */
        if (r)
            freeReplyObject(r);
        r = redisCommand(ctx, "GET %s", key);
        if (r->type == REDIS_REPLY_STRING && strcmp(r->str, "2") == 0)
            break;
        sleep_ms(5);
    }
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    ck_assert_str_eq(r->str, "2"); /* the 2 that passed, not 6 */
    freeReplyObject(r);
    redisFree(ctx);
    store_redis_stats_get(limiter_store(lim), &st);
    ck_assert_int_eq(st.refunds, 4);
    rl_limiter_free(lim);
    rh_cluster_stop(&cl);
}
END_TEST

/* The same with a sliding_log rule by user: the refunds take its times
 * out of the log, leaving the 2 that passed (2 x 6 bytes). */
START_TEST(log_refunded_across_masters)
{
    static const char rules[] =
        "[{\"rule_id\":\"lu\",\"dimension\":\"user\",\"limit\":10,"
        "\"window_seconds\":60,\"algorithm\":\"sliding_log\","
        "\"match\":{\"endpoint\":\"/both\"}},"
        " {\"rule_id\":\"li\",\"dimension\":\"ip\",\"limit\":2,"
        "\"window_seconds\":60,\"match\":{\"endpoint\":\"/both\"}}]";
    rl_limiter *lim;
    rl_request req = {.size = sizeof(rl_request), .endpoint = "/both", .ip = "10.0.0.1", .cost = 1};
    char user[32], key[64];
    int from = 0, passed = 0, a, ip_node;
    long long len = -1;
    store_redis_stats st;
    rl_result res = RL_RESULT_INIT;

    up(2000);
    ip_node = rh_cluster_master_of(&cl, (int)slot_of("ip:10.0.0.1"));
    a = first_master(ip_node);
    user_where(user, sizeof user, &from, -1, a);
    req.user = user + 5;
    lim = open_with(uri, "rules", rules, NULL, NULL);
    for (int i = 0; i < 6; i++) {
        ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
        ck_assert_int_eq(res.flags & RL_FLAG_FALLBACK, 0);
        passed += res.allowed;
    }
    ck_assert_int_eq(passed, 2);
    snprintf(key, sizeof key, "rl:{%s}:lu:l60", user);
    redisContext *ctx = rh_connect(&cl.node[a]);
    for (int i = 0; i < 200 && len != 12; i++) { /* refunds: not waited */
        redisReply *r = redisCommand(ctx, "STRLEN %s", key);
        len = r->integer;
        freeReplyObject(r);
        if (len != 12)
            sleep_ms(5);
    }
    ck_assert_int_eq(len, 12);
    redisFree(ctx);
    store_redis_stats_get(limiter_store(lim), &st);
    ck_assert_int_eq(st.refunds, 4);
    ck_assert_int_eq(rl_allow(lim, user, "lu", 0, &res), RL_OK);
    ck_assert_int_eq(res.remaining, 8);
    rl_limiter_free(lim);
    rh_cluster_stop(&cl);
}
END_TEST

/* ---- resharding while checks run ------------------------------------- */

typedef struct hammer {
    rl_limiter *lim;
    char user[8][32];
    int nusers;
    _Atomic int stop;
    _Atomic long checks, degraded, errors;
} hammer;

/* One check of each user in one rl_check_many() call. */
static void hammer_many(hammer *h)
{
    rl_request req[8];
    rl_result res[8];
    int codes[8];

    results_init(res, 8);
    for (int u = 0; u < h->nusers; u++)
        req[u] = (rl_request){.size = sizeof(rl_request), .endpoint = "/big", .user = h->user[u] + 5,
                              .cost = 1};
    rl_check_many(h->lim, req, res, codes, (size_t)h->nusers);
    for (int u = 0; u < h->nusers; u++) {
        if (codes[u] != RL_OK)
            atomic_fetch_add(&h->errors, 1);
        else if (res[u].flags & (RL_FLAG_FALLBACK | RL_FLAG_FAIL_OPEN))
            atomic_fetch_add(&h->degraded, 1);
        atomic_fetch_add(&h->checks, 1);
    }
}

/* rl_check() and rl_check_many() in turn. */
static void *hammer_main(void *arg)
{
    hammer *h = arg;
    rl_result res = RL_RESULT_INIT;

    for (long i = 0; !atomic_load(&h->stop); i++) {
        if (i % 16 == 0) {
            hammer_many(h);
            continue;
        }
        if (check_one(h->lim, "/big", h->user[i % h->nusers], &res) != RL_OK)
            atomic_fetch_add(&h->errors, 1);
        else if (res.flags & (RL_FLAG_FALLBACK | RL_FLAG_FAIL_OPEN))
            atomic_fetch_add(&h->degraded, 1);
        atomic_fetch_add(&h->checks, 1);
    }
    return NULL;
}

/* Let the hammer run at least n more checks in the current phase, so that
 * every step of the move is met by concurrent checks however the
 * scheduler shares the two cores (a fast step must not leave it idle). */
static void hammer_wait(hammer *h, long n)
{
    long goal = atomic_load(&h->checks) + n;

    for (int i = 0; i < 10000 && atomic_load(&h->checks) < goal; i++)
        sleep_ms(1);
    ck_assert_int_ge(atomic_load(&h->checks), goal);
}

/* Slot S moves from its master to another, in steps, while a thread keeps
 * checking clients of S: every redirect is followed (none degrades), ASK
 * while the slot is half-moved and MOVED after, and every client of S
 * still gets exactly its 5 over the whole move. */
START_TEST(reshard_follows_ask_and_moved)
{
    char user[8][32];
    int from = 1, src, to, degraded = 0, total[8] = {0};
    unsigned slot;
    hammer h = {0};
    pthread_t th;
    store_redis_stats st, at_end = {0};

    up(2000);
    snprintf(user[0], sizeof user[0], "user:0");
    slot = slot_of(user[0]);
    for (int i = 1; i < 8; i++)
        user_where(user[i], sizeof user[i], &from, (int)slot, -1);
    src = rh_cluster_master_of(&cl, (int)slot);
    to = first_master(src);
    h.lim = open_with(uri, NULL, NULL, NULL, NULL);
    memcpy(h.user, user, sizeof user);
    h.nusers = 8;
    ck_assert_int_eq(pthread_create(&th, NULL, hammer_main, &h), 0);

    for (int i = 0; i < 4; i++) /* keys of 0..3 exist on the source */
        total[i] += admitted(h.lim, user[i], 2, &degraded);
    hammer_wait(&h, 50);
    ck_assert_int_eq(rh_cluster_migrate_begin(&cl, (int)slot, to), 0);
    for (int i = 0; i < 8; i++) /* 4..7 are new: ASK, created on `to` */
        total[i] += admitted(h.lim, user[i], 2, &degraded);
    hammer_wait(&h, 50);
    ck_assert_int_ge(rh_cluster_migrate_keys(&cl, (int)slot, 1000), 1);
    for (int i = 0; i < 8; i++) /* all moved: ASK for every one */
        total[i] += admitted(h.lim, user[i], 2, &degraded);
    hammer_wait(&h, 50);
    ck_assert_int_eq(rh_cluster_migrate_keys(&cl, (int)slot, 1000), 0);
    store_redis_stats_get(limiter_store(h.lim), &at_end);
    ck_assert_int_eq(rh_cluster_migrate_end(&cl, (int)slot, to), 0);
    for (int i = 0; i < 8; i++) /* MOVED, then the new map */
        total[i] += admitted(h.lim, user[i], 3, &degraded);
    hammer_wait(&h, 50);

    atomic_store(&h.stop, 1);
    pthread_join(th, NULL);
    store_redis_stats_get(limiter_store(h.lim), &st);
    ck_assert_int_eq(degraded, 0);
    ck_assert_int_eq(atomic_load(&h.degraded), 0);
    ck_assert_int_eq(atomic_load(&h.errors), 0);
    for (int i = 0; i < 8; i++)
        ck_assert_msg(total[i] == 5, "%s admitted %d of 5", user[i],
                      total[i]);
    ck_assert_int_ge(st.asks, 1);
    /* MOVED is met unless a refresh of the map (asked for by the ASKs
     * every 50 ms) read the move from the target before any check reached
     * the source after it: migrate_end tells the target first.  Then the
     * checks went straight to the new master, as the exact counts show. */
    if (st.moved == 0)
        ck_assert_int_gt(st.refreshes, at_end.refreshes);
    /* a batch call that met a moved key left it undone; it went again on
     * its own, keys declared, and met the redirect */
    ck_assert_int_ge(st.elsewhere, 1);
    rl_limiter_free(h.lim);
    rh_cluster_stop(&cl);
}
END_TEST

/* A client's two rules are one script call with two keys.  Half-way
 * through moving its slot one key is on each side: Redis answers TRYAGAIN
 * to both (a multi-key call needs all its keys on one node), the check
 * retries until its deadline and then follows the failure mode; once the
 * move ends, it is served again, with both counts intact. */
START_TEST(tryagain_while_a_clients_keys_are_split)
{
    const char *user = "user:split";
    int src, to;
    unsigned slot = slot_of(user);
    rl_limiter *lim;
    store_redis_stats st;
    rl_result res = RL_RESULT_INIT;

    up(2000);
    src = rh_cluster_master_of(&cl, (int)slot);
    to = first_master(src);
    lim = open_with(uri, NULL, NULL, NULL, NULL);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(check_one(lim, "/two", user, &res), RL_OK);
        ck_assert(res.allowed && !(res.flags & RL_FLAG_FALLBACK));
    }
    ck_assert_int_eq(rh_cluster_migrate_begin(&cl, (int)slot, to), 0);
    ck_assert_int_eq(rh_cluster_migrate_keys(&cl, (int)slot, 1), 1);
    ck_assert_int_eq(check_one(lim, "/two", user, &res), RL_OK);
    ck_assert(res.flags & RL_FLAG_FALLBACK);
    store_redis_stats_get(limiter_store(lim), &st);
    ck_assert_int_ge(st.tryagain, 1);
    ck_assert_int_eq(rh_cluster_migrate_keys(&cl, (int)slot, 1000), 1);
    ck_assert_int_eq(rh_cluster_migrate_end(&cl, (int)slot, to), 0);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(check_one(lim, "/two", user, &res), RL_OK);
        ck_assert(res.allowed && !(res.flags & RL_FLAG_FALLBACK));
    }
    /* 3 before + 2 after were charged on both rules; the degraded one
     * was not: 100 - 5 left on each */
    ck_assert_int_eq(res.remaining, 95);
    rl_limiter_free(lim);
    rh_cluster_stop(&cl);
}
END_TEST

/* A master that sees a slot uncovered (CLUSTER DELSLOTS of another of
 * its slots; cluster-require-full-coverage, the default) takes its
 * cluster for down and answers CLUSTERDOWN to every keyed call: each
 * check on its keys follows the failure modes (ratelimit(3),
 * "Redirects"), the breaker stays closed (the node answered), and the
 * store counts the answers; once the slot is back, Redis decides again. */
START_TEST(clusterdown_degrades_and_is_counted)
{
    char user[32];
    int from = 0, victim, degraded = 0, ok = 0;
    unsigned other;
    rl_limiter *lim;
    rl_stats rs = RL_STATS_INIT;
    store_redis_stats st;
    redisContext *ctx;
    redisReply *r;

    up(15000);
    victim = first_master(-1);
    user_where(user, sizeof user, &from, -1, victim);
    for (other = 0; rh_cluster_master_of(&cl, (int)other) != victim ||
                    other == slot_of(user); other++)
        ;
    lim = open_with(uri, "timeout_ms", "2000", NULL, NULL);
    ck_assert_int_eq(admitted(lim, user, 1, &degraded), 1);
    ck_assert_int_eq(degraded, 0);
    ctx = rh_connect(&cl.node[victim]);
    ck_assert_ptr_nonnull(ctx);
    r = redisCommand(ctx, "CLUSTER DELSLOTS %u", other);
    ck_assert_msg(r && r->type == REDIS_REPLY_STATUS, "CLUSTER DELSLOTS");
    freeReplyObject(r);
    ck_assert_int_eq(admitted(lim, user, 5, &degraded), 0);
    ck_assert_int_eq(degraded, 5);
    store_redis_stats_get(limiter_store(lim), &st);
    ck_assert_int_eq(st.clusterdown, 5);
    r = redisCommand(ctx, "CLUSTER ADDSLOTS %u", other);
    ck_assert_msg(r && r->type == REDIS_REPLY_STATUS, "CLUSTER ADDSLOTS");
    freeReplyObject(r);
    redisFree(ctx);
    for (int i = 0; i < 1000 && !ok; i++) { /* its state is ok again */
        degraded = 0;
        ok = admitted(lim, user, 1, &degraded) == 1;
        if (!ok)
            sleep_ms(10);
    }
    ck_assert(ok);
    rl_stats_get(lim, &rs);
    ck_assert_int_eq(rs.breaker_opens, 0);
    rl_limiter_free(lim);
    rh_cluster_stop(&cl);
}
END_TEST

/* A master restarted empty, too fast for a failover: its counters are gone
 * and so is the script; the first call meets NOSCRIPT and goes again as
 * EVAL, and its clients start over. */
START_TEST(node_restarted_empty)
{
    char user[32];
    int from = 0, victim, degraded = 0, ok = 0;
    rl_limiter *lim;
    store_redis_stats st;

    up(15000);
    victim = first_master(-1);
    user_where(user, sizeof user, &from, -1, victim);
    lim = open_with(uri, NULL, NULL, NULL, NULL);
    ck_assert_int_eq(admitted(lim, user, 7, &degraded), 5);
    ck_assert_int_eq(rh_restart(&cl.node[victim]), 0);
    ck_assert_int_eq(rh_cluster_wait_ok(&cl, 20000), 0);
    ck_assert_int_eq(rh_cluster_is_master(&cl, victim), 1);
    for (int i = 0; i < 400 && !ok; i++) { /* until the lanes reconnect */
        rl_result res = RL_RESULT_INIT;
        ck_assert_int_eq(check_one(lim, "/one", user, &res), RL_OK);
        ok = !(res.flags & RL_FLAG_FALLBACK) && res.allowed;
        if (!ok)
            sleep_ms(10);
    }
    ck_assert(ok);
    degraded = 0;
    ck_assert_int_eq(admitted(lim, user, 6, &degraded), 4); /* 1 + 4 = 5 */
    ck_assert_int_eq(degraded, 0);
    store_redis_stats_get(limiter_store(lim), &st);
    ck_assert_int_ge(st.reconnects, 1);
    /* The reconnect loaded the script again (SCRIPT LOAD and FUNCTION
     * LOAD in the handshake); a flush behind the lanes' back is met by
     * NOSCRIPT (no such function, for an FCALL), and the call goes again
     * as EVAL. */
    redisContext *ctx = rh_connect(&cl.node[victim]);
    freeReplyObject(redisCommand(ctx, "SCRIPT FLUSH"));
    freeReplyObject(redisCommand(ctx, "FUNCTION FLUSH"));
    redisFree(ctx);
    ck_assert_int_eq(admitted(lim, user, 1, &degraded), 0);
    ck_assert_int_eq(degraded, 0);
    store_redis_stats_get(limiter_store(lim), &st);
    ck_assert_int_ge(st.noscript, 1);
    rl_limiter_free(lim);
    rh_cluster_stop(&cl);
}
END_TEST

/* ---- starts ----------------------------------------------------------- */

/* The first seeds are down (one refuses, one is a killed replica): the
 * next one answers and the limiter works. */
START_TEST(seed_list_with_first_nodes_down)
{
    char seeds[1100], user[32];
    int replica = -1, degraded = 0;
    rl_limiter *lim;

    up(2000);
    for (int i = 0; i < cl.n && replica < 0; i++)
        if (rh_cluster_is_master(&cl, i) == 0)
            replica = i;
    ck_assert_int_ge(replica, 0);
    ck_assert_int_eq(rh_kill(&cl.node[replica]), 0);
    ck_assert_ptr_nonnull(rh_cluster_uri(&cl, replica, uri, sizeof uri));
    snprintf(seeds, sizeof seeds, "redis-cluster://127.0.0.1:1,%s", uri + 16);
    lim = open_with(seeds, NULL, NULL, NULL, NULL);
    snprintf(user, sizeof user, "user:seed");
    ck_assert_int_eq(admitted(lim, user, 7, &degraded), 5);
    ck_assert_int_eq(degraded, 0);
    rl_limiter_free(lim);
    rh_cluster_stop(&cl);
}
END_TEST

START_TEST(seed_that_is_not_a_cluster)
{
    rh_server one;
    char u[256], seed[300];
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;

    ck_assert_int_eq(rh_start(&one, NULL), 0);
    rh_uri(&one, u, sizeof u);
    snprintf(seed, sizeof seed, "redis-cluster://127.0.0.1:%d", one.port);
    ck_assert_int_eq(rl_config_set(cfg, "store", seed), RL_OK);
    /* a wrong address is no outage: degraded_start does not hide it */
    ck_assert_int_eq(rl_config_set(cfg, "degraded_start", "1"), RL_OK);
    ck_assert_int_eq(rl_limiter_new(&lim, cfg), RL_ESTORE);
    ck_assert_ptr_null(lim);
    ck_assert_msg(strstr(rl_errmsg(NULL), "not a Redis Cluster node"),
                  "%s", rl_errmsg(NULL));
    rl_config_free(cfg);
    rh_stop(&one);
}
END_TEST

/* ---- a seed that is not Redis: a tiny HTTP server --------------------- */

typedef struct http {
    int fd, port;
    _Atomic int stop;
    pthread_t th;
} http;

/* Every connection gets a 400 to whatever it sent, then is closed. */
static void *http_main(void *arg)
{
    static const char reply[] = "HTTP/1.1 400 Bad Request\r\n"
                                "Content-Length: 0\r\n"
                                "Connection: close\r\n\r\n";
    http *h = arg;
    char buf[4096];

    while (!atomic_load(&h->stop)) {
        struct pollfd p = {.fd = h->fd, .events = POLLIN};
        int c;
        if (poll(&p, 1, 50) <= 0 || (c = accept(h->fd, NULL, NULL)) < 0)
            continue;
        p = (struct pollfd){.fd = c, .events = POLLIN};
        if (poll(&p, 1, 1000) > 0 && read(c, buf, sizeof buf) > 0 &&
            write(c, reply, sizeof reply - 1) < 0) {
            /* the client left first */
        }
        close(c);
    }
    return NULL;
}

static void http_start(http *h)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;

    h->fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_eq(bind(h->fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(h->fd, 16), 0);
    getsockname(h->fd, (struct sockaddr *)&a, &len);
    h->port = ntohs(a.sin_port);
    ck_assert_int_eq(pthread_create(&h->th, NULL, http_main, h), 0);
}

static void http_stop(http *h)
{
    atomic_store(&h->stop, 1);
    pthread_join(h->th, NULL);
    close(h->fd);
}

/* rl_limiter_new on `seeds` fails (degraded_start or not) with a message
 * that names `port` and says `what`, and holds no password. */
static void refused(const char *seeds, int port, const char *what)
{
    char at[32];

    snprintf(at, sizeof at, "127.0.0.1:%d", port);
    for (int degraded = 0; degraded < 2; degraded++) {
        rl_config *cfg = rl_config_new();
        rl_limiter *lim = NULL;
        const char *msg;
        ck_assert_int_eq(rl_config_set(cfg, "store", seeds), RL_OK);
        ck_assert_int_eq(rl_config_set(cfg, "rules", RULES), RL_OK);
        ck_assert_int_eq(rl_config_set(cfg, "degraded_start",
                                       degraded ? "1" : "0"), RL_OK);
        ck_assert_int_eq(rl_limiter_new(&lim, cfg), RL_ESTORE);
        ck_assert_ptr_null(lim);
        msg = rl_errmsg(NULL);
        ck_assert_msg(strstr(msg, at) && strstr(msg, what) &&
                      !strstr(msg, "sekret"), "%s: %s", seeds, msg);
        rl_config_free(cfg);
    }
}

/* A seed that answers but is not a cluster node, an HTTP server or a plain
 * redis-server, fails the start wherever it stands in the list, with or
 * without degraded_start; a good seed beside it changes nothing. */
START_TEST(every_answering_seed_is_a_cluster_node)
{
    rh_server one;
    http h = {0};
    char node[64], seeds[256];

    up(2000);
    ck_assert_int_eq(rh_start(&one, NULL), 0);
    http_start(&h);
    snprintf(node, sizeof node, "127.0.0.1:%d", cl.node[0].port);

    snprintf(seeds, sizeof seeds, "redis-cluster://127.0.0.1:%d,%s", h.port,
             node);
    refused(seeds, h.port, "not a Redis server");
    snprintf(seeds, sizeof seeds, "redis-cluster://%s,127.0.0.1:%d", node,
             h.port);
    refused(seeds, h.port, "not a Redis server");
    /* with a password: AUTH meets the HTTP answer, and says no more */
    snprintf(seeds, sizeof seeds, "redis-cluster://:sekret@127.0.0.1:%d,%s",
             h.port, node);
    refused(seeds, h.port, "not a Redis server");

    snprintf(seeds, sizeof seeds, "redis-cluster://127.0.0.1:%d,%s",
             one.port, node);
    refused(seeds, one.port, "not a Redis Cluster node");
    snprintf(seeds, sizeof seeds, "redis-cluster://%s,127.0.0.1:%d", node,
             one.port);
    refused(seeds, one.port, "not a Redis Cluster node");

    http_stop(&h);
    rh_stop(&one);
    rh_cluster_stop(&cl);
}
END_TEST

/* Two of three masters die: no majority can elect their replicas, the
 * cluster stays down.  A start is refused, or with degraded_start opens
 * and follows the failure modes. */
START_TEST(cluster_down_at_start)
{
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;
    int m1, m2, live = -1, down = 0;
    rl_result res = RL_RESULT_INIT;

    up(1000);
    m1 = first_master(-1);
    m2 = first_master(m1);
    for (int i = 0; i < cl.n && live < 0; i++)
        if (i != m1 && i != m2)
            live = i;
    ck_assert_int_eq(rh_kill(&cl.node[m1]), 0);
    ck_assert_int_eq(rh_kill(&cl.node[m2]), 0);
    for (int i = 0; i < 100 && !down; i++) { /* node timeout, then fail */
        redisContext *ctx = rh_connect(&cl.node[live]);
        redisReply *r = ctx ? redisCommand(ctx, "CLUSTER INFO") : NULL;
        down = r && r->type == REDIS_REPLY_STRING &&
               strstr(r->str, "cluster_state:fail");
        if (r)
            freeReplyObject(r);
        if (ctx)
            redisFree(ctx);
        if (!down)
            sleep_ms(100);
    }
    ck_assert(down);
    ck_assert_ptr_nonnull(rh_cluster_uri(&cl, live, uri, sizeof uri));
    ck_assert_int_eq(rl_config_set(cfg, "store", uri), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "rules", RULES), RL_OK);
    ck_assert_int_eq(rl_limiter_new(&lim, cfg), RL_ESTORE);
    ck_assert_msg(strstr(rl_errmsg(NULL), "cluster is down"), "%s",
                  rl_errmsg(NULL));
    ck_assert_int_eq(rl_config_set(cfg, "degraded_start", "1"), RL_OK);
    ck_assert_int_eq(rl_limiter_new(&lim, cfg), RL_OK);
    ck_assert_int_eq(check_one(lim, "/one", "user:down", &res), RL_OK);
    ck_assert(res.flags & RL_FLAG_FALLBACK);
    rl_limiter_free(lim);
    rl_config_free(cfg);
    rh_cluster_stop(&cl);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("cluster");
    TCase *tc = tcase_create("cluster");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, routes_by_slot_with_exact_limits);
    tcase_add_test(tc, routes_by_slot_with_exact_limits_compact);
    tcase_add_test(tc, no_rule_charged_across_masters);
    tcase_add_test(tc, log_refunded_across_masters);
    tcase_add_test(tc, reshard_follows_ask_and_moved);
    tcase_add_test(tc, tryagain_while_a_clients_keys_are_split);
    tcase_add_test(tc, node_restarted_empty);
    tcase_add_test(tc, clusterdown_degrades_and_is_counted);
    tcase_add_test(tc, seed_list_with_first_nodes_down);
    tcase_add_test(tc, seed_that_is_not_a_cluster);
    tcase_add_test(tc, every_answering_seed_is_a_cluster_node);
    tcase_add_test(tc, cluster_down_at_start);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (!rh_cluster_available())
        return 77;
    return run_suite(suite());
}
