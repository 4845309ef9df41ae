/*
 * check_limiter_check.c -- what a limiter decides: rl_check's choice among
 * rules (the most restrictive, the longer wait, tiers, endpoints, absent
 * dimensions, mode "log", the all-or-nothing charge), rl_check_many
 * against rl_check on every algorithm, the fields of a result, readers
 * racing a loader (no check sees half a set, every thread counted
 * exactly), and the stats of decisions.  Apart from check_limiter.c (the
 * API's arguments, options, loading and messages) so that each suite is
 * one concern; limiter_fixture.h is what both share.
 */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "limiter_fixture.h"
#include "ratelimit.h"
#include "testutil.h"

/* ---- rl_check_many ------------------------------------------------------ */

/* "base" counts every request by user; "/wide" meets 30 more rules (w0..),
 * and tier "over" 3 more on top: 34, more than one request may match. */
static char *wide_rules(void)
{
    static char buf[16384];
    size_t at = 0;

    at += (size_t)snprintf(buf + at, sizeof buf - at,
                           "[" RULE("base", "user", 40, ""));
    for (int i = 0; i < 30; i++)
        at += (size_t)snprintf(buf + at, sizeof buf - at,
                               ",{\"rule_id\":\"w%d\",\"dimension\":\"%s\","
                               "\"limit\":%d,\"window_seconds\":60,"
                               "\"match\":{\"endpoint\":\"/wide\"}}",
                               i, i % 2 ? "ip" : "user", 3 + i);
    for (int i = 0; i < 3; i++)
        at += (size_t)snprintf(buf + at, sizeof buf - at,
                               ",{\"rule_id\":\"o%d\",\"dimension\":\"user\","
                               "\"limit\":9,\"window_seconds\":60,"
                               "\"match\":{\"endpoint\":\"/wide\","
                               "\"tier\":\"over\"}}", i);
    snprintf(buf + at, sizeof buf - at, "]");
    return buf;
}

/* 300 requests in one rl_check_many() call decide exactly as 300
 * rl_check() calls on a twin limiter: chunked by the 64-request bound and
 * by room for their charges (30 rules of 250-byte keys each), with one
 * request of 34 rules failing alone and no rule matching some. */
START_TEST(check_many_decides_as_check_does)
{
    rl_limiter *a = limiter_with(wide_rules()), *b = limiter_with(wide_rules());
    static rl_request req[300];
    static rl_result ra[300], rb[300];
    static int codes[300];
    static char user[8][251], ip[3][24];

    results_init(ra, 300);
    results_init(rb, 300);
    for (int u = 0; u < 8; u++) {
        memset(user[u], 'a' + u, 250);
        user[u][u < 4 ? 250 : 5] = '\0'; /* half of them 250 bytes long */
    }
    for (int i = 0; i < 3; i++)
        snprintf(ip[i], sizeof ip[i], "10.0.0.%d", i);
    for (int i = 0; i < 300; i++)
        req[i] = (rl_request){.size = sizeof(rl_request), .endpoint = i % 3 ? "/wide" : "/narrow",
                              .tier = i == 151 ? "over" : "free",
                              .user = i % 11 ? user[i % 8] : NULL,
                              .ip = ip[i % 3], .cost = i % 5 ? 1 : 2};
    ck_assert_int_eq(rl_check_many(a, req, ra, codes, 300), RL_ERULE);
    for (int i = 0; i < 300; i++) {
        int rc = rl_check(b, &req[i], &rb[i]);
        ck_assert_int_eq(codes[i], rc);
        if (rc != RL_OK)
            continue;
        ck_assert_int_eq(ra[i].allowed, rb[i].allowed);
        ck_assert_int_eq(ra[i].flags, rb[i].flags);
        ck_assert_int_eq(ra[i].remaining, rb[i].remaining);
        ck_assert_int_eq(ra[i].limit, rb[i].limit);
        ck_assert_int_eq(ra[i].retry_after, rb[i].retry_after);
        ck_assert_str_eq(ra[i].rule_id, rb[i].rule_id);
    }
    ck_assert_int_eq(codes[151], RL_ERULE);
    ck_assert_int_eq(codes[0], RL_OK);
    ck_assert_int_eq(ra[0].flags, RL_FLAG_NO_RULE); /* /narrow, no user */
    rl_limiter_free(a);
    rl_limiter_free(b);
}
END_TEST

