/*
 * check_functions.c -- the Redis function library (issue 11: a lone
 * check's Redis CPU), against a real redis-server: with redis_functions=1
 * (the default) the checks are FCALLs of the library the connector
 * FUNCTION LOADed, with 0 EVALSHAs, as INFO commandstats counts them; a
 * FUNCTION FLUSH under load costs no check its decision (the batch goes
 * again as EVAL, the connection calls EVALSHA until it connects again,
 * and FCALLs after that); a user whose ACL lacks FUNCTION and FCALL (the
 * least-privilege rule of docs/REDIS.md) is served by EVALSHA, one granted them
 * by FCALL; on Redis Cluster every master is FCALLed.  Every other Redis
 * suite runs with the default, functions on.
 */
#include <check.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl_rules.h"
#include "limiter.h"
#include "ratelimit.h"
#include "redis_harness.h"
#include "store_redis.h"
#include "testutil.h"
#include "timeutil.h"

#define USER "ratelimit"
#define PASSWORD "fn-limiter-pw"
#define LIMIT 50 /* the exact rule's limit an hour */

static const char rules[] =
    "[{\"rule_id\":\"tb\",\"dimension\":\"user\",\"limit\":50,"
    "\"window_seconds\":3600,\"algorithm\":\"token_bucket\","
    "\"match\":{\"endpoint\":\"/tb\"}},"
    " {\"rule_id\":\"sw\",\"dimension\":\"user\",\"limit\":1000000,"
    "\"window_seconds\":3600,\"match\":{\"endpoint\":\"/sw\"}},"
    " {\"rule_id\":\"fw\",\"dimension\":\"user\",\"limit\":5,"
    "\"window_seconds\":3600,\"algorithm\":\"fixed_window\","
    "\"match\":{\"endpoint\":\"/fw\"}}]";

static rh_server srv;
static char uri[512];

/* ---- helpers ------------------------------------------------------------- */

static void setup(void)
{
    ck_assert_int_eq(rh_start(&srv, NULL), 0);
    ck_assert_ptr_nonnull(rh_uri(&srv, uri, sizeof uri));
}

static void teardown(void)
{
    rh_stop(&srv);
}

/* An admin command's reply, freed. */
static void admin(const char *fmt, const char *arg)
{
    redisContext *c = rh_connect(&srv);
    redisReply *r;

    ck_assert_ptr_nonnull(c);
    r = redisCommand(c, fmt, arg);
    ck_assert_msg(r && r->type != REDIS_REPLY_ERROR, "%s: %s", fmt,
                  r ? r->str : c->errstr);
    freeReplyObject(r);
    redisFree(c);
}

/* The calls of `command` INFO commandstats of server s counts so far
 * (0: none). */
static long long calls_on(const rh_server *s, const char *command)
{
    long long n = rh_cmdstat_calls(s, command);

    ck_assert_int_ge(n, 0);
    return n;
}

static long long calls_of(const char *command)
{
    return calls_on(&srv, command);
}

/* A limiter of `rules` on store, option name set to value (NULL: not
 * set). */
static rl_limiter *open_opt(const char *store, const char *name,
                            const char *value)
{
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;
    int rc;

    ck_assert_int_eq(rl_config_set(cfg, "store", store), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "rules", rules), RL_OK);
    /* These tests ask which command decided, never how fast: a deadline
     * no busy host misses (at load 25 a 1 s one was missed, and the check
     * left to the failure modes failed the test, not the library). */
    ck_assert_int_eq(rl_config_set(cfg, "timeout_ms", "10000"), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "deny_cache", "0"), RL_OK);
    if (value)
        ck_assert_int_eq(rl_config_set(cfg, name, value), RL_OK);
    rc = rl_limiter_new(&lim, cfg);
    rl_config_free(cfg);
    ck_assert_msg(rc == RL_OK, "rl_limiter_new: %s", rl_errmsg(NULL));
    return lim;
}

static rl_limiter *open_on(const char *store, const char *functions)
{
    return open_opt(store, "redis_functions", functions);
}

/* n checks of `key` on rule tb: how many passed.  Each is one call. */
static int admitted(rl_limiter *lim, const char *key, int n)
{
    int ok = 0;

    for (int i = 0; i < n; i++)
        ok += allow_decided(lim, key, "tb");
    return ok;
}

/* ---- which command a check is -------------------------------------------- */

