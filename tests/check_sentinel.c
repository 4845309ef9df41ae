/*
 * check_sentinel.c -- the redis-sentinel:// store (issue 14) against real
 * processes: a primary, its replica and three redis-sentinel processes
 * (tests/redis_harness.h), every one with a password.  The store decides
 * through the primary (exact counts, read on the primary); a sentinel
 * list whose first sentinel is down still works; an unknown master name,
 * a wrong password (the master's, the sentinels') and bad URIs are refused
 * with a clear message holding no secret.  Failovers: the primary killed
 * (-9) under load by 4 threads: meanwhile a `fallback` rule decides
 * locally and a `closed` one denies, then the checks return to the
 * promoted replica (its role verified, its counts exact), and the times
 * from the kill to the promotion, to the store's move and to the first
 * check decided by Redis again are printed; a SENTINEL FAILOVER, the old
 * primary alive with the store's connections open (dropped, never used
 * again); a +switch-master that never comes (SUBSCRIBE refused by ACL on
 * every sentinel: the store learns by asking); and rediss-sentinel://,
 * everything over TLS, through a failover.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "limiter.h"
#include "ratelimit.h"
#include "redis_harness.h"
#include "store_sentinel.h"
#include "testutil.h"
#include "timeutil.h"
#include "tls_certs.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SLOW 4
#else
#define SLOW 1
#endif
#define WAIT_MS (20000 * SLOW)      /* any condition waited for           */
#define RESUME_BOUND_MS (30000 * SLOW) /* kill -> decided by Redis again */
#define NAME "m"
#define MASTER_PW "master-secret-pw"
#define SENTINEL_PW "sentinel-secret-pw"
#define LIMIT 5
#define THREADS 4

static const char rules[] =
    "[{\"rule_id\":\"r\",\"dimension\":\"user\",\"limit\":5,"
    "\"window_seconds\":3600},"
    " {\"rule_id\":\"fb\",\"dimension\":\"user\",\"limit\":100000000,"
    "\"window_seconds\":3600,\"failure_mode\":\"fallback\"},"
    " {\"rule_id\":\"cl\",\"dimension\":\"user\",\"limit\":100000000,"
    "\"window_seconds\":3600,\"failure_mode\":\"closed\"}]";

typedef struct deployment {
    rh_server primary, replica, sentinel[3];
} deployment;

/* CONFIG SET name value on s. */
static void config_set(const rh_server *s, const char *name, const char *v)
{
    redisContext *c = rh_connect(s);
    redisReply *r;

    ck_assert_ptr_nonnull(c);
    r = redisCommand(c, "CONFIG SET %s %s", name, v);
    ck_assert_msg(r && r->type == REDIS_REPLY_STATUS, "CONFIG SET %s", name);
    freeReplyObject(r);
    redisFree(c);
}

/* A primary, its replica in sync, three sentinels that see both and each
 * other; over TLS when t is set. */
static void deploy_tls(deployment *d, const rh_tls *t)
{
    int64_t until = now_ms() + WAIT_MS;

    ck_assert_int_eq(t ? rh_start_tls(&d->primary, MASTER_PW, t)
                       : rh_start(&d->primary, MASTER_PW), 0);
    /* Demoted, it replicates from the new primary, which wants AUTH. */
    config_set(&d->primary, "masterauth", MASTER_PW);
    if (t)
        config_set(&d->primary, "tls-replication", "yes");
    ck_assert_int_eq(rh_start_replica_tls(&d->replica, MASTER_PW, &d->primary,
                                          t), 0);
    while (rh_info_int(&d->primary, "replication", "connected_slaves") < 1 ||
           rh_info_int(&d->replica, "replication",
                       "master_sync_in_progress") != 0) {
        ck_assert_msg(now_ms() < until, "the replica did not sync");
        sleep_ms(10);
    }
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(rh_start_sentinel_tls(&d->sentinel[i], SENTINEL_PW,
                                               NAME, &d->primary, t), 0);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(rh_sentinel_wait(&d->sentinel[i], NAME, 1, 3,
                                          WAIT_MS), 0);
}

static void deploy(deployment *d)
{
    deploy_tls(d, NULL);
}