/* Every algorithm, the sliding log's table included, decided in batches
 * (the memory store places a batch's charges before deciding any of
 * them) exactly as one rl_check() at a time on a twin: requests of five
 * rules, of one, and keys met again and again within a batch, until they
 * are denied. */
START_TEST(check_many_decides_every_algorithm_as_check_does)
{
    static const char *const sets[2] = {
        "[" RULE("tb", "user", 7, ",\"algorithm\":\"token_bucket\"")
        "," RULE("gc", "user", 9, ",\"algorithm\":\"gcra\"")
        "," RULE("fw", "user", 8, ",\"algorithm\":\"fixed_window\"")
        "," RULE("sw", "user", 10, ",\"algorithm\":\"sliding_window\"")
        "," RULE("lg", "user", 6, ",\"algorithm\":\"sliding_log\"") "]",
        "[" RULE("lg", "user", 6, ",\"algorithm\":\"sliding_log\"") "]"};
    static rl_request req[120];
    static rl_result ra[120], rb[120];
    static int codes[120];
    char user[5][16];

    for (int u = 0; u < 5; u++)
        snprintf(user[u], sizeof user[u], "u%d", u);
    for (int set = 0; set < 2; set++) {
        rl_limiter *a = limiter_with(sets[set]), *b = limiter_with(sets[set]);
        int denied = 0;
        results_init(ra, 120);
        results_init(rb, 120);
        for (int i = 0; i < 120; i++)
            req[i] = (rl_request){.size = sizeof(rl_request),
                                  .user = user[(i * 7) % 5],
                                  .cost = i % 4 ? 1 : 2};
        for (int from = 0; from < 120; from += 40)
            ck_assert_int_eq(rl_check_many(a, req + from, ra + from,
                                           codes + from, 40), RL_OK);
        for (int i = 0; i < 120; i++) {
            ck_assert_int_eq(rl_check(b, &req[i], &rb[i]), RL_OK);
            ck_assert_int_eq(ra[i].allowed, rb[i].allowed);
            ck_assert_int_eq(ra[i].remaining, rb[i].remaining);
            ck_assert_int_eq(ra[i].retry_after_ms, rb[i].retry_after_ms);
            ck_assert_int_eq(ra[i].reset_at_ms, rb[i].reset_at_ms);
            ck_assert_str_eq(ra[i].rule_id, rb[i].rule_id);
            denied += !ra[i].allowed;
        }
        ck_assert_int_gt(denied, 20); /* the limits were reached */
        rl_limiter_free(a);
        rl_limiter_free(b);
    }
}
END_TEST

START_TEST(check_many_rejects_null_arguments)
{
    rl_limiter *lim = limiter_with(ONE_RULE);
    rl_request req = req_user("u");
    rl_result res = RL_RESULT_INIT;
    int code = 42;

    ck_assert_int_eq(rl_check_many(NULL, &req, &res, &code, 1), RL_EINVAL);
    msg_has(NULL, "rl_check_many: NULL");
    ck_assert_int_eq(rl_check_many(lim, NULL, &res, &code, 1), RL_EINVAL);
    ck_assert_int_eq(rl_check_many(lim, &req, NULL, &code, 1), RL_EINVAL);
    ck_assert_int_eq(rl_check_many(lim, &req, &res, NULL, 1), RL_EINVAL);
    msg_has(lim, "rl_check_many: NULL");
    ck_assert_int_eq(code, 42); /* nothing was decided */
    ck_assert_int_eq(rl_check_many(lim, NULL, NULL, NULL, 0), RL_OK);
    ck_assert_int_eq(rl_check_many(lim, &req, &res, &code, 1), RL_OK);
    ck_assert_int_eq(code, RL_OK);
    ck_assert(res.allowed);
    ck_assert_int_eq(res.remaining, 4);
    rl_limiter_free(lim);
}
END_TEST

/* ---- results ------------------------------------------------------------------- */

