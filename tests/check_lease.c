/*
 * check_lease.c -- leases for very high limits (a rule's "lease", issue
 * 11) on a real redis-server: 8 limiters (threads, each its own
 * rl_limiter) spend one client's limit together and admit within the
 * documented bound of it (a fixed window never above the limit, the
 * others at most 8 x (lease - 1) above), with at most one script call per
 * lease's worth of checks (INFO commandstats); the units a limiter holds
 * go back to Redis at rl_limiter_free() (Redis's count then equals what
 * was admitted) and when its rule changes; a grant keeps serving while
 * Redis is away, the failure mode deciding after it; memory:// accepts
 * the field and ignores it; bad lease values are refused with a message;
 * the metrics count what leases answered.
 *
 * Redis decides by its own clock, so a test that must stay inside one
 * window waits, when the window is about to end, for the next one (the
 * windows are an hour long: rarely).
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ratelimit.h"
#include "redis_harness.h"
#include "rule.h"
#include "rule_json.h"
#include "testutil.h"
#include "timeutil.h"

#define FLEET 8           /* limiters spending one client's limit      */
#define LIMIT 100000      /* per window                                */
#define LEASE 1000        /* units per lease                           */
#define WAIT_MS 5000      /* the longest a test polls for an outcome   */

static rh_server srv;

static void srv_setup(void)
{
    ck_assert_int_eq(rh_start(&srv, NULL), 0);
}

static void srv_teardown(void)
{
    rh_stop(&srv);
}

/* Less than 20 s left in the current window of `window_s`: wait for the
 * next one, so a test's checks all fall in one window. */
static void inside_one_window(int64_t window_s)
{
    int64_t w = window_s * 1000, left = w - real_ms() % w;

    if (left < 20000)
        usleep((useconds_t)(left + 100) * 1000);
}

static void flush(void)
{
    redisContext *ctx = rh_connect(&srv);

    freeReplyObject(redisCommand(ctx, "FLUSHALL"));
    freeReplyObject(redisCommand(ctx, "CONFIG RESETSTAT"));
    redisFree(ctx);
}

/* A limiter on the suite's server (or on `store` if not NULL). */
static rl_limiter *open_on(const char *store, const char *rules,
                           const char *failure_timeout_ms)
{
    char uri[1024];
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;
    int rc;

    ck_assert_int_eq(rl_config_set(cfg, "store", store ? store
                                   : rh_uri(&srv, uri, sizeof uri)), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "timeout_ms",
                                   failure_timeout_ms ? failure_timeout_ms
                                                      : "2000"), RL_OK);
    if (failure_timeout_ms)
        ck_assert_int_eq(rl_config_set(cfg, "breaker_failures", "1000"),
                         RL_OK);
    rc = rl_limiter_new(&lim, cfg);
    rl_config_free(cfg);
    ck_assert_msg(rc == RL_OK, "rl_limiter_new: %s", rl_errmsg(NULL));
    rc = rl_rules_load_string(lim, rules);
    ck_assert_msg(rc == RL_OK, "rules: %s", rl_errmsg(lim));
    return lim;
}

/* Calls of `cmd` so far (INFO commandstats). */
static long long calls_of(const char *cmd)
{
    long long n = rh_cmdstat_calls(&srv, cmd);

    ck_assert_int_ge(n, 0);
    return n;
}

/* Script calls so far: EVALSHA and EVAL. */
static long long script_calls(void)
{
    return calls_of("evalsha") + calls_of("eval");
}

/* An integer key's value in Redis (0: none). */
static long long redis_int(const char *key)
{
    redisContext *ctx = rh_connect(&srv);
    redisReply *rep = redisCommand(ctx, "GET %s", key);
    long long v = rep->type == REDIS_REPLY_STRING ? atoll(rep->str) : 0;

    freeReplyObject(rep);
    redisFree(ctx);
    return v;
}

