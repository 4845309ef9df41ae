/*
 * check_failed_result.c -- a failed call leaves the caller's rl_result all
 * zeros, never the previous call's answer: each entry point that fills a
 * result (rl_allow, rl_check, rl_check_many, rl_reserve, rl_check_start),
 * each of its early returns (NULL arguments, the NULL limiter included,
 * sizes, keys, costs, unknown rules, a busy loop context), as the header's
 * rl_result comment promises.  Each case first fills the result with a
 * real allowed answer, then fails a call on it.
 */
#include <check.h>
#include <string.h>

#include "ratelimit.h"
#include "testutil.h"

#define RULES                                                                  \
    "[{\"rule_id\":\"r\",\"dimension\":\"user\",\"limit\":5,"                  \
    "\"window_seconds\":60}]"

/* res holding an answer: allowed, 4 of 5 left (the example). */
static void answered(rl_limiter *lim, rl_result *res)
{
    static int n;
    char key[32];

    snprintf(key, sizeof key, "fresh-%d", n++);
    ck_assert_int_eq(rl_allow(lim, key, "r", 1, res), RL_OK);
    ck_assert_int_eq(res->allowed, 1);
    ck_assert_int_eq(res->remaining, 4);
}

/* Every byte of res after its size zero, the size kept. */
static void assert_zeroed(const rl_result *res, int line)
{
    rl_result zero = RL_RESULT_INIT;

    ck_assert_msg(res->size == sizeof *res, "line %d: size changed", line);
    ck_assert_msg(memcmp(res, &zero, sizeof *res) == 0,
                  "line %d: result not zeroed (allowed %d, remaining %lld, "
                  "limit %lld, rule \"%s\")", line, res->allowed,
                  (long long)res->remaining, (long long)res->limit,
                  res->rule_id);
}

#define FAILS_ZEROED(call, code)                                               \
    do {                                                                       \
        answered(lim, &res);                                                   \
        ck_assert_int_eq((call), (code));                                      \
        assert_zeroed(&res, __LINE__);                                         \
    } while (0)

START_TEST(allow_zeroes_its_result_on_every_failure)
{
    rl_limiter *lim = limiter_with(RULES);
    rl_result res = RL_RESULT_INIT;
    char longkey[RL_KEY_MAX + 2];

    memset(longkey, 'k', sizeof longkey - 1);
    longkey[sizeof longkey - 1] = '\0';
    FAILS_ZEROED(rl_allow(NULL, "k", "r", 1, &res), RL_EINVAL);
    FAILS_ZEROED(rl_allow(lim, NULL, "r", 1, &res), RL_EINVAL);
    FAILS_ZEROED(rl_allow(lim, "k", NULL, 1, &res), RL_EINVAL);
    FAILS_ZEROED(rl_allow(lim, "", "r", 1, &res), RL_EINVAL);
    FAILS_ZEROED(rl_allow(lim, longkey, "r", 1, &res), RL_EINVAL);
    FAILS_ZEROED(rl_allow(lim, "k", "r", -1, &res), RL_EINVAL);
    FAILS_ZEROED(rl_allow(lim, "k", "nope", 1, &res), RL_ENORULE);
    rl_limiter_free(lim);
}
END_TEST

START_TEST(check_zeroes_its_result_on_every_failure)
{
    rl_limiter *lim = limiter_with(RULES);
    rl_result res = RL_RESULT_INIT;
    rl_request req = {.size = sizeof req, .user = "u", .cost = 1};
    rl_request small = req, bad_cost = req;

    small.size = 8;
    bad_cost.cost = -1;
    FAILS_ZEROED(rl_check(NULL, &req, &res), RL_EINVAL);
    FAILS_ZEROED(rl_check(lim, NULL, &res), RL_EINVAL);
    FAILS_ZEROED(rl_check(lim, &small, &res), RL_EINVAL);
    FAILS_ZEROED(rl_check(lim, &bad_cost, &res), RL_EINVAL);
    rl_limiter_free(lim);
}
END_TEST