static void undeploy(deployment *d)
{
    for (int i = 0; i < 3; i++)
        rh_stop(&d->sentinel[i]);
    rh_stop(&d->replica);
    rh_stop(&d->primary);
}

/* The sentinels' URI, from sentinel `first` on (first = 1: 1, 2, 0). */
static void store_uri(const deployment *d, int first, const char *pw,
                      const char *name, char *buf, size_t len)
{
    const rh_server *s = d->sentinel;

    snprintf(buf, len, "redis-sentinel://:%s@127.0.0.1:%d,127.0.0.1:%d,"
             "127.0.0.1:%d/%s", pw, s[first % 3].port,
             s[(first + 1) % 3].port, s[(first + 2) % 3].port, name);
}

/* rl_limiter_new; RL_OK or its error, the message into msg. */
static const char *ca_file; /* rediss-sentinel://: tls_ca_file */

static int open_limiter(rl_limiter **lim, const char *store,
                        const char *sentinel_pw, char *msg, size_t len)
{
    rl_config *cfg = rl_config_new();
    int rc;

    ck_assert_int_eq(rl_config_set(cfg, "store", store), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "rules", rules), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "timeout_ms", "500"), RL_OK);
    if (sentinel_pw)
        ck_assert_int_eq(rl_config_set(cfg, "sentinel_password", sentinel_pw),
                         RL_OK);
    if (ca_file)
        ck_assert_int_eq(rl_config_set(cfg, "tls_ca_file", ca_file), RL_OK);
    *lim = NULL;
    rc = rl_limiter_new(lim, cfg);
    snprintf(msg, len, "%s", rc == RL_OK ? "" : rl_errmsg(NULL));
    rl_config_free(cfg);
    return rc;
}

static rl_limiter *must_open(const char *store)
{
    rl_limiter *lim;
    char msg[512];

    ck_assert_msg(open_limiter(&lim, store, SENTINEL_PW, msg, sizeof msg) ==
                  RL_OK, "%s", msg);
    return lim;
}

/* Refused, saying `why`, with no secret and no control byte. */
static void refused(const char *store, const char *sentinel_pw,
                    const char *why)
{
    rl_limiter *lim;
    char msg[512];

    ck_assert_int_ne(open_limiter(&lim, store, sentinel_pw, msg, sizeof msg),
                     RL_OK);
    ck_assert_ptr_null(lim);
    ck_assert_msg(strstr(msg, why), "\"%s\" does not say \"%s\"", msg, why);
    assert_clean_text(msg, "secret");
}

/* Decided by Redis: 1 allowed, 0 denied. */
static int allow(rl_limiter *lim, const char *key)
{
    return allow_decided(lim, key, "r");
}

/* The count of key under rule "r" on server s. */
static long count_on(const rh_server *s, const char *key)
{
    redisContext *c = rh_connect(s);
    redisReply *r;
    long n;

    ck_assert_ptr_nonnull(c);
    r = redisCommand(c, "GET rl:{%s}:r:s3600", key);
    ck_assert_ptr_nonnull(r);
    n = r->type == REDIS_REPLY_STRING ? atol(r->str) : -1;
    freeReplyObject(r);
    redisFree(c);
    return n;
}

/* LIMIT allowed then denied, the count on `s` exactly LIMIT. */
static void limit_holds_on(rl_limiter *lim, const char *key,
                           const rh_server *s)
{
    for (int i = 0; i < LIMIT; i++)
        ck_assert_msg(allow(lim, key) == 1, "%s: check %d denied", key, i);
    ck_assert_msg(allow(lim, key) == 0, "%s: over the limit allowed", key);
    ck_assert_int_eq(count_on(s, key), LIMIT);
}

/* The store's primary is s (and it moved `switches` times). */
static void primary_is(rl_limiter *lim, const rh_server *s, long switches)
{
    char addr[300], want[64];
    long n;

    ck_assert_int_eq(store_sentinel_primary(limiter_store(lim), addr,
                                            sizeof addr, &n), 0);
    snprintf(want, sizeof want, "127.0.0.1:%d", ca_file ? s->tls_port
                                                         : s->port);
    ck_assert_str_eq(addr, want);
    if (switches >= 0)
        ck_assert_int_eq(n, switches);
}