/* Poll until the key holds `want`; its last value. */
static long long redis_int_becomes(const char *key, long long want)
{
    int64_t t0 = now_ms();
    long long v;

    while ((v = redis_int(key)) != want && now_ms() - t0 < WAIT_MS)
        usleep(2000);
    return v;
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

/* ---- the fleet ---------------------------------------------------------- */

typedef struct member {
    rl_limiter *lim;
    int64_t limit;            /* the rule's, as results must say */
    long long admitted, checks, leased;
    const char *err;
} member;

/* Check the partner's requests until the first denial. */
static void *spend(void *arg)
{
    member *m = arg;
    rl_request req = RL_REQUEST_INIT;

    req.user = "partner";
    req.cost = 1;
    for (;;) {
        rl_result res = RL_RESULT_INIT;
        if (rl_check(m->lim, &req, &res) != RL_OK) {
            m->err = "rl_check failed";
            break;
        }
        m->checks++;
        if (!res.allowed)
            break;
        m->admitted++;
        m->leased += (res.flags & RL_FLAG_LEASED) != 0;
        if (res.remaining < 0 || res.limit != m->limit) {
            m->err = "a bad result";
            break;
        }
    }
    return NULL;
}

static const char *const algos[] = {"fixed_window", "sliding_window",
                                    "token_bucket"};

/* FLEET limiters spend the partner's LIMIT per hour (a day for the
 * bucket: it refills slowly) with leases of LEASE: admitted within the
 * bound, one script call per lease's worth of checks at most, and the
 * unspent units back in Redis once the limiters are freed. */
START_TEST(fleet_admits_within_the_bound)
{
    const char *algo = algos[_i];
    int bucket = _i == 2;
    int64_t window = bucket ? 86400 : 3600, t0;
    char rules[512], key[128];
    member m[FLEET] = {{0}};
    pthread_t t[FLEET];
    long long admitted = 0, checks = 0, leased = 0, calls, refill;

    snprintf(rules, sizeof rules, "[{\"rule_id\":\"partner\",\"dimension\":"
             "\"user\",\"algorithm\":\"%s\",\"limit\":%d,\"window_seconds\":"
             "%lld,\"lease\":%d}]", algo, LIMIT, (long long)window, LEASE);
    inside_one_window(window);
    flush();
    for (int i = 0; i < FLEET; i++) {
        m[i].lim = open_on(NULL, rules, NULL);
        m[i].limit = LIMIT;
    }
    calls = script_calls();
    t0 = now_ms();
    for (int i = 0; i < FLEET; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, spend, &m[i]), 0);
    for (int i = 0; i < FLEET; i++) {
        pthread_join(t[i], NULL);
        ck_assert_msg(m[i].err == NULL, "limiter %d: %s", i, m[i].err);
        admitted += m[i].admitted;
        checks += m[i].checks;
        leased += m[i].leased;
    }
    calls = script_calls() - calls;
    /* a bucket refills a little meanwhile: LIMIT per day */
    refill = bucket ? (now_ms() - t0) * LIMIT / (window * 1000) + 1 : 0;
    fprintf(stderr, "%s: %lld admitted of %d (bound %d), %lld checks, "
            "%lld leased, %lld script calls (%.5f per check)\n", algo,
            admitted, LIMIT, FLEET * (LEASE - 1), checks, leased, calls,
            (double)calls / (double)checks);
    if (_i == 0) /* a fixed window: never above, at most the bound below */
        ck_assert_int_le(admitted, LIMIT);
    else
        ck_assert_int_le(admitted, LIMIT + FLEET * (LEASE - 1) + refill);
    ck_assert_int_ge(admitted, LIMIT - FLEET * (LEASE - 1));
    /* a call per lease, a few partial ones at the end, a denial each */
    ck_assert_int_le(calls, LIMIT / LEASE + refill + 4 * FLEET);
    ck_assert_msg(calls * 100 <= checks, "%lld calls for %lld checks", calls,
                  checks);
    for (int i = 0; i < FLEET; i++)
        rl_limiter_free(m[i].lim);
    if (_i == 0) { /* what the limiters held went back: Redis counts only
                      what they admitted */
        snprintf(key, sizeof key, "rl:{user:partner}:partner:f%lld",
                 (long long)window);
        ck_assert_int_eq(redis_int(key), admitted);
    }
}
END_TEST