START_TEST(check_many_zeroes_its_results_on_every_failure)
{
    rl_limiter *lim = limiter_with(RULES);
    rl_request reqs[2] = {{.size = sizeof(rl_request), .user = "u", .cost = 1},
                          {.size = sizeof(rl_request), .user = "v", .cost = 1}};
    rl_request small[2];
    rl_result res = RL_RESULT_INIT, two[2] = {RL_RESULT_INIT, RL_RESULT_INIT};
    int codes[2];

    FAILS_ZEROED(rl_check_many(NULL, reqs, &res, codes, 1), RL_EINVAL);
    FAILS_ZEROED(rl_check_many(lim, NULL, &res, codes, 1), RL_EINVAL);
    FAILS_ZEROED(rl_check_many(lim, reqs, &res, NULL, 1), RL_EINVAL);
    memcpy(small, reqs, sizeof small);
    small[0].size = small[1].size = 8;
    FAILS_ZEROED(rl_check_many(lim, small, &res, codes, 1), RL_EINVAL);
    ck_assert_int_eq(codes[0], RL_EINVAL);
    /* element 1 of another size than element 0: its own result zeroed */
    small[0].size = sizeof(rl_request);
    answered(lim, &two[1]);
    ck_assert_int_eq(rl_check_many(lim, small, two, codes, 2), RL_EINVAL);
    ck_assert_int_eq(codes[0], RL_OK);
    ck_assert_int_eq(codes[1], RL_EINVAL);
    assert_zeroed(&two[1], __LINE__);
    rl_limiter_free(lim);
}
END_TEST

START_TEST(reserve_zeroes_its_result_on_every_failure)
{
    rl_limiter *lim = limiter_with(RULES);
    rl_request req = {.size = sizeof req, .user = "u", .cost = 1};
    rl_reservation rsv = RL_RESERVATION_INIT, small_rsv = RL_RESERVATION_INIT;
    rl_result res = RL_RESULT_INIT;
    rl_request small = req;

    small.size = 8;
    small_rsv.size = 8;
    FAILS_ZEROED(rl_reserve(NULL, &req, &rsv, &res), RL_EINVAL);
    FAILS_ZEROED(rl_reserve(lim, NULL, &rsv, &res), RL_EINVAL);
    FAILS_ZEROED(rl_reserve(lim, &req, NULL, &res), RL_EINVAL);
    FAILS_ZEROED(rl_reserve(lim, &small, &rsv, &res), RL_EINVAL);
    FAILS_ZEROED(rl_reserve(lim, &req, &small_rsv, &res), RL_EINVAL);
    rl_limiter_free(lim);
}
END_TEST

static int called;

static void on_done(rl_async_check *chk, int rc)
{
    (void)chk;
    (void)rc;
    called++;
}

START_TEST(check_start_zeroes_its_result_on_every_failure)
{
    rl_limiter *lim = limiter_with(RULES);
    rl_async *a = NULL;
    rl_request req = {.size = sizeof req, .user = "u", .cost = 1};
    rl_request small = req, bad_cost = req;
    rl_result res = RL_RESULT_INIT, first = RL_RESULT_INIT;
    rl_async_check chk = RL_ASYNC_CHECK_INIT, busy = RL_ASYNC_CHECK_INIT;

    small.size = 8;
    bad_cost.cost = -1;
    ck_assert_int_eq(rl_async_new(lim, 1, &a), RL_OK);
    chk.cb = on_done;
    chk.result = &res;
    FAILS_ZEROED(rl_check_start(NULL, &req, &chk), RL_EINVAL);
    FAILS_ZEROED(rl_check_start(a, NULL, &chk), RL_EINVAL);
    FAILS_ZEROED(rl_check_start(a, &small, &chk), RL_EINVAL);
    FAILS_ZEROED(rl_check_start(a, &bad_cost, &chk), RL_EINVAL);
    chk.cb = NULL;
    FAILS_ZEROED(rl_check_start(a, &req, &chk), RL_EINVAL);
    /* the context's one slot taken: RL_EBUSY */
    busy.cb = on_done;
    busy.result = &first;
    ck_assert_int_eq(rl_check_start(a, &req, &busy), RL_OK);
    chk.cb = on_done;
    FAILS_ZEROED(rl_check_start(a, &req, &chk), RL_EBUSY);
    ck_assert_int_eq(rl_async_process(a), 1);
    ck_assert_int_eq(called, 1);
    ck_assert_int_eq(first.allowed, 1);
    rl_async_free(a);
    rl_limiter_free(lim);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("failed_result");
    TCase *tc = tcase_create("failed_result");

    tcase_add_test(tc, allow_zeroes_its_result_on_every_failure);
    tcase_add_test(tc, check_zeroes_its_result_on_every_failure);
    tcase_add_test(tc, check_many_zeroes_its_results_on_every_failure);
    tcase_add_test(tc, reserve_zeroes_its_result_on_every_failure);
    tcase_add_test(tc, check_start_zeroes_its_result_on_every_failure);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