/* How many times the store moved to another primary. */
static long switches(rl_limiter *lim)
{
    char addr[300];
    long n;

    ck_assert_int_eq(store_sentinel_primary(limiter_store(lim), addr,
                                            sizeof addr, &n), 0);
    return n;
}

/* ---- finding the primary ------------------------------------------------ */

START_TEST(decides_through_the_primary)
{
    deployment d;
    char uri[300];
    rl_limiter *lim;

    deploy(&d);
    store_uri(&d, 0, MASTER_PW, NAME, uri, sizeof uri);
    lim = must_open(uri);
    primary_is(lim, &d.primary, 0);
    limit_holds_on(lim, "user:a", &d.primary);
    limit_holds_on(lim, "user:b", &d.primary);
    rl_limiter_free(lim);
    undeploy(&d);
}
END_TEST

START_TEST(a_sentinel_down_first_in_the_list)
{
    deployment d;
    char uri[300];
    rl_limiter *lim;

    deploy(&d);
    ck_assert_int_eq(rh_kill(&d.sentinel[1]), 0);
    store_uri(&d, 1, MASTER_PW, NAME, uri, sizeof uri);
    lim = must_open(uri);
    primary_is(lim, &d.primary, 0);
    limit_holds_on(lim, "user:c", &d.primary);
    rl_limiter_free(lim);
    undeploy(&d);
}
END_TEST

START_TEST(refusals_are_clear_and_hold_no_secret)
{
    deployment d;
    char uri[300];

    deploy(&d);
    store_uri(&d, 0, MASTER_PW, "nosuch", uri, sizeof uri);
    refused(uri, SENTINEL_PW, "no sentinel knows a master named \"nosuch\"");
    store_uri(&d, 0, "wrong-secret", NAME, uri, sizeof uri);
    refused(uri, SENTINEL_PW, "WRONGPASS");
    store_uri(&d, 0, MASTER_PW, NAME, uri, sizeof uri);
    refused(uri, "bad-secret", "no sentinel answered");
    refused(uri, "bad-secret", "AUTH: WRONGPASS");
    refused(uri, NULL, "NOAUTH");
    undeploy(&d);
}
END_TEST

START_TEST(bad_uris_are_clear_errors)
{
    refused("redis-sentinel://127.0.0.1:1", NULL, "no master name");
    refused("redis-sentinel:///m", NULL, "no sentinel");
    refused("redis-sentinel://127.0.0.1:99999/m", NULL, "port");
    refused("redis-sentinel://127.0.0.1:1,,127.0.0.1:2/m", NULL,
            "empty sentinel");
    refused("redis-sentinel://:a-secret@127.0.0.1:1,127.0.0.1:2/m", NULL,
            "no sentinel answered (127.0.0.1:1: ");
    refused("redis-sentinel://:x@y:a-secret@127.0.0.1:1/m", NULL,
            "127.0.0.1:1");
}
END_TEST

/* Wait until the store has moved `n` times, to server s. */
static void await_move(rl_limiter *lim, long n, const rh_server *s)
{
    int64_t until = now_ms() + WAIT_MS;

    while (switches(lim) < n) {
        ck_assert_msg(now_ms() < until, "the store did not move");
        sleep_ms(10);
    }
    primary_is(lim, s, n);
}

/* Wait until checks are decided by Redis (the new primary connected and
 * the breaker closed), probing with rule "fb" on a key of its own. */
static void await_redis(rl_limiter *lim)
{
    int64_t until = now_ms() + WAIT_MS;
    rl_result res = RL_RESULT_INIT;

    do {
        ck_assert_msg(now_ms() < until, "not decided by Redis again");
        ck_assert_int_eq(rl_allow(lim, "user:probe", "fb", 1, &res), RL_OK);
        sleep_ms(10);
    } while (res.flags & DECIDED_ELSEWHERE);
}

/* Wait until s says it is a master (want 1) or a replica (0). */
static void await_role(const rh_server *s, int want)
{
    int64_t until = now_ms() + WAIT_MS;

    while (rh_is_master(s) != want) {
        ck_assert_msg(now_ms() < until, "%d: not the role wanted", s->port);
        sleep_ms(10);
    }
}