START_TEST(result_fields_when_allowed)
{
    rl_limiter *lim = limiter_with("[" RULE("fw", "user", 5,
                                   ",\"algorithm\":\"fixed_window\"") "]");
    rl_result res = RL_RESULT_INIT;

    clock_add(10000);
    ck_assert_int_eq(rl_allow(lim, "k", "fw", 1, &res), RL_OK);
    ck_assert_int_eq(res.allowed, 1);
    ck_assert_uint_eq(res.flags, 0);
    ck_assert_int_eq(res.limit, 5);
    ck_assert_int_eq(res.remaining, 4);
    ck_assert_int_eq(res.reset_at, T0 / 1000 + 60);
    ck_assert_int_eq(res.retry_after, 0);
    ck_assert_int_eq(res.window, 60);
    ck_assert_str_eq(res.rule_id, "fw");
    rl_limiter_free(lim);
}
END_TEST

START_TEST(result_fields_when_denied)
{
    rl_limiter *lim = limiter_with("[" RULE("fw", "user", 5,
                                   ",\"algorithm\":\"fixed_window\"") "]");
    rl_result res = RL_RESULT_INIT;

    clock_add(10000);
    ck_assert_int_eq(rl_allow(lim, "k", "fw", 5, &res), RL_OK);
    ck_assert_int_eq(res.allowed, 1);
    ck_assert_int_eq(res.remaining, 0);
    ck_assert_int_eq(res.retry_after, 0);
    clock_add(500);
    ck_assert_int_eq(rl_allow(lim, "k", "fw", 1, &res), RL_OK);
    ck_assert_int_eq(res.allowed, 0);
    ck_assert_uint_eq(res.flags, 0);
    ck_assert_int_eq(res.limit, 5);
    ck_assert_int_eq(res.remaining, 0);
    ck_assert_int_eq(res.reset_at, T0 / 1000 + 60);
    ck_assert_int_eq(res.retry_after, 50); /* 49.5 s, rounded up */
    ck_assert_int_eq(res.window, 60);
    ck_assert_str_eq(res.rule_id, "fw");
    clock_add(49500);
    ck_assert_int_eq(rl_allow(lim, "k", "fw", 1, &res), RL_OK);
    ck_assert_int_eq(res.allowed, 1);
    ck_assert_int_eq(res.reset_at, T0 / 1000 + 120);
    rl_limiter_free(lim);
}
END_TEST

START_TEST(retry_after_at_least_one_second)
{
    rl_limiter *lim = limiter_with("[" RULE("fw", "user", 1,
                                   ",\"algorithm\":\"fixed_window\"") "]");
    rl_result res = RL_RESULT_INIT;

    clock_add(59999);
    ck_assert_int_eq(rl_allow(lim, "k", "fw", 1, &res), RL_OK);
    ck_assert_int_eq(rl_allow(lim, "k", "fw", 1, &res), RL_OK);
    ck_assert_int_eq(res.allowed, 0);
    ck_assert_int_eq(res.retry_after, 1); /* 1 ms away */
    rl_limiter_free(lim);
}
END_TEST

/* ---- rl_check ------------------------------------------------------------------- */

START_TEST(check_picks_most_restrictive_rule)
{
    rl_limiter *lim = limiter_with("[" RULE("per-user", "user", 5, "") ","
                                   RULE("per-ip", "ip", 3, "") "]");
    rl_request a = {.size = sizeof(rl_request), .user = "alice", .ip = "10.0.0.1", .cost = 1};
    rl_request b = {.size = sizeof(rl_request), .user = "alice", .ip = "10.0.0.2", .cost = 1};
    rl_result res = RL_RESULT_INIT;

    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(rl_check(lim, &a, &res), RL_OK);
        ck_assert_int_eq(res.allowed, 1);
        ck_assert_str_eq(res.rule_id, "per-ip"); /* 2-i left vs 4-i */
        ck_assert_int_eq(res.remaining, 2 - i);
        ck_assert_int_eq(res.limit, 3);
    }
    ck_assert_int_eq(rl_check(lim, &a, &res), RL_OK);
    ck_assert_int_eq(res.allowed, 0);
    ck_assert_str_eq(res.rule_id, "per-ip");
    /* From another ip, alice has 2 of her 5 left: the user rule decides. */
    ck_assert_int_eq(rl_check(lim, &b, &res), RL_OK);
    ck_assert_int_eq(res.allowed, 1);
    ck_assert_str_eq(res.rule_id, "per-user");
    ck_assert_int_eq(res.remaining, 1);
    ck_assert_int_eq(res.limit, 5);
    ck_assert_int_eq(rl_check(lim, &b, &res), RL_OK);
    ck_assert_int_eq(rl_check(lim, &b, &res), RL_OK);
    ck_assert_int_eq(res.allowed, 0);
    ck_assert_str_eq(res.rule_id, "per-user");
    rl_limiter_free(lim);
}
END_TEST

