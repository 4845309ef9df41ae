/*
 * check_denycache.c -- the deny cache (option deny_cache, issue 11) on a
 * real redis-server: a client Redis denied is answered locally until its
 * denial ends, with the result Redis gives (remaining 0, the rule's limit
 * and reset, Retry-After counted down, RL_FLAG_CACHED), and Redis is not
 * asked meanwhile (INFO commandstats: EVALSHA calls); it is admitted again
 * at the end; a rule changed by a new rule set drops its denials; a larger
 * cost is not answered by a smaller one's denial; rules in mode log are
 * not cached; deny_cache 0 asks Redis every time; the rule's metrics count
 * the cached denials (rule_cached_total) beside Redis's.
 *
 * Redis decides by its own clock (TIME), so the figures Redis gives are
 * read from its answers and the cached ones compared with them; waits
 * poll for the outcome with a deadline, and the only bound on time is
 * the generous one on how late after its denial ends a client is let in.
 * At a cached denial's end Redis may still deny for a moment (its clock
 * is not ours): a few such denials are allowed, bounded (issue 27).  The
 * refill while a test's checks run is measured, not assumed, and the
 * tests not about a denial's end deny for a minute, so that a loaded
 * machine's stalls do not end it under them.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "limiter.h"
#include "ratelimit.h"
#include "redis_harness.h"
#include "testutil.h"
#include "timeutil.h"

#include <poll.h>
#include <pthread.h>
#include <time.h>

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SLACK_MS 2000
#else
#define SLACK_MS 250
#endif

#define WAIT_MS 5000 /* the longest a test waits for a denial's end */

static int64_t absdiff(int64_t a, int64_t b)
{
    return a > b ? a - b : b - a;
}

static rh_server srv;

static void srv_setup(void)
{
    ck_assert_int_eq(rh_start(&srv, NULL), 0);
}

static void srv_teardown(void)
{
    rh_stop(&srv);
}

/* A limiter on the suite's server (emptied first); deny_cache NULL: the
 * default. */
static rl_limiter *open_limiter(const char *deny_cache, const char *rules)
{
    char uri[1024];
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;
    redisContext *ctx = rh_connect(&srv);
    int rc;

    freeReplyObject(redisCommand(ctx, "FLUSHALL"));
    redisFree(ctx);

    rh_uri(&srv, uri, sizeof uri);
    ck_assert_int_eq(rl_config_set(cfg, "store", uri), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "timeout_ms", "2000"), RL_OK);
    if (deny_cache)
        ck_assert_int_eq(rl_config_set(cfg, "deny_cache", deny_cache),
                         RL_OK);
    rc = rl_limiter_new(&lim, cfg);
    rl_config_free(cfg);
    ck_assert_msg(rc == RL_OK, "rl_limiter_new: %s", rl_errmsg(NULL));
    rc = rl_rules_load_string(lim, rules);
    ck_assert_msg(rc == RL_OK, "rules: %s", rl_errmsg(lim));
    return lim;
}

/* The script's calls so far: EVALSHA, and FCALL (redis_functions). */
static long long evalsha_calls(void)
{
    long long evalsha = rh_cmdstat_calls(&srv, "evalsha"),
              fcall = rh_cmdstat_calls(&srv, "fcall");

    ck_assert(evalsha >= 0 && fcall >= 0);
    return evalsha + fcall;
}

static rl_result check_user(rl_limiter *lim, const char *user, int64_t cost)
{
    rl_request req = RL_REQUEST_INIT;
    rl_result res = RL_RESULT_INIT;

    req.user = user;
    req.cost = cost;
    ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
    return res;
}

/* The token buckets the tests deny on: 10 tokens, refilled one a second
 * (the abusive client's, whose denial the test waits out) or one a
 * minute (the others', whose denials must outlast a loaded machine's
 * stalls: their tests are about what is cached, not when it ends). */