/* SENTINEL FAILOVER: the old primary lives on as a replica, with the
 * store's connections to it still open: they are closed and never used
 * again (it would answer READONLY), the new primary decides. */
START_TEST(follows_a_failover_the_old_primary_survives)
{
    deployment d;
    char uri[300];
    rl_limiter *lim;
    redisContext *c;
    redisReply *r;

    deploy(&d);
    store_uri(&d, 0, MASTER_PW, NAME, uri, sizeof uri);
    lim = must_open(uri);
    limit_holds_on(lim, "user:d", &d.primary);
    ck_assert_ptr_nonnull(c = rh_connect(&d.sentinel[2]));
    r = redisCommand(c, "SENTINEL FAILOVER %s", NAME);
    ck_assert_msg(r && r->type == REDIS_REPLY_STATUS, "SENTINEL FAILOVER: %s",
                  r && r->str ? r->str : c->errstr);
    freeReplyObject(r);
    redisFree(c);
    await_role(&d.replica, 1);
    await_move(lim, 1, &d.replica);
    await_redis(lim);
    limit_holds_on(lim, "user:e", &d.replica);
    await_role(&d.primary, 0); /* alive, demoted by the sentinels */
    for (int64_t until = now_ms() + WAIT_MS;
         count_on(&d.primary, "user:e") != LIMIT; sleep_ms(10))
        ck_assert_msg(now_ms() < until, "user:e not replicated");
    limit_holds_on(lim, "user:e2", &d.replica);
    rl_limiter_free(lim);
    undeploy(&d);
}
END_TEST

/* The last line the store logged (its watcher thread). */
static pthread_mutex_t heard_mu = PTHREAD_MUTEX_INITIALIZER;
static char heard[512];

static void capture(void *arg, int level, const char *msg)
{
    (void)arg;
    (void)level;
    pthread_mutex_lock(&heard_mu);
    snprintf(heard, sizeof heard, "%s", msg);
    pthread_mutex_unlock(&heard_mu);
}

/* Every sentinel refuses SUBSCRIBE (an ACL), so no +switch-master ever
 * reaches the store: it finds the new primary by asking again, once the
 * primary is gone. */
START_TEST(a_lost_switch_message_costs_a_recheck)
{
    deployment d;
    char uri[300];
    rl_config *cfg = rl_config_new();
    rl_limiter *lim;

    deploy(&d);
    for (int i = 0; i < 3; i++) {
        redisContext *c = rh_connect(&d.sentinel[i]);
        redisReply *r;
        ck_assert_ptr_nonnull(c);
        r = redisCommand(c, "ACL SETUSER default -subscribe");
        ck_assert_msg(r && r->type == REDIS_REPLY_STATUS, "ACL: %s",
                      r && r->str ? r->str : c->errstr);
        freeReplyObject(r);
        redisFree(c);
    }
    store_uri(&d, 0, MASTER_PW, NAME, uri, sizeof uri);
    ck_assert_int_eq(rl_config_set(cfg, "store", uri), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "rules", rules), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "timeout_ms", "500"), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "sentinel_password", SENTINEL_PW),
                     RL_OK);
    ck_assert_int_eq(rl_config_set_log(cfg, capture, NULL), RL_OK);
    ck_assert_int_eq(rl_limiter_new(&lim, cfg), RL_OK);
    rl_config_free(cfg);
    limit_holds_on(lim, "user:f", &d.primary);
    ck_assert_int_eq(rh_kill(&d.primary), 0);
    await_role(&d.replica, 1);
    await_move(lim, 1, &d.replica);
    pthread_mutex_lock(&heard_mu);
    ck_assert_msg(strstr(heard, "learnt by asking"), "heard \"%s\"", heard);
    pthread_mutex_unlock(&heard_mu);
    await_redis(lim);
    limit_holds_on(lim, "user:g", &d.replica);
    rl_limiter_free(lim);
    undeploy(&d);
}
END_TEST

/* ---- a failover under load ---------------------------------------------- */

typedef struct load {
    rl_limiter *lim;
    atomic_int stop;
    _Atomic int64_t killed_ms;   /* 0 until the primary is dead          */
    _Atomic int64_t resumed_ms;  /* first Redis decision begun after it  */
    atomic_long redis, local, denied, wrong;
} load;

