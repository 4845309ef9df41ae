/*
 * check_redis.c -- the Redis store through the public API, against real
 * redis-server processes the tests start and stop: the fleet-wide limit
 * across limiters, key layout and expiry, AUTH, SELECT, unix sockets,
 * restarts (NOSCRIPT and lost counters), SCRIPT FLUSH, refunds across
 * slots, failure modes, and bad input (checks timed against their
 * timeout are check_redis_timing.c's; what both share is
 * tests/redis_fixture.h).
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "hash.h"
#include "redis_harness.h"
#include "server_fixtures.h"
#include "siphash.h"
#include "store_redis.h"
#include "testutil.h"
#include "redis_fixture.h"

static redisReply *cmd(const char *fmt, const char *arg)
{
    redisContext *c = rh_connect(&srv);
    redisReply *r;

    ck_assert_ptr_nonnull(c);
    r = redisCommand(c, fmt, arg);
    redisFree(c);
    ck_assert_ptr_nonnull(r);
    return r;
}

/* The keys of limits in Redis: every key but the fleet's heartbeats
 * (fleet_size "auto", the default, keeps rl:fleet:{default}). */
static long long limit_keys(const char *pattern)
{
    redisReply *r = cmd("KEYS %s", pattern);
    long long n = 0;

    for (size_t i = 0; i < r->elements; i++)
        n += strncmp(r->element[i]->str, "rl:fleet:", 9) != 0;
    freeReplyObject(r);
    return n;
}

START_TEST(limit_holds_across_limiters)
{
    rl_limiter *a = open_limiter(uri, NULL, NULL);
    rl_limiter *b = open_limiter(uri, NULL, NULL);
    rl_limiter *c = open_limiter(uri, NULL, NULL);

    /* Three "servers", 10 each: 10 in all, not 30. */
    int total = admitted(a, "user:1", "sw", 10) +
                admitted(b, "user:1", "sw", 10) +
                admitted(c, "user:1", "sw", 10);
    ck_assert_int_eq(total, 10);
    rl_limiter_free(a);
    rl_limiter_free(b);
    rl_limiter_free(c);
}
END_TEST

START_TEST(one_key_per_client_rule_with_ttl)
{
    rl_limiter *lim = open_limiter(uri, NULL, NULL);
    redisReply *r;

    admitted(lim, "user:42", "tb", 3);
    r = cmd("PTTL %s", "rl:{user:42}:tb:t60:100:20");
    ck_assert_int_eq(r->type, REDIS_REPLY_INTEGER);
    /* Refilling 3 tokens at 600 ms each: full again in 1.8 s. */
    ck_assert_int_gt(r->integer, 1000);
    ck_assert_int_le(r->integer, 1800);
    freeReplyObject(r);
    r = cmd("OBJECT ENCODING %s", "rl:{user:42}:tb:t60:100:20");
    ck_assert_str_eq(r->str, "int");
    freeReplyObject(r);
    ck_assert_int_eq(limit_keys("*"), 1);
    rl_limiter_free(lim);
}
END_TEST

START_TEST(results_match_the_memory_store)
{
    rl_limiter *red = open_limiter(uri, NULL, NULL);
    rl_limiter *mem = open_limiter("memory://", NULL, NULL);
    rl_result a = RL_RESULT_INIT, b = RL_RESULT_INIT;

    for (int i = 0; i < 25; i++) {
        ck_assert_int_eq(rl_allow(red, "user:7", "tb", 1, &a), RL_OK);
        ck_assert_int_eq(rl_allow(mem, "user:7", "tb", 1, &b), RL_OK);
        ck_assert_int_eq(a.allowed, b.allowed);
        ck_assert_int_eq(a.remaining, b.remaining);
        ck_assert_int_eq(a.limit, b.limit);
    }
    rl_limiter_free(red);
    rl_limiter_free(mem);
}
END_TEST

START_TEST(auth_right_and_wrong_password)
{
    rh_server sec;
    char good[512], bad[512];
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;

    ck_assert_int_eq(rh_start(&sec, "s3cret"), 0);
    rh_uri(&sec, good, sizeof good);
    snprintf(bad, sizeof bad, "redis://:wrong@127.0.0.1:%d/0", sec.port);
    ck_assert_int_eq(rl_config_set(cfg, "store", bad), RL_OK);
    ck_assert_int_eq(rl_limiter_new(&lim, cfg), RL_ESTORE);
    ck_assert_ptr_null(lim);
    ck_assert_ptr_nonnull(strstr(rl_errmsg(NULL), "AUTH"));
    rl_config_free(cfg);
    lim = open_limiter(good, NULL, NULL);
    ck_assert_int_eq(admitted(lim, "user:1", "sw", 12), 10);
    rl_limiter_free(lim);
    rh_stop(&sec);
}
END_TEST