START_TEST(fcall_when_on_evalsha_when_off)
{
    rl_limiter *on = open_on(uri, NULL), *off = open_on(uri, "0");
    long long f0 = calls_of("fcall"), e0 = calls_of("evalsha");

    ck_assert_int_eq(admitted(on, "user:on", 60), LIMIT);
    ck_assert_int_ge(calls_of("fcall") - f0, 60);
    ck_assert_int_eq(calls_of("evalsha") - e0, 0);
    f0 = calls_of("fcall");
    ck_assert_int_eq(admitted(off, "user:off", 60), LIMIT);
    ck_assert_int_ge(calls_of("evalsha") - e0, 60);
    ck_assert_int_eq(calls_of("fcall") - f0, 0);
    /* The same state either way: one key's charges, both commands. */
    ck_assert_int_eq(admitted(on, "user:off", 1), 0);
    ck_assert_int_eq(admitted(off, "user:on", 1), 0);
    rl_limiter_free(on);
    rl_limiter_free(off);
}
END_TEST

/* A lone one-rule check is the lean function's (lua/lean.lua): a fixed
 * window is charged by INCRBY (a denial undone by INCRBY -cost), with no
 * GET and no SET once its key is made, which only that function does; EVALSHA (the general script) reads
 * and writes the same key, so either sees the other's charges. */
START_TEST(lone_check_takes_the_lean_function)
{
    rl_limiter *on = open_on(uri, NULL), *off = open_on(uri, "0");
    long long i0 = calls_of("incrby"), g0 = calls_of("get");
    int ok = 0;

    for (int i = 0; i < 8; i++)
        ok += allow_decided(on, "user:lean", "fw");
    ck_assert_int_eq(ok, 5);
    /* 8 charges, and the 3 denials' undo (INCRBY -cost) */
    ck_assert_int_eq(calls_of("incrby") - i0, 8 + 3);
    ck_assert_int_eq(calls_of("get") - g0, 0);
    ck_assert_int_eq(allow_decided(off, "user:lean", "fw"), 0);
    ck_assert_int_eq(allow_decided(off, "user:other", "fw"), 1);
    for (int i = 0; i < 5; i++)
        ok += allow_decided(on, "user:other", "fw");
    ck_assert_int_eq(ok, 5 + 4);
    rl_limiter_free(on);
    rl_limiter_free(off);
}
END_TEST

/* A batch of one-rule requests (rl_check_many) is the lean batch's
 * (lua/lean.lua, rl_<sha>_b): no MGET (the general path reads a batch's
 * keys with one), the fixed window charged by INCRBY (a denial undone by
 * INCRBY -cost); each request decided on its own, in order, as the lone
 * checks above. */
START_TEST(batch_of_lone_checks_takes_the_lean_batch)
{
    rl_limiter *lim = open_on(uri, NULL);
    rl_request req[8];
    rl_result res[8];
    int codes[8], ok = 0;
    long long f0 = calls_of("fcall"), m0 = calls_of("mget");
    long long i0 = calls_of("incrby");

    results_init(res, 8);
    for (int i = 0; i < 8; i++)
        req[i] = (rl_request){.size = sizeof(rl_request), .endpoint = "/fw",
                              .user = "batch", .cost = 1};
    ck_assert_int_eq(rl_check_many(lim, req, res, codes, 8), RL_OK);
    for (int i = 0; i < 8; i++) {
        ck_assert_int_eq(codes[i], RL_OK);
        ok += res[i].allowed;
    }
    ck_assert_int_eq(ok, 5);
    ck_assert_int_lt(calls_of("fcall") - f0, 8); /* batched */
    ck_assert_int_eq(calls_of("mget") - m0, 0);
    ck_assert_int_eq(calls_of("incrby") - i0, 8 + 3);
    ck_assert_int_eq(rl_check_many(lim, req, res, codes, 8), RL_OK);
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(res[i].allowed, 0); /* the window is spent */
    rl_limiter_free(lim);
}
END_TEST

/* Option redis_oldest_limiter: by default (1.0) a lone or batched
 * charge of a token bucket whose q is 1 (rule tb: 50 an hour, a token
 * every 72 s) is SET "0" PXAT, which a limiter before 1.1.0 reads
 * safely; with 1.1 a live key's is PEXPIREAT alone (a new key's still a
 * SET), as commandstats count them.  Limiters of either setting share
 * the keys: each reads the level the other left (the expiry alone). */