typedef struct worker {
    load *l;
    int id;
} worker;

/* One check of `rule`, begun at `began`, counted: decided by Redis, or
 * in the gap as the rule's failure mode says (anything else is wrong). */
static void tally(load *l, const char *rule, const rl_result *res, int rc,
                  int64_t began)
{
    int64_t killed = atomic_load(&l->killed_ms), zero = 0;
    int fb = rule[0] == 'f';

    if (rc != RL_OK) {
        atomic_fetch_add(&l->wrong, 1);
    } else if ((res->flags & DECIDED_ELSEWHERE) == 0) {
        atomic_fetch_add(&l->redis, 1);
        if (killed && began > killed)
            atomic_compare_exchange_strong(&l->resumed_ms, &zero, now_ms());
    } else if (fb && (res->flags & RL_FLAG_FALLBACK) && res->allowed) {
        atomic_fetch_add(&l->local, 1);
    } else if (!fb && (res->flags & RL_FLAG_FAIL_CLOSED) && !res->allowed) {
        atomic_fetch_add(&l->denied, 1);
    } else {
        atomic_fetch_add(&l->wrong, 1);
    }
}

static void *work(void *arg)
{
    worker *w = arg;
    char key[32];

    snprintf(key, sizeof key, "user:w%d", w->id);
    for (int i = 0; !atomic_load(&w->l->stop); i++) {
        const char *rule = i % 2 ? "cl" : "fb";
        rl_result res = RL_RESULT_INIT;
        int64_t began = now_ms();
        int rc = rl_allow(w->l->lim, key, rule, 1, &res);
        tally(w->l, rule, &res, rc, began);
        if (rc == RL_OK && (res.flags & DECIDED_ELSEWHERE))
            sleep_ms(1); /* the gap: decided at once, no need to spin */
    }
    return NULL;
}

/* Wait until *v reaches at least `want`. */
static void await_count(atomic_long *v, long want, const char *what)
{
    int64_t until = now_ms() + WAIT_MS;

    while (atomic_load(v) < want) {
        ck_assert_msg(now_ms() < until, "%s: %ld, not %ld", what,
                      atomic_load(v), want);
        sleep_ms(5);
    }
}

START_TEST(follows_a_failover_under_load)
{
    deployment d;
    char uri[300];
    load l = {0};
    worker w[THREADS];
    pthread_t th[THREADS];
    int64_t kill_ms, promoted_ms = 0, switched_ms = 0, until;
    long before;

    deploy(&d);
    store_uri(&d, 0, MASTER_PW, NAME, uri, sizeof uri);
    l.lim = must_open(uri);
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){.l = &l, .id = i};
        ck_assert_int_eq(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    await_count(&l.redis, 400, "decisions by the primary");
    before = atomic_load(&l.redis);
    kill_ms = now_ms();
    ck_assert_int_eq(rh_kill(&d.primary), 0);
    atomic_store(&l.killed_ms, now_ms());
    for (until = now_ms() + WAIT_MS; !promoted_ms; sleep_ms(5)) {
        ck_assert_msg(now_ms() < until, "the replica was not promoted");
        if (rh_is_master(&d.replica) == 1)
            promoted_ms = now_ms();
    }
    for (until = now_ms() + WAIT_MS; !switched_ms; sleep_ms(5)) {
        ck_assert_msg(now_ms() < until, "the store did not move");
        if (switches(l.lim) > 0)
            switched_ms = now_ms();
    }
    for (until = now_ms() + WAIT_MS; !atomic_load(&l.resumed_ms); sleep_ms(5))
        ck_assert_msg(now_ms() < until, "no check decided by Redis after "
                      "the promotion");
    await_count(&l.redis, atomic_load(&l.redis) + 400,
                "decisions by the new primary");
    atomic_store(&l.stop, 1);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    printf("sentinel failover (down-after %d ms), from the kill: promoted "
           "%lld ms, store moved %lld ms, decided by Redis again %lld ms; "
           "in the gap %ld fallback decisions, %ld closed denials; %ld Redis "
           "decisions before, %ld in all\n",
           RH_SENTINEL_DOWN_MS, (long long)(promoted_ms - kill_ms),
           (long long)(switched_ms - kill_ms),
           (long long)(atomic_load(&l.resumed_ms) - kill_ms),
           atomic_load(&l.local), atomic_load(&l.denied), before,
           atomic_load(&l.redis));
    ck_assert_int_eq(atomic_load(&l.wrong), 0);
    ck_assert_int_gt(atomic_load(&l.local), 0);
    ck_assert_int_gt(atomic_load(&l.denied), 0);
    ck_assert_int_lt(atomic_load(&l.resumed_ms) - kill_ms, RESUME_BOUND_MS);
    ck_assert_int_eq(rh_is_master(&d.replica), 1);
    primary_is(l.lim, &d.replica, -1);
    limit_holds_on(l.lim, "user:after", &d.replica);
    rl_limiter_free(l.lim);
    undeploy(&d);
}
END_TEST