START_TEST(select_keeps_state_in_its_db)
{
    char db3[512];
    redisContext *c;
    redisReply *r;

    snprintf(db3, sizeof db3, "redis://127.0.0.1:%d/3", srv.port);
    rl_limiter *lim = open_limiter(db3, NULL, NULL);
    admitted(lim, "user:1", "sw", 1);
    c = rh_connect(&srv);
    r = redisCommand(c, "DBSIZE");
    ck_assert_int_eq(r->integer, 0); /* nothing in db 0 */
    freeReplyObject(r);
    freeReplyObject(redisCommand(c, "SELECT 3"));
    r = redisCommand(c, "EXISTS rl:{user:1}:sw:s60");
    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
    redisFree(c);
    rl_limiter_free(lim);
}
END_TEST

/* The unix:// store counts on the server behind the socket.  What is
 * tested is the socket, not a deadline: timeout_ms 10 s, room for a loaded
 * host (a call past open_limiter's 500 ms flaked at load 23; a server
 * stopped for 800 ms fails the 500 ms, not this). */
START_TEST(unix_socket)
{
    char u[512];
    redisReply *r;

    snprintf(u, sizeof u, "unix://%s", srv.unix_path);
    rl_limiter *lim = open_limiter(u, "timeout_ms", "10000");
    ck_assert_int_eq(admitted(lim, "user:9", "sw", 12), 10);
    r = cmd("EXISTS %s", "rl:{user:9}:sw:s60");
    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
    rl_limiter_free(lim);
}
END_TEST

START_TEST(restart_reloads_script_and_starts_empty)
{
    rl_limiter *lim = open_limiter(uri, NULL, NULL);

    ck_assert_int_eq(admitted(lim, "user:5", "sw", 12), 10);
    ck_assert_int_eq(rh_restart(&srv), 0); /* empty, no script cached */
    await_redis(lim, "user:5");
    /* The counters went with the server: a fresh window. */
    ck_assert_int_eq(admitted(lim, "user:5", "sw", 12), 10);
    rl_limiter_free(lim);
}
END_TEST

/* EVALSHA's NOSCRIPT (check_functions.c: FCALL's missing function). */
START_TEST(script_flush_is_survived)
{
    rl_limiter *lim = open_limiter(uri, "redis_functions", "0");
    store_redis_stats st;

    ck_assert_int_eq(admitted(lim, "user:6", "sw", 4), 4);
    freeReplyObject(cmd("SCRIPT FLUSH%s", ""));
    ck_assert_int_eq(admitted(lim, "user:6", "sw", 8), 6);
    store_redis_stats_get(limiter_store(lim), &st);
    ck_assert_int_ge(st.noscript, 1);
    rl_limiter_free(lim);
}
END_TEST

/* A per-user and a per-IP rule live in different slots.  On one server
 * they run in one script, all-or-nothing (check_cluster tests the split
 * per slot, with refunds, that Redis Cluster needs). */