#define TB_RULE(window) "[{\"rule_id\":\"tb\",\"dimension\":\"user\"," \
                        "\"algorithm\":\"token_bucket\",\"limit\":10," \
                        "\"window_seconds\":" #window "}]"
#define TB_FAST TB_RULE(10)
#define TB_SLOW TB_RULE(600)
#define FAST_TOKEN_MS 1000
#define SLOW_TOKEN_MS 60000

/* The client's 10 tokens spent, then one denial from Redis: retry about
 * token_ms (the time one token takes), less what the refill brought while
 * the checks ran (measured, not assumed: under load 10 round trips may
 * take most of a second).  Were they slower than a token, Redis admits
 * one more: at most one per token_ms passed.  Returns that denial;
 * *asked (if not NULL): the moment just before it was asked for, which
 * is no later than Redis decided it. */
static rl_result exhaust(rl_limiter *lim, const char *user, int64_t token_ms,
                         int64_t *asked)
{
    int64_t start = now_ms(), at;
    int extra = 0;
    rl_result r;

    for (int i = 0; i < 10; i++)
        ck_assert(check_user(lim, user, 1).allowed);
    for (;;) {
        at = now_ms();
        r = check_user(lim, user, 1);
        if (!r.allowed)
            break;
        extra++; /* a token refilled meanwhile: Redis's clock, ours +1 */
        ck_assert_msg(now_ms() - start + 1 >= extra * token_ms,
                      "admitted %d more after %lld ms", extra,
                      (long long)(now_ms() - start));
    }
    if (asked)
        *asked = at;
    ck_assert_int_eq(r.flags & RL_FLAG_CACHED, 0);
    ck_assert_int_ge(r.retry_after_ms, 1);
    ck_assert_int_le(r.retry_after_ms, token_ms);
    /* Redis's time from the first check to the denial is no more than
     * ours (each side's clock truncated to the ms: 2 ms) */
    if (!extra)
        ck_assert_int_ge(r.retry_after_ms,
                         token_ms - (now_ms() - start) - 2);
    return r;
}

/* At the end of a cached denial the library asks Redis again, and Redis,
 * whose clock decides, may still deny for a moment (the local monotonic
 * clock and Redis's TIME are not the same clock, each truncated to the
 * ms): a denial with no CACHED flag, right, and cached in its turn.  At
 * most BOUNDARY_DENIALS of them, each with a retry of at most BOUNDARY_MS
 * (issue 27). */
#define BOUNDARY_DENIALS 3
#define BOUNDARY_MS 50

/* The abusive client at full speed while denied: every answer is Redis's
 * denial counted down, Redis hears of none but the one that lets the
 * client in again when the denial ends (and the few boundary denials
 * above: <= 1 % of the checks in all), and that is right after its end. */
