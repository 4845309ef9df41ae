/*
 * check_headers.c -- tests for rl_headers(): exact header names and values
 * for allowed and denied results, clamping, the IETF pair (draft-11 by
 * default, draft-10 with RL_HEADERS_DRAFT10) on hand-made results, and
 * rule id sanitisation.  check_headers_format.c tests the text forms
 * (rl_headers_format(), rl_body_format()), buffer bounds, argument checks
 * and a property test over random rl_results; headers_fixture.h is what
 * both share.  check_headers_ietf.c drives the pair from real limiters,
 * per algorithm.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "headers_fixture.h"
#include "ratelimit.h"
#include "testutil.h"

/* ---- helpers -------------------------------------------------------------- */

/* Index of the header called name in h[0..n), or -1. */
static int find_header(const rl_header *h, int n, const char *name)
{
    int i;

    for (i = 0; i < n; i++)
        if (strcmp(h[i].name, name) == 0)
            return i;
    return -1;
}

static void assert_header(const rl_header *h, int n, int idx, const char *name,
                          const char *value)
{
    ck_assert_int_lt(idx, n);
    ck_assert_str_eq(h[idx].name, name);
    ck_assert_str_eq(h[idx].value, value);
}

static void split_ietf(const char *value, char *pol, size_t polsz,
                       const char *k1, long long *n1, const char *k2,
                       long long *n2)
{
    const char *err = parse_ietf(value, pol, polsz, k1, n1, k2, n2);

    ck_assert_msg(err == NULL, "'%s': %s", value, err);
}

/* ---- the Redis-style headers ------------------------------------------------ */

START_TEST(test_allowed_headers)
{
    rl_result r = make_result(1, 100, 42, 1700000060, 0, 60, "api");
    rl_header h[8];
    int n;

    memset(h, 0x7f, sizeof(h));
    n = rl_headers(&r, 0, h, 8);
    ck_assert_int_eq(n, 3);
    assert_header(h, n, 0, "X-RateLimit-Limit", "100");
    assert_header(h, n, 1, "X-RateLimit-Remaining", "42");
    assert_header(h, n, 2, "X-RateLimit-Reset", "1700000060");
    ck_assert_int_eq(find_header(h, n, "Retry-After"), -1);
    /* Nothing written past the returned count. */
    ck_assert_int_eq((unsigned char)h[3].name[0], 0x7f);
}
END_TEST

START_TEST(test_denied_headers)
{
    rl_result r = make_result(0, 10, 0, 1700000005, 7, 10, "login");
    rl_header h[8];
    int n = rl_headers(&r, 0, h, 8);

    ck_assert_int_eq(n, 4);
    assert_header(h, n, 0, "X-RateLimit-Limit", "10");
    assert_header(h, n, 1, "X-RateLimit-Remaining", "0");
    assert_header(h, n, 2, "X-RateLimit-Reset", "1700000005");
    assert_header(h, n, 3, "Retry-After", "7");
}
END_TEST

/* X-RateLimit-Limit of a result whose limit is v, as printf writes v. */
static void assert_limit_as_printf(int64_t v)
{
    rl_result r = make_result(1, v, 0, 0, 0, 1, "n");
    rl_header h[RL_HEADERS_MAX];
    char want[24];
    int n = rl_headers(&r, 0, h, RL_HEADERS_MAX);

    snprintf(want, sizeof want, "%lld", (long long)v);
    assert_header(h, n, 0, "X-RateLimit-Limit", want);
}

/* Every digit count, each side of each power of ten, and every bit
 * length, each side of each power of two (the digits are counted from
 * the bit length, then written four at a time), as printf writes them. */
START_TEST(test_numbers_as_printf)
{
    int64_t p = 1;

    for (int k = 0; k <= 18; k++) { /* p = 10^k */
        int64_t vs[] = {p - 1, p, p + 1, p + p / 2 + 3,
                        k < 18 ? p * 10 - 1 : INT64_MAX};
        for (size_t j = 0; j < sizeof vs / sizeof vs[0]; j++)
            assert_limit_as_printf(vs[j]);
        if (k < 18)
            p *= 10;
    }
    for (int k = 1; k <= 62; k++) {
        assert_limit_as_printf(((int64_t)1 << k) - 1);
        assert_limit_as_printf((int64_t)1 << k);
        assert_limit_as_printf(((int64_t)1 << k) + 1);
    }
}
END_TEST