START_TEST(no_rule_charged_for_a_denied_request)
{
    rl_limiter *lim = open_limiter(uri, NULL, NULL);
    rl_request req = {.size = sizeof(rl_request), .endpoint = "/both", .user = "u1", .ip = "10.0.0.1",
                      .cost = 1};
    rl_result res = RL_RESULT_INIT;
    redisReply *r;
    int passed = 0;

    for (int i = 0; i < 6; i++) {
        ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
        passed += res.allowed;
    }
    ck_assert_int_eq(passed, 2);
    ck_assert_str_eq(res.rule_id, "per-ip");
    /* Refunds are sent without waiting: give them a moment to land. */
    for (int i = 0; i < 100; i++) {
        r = cmd("GET %s", "rl:{user:u1}:per-user:s60");
        int charged = r->str ? atoi(r->str) : -1;
        freeReplyObject(r);
        if (charged == 2)
            break;
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    r = cmd("GET %s", "rl:{user:u1}:per-user:s60");
    ck_assert_str_eq(r->str, "2"); /* the 2 that passed, not 6 */
    freeReplyObject(r);
    rl_limiter_free(lim);
}
END_TEST

/* redis_layout compact: two limiters share limits exactly as in the plain
 * layout, a denied multi-rule request charges nothing, and the state is a
 * few hashes (rlc:...), not a key per client. */
START_TEST(compact_layout_end_to_end)
{
    rl_limiter *a = open_limiter(uri, "redis_layout", "compact");
    rl_limiter *b = open_limiter(uri, "redis_layout", "compact");
    rl_request req = {.size = sizeof(rl_request), .endpoint = "/both", .user = "cu", .ip = "10.9.9.9",
                      .cost = 1};
    rl_result res = RL_RESULT_INIT;
    char key[32];
    int passed = 0;
    redisReply *r;

    freeReplyObject(cmd("FLUSHALL%s", ""));
    for (int u = 0; u < 200; u++) {
        struct timespec t;
        int got;
        snprintf(key, sizeof key, "user:c%d", u);
        ck_assert_int_eq(admitted(a, key, "sw", 6) + admitted(b, key, "sw", 6),
                         10);
        /* The burst of 20, and what the bucket refills (100 a minute)
         * while the 25 checks run: nothing on an idle machine, a token
         * per 600 ms on one loaded enough to stretch them. */
        clock_gettime(CLOCK_MONOTONIC, &t);
        got = admitted(u % 2 ? a : b, key, "tb", 25);
        ck_assert_int_ge(got, 20);
        ck_assert_int_le(got, 20 + (elapsed_ms(&t) + 1) * 100 / 60000);
    }
    for (int i = 0; i < 6; i++) { /* per-ip denies after 2 */
        ck_assert_int_eq(rl_check(a, &req, &res), RL_OK);
        passed += res.allowed;
    }
    ck_assert_int_eq(passed, 2);
    req.ip = "10.9.9.10"; /* per-user had 2 of 10: 8 more pass */
    for (int i = 0, more = 0; i < 12; i++) {
        ck_assert_int_eq(rl_check(a, &req, &res), RL_OK);
        more += res.allowed;
        if (i == 11)
            ck_assert_int_eq(more, 2); /* the new ip's own limit of 2 */
    }
    /* every (client, rule) is one field of a compact hash with a TTL:
     * 200 x 2, the per-user rule of "cu" and the per-ip rule of 2 ips.
     * (With 65536 buckets, 200 clients hardly share a hash; a million do,
     * ~15 per hash: bench/redisbench --only compact measures the bytes.) */
    ck_assert_int_eq(limit_keys("rl:*"), 0);
    r = cmd("KEYS %s", "rlc:*");
    long long fields = 0;
    for (size_t i = 0; i < r->elements; i++) {
        const char *k = r->element[i]->str;
        redisReply *t = cmd("TYPE %s", k);
        ck_assert_str_eq(t->str, "hash");
        freeReplyObject(t);
        t = cmd("PTTL %s", k);
        ck_assert_int_gt(t->integer, 0);
        freeReplyObject(t);
        /* a pair written on both sides of a window's end has a field in
         * two epochs' hashes (base:e-1 and base:e): count it once */
        t = cmd("HKEYS %s", k);
        for (size_t f = 0; f < t->elements; f++) {
            int seen = 0;
            size_t blen = (size_t)(strrchr(k, ':') - k);
            for (size_t j = 0; j < i && !seen; j++) {
                const char *o = r->element[j]->str;
                if ((size_t)(strrchr(o, ':') - o) == blen &&
                    memcmp(o, k, blen) == 0) {
                    redisContext *c = rh_connect(&srv);
                    redisReply *e = redisCommand(c, "HEXISTS %s %s", o,
                                                 t->element[f]->str);
                    seen = e && e->integer == 1;
                    freeReplyObject(e);
                    redisFree(c);
                }
            }
            fields += !seen;
        }
        freeReplyObject(t);
    }
    ck_assert_int_eq(fields, 200 * 2 + 1 + 2);
    freeReplyObject(r);
    rl_limiter_free(a);
    rl_limiter_free(b);
}
END_TEST

START_TEST(failure_modes_when_redis_dies)
{
    rl_limiter *lim = open_limiter(uri, "fleet_size", "4");
    rl_result res = RL_RESULT_INIT;
    int fb = 0;

    ck_assert_int_eq(admitted(lim, "user:1", "open", 1), 1);
    ck_assert_int_eq(rh_kill(&srv), 0);
    ck_assert_int_eq(rl_allow(lim, "user:1", "open", 1, &res), RL_OK);
    ck_assert(res.allowed);
    ck_assert(res.flags & RL_FLAG_FAIL_OPEN);
    ck_assert_int_eq(rl_allow(lim, "user:1", "closed", 1, &res), RL_OK);
    ck_assert(!res.allowed);
    ck_assert_int_ge(res.retry_after, 1);
    /* fallback: 40 / fleet of 4 = 10 here. */
    for (int i = 0; i < 20; i++) {
        ck_assert_int_eq(rl_allow(lim, "user:1", "fb", 1, &res), RL_OK);
        ck_assert(res.flags & RL_FLAG_FALLBACK);
        fb += res.allowed;
    }
    ck_assert_int_eq(fb, 10);
    ck_assert_int_eq(rh_restart(&srv), 0);
    await_redis(lim, "user:1");
    rl_limiter_free(lim);
}
END_TEST

/* A client Redis had exhausted stays exhausted when the fallback takes
 * over (its local state was drained when Redis denied it); one Redis never
 * denied gets the local share.  Before, both got a fresh local quota. */
START_TEST(fallback_starts_from_what_redis_denied)
{
    rl_limiter *lim = open_limiter(uri, "fleet_size", "4");
    rl_result res = RL_RESULT_INIT;
    int spent = 0, fresh = 0;

    ck_assert_int_eq(admitted(lim, "user:2", "fb", 41), 40);
    ck_assert_int_eq(admitted(lim, "user:3", "fb", 1), 1);
    ck_assert_int_eq(rh_kill(&srv), 0);
    for (int i = 0; i < 20; i++) {
        ck_assert_int_eq(rl_allow(lim, "user:2", "fb", 1, &res), RL_OK);
        ck_assert(res.flags & RL_FLAG_FALLBACK);
        spent += res.allowed;
        ck_assert_int_eq(rl_allow(lim, "user:3", "fb", 1, &res), RL_OK);
        fresh += res.allowed;
    }
    ck_assert_int_eq(spent, 0);
    ck_assert_int_eq(fresh, 10); /* 40 / fleet of 4 */
    ck_assert_int_eq(rh_restart(&srv), 0);
    await_redis(lim, "user:1");
    rl_limiter_free(lim);
}
END_TEST

START_TEST(bad_stores_are_clear_errors)
{
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;
    rl_result res = RL_RESULT_INIT;
    const char *bad[] = {"redis://127.0.0.1:1/0", "redis://127.0.0.1:99999",
                         "redis://:@h", "redis://h/x", "rediss://h",
                         "unix://relative.sock"};

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(rl_config_set(cfg, "store", bad[i]), RL_OK);
        ck_assert_int_eq(rl_limiter_new(&lim, cfg), RL_ESTORE);
        ck_assert_ptr_null(lim);
        ck_assert_msg(strstr(rl_errmsg(NULL), "store") != NULL, "%s: %s",
                      bad[i], rl_errmsg(NULL));
    }
    /* Unreachable, but told to start degraded: decisions by failure mode. */
    ck_assert_int_eq(rl_config_set(cfg, "store", "redis://127.0.0.1:1/0"),
                     RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "degraded_start", "1"), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "rules", rules), RL_OK);
    ck_assert_int_eq(rl_limiter_new(&lim, cfg), RL_OK);
    ck_assert_int_eq(rl_allow(lim, "user:1", "fb", 1, &res), RL_OK);
    ck_assert(res.allowed && (res.flags & RL_FLAG_FALLBACK));
    rl_limiter_free(lim);
    rl_config_free(cfg);
}
END_TEST