START_TEST(abusive_client_answered_locally)
{
    rl_limiter *lim = open_limiter(NULL, TB_FAST);
    rl_result first, last, r;
    long long before, admitted, checks = 0, calls, boundary = 0,
              boundary_ms = 0;
    int64_t t0, left;

    /* t0 no later than Redis's denial: the retry counts from there (the
     * reply's way back took 7 ms once under ASan) */
    first = exhaust(lim, "abuser", FAST_TOKEN_MS, &t0);
    last = first; /* the Redis denial the cache answers with */
    left = first.retry_after_ms;
    admitted = rule_metric(lim, "allowed_total", "tb"); /* 10, or more */
    before = evalsha_calls();
    for (;;) {
        r = check_user(lim, "abuser", 1);
        checks++;
        if (r.allowed)
            break;
        ck_assert_msg(now_ms() - t0 < WAIT_MS, "never admitted again");
        ck_assert_int_eq(r.remaining, 0);
        ck_assert_int_eq(r.limit, 10);
        ck_assert_int_eq(r.window, 10);
        ck_assert_str_eq(r.rule_id, "tb");
        ck_assert_int_ge(r.retry_after_ms, 1);
        ck_assert_int_eq(r.retry_after, (r.retry_after_ms + 999) / 1000);
        if (r.flags == 0) { /* Redis asked at the cached window's end */
            boundary++;
            boundary_ms += r.retry_after_ms;
            ck_assert_msg(boundary <= BOUNDARY_DENIALS,
                          "%lld Redis denials past the cached one", boundary);
            ck_assert_int_ge(now_ms() - t0, first.retry_after_ms - 1);
            ck_assert_int_le(r.retry_after_ms, BOUNDARY_MS);
            ck_assert_int_le(absdiff(r.reset_at_ms, first.reset_at_ms),
                             BOUNDARY_MS);
            last = r;
            left = r.retry_after_ms;
            continue;
        }
        ck_assert_int_eq(r.flags, RL_FLAG_CACHED);
        ck_assert_int_eq(r.reset_at_ms, last.reset_at_ms);
        ck_assert_int_le(r.retry_after_ms, left); /* counted down */
        left = r.retry_after_ms;
    }
    calls = evalsha_calls() - before;
    ck_assert_int_eq(r.flags, 0);                /* Redis admitted it  */
    ck_assert_int_ge(now_ms() - t0, first.retry_after_ms - 1);
    ck_assert_int_le(now_ms() - t0,
                     first.retry_after_ms + boundary_ms + SLACK_MS);
    ck_assert_int_eq(calls, 1 + boundary);
    ck_assert_msg(calls * 100 <= checks, "%lld Redis calls in %lld checks",
                  calls, checks);
    /* metrics: one more admitted by Redis; its denials (exhaust's and
     * the boundary ones) and the rest answered from the cache denied,
     * those counted as cached */
    ck_assert_int_eq(rule_metric(lim, "allowed_total", "tb"), admitted + 1);
    ck_assert_int_eq(rule_metric(lim, "denied_total", "tb"), checks);
    ck_assert_int_eq(rule_metric(lim, "cached_total", "tb"),
                     checks - 1 - boundary);
    /* another client was never touched */
    ck_assert(check_user(lim, "innocent", 1).allowed);
    rl_limiter_free(lim);
}
END_TEST

/* What Redis answers and what the cache answers are the same result. */
START_TEST(cached_result_equals_redis)
{
    rl_limiter *on = open_limiter(NULL, TB_SLOW);
    rl_limiter *off = open_limiter("0", TB_SLOW);
    rl_result a, b;
    int64_t t, span;

    /* both limiters share the client's state */
    exhaust(on, "same", SLOW_TOKEN_MS, NULL);
    for (int i = 0; i < 20; i++) {
        t = now_ms();
        a = check_user(on, "same", 1);
        b = check_user(off, "same", 1);
        span = now_ms() - t; /* Redis decided b within it */
        ck_assert_int_eq(a.flags, RL_FLAG_CACHED);
        ck_assert_int_eq(b.flags, 0);
        ck_assert_int_eq(a.allowed, b.allowed);
        ck_assert_int_eq(a.remaining, b.remaining);
        ck_assert_int_eq(a.limit, b.limit);
        /* a is up to one round trip later, and b up to span after a */
        ck_assert_int_le(absdiff(a.retry_after_ms, b.retry_after_ms),
                         SLACK_MS + span);
        ck_assert_int_le(absdiff(a.reset_at_ms, b.reset_at_ms), SLACK_MS);
        ck_assert_int_eq(a.window, b.window);
        ck_assert_str_eq(a.rule_id, b.rule_id);
    }
    rl_limiter_free(on);
    rl_limiter_free(off);
}
END_TEST

#define FW(limit) "[{\"rule_id\":\"fw\",\"dimension\":\"user\"," \
                  "\"algorithm\":\"fixed_window\",\"limit\":" #limit "," \
                  "\"window_seconds\":3600}"

/* A rule changed by a new rule set drops its denials: a raised limit
 * admits at once (a fixed window: the count is kept, the limit is
 * higher); a token bucket's raised rate is asked of Redis, which answers
 * with the new numbers.  An unchanged rule keeps its denials across a
 * swap. */