/* ---- over TLS ----------------------------------------------------------- */

static char certs[64]; /* the runner's temp dir of certificates */
static char ca_path[128];

static void make_certs(void)
{
    ck_assert_int_eq(tls_certs_make(certs, sizeof certs), 0);
    snprintf(ca_path, sizeof ca_path, "%s/ca.crt", certs);
}

static void remove_certs(void)
{
    tls_certs_remove(certs);
}

/* rediss-sentinel://: sentinels, primary and replica over TLS, verified;
 * the +switch-master message comes over TLS too. */
START_TEST(over_tls_through_a_failover)
{
    char cert[128], key[128], uri[300];
    rh_tls t = {.cert_file = cert, .key_file = key, .ca_file = ca_path,
                .auth_clients = "no"};
    const rh_server *s;
    deployment d;
    rl_limiter *lim;
    redisContext *c;
    redisReply *r;

    snprintf(cert, sizeof cert, "%s/server.crt", certs);
    snprintf(key, sizeof key, "%s/server.key", certs);
    deploy_tls(&d, &t);
    s = d.sentinel;
    snprintf(uri, sizeof uri, "rediss-sentinel://:%s@127.0.0.1:%d,"
             "127.0.0.1:%d,127.0.0.1:%d/%s", MASTER_PW, s[0].tls_port,
             s[1].tls_port, s[2].tls_port, NAME);
    ca_file = NULL; /* the system's CAs do not know ours: refused */
    refused(uri, SENTINEL_PW, "certificate verify failed");
    ca_file = ca_path;
    lim = must_open(uri);
    primary_is(lim, &d.primary, 0);
    limit_holds_on(lim, "user:t1", &d.primary);
    ck_assert_ptr_nonnull(c = rh_connect(&d.sentinel[1]));
    r = redisCommand(c, "SENTINEL FAILOVER %s", NAME);
    ck_assert(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    redisFree(c);
    await_role(&d.replica, 1);
    await_move(lim, 1, &d.replica);
    await_redis(lim);
    limit_holds_on(lim, "user:t2", &d.replica);
    rl_limiter_free(lim);
    undeploy(&d);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sentinel");
    TCase *uris = tcase_create("uris"), *tc = tcase_create("sentinel");
    TCase *tls = tcase_create("tls");

    tcase_add_test(uris, bad_uris_are_clear_errors);
    suite_add_tcase(s, uris);
    if (rh_sentinel_available()) {
        tcase_set_timeout(tc, 120 * SLOW);
        tcase_add_test(tc, decides_through_the_primary);
        tcase_add_test(tc, a_sentinel_down_first_in_the_list);
        tcase_add_test(tc, refusals_are_clear_and_hold_no_secret);
        tcase_add_test(tc, follows_a_failover_under_load);
        tcase_add_test(tc, follows_a_failover_the_old_primary_survives);
        tcase_add_test(tc, a_lost_switch_message_costs_a_recheck);
        suite_add_tcase(s, tc);
        tcase_set_timeout(tls, 120 * SLOW);
        tcase_add_unchecked_fixture(tls, make_certs, remove_certs);
        tcase_add_test(tls, over_tls_through_a_failover);
        suite_add_tcase(s, tls);
    }
    return run_suite(s);
}