START_TEST(bad_keys_write_nothing)
{
    rl_limiter *lim = open_limiter(uri, NULL, NULL);
    char big[RL_KEY_MAX + 2];
    rl_result res = RL_RESULT_INIT;

    memset(big, 'k', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    ck_assert_int_eq(rl_allow(lim, big, "sw", 1, &res), RL_EINVAL);
    ck_assert_int_eq(rl_allow(lim, "", "sw", 1, &res), RL_EINVAL);
    ck_assert_int_eq(rl_allow(lim, "user:1", "nope", 1, &res), RL_ENORULE);
    ck_assert_int_eq(limit_keys("*"), 0);
    rl_limiter_free(lim);
}
END_TEST

/* 64 threads on one token bucket key: exactly the burst, no more. */
typedef struct hammer_arg {
    rl_limiter *lim;
    _Atomic int ok;
} hammer_arg;

static void *hammer(void *p)
{
    hammer_arg *h = p;
    rl_result res = RL_RESULT_INIT;

    for (int i = 0; i < 20; i++)
        if (rl_allow(h->lim, "user:hot", "tb", 1, &res) == RL_OK &&
            res.allowed && !(res.flags & RL_FLAG_FALLBACK))
            atomic_fetch_add(&h->ok, 1);
    return NULL;
}

START_TEST(sixty_four_threads_share_few_sockets)
{
    /* Every check must reach Redis (counted below): a timeout no slowed
     * run reaches (valgrind runs the 64 threads one at a time; at 1 s, 5
     * of 1280 checks once timed out there). */
    hammer_arg h = {open_limiter(uri, "timeout_ms", "10000"), 0};
    pthread_t th[64];
    store_redis_stats st;
    long long clients, ms;
    struct timespec a, b;

    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < 64; i++)
        pthread_create(&th[i], NULL, hammer, &h);
    for (int i = 0; i < 64; i++)
        pthread_join(th[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
    /* burst 20, refilling 1 per 600 ms: 20 plus what refilled during the
     * run (longer under sanitizers), never one more. */
    ck_assert_int_ge(atomic_load(&h.ok), 20);
    ck_assert_int_le(atomic_load(&h.ok), 20 + ms / 600 + 1);
    store_redis_stats_get(limiter_store(h.lim), &st);
    ck_assert_int_eq(st.checks, 64 * 20);
    ck_assert_int_lt(st.batches, st.checks); /* many checks per script */
    clients = rh_info_int(&srv, "clients", "connected_clients");
    ck_assert_int_le(clients, 3);
    rl_limiter_free(h.lim);
}
END_TEST

/* A reload that changes a rule's algorithm carries each client's level
 * over (tests/check_rulechange.c has every case): a window spent in full
 * is an empty bucket; a bucket's whole tokens stay, its fraction goes. */
START_TEST(reloaded_rules_carry_each_clients_level)
{
    rl_limiter *lim = open_limiter(uri, NULL, NULL);
    rl_result res = RL_RESULT_INIT;
    int n;

    ck_assert_int_eq(admitted(lim, "user:3", "sw", 12), 10);
    ck_assert_int_eq(rl_rules_load_string(lim,
        "[{\"rule_id\":\"sw\",\"dimension\":\"user\",\"limit\":10,"
        "\"window_seconds\":60,\"algorithm\":\"gcra\"},"
        " {\"rule_id\":\"b\",\"dimension\":\"user\",\"limit\":1,"
        "\"window_seconds\":60,\"burst\":10,\"algorithm\":\"token_bucket\"}]"),
        RL_OK);
    ck_assert_int_eq(rl_allow(lim, "user:3", "sw", 1, &res), RL_OK);
    ck_assert(!res.allowed);              /* 10 of 10 used: empty      */
    ck_assert_int_eq(res.retry_after, 6); /* one token per 6 s         */
    ck_assert_int_eq(admitted(lim, "user:4", "b", 1), 1);
    ck_assert_int_eq(rl_rules_load_string(lim,
        "[{\"rule_id\":\"b\",\"dimension\":\"user\",\"limit\":60,"
        "\"window_seconds\":60,\"algorithm\":\"token_bucket\"}]"), RL_OK);
    /* 9 whole tokens were left of 10; the new bucket of 60 keeps them and
     * refills one a second: no free refill to 60. */
    n = admitted(lim, "user:4", "b", 100);
    ck_assert_int_ge(n, 9);
    ck_assert_int_le(n, 11);
    rl_limiter_free(lim);
}
END_TEST

/* Redis down: a closed rule's denial leaves the fallback rule uncharged,
 * and the flags describe the deciding rule only. */
START_TEST(failure_modes_stay_all_or_nothing)
{
    static const char *both =
        "[{\"rule_id\":\"fb\",\"dimension\":\"user\",\"limit\":5,"
        "\"window_seconds\":60},"
        " {\"rule_id\":\"open\",\"dimension\":\"user\",\"limit\":5,"
        "\"window_seconds\":60,\"failure_mode\":\"open\"},"
        " {\"rule_id\":\"login\",\"dimension\":\"ip\",\"limit\":5,"
        "\"window_seconds\":60,\"failure_mode\":\"closed\","
        "\"match\":{\"endpoint\":\"/login\"}}]";
    rl_limiter *lim = open_limiter(uri, NULL, NULL);
    rl_request login = {.size = sizeof(rl_request), .endpoint = "/login", .user = "u", .ip = "1.2.3.4",
                        .cost = 1};
    rl_request other = {.size = sizeof(rl_request), .endpoint = "/x", .user = "u", .cost = 0};
    rl_result res = RL_RESULT_INIT;

    ck_assert_int_eq(rl_rules_load_string(lim, both), RL_OK);
    ck_assert_int_eq(rh_kill(&srv), 0);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(rl_check(lim, &login, &res), RL_OK);
        ck_assert(!res.allowed);
        ck_assert_str_eq(res.rule_id, "login");
        ck_assert_int_eq(res.flags & (RL_FLAG_FAIL_OPEN | RL_FLAG_FALLBACK), 0);
        ck_assert(res.flags & RL_FLAG_FAIL_CLOSED);
    }
    /* The fallback rule was never charged: 5 of 5 left. */
    ck_assert_int_eq(rl_check(lim, &other, &res), RL_OK);
    ck_assert_str_eq(res.rule_id, "fb");
    ck_assert_int_eq(res.remaining, 5);
    ck_assert(res.flags & RL_FLAG_FALLBACK);
    rl_limiter_free(lim);
}
END_TEST

START_TEST(passwords_stay_out_of_messages)
{
    rh_server sec;
    char bad[512];
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;

    ck_assert_int_eq(rh_start(&sec, "s3cret"), 0);
    snprintf(bad, sizeof bad, "redis://app:hunter2@127.0.0.1:%d/0", sec.port);
    ck_assert_int_eq(rl_config_set(cfg, "store", bad), RL_OK);
    ck_assert_int_eq(rl_limiter_new(&lim, cfg), RL_ESTORE);
    ck_assert_ptr_null(strstr(rl_errmsg(NULL), "hunter2"));
    ck_assert_ptr_nonnull(strstr(rl_errmsg(NULL), "***"));
    rl_config_free(cfg);
    rh_stop(&sec);
}
END_TEST

/* fleet_size "auto": limiters count each other by heartbeats, and the
 * fallback divides by the count; a limiter that leaves is out at once. */
START_TEST(fleet_counts_itself)
{
    rl_limiter *a = open_limiter(uri, "fleet_size", "auto");
    rl_limiter *b = open_limiter(uri, "fleet_size", "auto");
    rl_limiter *other = NULL;
    rl_config *cfg = rl_config_new();
    rl_result res = RL_RESULT_INIT;
    rl_stats st = RL_STATS_INIT;
    struct timespec t;
    int ok = 0;

    ck_assert_int_eq(rl_config_set(cfg, "store", uri), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "fleet_size", "auto"), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "fleet_name", "other-app"), RL_OK);
    ck_assert_int_eq(rl_limiter_new(&other, cfg), RL_OK); /* another fleet */
    rl_config_free(cfg);
    clock_gettime(CLOCK_MONOTONIC, &t);
    do { /* each beats once a second */
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
        ck_assert_int_eq(rl_stats_get(a, &st), RL_OK);
        ck_assert_int_lt(elapsed_ms(&t), 3000);
    } while (st.fleet_size != 2);
    ck_assert_int_eq(rl_stats_get(other, &st), RL_OK);
    ck_assert_int_eq(st.fleet_size, 1);
    /* Redis away: the fallback allows 40 / 2 here. */
    ck_assert_int_eq(rh_kill(&srv), 0);
    for (int i = 0; i < 40; i++) {
        ck_assert_int_eq(rl_allow(a, "user:f", "fb", 1, &res), RL_OK);
        ck_assert(res.flags & RL_FLAG_FALLBACK);
        ok += res.allowed;
    }
    ck_assert_int_eq(ok, 20);
    ck_assert_int_eq(rh_restart(&srv), 0);
    rl_limiter_free(a);
    rl_limiter_free(b);
    rl_limiter_free(other);
    ck_assert_int_eq(rl_config_set(NULL, "fleet_name", "x"), RL_EINVAL);
}
END_TEST