START_TEST(rule_change_drops_denials)
{
    rl_limiter *lim = open_limiter(NULL, FW(10) "]");
    rl_result r;
    long long before;

    for (int i = 0; i < 10; i++)
        ck_assert(check_user(lim, "u", 1).allowed);
    ck_assert(!check_user(lim, "u", 1).allowed);
    ck_assert_int_eq(rl_rules_load_string(lim, FW(10) ",{\"rule_id\":"
                     "\"other\",\"dimension\":\"ip\",\"limit\":5,"
                     "\"window_seconds\":10}]"), RL_OK);
    before = evalsha_calls();
    r = check_user(lim, "u", 1);
    ck_assert(!r.allowed);
    ck_assert_int_eq(r.flags, RL_FLAG_CACHED);
    ck_assert_int_eq(evalsha_calls() - before, 0);
    ck_assert_int_eq(rl_rules_load_string(lim, FW(20) "]"), RL_OK);
    r = check_user(lim, "u", 1);
    ck_assert_msg(r.allowed, "a raised limit must admit at once");
    ck_assert_int_eq(r.flags, 0);
    ck_assert_int_eq(r.limit, 20);
    rl_limiter_free(lim);

    lim = open_limiter(NULL, TB_SLOW);
    exhaust(lim, "t", SLOW_TOKEN_MS, NULL);
    ck_assert_int_eq(check_user(lim, "t", 1).flags, RL_FLAG_CACHED);
    ck_assert_int_eq(rl_rules_load_string(lim, "[{\"rule_id\":\"tb\","
                     "\"dimension\":\"user\",\"algorithm\":"
                     "\"token_bucket\",\"limit\":20,"
                     "\"window_seconds\":600}]"), RL_OK);
    before = evalsha_calls();
    r = check_user(lim, "t", 1);
    ck_assert_int_eq(r.flags, 0);
    ck_assert_int_eq(r.limit, 20);
    /* a token each 30 s, not the old rule's 60 s */
    ck_assert_int_le(r.retry_after_ms, SLOW_TOKEN_MS / 2);
    ck_assert_int_eq(evalsha_calls() - before, 1);
    rl_limiter_free(lim);
}
END_TEST

/* deny_cache 0: every check goes to Redis, none is flagged. */
START_TEST(off_asks_redis_every_time)
{
    rl_limiter *lim = open_limiter("0", TB_SLOW);
    long long before;

    exhaust(lim, "u", SLOW_TOKEN_MS, NULL);
    before = evalsha_calls();
    for (int i = 0; i < 200; i++) {
        rl_result r = check_user(lim, "u", 1);
        ck_assert(!r.allowed);
        ck_assert_int_eq(r.flags, 0);
    }
    ck_assert_int_eq(evalsha_calls() - before, 200);
    rl_limiter_free(lim);
}
END_TEST

/* A denial answers only costs at least as large as the one denied; a
 * cost of 0 (a look) always goes to Redis. */
START_TEST(smaller_cost_asks_redis)
{
    rl_limiter *lim = open_limiter(NULL, TB_SLOW);
    rl_result r;
    int64_t start = now_ms(), asked, denied;

    for (int i = 0; i < 8; i++)
        ck_assert(check_user(lim, "c", 1).allowed);
    asked = now_ms();
    r = check_user(lim, "c", 5); /* 2 left: denied for about 3 tokens */
    ck_assert(!r.allowed);
    ck_assert_int_eq(r.flags, 0);
    /* less the refill while the checks ran (2 ms: the clocks' ms) */
    ck_assert_int_ge(r.retry_after_ms,
                     3 * SLOW_TOKEN_MS - (now_ms() - start) - 2);
    ck_assert_int_le(r.retry_after_ms, 3 * SLOW_TOKEN_MS);
    denied = r.retry_after_ms;
    r = check_user(lim, "c", 6);
    ck_assert_int_eq(r.flags, RL_FLAG_CACHED);
    /* the cached denial counted down from the moment it was asked for */
    ck_assert_int_ge(r.retry_after_ms, denied - (now_ms() - asked) - 1);
    r = check_user(lim, "c", 1); /* fits: Redis admits it */
    ck_assert(r.allowed);
    ck_assert_int_eq(r.flags, 0);
    r = check_user(lim, "c", 0);
    ck_assert_int_eq(r.flags & RL_FLAG_CACHED, 0);
    rl_limiter_free(lim);
}
END_TEST