START_TEST(check_two_denials_report_the_longer_wait)
{
    rl_limiter *lim = limiter_with(
        "[{\"rule_id\":\"minute\",\"dimension\":\"user\",\"limit\":1,"
        "\"window_seconds\":60,\"algorithm\":\"fixed_window\"},"
        "{\"rule_id\":\"hour\",\"dimension\":\"ip\",\"limit\":1,"
        "\"window_seconds\":3600,\"algorithm\":\"fixed_window\"}]");
    rl_request req = {.size = sizeof(rl_request), .user = "u", .ip = "10.0.0.1", .cost = 1};
    rl_result res = RL_RESULT_INIT;

    ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
    ck_assert_int_eq(res.allowed, 1);
    ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
    ck_assert_int_eq(res.allowed, 0);
    ck_assert_str_eq(res.rule_id, "hour");
    ck_assert_int_eq(res.retry_after, 3600);
    ck_assert_int_eq(res.window, 3600);
    rl_limiter_free(lim);
}
END_TEST

START_TEST(check_without_matching_rule_allows)
{
    rl_limiter *lim = limiter_with("[" RULE("pro", "user", 1,
                                   ",\"match\":{\"tier\":\"pro\"}") "]");
    rl_request req = {.size = sizeof(rl_request), .user = "u", .tier = "free", .cost = 1};
    rl_result res = RL_RESULT_INIT;

    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
        ck_assert_int_eq(res.allowed, 1);
        ck_assert_uint_eq(res.flags, RL_FLAG_NO_RULE);
        ck_assert_str_eq(res.rule_id, "");
        ck_assert_int_eq(res.retry_after, 0);
    }
    rl_limiter_free(lim);
}
END_TEST

START_TEST(rule_on_absent_dimension_does_not_apply)
{
    rl_limiter *lim = limiter_with("[" RULE("by-key", "api_key", 1, "") "]");
    rl_request req = {.size = sizeof(rl_request), .user = "u", .api_key = NULL, .cost = 1};
    rl_result res = RL_RESULT_INIT;

    ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
    ck_assert_uint_eq(res.flags, RL_FLAG_NO_RULE);
    req.api_key = "";
    ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
    ck_assert_uint_eq(res.flags, RL_FLAG_NO_RULE);
    req.api_key = "key-1";
    ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
    ck_assert_str_eq(res.rule_id, "by-key");
    ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
    ck_assert_int_eq(res.allowed, 0);
    rl_limiter_free(lim);
}
END_TEST

START_TEST(global_dimension_counts_everyone)
{
    rl_limiter *lim = limiter_with("[" RULE("all", "global", 2, "") "]");
    rl_request a = {.size = sizeof(rl_request), .cost = 1}, b = {.size = sizeof(rl_request), .user = "b", .ip = "1.1.1.1", .cost = 1};
    rl_result res = RL_RESULT_INIT;

    ck_assert_int_eq(rl_check(lim, &a, &res), RL_OK);
    ck_assert_int_eq(rl_check(lim, &b, &res), RL_OK);
    ck_assert_int_eq(res.allowed, 1);
    ck_assert_int_eq(rl_check(lim, &a, &res), RL_OK);
    ck_assert_int_eq(res.allowed, 0);
    ck_assert_str_eq(res.rule_id, "all");
    rl_limiter_free(lim);
}
END_TEST