START_TEST(fleet_options_are_checked)
{
    rl_config *cfg = rl_config_new();

    ck_assert_int_eq(rl_config_set(cfg, "fleet_size", "0"), RL_EOPTION);
    ck_assert_int_eq(rl_config_set(cfg, "fleet_size", "automatic"), RL_EOPTION);
    ck_assert_int_eq(rl_config_set(cfg, "fleet_name", "a{b}"), RL_EOPTION);
    ck_assert_int_eq(rl_config_set(cfg, "fleet_name", ""), RL_EOPTION);
    ck_assert_int_eq(rl_config_set(cfg, "fleet_name", "shop-eu"), RL_OK);
    rl_config_free(cfg);
}
END_TEST

/* ---- rl_check_many ----------------------------------------------------- */

typedef struct many_arg {
    rl_limiter *lim;
    int many;                       /* rl_check_many, else rl_check */
    _Atomic int ok[10];             /* admitted per user            */
    _Atomic int degraded, errors;
} many_arg;

static void *many_main(void *p)
{
    many_arg *m = p;
    rl_request req[50];
    rl_result res[50];
    int codes[50];
    char user[10][16];

    results_init(res, 50);
    for (int u = 0; u < 10; u++)
        snprintf(user[u], sizeof user[u], "m%d", u);
    for (int i = 0; i < 50; i++)
        req[i] = (rl_request){.size = sizeof(rl_request), .endpoint = "/both", .user = user[i % 10],
                              .cost = 1}; /* no ip: per-user, 10 each */
    for (int round = 0; round < 4; round++) {
        if (m->many) {
            if (rl_check_many(m->lim, req, res, codes, 50) != RL_OK)
                atomic_fetch_add(&m->errors, 1);
        } else {
            for (int i = 0; i < 50; i++)
                codes[i] = rl_check(m->lim, &req[i], &res[i]);
        }
        for (int i = 0; i < 50; i++) {
            if (codes[i] != RL_OK)
                atomic_fetch_add(&m->errors, 1);
            else if (res[i].flags & (RL_FLAG_FALLBACK | RL_FLAG_FAIL_OPEN))
                atomic_fetch_add(&m->degraded, 1);
            else
                atomic_fetch_add(&m->ok[i % 10], res[i].allowed);
        }
    }
    return NULL;
}