/* Threads of one limiter share its grant: two that miss at once both
 * lease, and the second's units go back at once instead of being added
 * (a limiter holds at most lease - 1 per pair); never over the limit,
 * under it by at most threads x (lease - 1) (units given back while the
 * limit looked spent to a thread denied meanwhile), and Redis counts
 * exactly what was admitted once the limiter is freed. */
START_TEST(threads_share_one_limiters_grant)
{
    member m[4] = {{0}};
    pthread_t t[4];
    long long admitted = 0;
    rl_limiter *lim;

    inside_one_window(3600);
    flush();
    lim = open_on(NULL, "[{\"rule_id\":\"fw\",\"dimension\":\"user\","
                  "\"algorithm\":\"fixed_window\",\"limit\":20000,"
                  "\"window_seconds\":3600,\"lease\":100}]", NULL);
    for (int i = 0; i < 4; i++) {
        m[i].lim = lim;
        m[i].limit = 20000;
        ck_assert_int_eq(pthread_create(&t[i], NULL, spend, &m[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        ck_assert_msg(m[i].err == NULL, "thread %d: %s", i, m[i].err);
        admitted += m[i].admitted;
    }
    ck_assert_int_le(admitted, 20000);
    ck_assert_int_ge(admitted, 20000 - 4 * 99);
    rl_limiter_free(lim);
    ck_assert_int_eq(redis_int("rl:{user:partner}:fw:f3600"), admitted);
}
END_TEST

/* One limiter: the first check charges a lease in Redis, the next ones
 * are answered from it without a call (RL_FLAG_LEASED, remaining as
 * Redis said plus what is held), a cost above what is held goes to
 * Redis, and rl_limiter_free() gives back what is left. */
START_TEST(lease_spent_locally_and_given_back)
{
    rl_limiter *lim;
    rl_result r;
    long long calls;
    const char *key = "rl:{user:p}:fw:f3600";

    inside_one_window(3600);
    flush();
    lim = open_on(NULL, "[{\"rule_id\":\"fw\",\"dimension\":\"user\","
                  "\"algorithm\":\"fixed_window\",\"limit\":1000,"
                  "\"window_seconds\":3600,\"lease\":100}]", NULL);
    r = check_user(lim, "p", 1);
    ck_assert(r.allowed);
    ck_assert_int_eq(r.flags, 0);
    ck_assert_int_eq(r.remaining, 999); /* 900 in Redis + 99 held */
    ck_assert_int_eq(redis_int(key), 100);
    calls = script_calls();
    for (int i = 0; i < 99; i++) {
        r = check_user(lim, "p", 1);
        ck_assert(r.allowed);
        ck_assert_int_eq(r.flags, RL_FLAG_LEASED);
        ck_assert_int_eq(r.remaining, 900 + 98 - i);
        ck_assert_int_eq(r.limit, 1000);
        ck_assert_str_eq(r.rule_id, "fw");
    }
    ck_assert_int_eq(script_calls() - calls, 0);
    ck_assert_int_eq(rule_metric(lim, "leased_total", "fw"), 99);
    ck_assert_int_eq(rule_metric(lim, "allowed_total", "fw"), 100);
    r = check_user(lim, "p", 1); /* the grant is spent: a new lease */
    ck_assert_int_eq(r.flags, 0);
    ck_assert_int_eq(redis_int(key), 200);
    r = check_user(lim, "p", 150); /* more than held: charged plainly */
    ck_assert(r.allowed);
    ck_assert_int_eq(r.flags, 0);
    ck_assert_int_eq(redis_int(key), 350);
    r = check_user(lim, "p", 5);
    ck_assert_int_eq(r.flags, RL_FLAG_LEASED);
    rl_limiter_free(lim); /* 99 - 5 held go back */
    ck_assert_int_eq(redis_int(key), 256);
}
END_TEST

/* The last units: a lease takes what is left (at least the cost), and a
 * cost above what is left is denied as without leases. */
START_TEST(lease_takes_what_is_left)
{
    rl_limiter *lim, *other;
    rl_result r;
    const char *key = "rl:{user:p}:fw:f3600";

    inside_one_window(3600);
    flush();
    lim = open_on(NULL, "[{\"rule_id\":\"fw\",\"dimension\":\"user\","
                  "\"algorithm\":\"fixed_window\",\"limit\":100,"
                  "\"window_seconds\":3600,\"lease\":40}]", NULL);
    other = open_on(NULL, "[{\"rule_id\":\"fw\",\"dimension\":\"user\","
                    "\"algorithm\":\"fixed_window\",\"limit\":100,"
                    "\"window_seconds\":3600,\"lease\":40}]", NULL);
    ck_assert(check_user(other, "p", 1).allowed); /* 40 */
    ck_assert(check_user(lim, "p", 1).allowed);   /* 80 */
    ck_assert_int_eq(redis_int(key), 80);
    for (int i = 0; i < 39; i++)
        ck_assert(check_user(lim, "p", 1).allowed);
    r = check_user(lim, "p", 1); /* 20 left: all of them */
    ck_assert(r.allowed);
    ck_assert_int_eq(redis_int(key), 100);
    r = check_user(lim, "p", 25); /* 19 held: to Redis, which denies */
    ck_assert(!r.allowed);
    ck_assert_int_eq(redis_int(key), 100);
    for (int i = 0; i < 19; i++)
        ck_assert_int_eq(check_user(lim, "p", 1).flags, RL_FLAG_LEASED);
    ck_assert(!check_user(lim, "p", 1).allowed);
    rl_limiter_free(lim);
    rl_limiter_free(other); /* its 39 go back */
    ck_assert_int_eq(redis_int(key), 61);
}
END_TEST

/* A new rule set that changes the rule (its lease, or its numbers) drops
 * the grants taken under the old one: their units go back to Redis and
 * the next check asks Redis. */
START_TEST(rule_change_drops_grants)
{
    rl_limiter *lim;
    const char *key = "rl:{user:p}:fw:f3600";

    inside_one_window(3600);
    flush();
    lim = open_on(NULL, "{\"version\":1,\"rules\":[{\"rule_id\":\"fw\","
                  "\"dimension\":\"user\",\"algorithm\":\"fixed_window\","
                  "\"limit\":1000,\"window_seconds\":3600,\"lease\":100}]}",
                  NULL);
    ck_assert(check_user(lim, "p", 1).allowed);
    ck_assert_int_eq(check_user(lim, "p", 1).flags, RL_FLAG_LEASED);
    ck_assert_int_eq(redis_int(key), 100);
    ck_assert_int_eq(rl_rules_load_string(lim, "{\"version\":2,\"rules\":"
                     "[{\"rule_id\":\"fw\",\"dimension\":\"user\","
                     "\"algorithm\":\"fixed_window\",\"limit\":1000,"
                     "\"window_seconds\":3600,\"lease\":50}]}"), RL_OK);
    ck_assert_int_eq(redis_int_becomes(key, 2), 2); /* 98 given back */
    ck_assert_int_eq(check_user(lim, "p", 1).flags, 0); /* Redis asked */
    ck_assert_int_eq(redis_int(key), 52);
    /* the rule leaves the set: its grant goes back too */
    ck_assert_int_eq(rl_rules_load_string(lim, "{\"version\":3,\"rules\":"
                     "[{\"rule_id\":\"other\",\"dimension\":\"user\","
                     "\"limit\":10,\"window_seconds\":60}]}"), RL_OK);
    ck_assert_int_eq(redis_int_becomes(key, 3), 3);
    rl_limiter_free(lim);
    ck_assert_int_eq(redis_int(key), 3);
}
END_TEST

/* Every algorithm, in both Redis layouts: a limiter that spent 3 of a
 * lease of 100 gives the other 97 back at rl_limiter_free(), so the next
 * limiter's first check sees 996 of 1000 left. */
START_TEST(given_back_in_every_algorithm_and_layout)
{
    static const char *const names[] = {"fixed_window", "sliding_window",
                                        "token_bucket", "gcra"};
    const char *layout = _i & 1 ? "compact" : "plain";
    char rules[300], uri[1024];
    rl_limiter *lim;
    rl_config *cfg;
    rl_result r;

    snprintf(rules, sizeof rules, "[{\"rule_id\":\"x\",\"dimension\":"
             "\"user\",\"algorithm\":\"%s\",\"limit\":1000,"
             "\"window_seconds\":3600,\"lease\":100}]", names[_i / 2]);
    inside_one_window(3600);
    flush();
    for (int round = 0; round < 2; round++) {
        cfg = rl_config_new();
        ck_assert_int_eq(rl_config_set(cfg, "store",
                                       rh_uri(&srv, uri, sizeof uri)), RL_OK);
        ck_assert_int_eq(rl_config_set(cfg, "redis_layout", layout), RL_OK);
        ck_assert_int_eq(rl_config_set(cfg, "timeout_ms", "2000"), RL_OK);
        ck_assert_int_eq(rl_config_set(cfg, "rules", rules), RL_OK);
        ck_assert_int_eq(rl_limiter_new(&lim, cfg), RL_OK);
        rl_config_free(cfg);
        for (int i = 0; i < (round ? 1 : 3); i++) {
            r = check_user(lim, "u", 1);
            ck_assert(r.allowed);
            ck_assert_int_eq(r.flags, i ? RL_FLAG_LEASED : 0);
            ck_assert_msg(r.remaining == (round ? 996 : 999 - i),
                          "%s %s round %d check %d: remaining %lld",
                          names[_i / 2], layout, round, i,
                          (long long)r.remaining);
        }
        rl_limiter_free(lim);
    }
}
END_TEST

/* Redis away (stopped): the grant held keeps serving; then the rule's
 * failure mode (closed) decides. */
START_TEST(grant_serves_while_redis_is_away)
{
    rl_limiter *lim;
    rl_result r;

    inside_one_window(3600);
    flush();
    lim = open_on(NULL, "[{\"rule_id\":\"fw\",\"dimension\":\"user\","
                  "\"algorithm\":\"fixed_window\",\"limit\":1000,"
                  "\"window_seconds\":3600,\"lease\":100,"
                  "\"failure_mode\":\"closed\"}]", "200");
    ck_assert(check_user(lim, "p", 1).allowed);
    ck_assert_int_eq(rh_pause(&srv), 0);
    for (int i = 0; i < 99; i++) {
        r = check_user(lim, "p", 1);
        ck_assert(r.allowed);
        ck_assert_int_eq(r.flags, RL_FLAG_LEASED);
    }
    r = check_user(lim, "p", 1);
    ck_assert(!r.allowed);
    ck_assert_int_eq(r.flags, RL_FLAG_FAIL_CLOSED);
    ck_assert_int_eq(rh_resume(&srv), 0);
    rl_limiter_free(lim);
}
END_TEST

/* memory:// (and shm://) accept the field and ignore it: exact checks. */
START_TEST(memory_store_ignores_leases)
{
    rl_limiter *lim = open_on("memory://", "[{\"rule_id\":\"fw\","
                              "\"dimension\":\"user\",\"algorithm\":"
                              "\"fixed_window\",\"limit\":10,"
                              "\"window_seconds\":3600,\"lease\":5}]", NULL);
    rl_result r;

    for (int i = 0; i < 10; i++) {
        r = check_user(lim, "p", 1);
        ck_assert(r.allowed);
        ck_assert_int_eq(r.flags, 0);
        ck_assert_int_eq(r.remaining, 9 - i);
    }
    ck_assert(!check_user(lim, "p", 1).allowed);
    rl_limiter_free(lim);
}
END_TEST

/* Bad lease values are refused, each with its message. */
START_TEST(bad_leases_refused)
{
    static const struct {
        const char *rule, *msg;
    } bad[] = {
        {"\"limit\":100,\"lease\":1", "lease: must be 2..50 (at most half "
                                      "the limit), got 1"},
        {"\"limit\":100,\"lease\":51", "lease: must be 2..50 (at most half "
                                       "the limit), got 51"},
        {"\"limit\":100,\"lease\":0", "lease: must be 2..50"},
        {"\"limit\":100,\"lease\":-3", "lease: must be 2..50"},
        {"\"limit\":100,\"lease\":\"10\"", "lease: must be an integer"},
        {"\"limit\":100,\"algorithm\":\"token_bucket\",\"burst\":10,"
         "\"lease\":6", "lease: must be 2..5 (at most half the burst), "
                        "got 6"},
        {"\"limit\":100,\"mode\":\"log\",\"lease\":10",
         "lease: not with mode \"log\""},
    };
    rl_limiter *lim = open_on("memory://", "[]", NULL);

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char rules[512];
        snprintf(rules, sizeof rules, "[{\"rule_id\":\"r\",\"dimension\":"
                 "\"user\",\"window_seconds\":60,%s}]", bad[i].rule);
        ck_assert_int_eq(rl_rules_load_string(lim, rules), RL_ERULE);
        ck_assert_msg(strstr(rl_errmsg(lim), bad[i].msg) != NULL,
                      "%s: %s", bad[i].rule, rl_errmsg(lim));
    }
    ck_assert_int_eq(rl_rules_load_string(lim, "[{\"rule_id\":\"r\","
                     "\"dimension\":\"user\",\"window_seconds\":60,"
                     "\"limit\":100,\"lease\":50}]"), RL_OK);
    rl_limiter_free(lim);
}
END_TEST

/* The field round-trips through the canonical writer (rule_json.h):
 * written when set, absent when not. */
START_TEST(lease_round_trips)
{
    static const char *const src[] = {
        "{\"rule_id\":\"r\",\"dimension\":\"user\",\"limit\":100,"
        "\"window_seconds\":60,\"lease\":50}",
        "{\"rule_id\":\"r\",\"dimension\":\"user\",\"limit\":100,"
        "\"window_seconds\":60}"};

    for (int i = 0; i < 2; i++) {
        json_t *in = json_loads(src[i], 0, NULL), *out;
        rl_rule r;
        char err[256];

        ck_assert_ptr_nonnull(in);
        ck_assert_int_eq(rule_from_json(in, &r, err, sizeof err), 0);
        ck_assert_int_eq(r.lease, i ? 0 : 50);
        out = rule_to_json(&r);
        ck_assert_ptr_nonnull(out);
        if (i)
            ck_assert_ptr_null(json_object_get(out, "lease"));
        else
            ck_assert_int_eq(json_integer_value(json_object_get(out, "lease")),
                             50);
        json_decref(out);
        json_decref(in);
        rule_clear(&r);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("lease");
    TCase *tc = tcase_create("redis");

    if (!rh_available()) {
        fprintf(stderr, "check_lease: no redis-server, skipped\n");
        return 77;
    }
    tcase_add_unchecked_fixture(tc, srv_setup, srv_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, fleet_admits_within_the_bound, 0,
                        (int)(sizeof algos / sizeof algos[0]));
    tcase_add_test(tc, threads_share_one_limiters_grant);
    tcase_add_test(tc, lease_spent_locally_and_given_back);
    tcase_add_test(tc, lease_takes_what_is_left);
    tcase_add_test(tc, rule_change_drops_grants);
    tcase_add_loop_test(tc, given_back_in_every_algorithm_and_layout, 0, 8);
    tcase_add_test(tc, grant_serves_while_redis_is_away);
    tcase_add_test(tc, memory_store_ignores_leases);
    tcase_add_test(tc, bad_leases_refused);
    tcase_add_test(tc, lease_round_trips);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