START_TEST(test_large_values)
{
    rl_result r = make_result(0, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX,
                              60, "x");
    rl_header h[4];
    int n = rl_headers(&r, 0, h, 4);

    ck_assert_int_eq(n, 4);
    assert_header(h, n, 0, "X-RateLimit-Limit", "9223372036854775807");
    assert_header(h, n, 1, "X-RateLimit-Remaining", "9223372036854775807");
    assert_header(h, n, 2, "X-RateLimit-Reset", "9223372036854775807");
    assert_header(h, n, 3, "Retry-After", "9223372036854775807");
}
END_TEST

START_TEST(test_retry_after_zero_clamped)
{
    rl_result r = make_result(0, 10, 0, 1700000005, 0, 10, "");
    rl_header h[4];
    int n = rl_headers(&r, 0, h, 4);

    ck_assert_int_eq(n, 4);
    assert_header(h, n, 3, "Retry-After", "1");
}
END_TEST

START_TEST(test_retry_after_negative_clamped)
{
    rl_result r = make_result(0, 10, 0, 1700000005, -5, 10, "");
    rl_header h[4];
    int n = rl_headers(&r, 0, h, 4);

    ck_assert_int_eq(n, 4);
    assert_header(h, n, 3, "Retry-After", "1");

    r.retry_after = INT64_MIN;
    n = rl_headers(&r, 0, h, 4);
    ck_assert_int_eq(n, 4);
    assert_header(h, n, 3, "Retry-After", "1");
}
END_TEST

START_TEST(test_allowed_ignores_retry_after)
{
    rl_result r = make_result(1, 10, 3, 1700000005, 99, 10, "");
    rl_header h[4];
    int n = rl_headers(&r, 0, h, 4);

    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(find_header(h, n, "Retry-After"), -1);
}
END_TEST

START_TEST(test_negative_remaining)
{
    rl_result r = make_result(1, 10, -3, 1700000005, 0, 10, "");
    rl_header h[4];
    int n = rl_headers(&r, 0, h, 4);

    ck_assert_int_eq(n, 3);
    assert_header(h, n, 1, "X-RateLimit-Remaining", "0");

    r.remaining = INT64_MIN;
    n = rl_headers(&r, 0, h, 4);
    assert_header(h, n, 1, "X-RateLimit-Remaining", "0");
}
END_TEST

START_TEST(test_negative_limit_and_reset)
{
    rl_result r = make_result(1, -1, 0, INT64_MIN, 0, 10, "");
    rl_header h[4];
    int n = rl_headers(&r, 0, h, 4);

    ck_assert_int_eq(n, 3);
    assert_header(h, n, 0, "X-RateLimit-Limit", "0");
    assert_header(h, n, 2, "X-RateLimit-Reset", "0");
}
END_TEST

/* ---- the IETF pair -------------------------------------------------------------- */

START_TEST(test_ietf_allowed_exact)
{
    rl_result r = RL_RESULT_INIT;
    rl_header h[8];
    int n;

    r = make_result(1, 100, 42, (int64_t)time(NULL) + 30, 0, 60, "api.search");
    n = rl_headers(&r, RL_HEADERS_IETF, h, 8);
    ck_assert_int_eq(n, 5);
    assert_header(h, n, 0, "X-RateLimit-Limit", "100");
    assert_header(h, n, 1, "X-RateLimit-Remaining", "42");
    assert_header(h, n, 3, "RateLimit-Policy", "\"api.search\";q=100;w=60");
    ck_assert_str_eq(h[4].name, "RateLimit");
    ck_assert_msg(strcmp(h[4].value, "\"api.search\";r=42;t=30") == 0 ||
                      strcmp(h[4].value, "\"api.search\";r=42;t=29") == 0,
                  "RateLimit value was '%s'", h[4].value);
}
END_TEST

START_TEST(test_ietf_denied_order)
{
    rl_result r = RL_RESULT_INIT;
    rl_header h[8];
    int n;

    r = make_result(0, 5, 0, (int64_t)time(NULL) + 30, 30, 60, "login:ip");
    n = rl_headers(&r, RL_HEADERS_IETF, h, 8);
    ck_assert_int_eq(n, 6);
    assert_header(h, n, 0, "X-RateLimit-Limit", "5");
    assert_header(h, n, 1, "X-RateLimit-Remaining", "0");
    ck_assert_str_eq(h[2].name, "X-RateLimit-Reset");
    assert_header(h, n, 3, "Retry-After", "30");
    assert_header(h, n, 4, "RateLimit-Policy", "\"login:ip\";q=5;w=60");
    ck_assert_str_eq(h[5].name, "RateLimit");
    ck_assert_msg(strcmp(h[5].value, "\"login:ip\";r=0;t=30") == 0 ||
                      strcmp(h[5].value, "\"login:ip\";r=0;t=29") == 0,
                  "RateLimit value was '%s'", h[5].value);
}
END_TEST