/* Four threads decide 50 requests per rl_check_many() call while two
 * others call rl_check() on the same clients: every client gets exactly
 * its 10 over the 1200 requests, and the many calls went out batched. */
START_TEST(check_many_holds_exact_limits)
{
    rl_limiter *lim = open_limiter(uri, "timeout_ms", "2000");
    many_arg a = {.lim = lim, .many = 1}, b = {.lim = lim, .many = 0};
    pthread_t th[6];
    store_redis_stats st;

    for (int i = 0; i < 6; i++)
        pthread_create(&th[i], NULL, many_main, i < 4 ? &a : &b);
    for (int i = 0; i < 6; i++)
        pthread_join(th[i], NULL);
    ck_assert_int_eq(atomic_load(&a.errors) + atomic_load(&b.errors), 0);
    ck_assert_int_eq(atomic_load(&a.degraded) + atomic_load(&b.degraded), 0);
    for (int u = 0; u < 10; u++)
        ck_assert_int_eq(atomic_load(&a.ok[u]) + atomic_load(&b.ok[u]), 10);
    store_redis_stats_get(limiter_store(lim), &st);
    ck_assert_int_eq(st.checks, 6 * 4 * 50);
    /* 800 of them came 50 at a time: far fewer script calls than checks */
    ck_assert_int_le(st.batches, 400 + 800 / 25);
    rl_limiter_free(lim);
}
END_TEST