START_TEST(oldest_limiter_1_1_bucket_writes_expiry_alone)
{
    rl_limiter *old = open_on(uri, NULL);
    rl_limiter *new = open_opt(uri, "redis_oldest_limiter", "1.1");
    long long s0 = calls_of("set"), p0 = calls_of("pexpireat");
    rl_request req[6];
    rl_result res[6];
    int codes[6];

    ck_assert_int_eq(admitted(old, "user:mixed", 10), 10);
    ck_assert_int_eq(calls_of("set") - s0, 10);
    ck_assert_int_eq(calls_of("pexpireat") - p0, 0);
    ck_assert_int_eq(admitted(new, "user:mixed", 10), 10);
    ck_assert_int_eq(admitted(new, "user:fresh", 5), 5);
    ck_assert_int_eq(calls_of("set") - s0, 10 + 1); /* user:fresh made */
    ck_assert_int_eq(calls_of("pexpireat") - p0, 10 + 4);
    results_init(res, 6);
    for (int i = 0; i < 6; i++)
        req[i] = (rl_request){.size = sizeof(rl_request), .endpoint = "/tb",
                              .user = i % 2 ? "mixed" : "fresh", .cost = 1};
    ck_assert_int_eq(rl_check_many(new, req, res, codes, 6), RL_OK);
    for (int i = 0; i < 6; i++)
        ck_assert(codes[i] == RL_OK && res[i].allowed);
    ck_assert_int_eq(calls_of("set") - s0, 10 + 1);
    ck_assert_int_eq(calls_of("pexpireat") - p0, 10 + 4 + 6);
    /* 10 + 10 + 3 of user:mixed's 50 spent, whoever wrote the key last */
    ck_assert_int_eq(admitted(old, "user:mixed", 20), 20);
    ck_assert_int_eq(admitted(new, "user:mixed", 10), 7);
    ck_assert_int_eq(admitted(old, "user:mixed", 1), 0);
    rl_limiter_free(old);
    rl_limiter_free(new);
}
END_TEST

/* ---- FUNCTION FLUSH under load --------------------------------------------- */

typedef struct load {
    rl_limiter *lim;
    _Atomic int stop;
    _Atomic int done;          /* checks decided so far                 */
    int passed;                /* the exact key's passes                */
} load;

/* Checks until told to stop: fresh keys of the large rule (each must be
 * allowed) and one key of the exact one. */
static void *checker(void *arg)
{
    load *l = arg;
    char key[64];

    for (int i = 0; !atomic_load(&l->stop); i++) {
        snprintf(key, sizeof key, "user:%d", i);
        ck_assert_int_eq(allow_decided(l->lim, key, "sw"), 1);
        l->passed += allow_decided(l->lim, "user:exact", "tb");
        atomic_fetch_add(&l->done, 2);
    }
    return NULL;
}

static void wait_done(load *l, int at_least)
{
    int64_t until = now_ms() + 15000;

    while (atomic_load(&l->done) < at_least && now_ms() < until)
        sleep_ms(1);
    ck_assert_int_ge(atomic_load(&l->done), at_least);
}

START_TEST(function_flush_under_load_decides_every_check)
{
    load l = {.lim = open_on(uri, NULL)};
    pthread_t th;
    store_redis_stats st;
    long long f0;

    ck_assert_int_eq(pthread_create(&th, NULL, checker, &l), 0);
    for (int round = 1; round <= 3; round++) {
        wait_done(&l, round * 200);
        admin("FUNCTION FLUSH%s", "");
        admin("SCRIPT FLUSH%s", ""); /* the EVALSHA it falls back to too */
    }
    wait_done(&l, 800);
    atomic_store(&l.stop, 1);
    pthread_join(th, NULL);
    ck_assert_int_eq(l.passed, LIMIT); /* every check charged once */
    store_redis_stats_get(limiter_store(l.lim), &st);
    ck_assert_int_ge(st.noscript, 1);
    /* A new connection loads the library again and calls it. */
    admin("CLIENT KILL TYPE %s", "normal");
    f0 = calls_of("fcall");
    for (int i = 0; i < 2000 && calls_of("fcall") - f0 < 10; i++) {
        rl_result res = RL_RESULT_INIT;
        ck_assert_int_eq(rl_allow(l.lim, "user:again", "sw", 1, &res),
                         RL_OK);
        sleep_ms(1);
    }
    ck_assert_int_ge(calls_of("fcall") - f0, 10);
    rl_limiter_free(l.lim);
}
END_TEST

/* ---- ACL: the rights decide the command ------------------------------------ */

/* docs/REDIS.md's user; granted: 2 plus FCALL and FUNCTION LOAD, 1 plus
 * FUNCTION LOAD alone. */
static void user_uri(int granted, char *buf, size_t len)
{
    acl_create(&srv, USER, PASSWORD);
    if (granted == 2)
        admin("ACL SETUSER " USER " +fcall +function|load%s", "");
    if (granted == 1)
        admin("ACL SETUSER " USER " +function|load%s", "");
    snprintf(buf, len, "redis://%s:%s@127.0.0.1:%d/0", USER, PASSWORD,
             srv.port);
}

START_TEST(least_privilege_falls_back_to_evalsha)
{
    char as_user[512];
    rl_limiter *lim;
    long long f0 = calls_of("fcall"), e0 = calls_of("evalsha");

    user_uri(0, as_user, sizeof as_user);
    lim = open_on(as_user, NULL);
    ck_assert_int_eq(admitted(lim, "user:acl", 60), LIMIT);
    ck_assert_int_ge(calls_of("evalsha") - e0, 60);
    ck_assert_int_eq(calls_of("fcall") - f0, 0);
    rl_limiter_free(lim);
}
END_TEST