START_TEST(test_ietf_default_policy)
{
    rl_result r = make_result(1, 10, 9, 0, 0, 1, "");
    rl_header h[8];
    int n = rl_headers(&r, RL_HEADERS_IETF, h, 8);

    ck_assert_int_eq(n, 5);
    assert_header(h, n, 3, "RateLimit-Policy", "\"default\";q=10;w=1");
    /* draft-11: 9 units at 10 per second take 1 s, the shortest window. */
    assert_header(h, n, 4, "RateLimit", "\"default\";r=9;t=1");
    n = rl_headers(&r, RL_HEADERS_IETF | RL_HEADERS_DRAFT10, h, 8);
    assert_header(h, n, 4, "RateLimit", "\"default\";r=9;t=0");
}
END_TEST

START_TEST(test_ietf_window_at_least_one)
{
    rl_result r = make_result(1, 10, 9, 0, 0, 0, "w");
    rl_header h[8];
    int n = rl_headers(&r, RL_HEADERS_IETF, h, 8);

    ck_assert_int_eq(n, 5);
    assert_header(h, n, 3, "RateLimit-Policy", "\"w\";q=10;w=1");

    r.window = INT64_MIN;
    n = rl_headers(&r, RL_HEADERS_IETF, h, 8);
    assert_header(h, n, 3, "RateLimit-Policy", "\"w\";q=10;w=1");
}
END_TEST

START_TEST(test_ietf_reset_in_past)
{
    rl_result r = make_result(1, 10, 9, (int64_t)time(NULL) - 100, 0, 60, "p");
    rl_header h[8];
    int n = rl_headers(&r, RL_HEADERS_IETF | RL_HEADERS_DRAFT10, h, 8);

    ck_assert_int_eq(n, 5);
    assert_header(h, n, 4, "RateLimit", "\"p\";r=9;t=0");
    /* draft-11: the window is never shorter than 9 units take at 10/60 s. */
    n = rl_headers(&r, RL_HEADERS_IETF, h, 8);
    assert_header(h, n, 4, "RateLimit", "\"p\";r=9;t=54");

    r.reset_at = INT64_MIN;
    r.remaining = -7;
    r.limit = -7;
    for (int mode = 0; mode < 2; mode++) {
        n = rl_headers(&r, RL_HEADERS_IETF | (mode ? RL_HEADERS_DRAFT10 : 0),
                       h, 8);
        assert_header(h, n, 3, "RateLimit-Policy", "\"p\";q=0;w=60");
        assert_header(h, n, 4, "RateLimit", "\"p\";r=0;t=0");
    }
}
END_TEST

START_TEST(test_ietf_integers_capped)
{
    /* Structured Field Integers have at most 15 digits (RFC 8941). */
    rl_result r = make_result(1, INT64_MAX, INT64_MAX, INT64_MAX, 0, INT64_MAX,
                              "big");
    rl_header h[8];
    int n = rl_headers(&r, RL_HEADERS_IETF, h, 8);

    ck_assert_int_eq(n, 5);
    assert_header(h, n, 3, "RateLimit-Policy",
                  "\"big\";q=999999999999999;w=999999999999999");
    assert_header(h, n, 4, "RateLimit",
                  "\"big\";r=999999999999999;t=999999999999999");
}
END_TEST

START_TEST(test_policy_sanitised)
{
    rl_result r = make_result(1, 10, 9, 0, 0, 60, "a\r\nSet-Cookie: x\"\\");
    rl_header h[8];
    char pol[128];
    long long q, w, rem, t;
    int n = rl_headers(&r, RL_HEADERS_IETF, h, 8);

    ck_assert_int_eq(n, 5);
    assert_header(h, n, 3, "RateLimit-Policy",
                  "\"a__Set-Cookie:_x__\";q=10;w=60");
    assert_header(h, n, 4, "RateLimit", "\"a__Set-Cookie:_x__\";r=9;t=54");
    split_ietf(h[3].value, pol, sizeof(pol), "q", &q, "w", &w);
    ck_assert_str_eq(pol, "a__Set-Cookie:_x__");
    split_ietf(h[4].value, pol, sizeof(pol), "r", &rem, "t", &t);
    ck_assert_str_eq(pol, "a__Set-Cookie:_x__");
    for (int i = 0; i < n; i++) {
        ck_assert_ptr_null(strchr(h[i].value, '\r'));
        ck_assert_ptr_null(strchr(h[i].value, '\n'));
    }
}
END_TEST