/* Each request of a batch is all-or-nothing on its own: the requests the
 * per-ip rule denies charge nothing on per-user, while the ones of other
 * ips in the same call pass and are charged; a bad request in the middle
 * gets its own error code and stops nothing. */
START_TEST(check_many_each_request_all_or_nothing)
{
    rl_limiter *lim = open_limiter(uri, NULL, NULL);
    rl_request req[8];
    rl_result res[8];
    int codes[8], passed = 0;
    redisReply *r;

    results_init(res, 8);
    for (int i = 0; i < 8; i++)
        req[i] = (rl_request){.size = sizeof(rl_request), .endpoint = "/both", .user = "solo",
                              .ip = i < 6 ? "10.1.1.1" : "10.2.2.2",
                              .cost = 1};
    req[3].cost = -1;
    ck_assert_int_eq(rl_check_many(lim, req, res, codes, 8), RL_EINVAL);
    for (int i = 0; i < 8; i++) {
        if (i == 3) {
            ck_assert_int_eq(codes[i], RL_EINVAL);
            continue;
        }
        ck_assert_int_eq(codes[i], RL_OK);
        ck_assert_int_eq(res[i].flags & RL_FLAG_FALLBACK, 0);
        passed += res[i].allowed;
        if (!res[i].allowed)
            ck_assert_str_eq(res[i].rule_id, "per-ip");
    }
    ck_assert_int_eq(passed, 4); /* 2 of the first ip, 2 of the second */
    ck_assert(res[6].allowed && res[7].allowed);
    r = cmd("GET %s", "rl:{user:solo}:per-user:s60");
    ck_assert_str_eq(r->str, "4"); /* the 4 that passed, not 7 */
    freeReplyObject(r);
    ck_assert_int_eq(rl_check_many(lim, NULL, NULL, NULL, 0), RL_OK);
    ck_assert_int_eq(rl_check_many(lim, req, NULL, codes, 1), RL_EINVAL);
    ck_assert_int_eq(rl_check_many(NULL, req, res, codes, 1), RL_EINVAL);
    rl_limiter_free(lim);
}
END_TEST

/* redis_layout compact with hash_key: limiters given the same key share
 * each client's limit, the client's bucket and field are its SipHash-1-3
 * under that key, and without the key they are the 1.0 hash's. */
static rl_limiter *compact_limiter(const char *hash_key)
{
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;
    int rc;

    ck_assert_int_eq(rl_config_set(cfg, "store", uri), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "rules", rules), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "timeout_ms", "500"), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "redis_layout", "compact"), RL_OK);
    if (hash_key)
        ck_assert_int_eq(rl_config_set(cfg, "hash_key", hash_key), RL_OK);
    rc = rl_limiter_new(&lim, cfg);
    rl_config_free(cfg);
    ck_assert_msg(rc == RL_OK, "rl_limiter_new: %s", rl_errmsg(NULL));
    return lim;
}

