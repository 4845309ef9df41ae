/*
 * check_events.c -- rejection events (src/telemetry/events.c, events_sender.c) on a
 * real redis-server: N denials and would-be denials become N stream
 * entries with the right fields (XRANGE); the key as is, hashed under
 * hash_key, or left out; a ring that fills while the server hangs drops
 * and counts, and every event is either in the stream or counted lost;
 * events_sample keeps one denial in N;
 * a killed server's events are counted lost; bad options are refused.
 */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "redis_harness.h"
#include "siphash.h"
#include "testutil.h"
#include "timeutil.h"

#define STREAM "ev:test"
#define HASH_KEY "000102030405060708090a0b0c0d0e0f"

static const char rules[] =
    "{\"rules\":["
    "{\"rule_id\":\"e\",\"dimension\":\"user\",\"match\":{\"endpoint\":\"/e\"},"
    "\"limit\":2,\"window_seconds\":3600},"
    "{\"rule_id\":\"l\",\"dimension\":\"user\",\"match\":{\"endpoint\":\"/l\"},"
    "\"limit\":1,\"window_seconds\":3600,\"mode\":\"log\"}]}";

static rl_limiter *events_limiter_sampled(const char *uri,
                                          const char *key_mode,
                                          const char *ring,
                                          const char *sample)
{
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;

    ck_assert_int_eq(rl_config_set(cfg, "rules", rules), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "events_redis", uri), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "events_stream", STREAM), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "events_key", key_mode), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "hash_key", HASH_KEY), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "connect_timeout_ms", "5000"), RL_OK);
    if (ring)
        ck_assert_int_eq(rl_config_set(cfg, "events_ring", ring), RL_OK);
    if (sample)
        ck_assert_int_eq(rl_config_set(cfg, "events_sample", sample), RL_OK);
    ck_assert_msg(rl_limiter_new(&lim, cfg) == RL_OK, "%s", rl_errmsg(NULL));
    rl_config_free(cfg);
    return lim;
}

static rl_limiter *events_limiter(const char *uri, const char *key_mode,
                                  const char *ring)
{
    return events_limiter_sampled(uri, key_mode, ring, NULL);
}

static int check(rl_limiter *lim, const char *ep, const char *user)
{
    rl_request req = {.size = sizeof req, .endpoint = ep, .user = user,
                      .cost = 1};
    rl_result res = RL_RESULT_INIT;

    ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
    return res.allowed && !(res.flags & RL_FLAG_SOFT);
}