/* Rules in mode log never deny, so nothing of theirs is cached. */
START_TEST(log_rules_not_cached)
{
    rl_limiter *lim = open_limiter(NULL, "[{\"rule_id\":\"tb\","
                                   "\"dimension\":\"user\",\"algorithm\":"
                                   "\"token_bucket\",\"limit\":2,"
                                   "\"window_seconds\":10,\"mode\":\"log\"}]");
    long long before;

    for (int i = 0; i < 3; i++)
        check_user(lim, "l", 1);
    before = evalsha_calls();
    for (int i = 0; i < 50; i++) {
        rl_result r = check_user(lim, "l", 1);
        ck_assert(r.allowed);
        ck_assert_int_eq(r.flags, RL_FLAG_SOFT);
    }
    ck_assert_int_eq(evalsha_calls() - before, 50);
    rl_limiter_free(lim);
}
END_TEST

/* rl_allow and rl_check_many answer from the cache too. */
START_TEST(allow_and_many_use_it)
{
    rl_limiter *lim = open_limiter(NULL, TB_SLOW);
    rl_request reqs[4];
    rl_result res[4], one = RL_RESULT_INIT;
    int codes[4];
    const char *users[4] = {"m", "fresh1", "m", "fresh2"};
    long long before;

    exhaust(lim, "m", SLOW_TOKEN_MS, NULL);
    before = evalsha_calls();
    ck_assert_int_eq(rl_allow(lim, "user:m", "tb", 1, &one), RL_OK);
    ck_assert(!one.allowed);
    ck_assert_int_eq(one.flags, RL_FLAG_CACHED);
    ck_assert_int_eq(evalsha_calls() - before, 0);
    for (int i = 0; i < 4; i++) {
        reqs[i] = (rl_request)RL_REQUEST_INIT;
        reqs[i].user = users[i];
        reqs[i].cost = 1;
        res[i] = (rl_result)RL_RESULT_INIT;
    }
    ck_assert_int_eq(rl_check_many(lim, reqs, res, codes, 4), RL_OK);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(codes[i], RL_OK);
        ck_assert_int_eq(res[i].allowed, i % 2);
        ck_assert_int_eq(res[i].flags, i % 2 ? 0 : RL_FLAG_CACHED);
    }
    rl_limiter_free(lim);
}
END_TEST

/* rl_check_start: a cached denial is settled at once (queued, called back
 * from rl_async_process like any other) without Redis. */
static void async_done(rl_async_check *chk, int rc)
{
    *(int *)chk->data = rc == RL_OK ? 1 : -1;
}

static rl_result check_async(rl_async *a, const char *user)
{
    rl_request req = RL_REQUEST_INIT;
    rl_result res = RL_RESULT_INIT;
    rl_async_check chk = RL_ASYNC_CHECK_INIT;
    int done = 0;
    int64_t t0 = now_ms();

    req.user = user;
    req.cost = 1;
    chk.cb = async_done;
    chk.data = &done;
    chk.result = &res;
    ck_assert_int_eq(rl_check_start(a, &req, &chk), RL_OK);
    while (!done) {
        struct pollfd p = {.fd = rl_async_fd(a), .events = POLLIN};
        poll(&p, 1, 50);
        rl_async_process(a);
        ck_assert_msg(now_ms() - t0 < WAIT_MS, "no callback");
    }
    ck_assert_int_eq(done, 1);
    return res;
}