/* Is field `field` in a hash of bucket `bucket` for rule sw? */
static int field_in_bucket(unsigned bucket, unsigned field)
{
    char pat[64], f[16];
    redisReply *r;
    int found = 0;

    snprintf(pat, sizeof pat, "rlc:{%u}:sw:*", bucket);
    snprintf(f, sizeof f, "%u", field);
    r = cmd("KEYS %s", pat);
    for (size_t i = 0; i < r->elements && !found; i++) {
        redisContext *c = rh_connect(&srv);
        redisReply *e = redisCommand(c, "HEXISTS %s %s",
                                     r->element[i]->str, f);
        found = e && e->integer == 1;
        freeReplyObject(e);
        redisFree(c);
    }
    freeReplyObject(r);
    return found;
}

START_TEST(compact_layout_hash_key)
{
    static const char *hex = "000102030405060708090a0b0c0d0e0f";
    static const char *key = "user:hk";
    rl_limiter *a = compact_limiter(hex), *b = compact_limiter(hex);
    rl_limiter *other = compact_limiter("ffeeddccbbaa99887766554433221100");
    rl_limiter *plain = compact_limiter(NULL);
    uint64_t k[2], h;
    rl_config *cfg = rl_config_new();

    ck_assert_int_eq(rl_config_set(cfg, "hash_key", "00"), RL_EOPTION);
    ck_assert_int_eq(rl_config_set(cfg, "hash_key",
                                   "000102030405060708090a0b0c0d0e0g"),
                     RL_EOPTION);
    rl_config_free(cfg);
    freeReplyObject(cmd("FLUSHALL%s", ""));
    /* one limit of 10 between a and b; another key, another state */
    ck_assert_int_eq(admitted(a, key, "sw", 6) + admitted(b, key, "sw", 6),
                     10);
    ck_assert_int_eq(admitted(other, key, "sw", 12), 10);
    ck_assert_int_eq(siphash_key_parse(hex, k), 0);
    h = siphash13(key, strlen(key), k);
    ck_assert(field_in_bucket((unsigned)(h & 0xffff), (unsigned)(h >> 33)));
    /* unset: where 1.0 put it */
    freeReplyObject(cmd("FLUSHALL%s", ""));
    ck_assert_int_eq(admitted(plain, key, "sw", 1), 1);
    h = hash_bytes(key, strlen(key), 0x726c632d6b657931ULL); /* "rlc-key1" */
    ck_assert(field_in_bucket((unsigned)(h & 0xffff), (unsigned)(h >> 33)));
    rl_limiter_free(a);
    rl_limiter_free(b);
    rl_limiter_free(other);
    rl_limiter_free(plain);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("redis");
    TCase *tc = tcase_create("redis");

    if (!rh_available()) {
        fprintf(stderr, "check_redis: redis-server not available, skipping\n");
        return 77;
    }
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, srv_up, srv_down);
    tcase_add_test(tc, limit_holds_across_limiters);
    tcase_add_test(tc, one_key_per_client_rule_with_ttl);
    tcase_add_test(tc, results_match_the_memory_store);
    tcase_add_test(tc, auth_right_and_wrong_password);
    tcase_add_test(tc, select_keeps_state_in_its_db);
    tcase_add_test(tc, unix_socket);
    tcase_add_test(tc, restart_reloads_script_and_starts_empty);
    tcase_add_test(tc, script_flush_is_survived);
    tcase_add_test(tc, no_rule_charged_for_a_denied_request);
    tcase_add_test(tc, compact_layout_end_to_end);
    tcase_add_test(tc, compact_layout_hash_key);
    tcase_add_test(tc, failure_modes_when_redis_dies);
    tcase_add_test(tc, fallback_starts_from_what_redis_denied);
    tcase_add_test(tc, bad_stores_are_clear_errors);
    tcase_add_test(tc, bad_keys_write_nothing);
    tcase_add_test(tc, sixty_four_threads_share_few_sockets);
    tcase_add_test(tc, reloaded_rules_carry_each_clients_level);
    tcase_add_test(tc, failure_modes_stay_all_or_nothing);
    tcase_add_test(tc, passwords_stay_out_of_messages);
    tcase_add_test(tc, fleet_counts_itself);
    tcase_add_test(tc, fleet_options_are_checked);
    tcase_add_test(tc, check_many_holds_exact_limits);
    tcase_add_test(tc, check_many_each_request_all_or_nothing);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