START_TEST(check_matches_tier)
{
    rl_limiter *lim = limiter_with(
        "[" RULE("free", "user", 1, ",\"match\":{\"tier\":\"free\"}") ","
        RULE("pro", "user", 3, ",\"match\":{\"tier\":\"pro\"}") "]");
    rl_request req = {.size = sizeof(rl_request), .user = "u", .tier = "free", .cost = 1};
    rl_result res = RL_RESULT_INIT;

    ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
    ck_assert_str_eq(res.rule_id, "free");
    ck_assert_int_eq(res.limit, 1);
    ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
    ck_assert_int_eq(res.allowed, 0);
    req.tier = "pro";
    ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
    ck_assert_int_eq(res.allowed, 1);
    ck_assert_str_eq(res.rule_id, "pro");
    ck_assert_int_eq(res.remaining, 2);
    req.tier = NULL;
    ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
    ck_assert_uint_eq(res.flags, RL_FLAG_NO_RULE);
    rl_limiter_free(lim);
}
END_TEST

START_TEST(check_matches_endpoint)
{
    rl_limiter *lim = limiter_with(
        "[" RULE("search", "user", 1, ",\"match\":{\"endpoint\":\"/search\"}")
        "," RULE("api", "user", 2, ",\"match\":{\"endpoint\":\"/api/**\"}")
        "]");
    rl_request req = {.size = sizeof(rl_request), .user = "u", .endpoint = "/search", .cost = 1};
    rl_result res = RL_RESULT_INIT;

    ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
    ck_assert_str_eq(res.rule_id, "search");
    ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
    ck_assert_int_eq(res.allowed, 0);
    req.endpoint = "/api/v1/items";
    ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
    ck_assert_int_eq(res.allowed, 1);
    ck_assert_str_eq(res.rule_id, "api");
    ck_assert_int_eq(res.remaining, 1);
    req.endpoint = "/other";
    ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
    ck_assert_uint_eq(res.flags, RL_FLAG_NO_RULE);
    req.endpoint = NULL;
    ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
    ck_assert_uint_eq(res.flags, RL_FLAG_NO_RULE);
    rl_limiter_free(lim);
}
END_TEST

START_TEST(log_mode_never_denies_and_flags_soft)
{
    rl_limiter *lim = limiter_with("[" RULE("shadow", "user", 2,
                                   ",\"mode\":\"log\"") "]");
    rl_request req = req_user("u");
    rl_result res = RL_RESULT_INIT;

    for (int i = 0; i < 2; i++) { /* counted: remaining goes down */
        ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
        ck_assert_int_eq(res.allowed, 1);
        ck_assert_uint_eq(res.flags, 0);
        ck_assert_int_eq(res.remaining, 1 - i);
        ck_assert_str_eq(res.rule_id, "shadow");
    }
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
        ck_assert_int_eq(res.allowed, 1);
        ck_assert_uint_eq(res.flags, RL_FLAG_SOFT);
        ck_assert_int_eq(res.remaining, 0);
        ck_assert_int_eq(res.retry_after, 0);
    }
    ck_assert_int_eq(rl_allow(lim, "k", "shadow", 3, &res), RL_OK);
    ck_assert_int_eq(res.allowed, 1);
    ck_assert_uint_eq(res.flags, RL_FLAG_SOFT);
    rl_limiter_free(lim);
}
END_TEST

START_TEST(log_rule_counts_beside_an_enforced_rule)
{
    rl_limiter *lim = limiter_with("[" RULE("shadow", "user", 1,
                                   ",\"mode\":\"log\"") ","
                                   RULE("real", "user", 5, "") "]");
    rl_request req = req_user("u");
    rl_result res = RL_RESULT_INIT;

    ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
    ck_assert_int_eq(res.allowed, 1);
    ck_assert_uint_eq(res.flags, 0);
    ck_assert_str_eq(res.rule_id, "real"); /* enforced rules decide */
    ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
    ck_assert_int_eq(res.allowed, 1);
    ck_assert_uint_eq(res.flags, RL_FLAG_SOFT); /* the log rule's 1 is used */
    ck_assert_str_eq(res.rule_id, "real");
    ck_assert_int_eq(res.remaining, 3);
    rl_limiter_free(lim);
}
END_TEST

