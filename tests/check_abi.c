/*
 * check_abi.c -- the 1.0 ABI promise, kept by a compiled caller.
 *
 * This file sees only tests/abi/ratelimit_1_0.h, the header of the first
 * 1.0 layout (rl_result ends with rule_id there), and links the shared
 * library as any program does.  Run against the current library, which
 * has grown rl_result since, it checks that the library fills no byte
 * beyond what the caller's size says, that a caller with bigger structs
 * (a later header's) is served and its tails left alone, and that
 * rl_check_many() strides both kinds of arrays by their elements' size.
 * It uses no internal function: the memory store's real clock, rules
 * with limits no test run reaches in time.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "abi/ratelimit_1_0.h"

#define GUARD 0x5a
#define RULES                                                              \
    "[{\"rule_id\":\"t\",\"dimension\":\"tenant\",\"limit\":2,"            \
    "\"window_seconds\":3600,\"algorithm\":\"fixed_window\"}]"

/* A caller's first-layout result followed by bytes it owns. */
typedef struct old_result {
    rl_result r;
    unsigned char guard[32];
} old_result;

/* A later header's structs: the first layout, 1.0's additions, and more
 * members this library does not know. */
typedef struct future_result {
    rl_result r;
    int64_t retry_after_ms, reset_at_ms; /* 1.0's, known to the library */
    int64_t later[3];                    /* unknown to it               */
} future_result;

typedef struct future_request {
    rl_request r;
    const char *later[3];
} future_request;

static rl_limiter *limiter(void)
{
    rl_limiter *lim = NULL;

    ck_assert_int_eq(rl_limiter_new(&lim, NULL), RL_OK);
    ck_assert_msg(rl_rules_load_string(lim, RULES) == RL_OK, "%s",
                  rl_errmsg(lim));
    return lim;
}

static void guard_intact(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(p[i], GUARD);
}

/* A caller built against 1.0's header runs on 1.1.0: the same soname,
 * a version at least its header's. */
START_TEST(version_is_1_1_0)
{
    ck_assert_int_ge(rl_version(), RL_VERSION_NUMBER);
    ck_assert_int_eq(rl_version(), 10100);
    ck_assert_str_eq(rl_version_string(), "1.1.0");
}
END_TEST

START_TEST(old_result_filled_to_its_size)
{
    rl_limiter *lim = limiter();
    rl_dim d[] = {{"tenant", "old"}};
    rl_request req = {.size = sizeof(rl_request), .dims = d, .ndims = 1,
                      .cost = 1};
    old_result o;

    memset(&o, GUARD, sizeof o);
    o.r.size = sizeof(rl_result);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(rl_check(lim, &req, &o.r), RL_OK);
        ck_assert_int_eq(o.r.allowed, i < 2);
        ck_assert_str_eq(o.r.rule_id, "t");
        ck_assert_uint_eq(o.r.size, sizeof(rl_result));
        guard_intact(o.guard, sizeof o.guard);
    }
    ck_assert_int_ge(o.r.retry_after, 1);
    ck_assert_int_eq(rl_allow(lim, "tenant:old", "t", 1, &o.r), RL_OK);
    ck_assert_int_eq(o.r.allowed, 0);
    guard_intact(o.guard, sizeof o.guard);
    rl_limiter_free(lim);
}
END_TEST

START_TEST(future_structs_served_tails_alone)
{
    rl_limiter *lim = limiter();
    rl_dim d[] = {{"tenant", "new"}};
    future_request q;
    future_result f;

    memset(&q, GUARD, sizeof q);
    q.r = (rl_request){.size = sizeof q, .dims = d, .ndims = 1, .cost = 1};
    memset(&f, GUARD, sizeof f);
    f.r.size = sizeof f;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(rl_check(lim, &q.r, &f.r), RL_OK);
        ck_assert_uint_eq(f.r.size, sizeof f);
        guard_intact((const unsigned char *)f.later, sizeof f.later);
    }
    ck_assert_int_eq(f.r.allowed, 0);
    /* 1.0's members, which this library knows, are filled. */
    ck_assert_int_gt(f.retry_after_ms, 0);
    ck_assert_int_eq(f.r.retry_after, (f.retry_after_ms + 999) / 1000);
    ck_assert_int_eq(f.r.reset_at, (f.reset_at_ms + 999) / 1000);
    rl_limiter_free(lim);
}
END_TEST

/* rl_check_many over old-layout results and future-layout ones. */
START_TEST(check_many_strides_both_ways)
{
    enum { N = 6 };
    rl_limiter *lim = limiter();
    rl_dim a[] = {{"tenant", "a"}}, b[] = {{"tenant", "b"}};
    rl_request reqs[N];
    future_request freqs[N];
    rl_result old[N];
    future_result fut[N];
    int codes[N];

    memset(freqs, GUARD, sizeof freqs);
    memset(fut, GUARD, sizeof fut);
    for (int i = 0; i < N; i++) {
        reqs[i] = (rl_request){.size = sizeof(rl_request),
                               .dims = i < 3 ? a : b, .ndims = 1, .cost = 1};
        freqs[i].r = reqs[i];
        freqs[i].r.size = sizeof(future_request);
        old[i] = (rl_result){.size = sizeof(rl_result)};
        fut[i].r.size = sizeof(future_result);
    }
    /* Old results: a, a, a(denied), b, b, b(denied). */
    ck_assert_int_eq(rl_check_many(lim, reqs, old, codes, N), RL_OK);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(codes[i], RL_OK);
        ck_assert_int_eq(old[i].allowed, i % 3 < 2);
        ck_assert_uint_eq(old[i].size, sizeof(rl_result));
    }
    /* Future requests and results: both spent, every one denied. */
    ck_assert_int_eq(rl_check_many(lim, &freqs[0].r, &fut[0].r, codes, N),
                     RL_OK);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(codes[i], RL_OK);
        ck_assert_int_eq(fut[i].r.allowed, 0);
        ck_assert_str_eq(fut[i].r.rule_id, "t");
        ck_assert_int_gt(fut[i].retry_after_ms, 0);
        guard_intact((const unsigned char *)fut[i].later,
                     sizeof fut[i].later);
    }
    rl_limiter_free(lim);
}
END_TEST

START_TEST(stats_and_status_at_old_sizes)
{
    rl_limiter *lim = limiter();
    rl_stats st = RL_STATS_INIT;
    rl_rules_status rs = RL_RULES_STATUS_INIT;
    rl_dryrun dr = RL_DRYRUN_INIT;

    ck_assert_int_eq(rl_stats_get(lim, &st), RL_OK);
    ck_assert_int_eq(st.breaker_state, RL_BREAKER_NONE);
    ck_assert_int_eq(rl_rules_status_get(lim, &rs), RL_OK);
    ck_assert_int_eq(rs.loads, 1);
    ck_assert_int_eq(rl_rule_dryrun_get(lim, "t", &dr), RL_OK);
    st.size = RL_STATS_SIZE_MIN - 1;
    ck_assert_int_eq(rl_stats_get(lim, &st), RL_EINVAL);
    ck_assert(strstr(rl_errmsg(lim), "first 1.0 rl_stats"));
    rl_limiter_free(lim);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("abi");
    TCase *tc = tcase_create("first 1.0 header");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, version_is_1_1_0);
    tcase_add_test(tc, old_result_filled_to_its_size);
    tcase_add_test(tc, future_structs_served_tails_alone);
    tcase_add_test(tc, check_many_strides_both_ways);
    tcase_add_test(tc, stats_and_status_at_old_sizes);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