static double metric(rl_limiter *lim, const char *series)
{
    static char buf[1 << 16];
    size_t len, n = strlen(series);

    ck_assert_int_eq(rl_metrics_write(lim, buf, sizeof buf, &len), RL_OK);
    for (char *p = buf; p; p = strchr(p, '\n'), p = p ? p + 1 : p)
        if (strncmp(p, series, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    return -1;
}

static double lost(rl_limiter *lim)
{
    return metric(lim, "ratelimit_events_dropped_total{reason=\"ring_full\"}") +
           metric(lim, "ratelimit_events_dropped_total{reason=\"redis_away\"}") +
           metric(lim, "ratelimit_events_dropped_total{reason=\"rejected\"}");
}

/* Wait (10 s at most) until every one of n events is sent or lost. */
static void settle(rl_limiter *lim, double n)
{
    for (int i = 0; i < 1000; i++) {
        if (metric(lim, "ratelimit_events_sent_total") + lost(lim) >= n)
            break;
        usleep(10000);
    }
    ck_assert(metric(lim, "ratelimit_events_sent_total") + lost(lim) == n);
}

static long long xlen(const rh_server *srv)
{
    redisContext *c = rh_connect(srv);
    redisReply *r = redisCommand(c, "XLEN " STREAM);
    long long n = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;

    freeReplyObject(r);
    redisFree(c);
    return n;
}

/* Field `name` of entry e of an XRANGE reply, or NULL. */
static const char *field(const redisReply *e, const char *name)
{
    const redisReply *kv = e->element[1];

    for (size_t i = 0; i + 1 < kv->elements; i += 2)
        if (strcmp(kv->element[i]->str, name) == 0)
            return kv->element[i + 1]->str;
    return NULL;
}

START_TEST(denials_become_entries)
{
    rh_server srv;
    char uri[256];
    const char *user = "u\"1 x\n";  /* quote, space, newline: kept whole */
    rl_limiter *lim;
    redisContext *c;
    redisReply *r;
    int64_t t0 = real_ms(), t1;
    int denied = 0, would = 0;

    ck_assert_int_eq(rh_start(&srv, NULL), 0);
    lim = events_limiter(rh_uri(&srv, uri, sizeof uri), "plain", NULL);
    for (int i = 0; i < 5; i++)
        denied += !check(lim, "/e", user);
    for (int i = 0; i < 3; i++)
        would += !check(lim, "/l", user);
    t1 = real_ms();
    ck_assert_int_eq(denied, 3);
    ck_assert_int_eq(would, 2);
    settle(lim, 5);
    ck_assert(metric(lim, "ratelimit_events_sent_total") == 5);
    ck_assert_int_eq(xlen(&srv), 5);
    c = rh_connect(&srv);
    r = redisCommand(c, "XRANGE " STREAM " - +");
    ck_assert_uint_eq(r->elements, 5);
    for (size_t i = 0; i < 5; i++) {
        const redisReply *e = r->element[i];
        int64_t ts = strtoll(field(e, "ts"), NULL, 10);
        ck_assert_str_eq(field(e, "rule"), i < 3 ? "e" : "l");
        ck_assert_str_eq(field(e, "mode"), i < 3 ? "enforce" : "log");
        ck_assert_str_eq(field(e, "key"), "user:u\"1 x\n");
        ck_assert_str_eq(field(e, "cost"), "1");
        ck_assert_str_eq(field(e, "decided"), "store");
        /* the coarse clock: at most a kernel tick (<= 10 ms) behind */
        ck_assert(ts >= t0 - 20 && ts <= t1);
        ck_assert_uint_gt(strlen(field(e, "limiter")), 0);
    }
    freeReplyObject(r);
    redisFree(c);
    rl_limiter_free(lim);
    rh_stop(&srv);
}
END_TEST

START_TEST(key_hashed_or_left_out)
{
    rh_server srv;
    char uri[256], hex[17];
    uint64_t key[2];
    rl_limiter *lim;
    redisContext *c;
    redisReply *r;

    ck_assert_int_eq(rh_start(&srv, NULL), 0);
    rh_uri(&srv, uri, sizeof uri);
    lim = events_limiter(uri, "hashed", NULL);
    for (int i = 0; i < 3; i++)
        check(lim, "/e", "u1");
    settle(lim, 1);
    rl_limiter_free(lim);
    lim = events_limiter(uri, "none", NULL);
    for (int i = 0; i < 3; i++)
        check(lim, "/e", "u2");
    settle(lim, 1);
    rl_limiter_free(lim);
    ck_assert_int_eq(siphash_key_parse(HASH_KEY, key), 0);
    snprintf(hex, sizeof hex, "%016" PRIx64, siphash13("user:u1", 7, key));
    c = rh_connect(&srv);
    r = redisCommand(c, "XRANGE " STREAM " - +");
    ck_assert_uint_eq(r->elements, 2);
    ck_assert_str_eq(field(r->element[0], "key"), hex);
    ck_assert_ptr_null(field(r->element[1], "key"));
    ck_assert_str_eq(field(r->element[1], "rule"), "e");
    freeReplyObject(r);
    redisFree(c);
    rh_stop(&srv);
}
END_TEST

#define BURST 2000

/* The server hangs: the sender waits on a batch, the ring (64 cells)
 * fills, the rest is dropped and counted; once it is back, every event is
 * in the stream or counted lost. */
START_TEST(ring_full_drops_counted)
{
    rh_server srv;
    char uri[256], user[32];
    rl_limiter *lim;
    double sent;

    ck_assert_int_eq(rh_start(&srv, NULL), 0);
    lim = events_limiter(rh_uri(&srv, uri, sizeof uri), "plain", "64");
    check(lim, "/e", "warm");
    check(lim, "/e", "warm");
    check(lim, "/e", "warm"); /* one event: the sender is connected */
    settle(lim, 1);
    ck_assert_int_eq(rh_pause(&srv), 0);
    for (int i = 0; i < BURST; i++) {
        snprintf(user, sizeof user, "u%d", i % 10);
        check(lim, "/l", user); /* limit 1: all but 10 would be denied */
    }
    ck_assert(metric(lim, "ratelimit_events_dropped_total"
                          "{reason=\"ring_full\"}") > 0);
    ck_assert_int_eq(rh_resume(&srv), 0);
    settle(lim, 1 + BURST - 10);
    sent = metric(lim, "ratelimit_events_sent_total");
    ck_assert_int_eq(xlen(&srv), (long long)sent);
    rl_limiter_free(lim);
    rh_stop(&srv);
}
END_TEST

START_TEST(redis_away_counted)
{
    rh_server srv;
    char uri[256];
    rl_limiter *lim;

    ck_assert_int_eq(rh_start(&srv, NULL), 0);
    lim = events_limiter(rh_uri(&srv, uri, sizeof uri), "plain", NULL);
    ck_assert_int_eq(rh_kill(&srv), 0);
    for (int i = 0; i < 12; i++)
        check(lim, "/e", "u1");
    settle(lim, 10);
    ck_assert(metric(lim, "ratelimit_events_sent_total") == 0);
    ck_assert(metric(lim, "ratelimit_events_dropped_total"
                          "{reason=\"redis_away\"}") == 10);
    rl_limiter_free(lim);
    rh_stop(&srv);
}
END_TEST

/* events_sample 4: of 12 denials from one thread, 3 become entries. */
START_TEST(sampled)
{
    rh_server srv;
    char uri[256];
    rl_limiter *lim;

    ck_assert_int_eq(rh_start(&srv, NULL), 0);
    lim = events_limiter_sampled(rh_uri(&srv, uri, sizeof uri), "none", NULL,
                                 "4");
    for (int i = 0; i < 14; i++) /* 2 pass, 12 denied */
        check(lim, "/e", "u1");
    settle(lim, 3);
    ck_assert_int_eq(xlen(&srv), 3);
    ck_assert(lost(lim) == 0);
    rl_limiter_free(lim);
    rh_stop(&srv);
}
END_TEST

START_TEST(bad_options)
{
    rl_config *cfg = rl_config_new();

    ck_assert_int_eq(rl_config_set(cfg, "events_redis", "rediss://h:1"),
                     RL_EOPTION);
    ck_assert_int_eq(rl_config_set(cfg, "events_redis", "http://h"),
                     RL_EOPTION);
    ck_assert_int_eq(rl_config_set(cfg, "events_ring", "63"), RL_EOPTION);
    ck_assert_int_eq(rl_config_set(cfg, "events_maxlen", "0"), RL_EOPTION);
    ck_assert_int_eq(rl_config_set(cfg, "events_stream", "a b"), RL_EOPTION);
    ck_assert_int_eq(rl_config_set(cfg, "events_stream", ""), RL_EOPTION);
    ck_assert_int_eq(rl_config_set(cfg, "events_key", "raw"), RL_EOPTION);
    ck_assert_int_eq(rl_config_set(cfg, "events_sample", "0"), RL_EOPTION);
    rl_config_free(cfg);
}
END_TEST

static Suite *events_suite(void)
{
    Suite *s = suite_create("events");
    TCase *tc = tcase_create("redis");

    tcase_add_test(tc, bad_options);
    if (rh_available()) {
        tcase_add_test(tc, denials_become_entries);
        tcase_add_test(tc, key_hashed_or_left_out);
        tcase_add_test(tc, ring_full_drops_counted);
        tcase_add_test(tc, redis_away_counted);
        tcase_add_test(tc, sampled);
    }
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(events_suite());
}