START_TEST(denied_request_charges_no_rule)
{
    rl_limiter *lim = limiter_with("[" RULE("per-user", "user", 10, "") ","
                                   RULE("per-ip", "ip", 2, "") "]");
    rl_request both = {.size = sizeof(rl_request), .user = "alice", .ip = "10.0.0.1", .cost = 1};
    rl_request peek = {.size = sizeof(rl_request), .user = "alice", .cost = 0};
    rl_result res = RL_RESULT_INIT;

    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(rl_check(lim, &both, &res), RL_OK);
        ck_assert_int_eq(res.allowed, 1);
    }
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(rl_check(lim, &both, &res), RL_OK);
        ck_assert_int_eq(res.allowed, 0);
        ck_assert_str_eq(res.rule_id, "per-ip");
    }
    ck_assert_int_eq(rl_check(lim, &peek, &res), RL_OK);
    ck_assert_int_eq(res.allowed, 1);
    ck_assert_str_eq(res.rule_id, "per-user");
    ck_assert_int_eq(res.remaining, 8); /* only the 2 that passed */
    rl_limiter_free(lim);
}
END_TEST

/* ---- readers race a loader ------------------------------------------------------ */

/* Limits no reader can exhaust however fast it runs on a frozen clock. */
#define SET_A "[" RULE("a", "user", 1000000000, "") "]"
#define SET_B "[" RULE("b", "user", 999999999, "") "]"

static atomic_int race_stop, race_bad, race_checks;

static void *race_reader(void *p)
{
    rl_limiter *lim = p;
    rl_request req = req_user("racer");
    rl_result res = RL_RESULT_INIT;

    while (!atomic_load(&race_stop)) {
        int rc = rl_check(lim, &req, &res);
        int ok = rc == RL_OK && res.allowed == 1 && res.flags == 0 &&
                 ((strcmp(res.rule_id, "a") == 0 && res.limit == 1000000000) ||
                  (strcmp(res.rule_id, "b") == 0 && res.limit == 999999999)) &&
                 res.window == 60 && res.remaining >= 0 &&
                 res.remaining < res.limit;
        if (!ok)
            atomic_fetch_add(&race_bad, 1);
        atomic_fetch_add(&race_checks, 1);
    }
    return NULL;
}

START_TEST(readers_race_rule_swaps)
{
    rl_limiter *lim = limiter_with(SET_A);
    pthread_t t[2];

    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, race_reader, lim), 0);
    while (atomic_load(&race_checks) < 10) /* readers are in the loop */
        sched_yield();
    for (int i = 0; i < 200; i++)
        ck_assert_int_eq(rl_rules_load_string(lim, i % 2 ? SET_A : SET_B),
                         RL_OK);
    while (atomic_load(&race_checks) < 1000)
        sched_yield();
    atomic_store(&race_stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    ck_assert_int_eq(atomic_load(&race_bad), 0);
    ck_assert_int_eq(rl_rules_version(lim), 201);
    rl_limiter_free(lim);
}
END_TEST

/* More threads than there are per-thread counting slots (METRICS_SLOTS,
 * 32: the last is shared with atomic adds) check while the rules are
 * swapped: every check is counted once, and each thread's result came
 * from a rule set still alive (rcu.h's read side, plain per-thread
 * counters with the fence paid by the swapping thread). */
#define COUNT_THREADS 40
#define COUNT_CHECKS 500

static atomic_int count_bad;
static pthread_barrier_t count_start, count_end; /* threads + the loader */

static void *count_reader(void *p)
{
    rl_limiter *lim = p;
    rl_request req = req_user("counter");
    rl_result res = RL_RESULT_INIT;

    pthread_barrier_wait(&count_start);
    for (int i = 0; i < COUNT_CHECKS; i++)
        if (rl_check(lim, &req, &res) != RL_OK || res.allowed != 1 ||
            (strcmp(res.rule_id, "a") != 0 && strcmp(res.rule_id, "b") != 0))
            atomic_fetch_add(&count_bad, 1);
    /* Alive until all have counted: no slot is handed on meanwhile, so
     * the threads past the owned slots do share the last one. */
    pthread_barrier_wait(&count_end);
    return NULL;
}