START_TEST(test_policy_high_and_control_bytes)
{
    rl_result r = make_result(1, 1, 1, 0, 0, 1, "");
    /* nine bytes outside the set, then three inside it */
    const unsigned char id[] = {0x80, 0xff, 0x7f, 0x01, 0x1b, ' ',
                                ',',  ';',  '=',  'A',  'z',  '9'};
    rl_header h[8];
    int n;

    memcpy(r.rule_id, id, sizeof(id));
    r.rule_id[sizeof(id)] = '\0';
    n = rl_headers(&r, RL_HEADERS_IETF, h, 8);
    ck_assert_int_eq(n, 5);
    assert_header(h, n, 3, "RateLimit-Policy", "\"_________Az9\";q=1;w=1");
}
END_TEST

START_TEST(test_policy_valid_bytes_kept)
{
    rl_result r = make_result(1, 1, 1, 0, 0, 1, "Az09._:-");
    rl_header h[8];
    int n = rl_headers(&r, RL_HEADERS_IETF, h, 8);

    ck_assert_int_eq(n, 5);
    assert_header(h, n, 3, "RateLimit-Policy", "\"Az09._:-\";q=1;w=1");
}
END_TEST

START_TEST(test_rule_id_not_terminated)
{
    /* rl_result followed by guard bytes that would show if read. */
    struct {
        rl_result r;
        char guard[16];
    } s;
    rl_header h[8];
    char expect[128];
    char sixty_four[RL_RULE_ID_MAX + 2];
    int n;

    memset(&s, 0, sizeof(s));
    s.r.size = sizeof(s.r);
    s.r.allowed = 0;
    s.r.limit = INT64_MAX;
    s.r.remaining = INT64_MAX;
    s.r.reset_at = INT64_MAX;
    s.r.retry_after = 5;
    s.r.window = INT64_MAX;
    memset(s.r.rule_id, 'a', sizeof(s.r.rule_id));
    memset(s.guard, 'Z', sizeof(s.guard));

    memset(sixty_four, 'a', RL_RULE_ID_MAX + 1);
    sixty_four[RL_RULE_ID_MAX + 1] = '\0';

    n = rl_headers(&s.r, RL_HEADERS_IETF, h, 8);
    ck_assert_int_eq(n, 6);
    snprintf(expect, sizeof(expect), "\"%s\";q=999999999999999;w=999999999999999",
             sixty_four);
    assert_header(h, n, 4, "RateLimit-Policy", expect);
    /* Denied: t is Retry-After's 5 s, r what q / w grants in them. */
    snprintf(expect, sizeof(expect), "\"%s\";r=5;t=5", sixty_four);
    assert_header(h, n, 5, "RateLimit", expect);
    ck_assert_ptr_null(strchr(h[4].value, 'Z'));
    ck_assert_ptr_null(strchr(h[5].value, 'Z'));
}
END_TEST

/* ---- the runner --------------------------------------------------------------------------- */

static Suite *headers_suite(void)
{
    Suite *s = suite_create("headers");
    TCase *tc = tcase_create("redis");
    TCase *ti = tcase_create("ietf");

    tcase_add_test(tc, test_allowed_headers);
    tcase_add_test(tc, test_denied_headers);
    tcase_add_test(tc, test_large_values);
    tcase_add_test(tc, test_numbers_as_printf);
    tcase_add_test(tc, test_retry_after_zero_clamped);
    tcase_add_test(tc, test_retry_after_negative_clamped);
    tcase_add_test(tc, test_allowed_ignores_retry_after);
    tcase_add_test(tc, test_negative_remaining);
    tcase_add_test(tc, test_negative_limit_and_reset);
    suite_add_tcase(s, tc);

    tcase_add_test(ti, test_ietf_allowed_exact);
    tcase_add_test(ti, test_ietf_denied_order);
    tcase_add_test(ti, test_ietf_default_policy);
    tcase_add_test(ti, test_ietf_window_at_least_one);
    tcase_add_test(ti, test_ietf_reset_in_past);
    tcase_add_test(ti, test_ietf_integers_capped);
    tcase_add_test(ti, test_policy_sanitised);
    tcase_add_test(ti, test_policy_high_and_control_bytes);
    tcase_add_test(ti, test_policy_valid_bytes_kept);
    tcase_add_test(ti, test_rule_id_not_terminated);
    suite_add_tcase(s, ti);

    return s;
}

int main(void)
{
    return run_suite(headers_suite());
}