START_TEST(granted_functions_are_called)
{
    char as_user[512];
    rl_limiter *lim;
    long long f0 = calls_of("fcall"), e0 = calls_of("evalsha");

    user_uri(2, as_user, sizeof as_user);
    lim = open_on(as_user, NULL);
    ck_assert_int_eq(admitted(lim, "user:acl", 60), LIMIT);
    ck_assert_int_ge(calls_of("fcall") - f0, 60);
    ck_assert_int_eq(calls_of("evalsha") - e0, 0);
    rl_limiter_free(lim);
}
END_TEST

/* A user set up before the scripts used INCRBY (docs/REDIS.md's line
 * without +incrby), with FCALL (the lean function) or without (EVALSHA,
 * the general script): the windows' INCRBY is refused inside the script
 * and the state written with SET instead; every decision stands. */
START_TEST(user_without_incrby_is_served)
{
    for (int granted = 0; granted <= 2; granted += 2) {
        char as_user[512], key[32];
        rl_limiter *lim;
        int ok = 0;

        user_uri(granted, as_user, sizeof as_user);
        admin("ACL SETUSER " USER " -incrby%s", "");
        lim = open_on(as_user, NULL);
        snprintf(key, sizeof key, "user:noincr%d", granted);
        for (int i = 0; i < 8; i++)
            ok += allow_decided(lim, key, "fw");
        ck_assert_int_eq(ok, 5);
        rl_limiter_free(lim);
    }
    ck_assert_int_eq(calls_of("incrby"), 0);
}
END_TEST

/* A user who may load the library but not call it: its first FCALL is
 * refused (NOPERM), met as NOSCRIPT: the batch goes again as EVAL, the
 * connection EVALSHAs from then on; no check fails. */
START_TEST(load_without_fcall_falls_back_too)
{
    char as_user[512];
    rl_limiter *lim;
    long long e0 = calls_of("evalsha");

    user_uri(1, as_user, sizeof as_user);
    lim = open_on(as_user, NULL);
    ck_assert_int_eq(admitted(lim, "user:acl", 60), LIMIT);
    ck_assert_int_ge(calls_of("evalsha") - e0, 50);
    rl_limiter_free(lim);
}
END_TEST

/* ---- Redis Cluster: every master loads the library --------------------------- */

START_TEST(every_cluster_master_is_fcalled)
{
    rh_cluster cl;
    char seeds[1024], key[32];
    rl_limiter *lim;

    ck_assert_int_eq(rh_cluster_start(&cl, 3, 0, 2000), 0);
    ck_assert_ptr_nonnull(rh_cluster_uri(&cl, 0, seeds, sizeof seeds));
    lim = open_on(seeds, NULL);
    for (int i = 0; i < 300; i++) { /* keys over every master's slots */
        snprintf(key, sizeof key, "user:%d", i);
        ck_assert_int_eq(allow_decided(lim, key, "sw"), 1);
    }
    ck_assert_int_eq(admitted(lim, "user:exact", 60), LIMIT);
    for (int i = 0; i < cl.n; i++) {
        ck_assert_msg(calls_on(&cl.node[i], "fcall") > 0,
                      "master %d: no FCALL", i);
        ck_assert_int_eq(calls_on(&cl.node[i], "evalsha"), 0);
    }
    rl_limiter_free(lim);
    ck_assert_int_eq(rh_cluster_stop(&cl), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("functions");
    TCase *tc = tcase_create("server"), *cluster = tcase_create("cluster");

    if (rh_available()) {
        tcase_set_timeout(tc, 60);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, fcall_when_on_evalsha_when_off);
        tcase_add_test(tc, lone_check_takes_the_lean_function);
        tcase_add_test(tc, batch_of_lone_checks_takes_the_lean_batch);
        tcase_add_test(tc, oldest_limiter_1_1_bucket_writes_expiry_alone);
        tcase_add_test(tc, function_flush_under_load_decides_every_check);
        tcase_add_test(tc, least_privilege_falls_back_to_evalsha);
        tcase_add_test(tc, granted_functions_are_called);
        tcase_add_test(tc, user_without_incrby_is_served);
        tcase_add_test(tc, load_without_fcall_falls_back_too);
        suite_add_tcase(s, tc);
    }
    if (rh_cluster_available()) {
        tcase_set_timeout(cluster, 120);
        tcase_add_test(cluster, every_cluster_master_is_fcalled);
        suite_add_tcase(s, cluster);
    }
    return run_suite(s);
}