START_TEST(threads_counted_exactly_across_swaps)
{
    rl_limiter *lim = limiter_with(SET_A);
    pthread_t t[COUNT_THREADS];
    rl_stats st = RL_STATS_INIT;
    int i;

    pthread_barrier_init(&count_start, NULL, COUNT_THREADS + 1);
    pthread_barrier_init(&count_end, NULL, COUNT_THREADS + 1);
    for (i = 0; i < COUNT_THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, count_reader, lim), 0);
    pthread_barrier_wait(&count_start);
    for (i = 0; i < 100; i++)
        ck_assert_int_eq(rl_rules_load_string(lim, i % 2 ? SET_A : SET_B),
                         RL_OK);
    pthread_barrier_wait(&count_end);
    for (i = 0; i < COUNT_THREADS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&count_start);
    pthread_barrier_destroy(&count_end);
    ck_assert_int_eq(atomic_load(&count_bad), 0);
    ck_assert_int_eq(rl_stats_get(lim, &st), RL_OK);
    ck_assert_int_eq(st.checks, COUNT_THREADS * COUNT_CHECKS);
    ck_assert_int_eq(st.allowed, COUNT_THREADS * COUNT_CHECKS);
    ck_assert_int_eq(st.denied, 0);
    rl_limiter_free(lim);
}
END_TEST

/* rl_stats_get counts how checks were decided; the memory store has no
 * breaker. */
START_TEST(stats_count_decisions)
{
    rl_limiter *lim = limiter_with(
        "[{\"rule_id\":\"r\",\"dimension\":\"user\",\"limit\":2,"
        "\"window_seconds\":60},"
        " {\"rule_id\":\"soft\",\"dimension\":\"ip\",\"limit\":1,"
        "\"window_seconds\":60,\"mode\":\"log\"}]");
    rl_request req = {.size = sizeof(rl_request), .user = "u", .ip = "1.1.1.1", .cost = 1};
    rl_result res = RL_RESULT_INIT;
    rl_stats st = RL_STATS_INIT;

    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
    ck_assert_int_eq(rl_allow(lim, "", "r", 1, &res), RL_EINVAL); /* no count */
    ck_assert_int_eq(rl_stats_get(lim, &st), RL_OK);
    ck_assert_int_eq(st.checks, 3);
    ck_assert_int_eq(st.allowed, 2);
    ck_assert_int_eq(st.denied, 1);
    ck_assert_int_eq(st.soft, 2); /* the ip rule's limit of 1, passed twice */
    ck_assert_int_eq(st.fallback + st.fail_open + st.fail_closed, 0);
    ck_assert_int_eq(st.store_errors, 0);
    ck_assert_int_eq(st.breaker_state, RL_BREAKER_NONE);
    ck_assert_int_eq(rl_stats_get(NULL, &st), RL_EINVAL);
    ck_assert_int_eq(rl_stats_get(lim, NULL), RL_EINVAL);
    rl_limiter_free(lim);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("limiter_check");
    TCase *tc = tcase_create("check");

    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, stats_count_decisions);
    tcase_add_test(tc, result_fields_when_allowed);
    tcase_add_test(tc, result_fields_when_denied);
    tcase_add_test(tc, retry_after_at_least_one_second);
    tcase_add_test(tc, check_picks_most_restrictive_rule);
    tcase_add_test(tc, check_two_denials_report_the_longer_wait);
    tcase_add_test(tc, check_without_matching_rule_allows);
    tcase_add_test(tc, rule_on_absent_dimension_does_not_apply);
    tcase_add_test(tc, global_dimension_counts_everyone);
    tcase_add_test(tc, check_matches_tier);
    tcase_add_test(tc, check_matches_endpoint);
    tcase_add_test(tc, log_mode_never_denies_and_flags_soft);
    tcase_add_test(tc, log_rule_counts_beside_an_enforced_rule);
    tcase_add_test(tc, denied_request_charges_no_rule);
    tcase_add_test(tc, readers_race_rule_swaps);
    tcase_add_test(tc, threads_counted_exactly_across_swaps);
    tcase_add_test(tc, check_many_decides_as_check_does);
    tcase_add_test(tc, check_many_decides_every_algorithm_as_check_does);
    tcase_add_test(tc, check_many_rejects_null_arguments);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