START_TEST(async_uses_it)
{
    rl_limiter *lim = open_limiter(NULL, TB_SLOW);
    rl_async *a = NULL;
    rl_result r;
    long long before;

    ck_assert_int_eq(rl_async_new(lim, 16, &a), RL_OK);
    for (int i = 0; i < 10; i++)
        ck_assert(check_async(a, "as").allowed);
    r = check_async(a, "as");
    ck_assert(!r.allowed);
    ck_assert_int_eq(r.flags, 0);
    before = evalsha_calls();
    for (int i = 0; i < 100; i++) {
        r = check_async(a, "as");
        ck_assert(!r.allowed);
        ck_assert_int_eq(r.flags, RL_FLAG_CACHED);
    }
    ck_assert_int_eq(evalsha_calls() - before, 0);
    rl_async_free(a);
    rl_limiter_free(lim);
}
END_TEST

/* Threads at once on the table: two abusive clients read and rewrite
 * their slots while others are admitted on keys of their own; every
 * answer is whole (a cached one is a denial of its own rule with a
 * retry no longer than a second), for TSan and ASan to watch. */
#define THREADS 4

typedef struct hammer {
    rl_limiter *lim;
    int id;
    long long cached, admitted;
} hammer;

static void *hammer_run(void *arg)
{
    hammer *h = arg;
    char user[32];
    rl_request req = RL_REQUEST_INIT;

    snprintf(user, sizeof user, "abuser%d", h->id % 2);
    req.user = user;
    req.cost = 1;
    for (int i = 0; i < 3000; i++) {
        rl_result res = RL_RESULT_INIT;
        if (h->id >= 2 && i % 2) { /* an innocent one now and then */
            snprintf(user, sizeof user, "fresh%d-%d", h->id, i);
        } else {
            snprintf(user, sizeof user, "abuser%d", h->id % 2);
        }
        if (rl_check(h->lim, &req, &res) != RL_OK)
            return "rl_check failed";
        if (res.flags & RL_FLAG_CACHED) {
            if (res.allowed || res.remaining != 0 || res.limit != 10 ||
                res.retry_after_ms < 1 || res.retry_after_ms > 1000 ||
                strcmp(res.rule_id, "tb") != 0)
                return "a torn cached answer";
            h->cached++;
        }
        h->admitted += res.allowed != 0;
    }
    return NULL;
}

START_TEST(threads_share_the_table)
{
    rl_limiter *lim = open_limiter("64", "[{\"rule_id\":\"tb\","
                                   "\"dimension\":\"user\",\"algorithm\":"
                                   "\"token_bucket\",\"limit\":10,"
                                   "\"window_seconds\":10}]");
    pthread_t t[THREADS];
    hammer h[THREADS];
    long long cached = 0;

    for (int i = 0; i < THREADS; i++) {
        h[i] = (hammer){.lim = lim, .id = i};
        ck_assert_int_eq(pthread_create(&t[i], NULL, hammer_run, &h[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        void *err;
        pthread_join(t[i], &err);
        ck_assert_msg(err == NULL, "thread %d: %s", i, (const char *)err);
        cached += h[i].cached;
    }
    ck_assert_int_gt(cached, 0);
    rl_limiter_free(lim);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("denycache");
    TCase *tc = tcase_create("redis");

    if (!rh_available()) {
        fprintf(stderr, "check_denycache: no redis-server, skipped\n");
        return 77;
    }
    tcase_add_unchecked_fixture(tc, srv_setup, srv_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, abusive_client_answered_locally);
    tcase_add_test(tc, cached_result_equals_redis);
    tcase_add_test(tc, rule_change_drops_denials);
    tcase_add_test(tc, off_asks_redis_every_time);
    tcase_add_test(tc, smaller_cost_asks_redis);
    tcase_add_test(tc, log_rules_not_cached);
    tcase_add_test(tc, allow_and_many_use_it);
    tcase_add_test(tc, async_uses_it);
    tcase_add_test(tc, threads_share_the_table);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
