/*
 * check_headers.c -- tests for rl_headers(), rl_headers_format() and
 * rl_body_format(): exact header names and values for allowed and denied
 * results, clamping, the IETF pair (draft-11 by default, draft-10 with
 * RL_HEADERS_DRAFT10) on hand-made results, rule id sanitisation, buffer
 * bounds, argument checks, and a property test over random rl_results.
 * check_headers_ietf.c drives the pair from real limiters, per algorithm.
 */
#include <check.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ratelimit.h"
#include "testutil.h"

/* ---- helpers -------------------------------------------------------------- */

static rl_result make_result(int allowed, int64_t limit, int64_t remaining,
                             int64_t reset_at, int64_t retry_after,
                             int64_t window, const char *rule_id)
{
    rl_result r;

    memset(&r, 0, sizeof(r));
    r.size = sizeof(r);
    r.allowed = allowed;
    r.limit = limit;
    r.remaining = remaining;
    r.reset_at = reset_at;
    r.retry_after = retry_after;
    r.window = window;
    snprintf(r.rule_id, sizeof(r.rule_id), "%s", rule_id);
    return r;
}

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

static int is_policy_byte(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
           (c >= '0' && c <= '9') || c == '.' || c == '_' || c == ':' ||
           c == '-';
}

/*
 * Parses an IETF value '"<policy>";<k1>=<n1>;<k2>=<n2>' (digits only) and
 * checks the policy is made of safe bytes.  Returns NULL or what is wrong;
 * no Check assertions, so the property test can call it in a hot loop.
 */
static const char *parse_ietf(const char *value, char *pol, size_t polsz,
                              const char *k1, long long *n1, const char *k2,
                              long long *n2)
{
    const char *p, *end;
    const char *keys[2] = {k1, k2};
    long long *nums[2] = {n1, n2};
    size_t plen;

    if (value[0] != '"')
        return "no opening quote";
    end = strchr(value + 1, '"');
    if (end == NULL)
        return "no closing quote";
    plen = (size_t)(end - (value + 1));
    if (plen == 0 || plen >= polsz)
        return "policy empty or too long";
    memcpy(pol, value + 1, plen);
    pol[plen] = '\0';
    for (size_t i = 0; i < plen; i++)
        if (!is_policy_byte((unsigned char)pol[i]))
            return "unsafe policy byte";
    p = end + 1;
    for (int k = 0; k < 2; k++) {
        size_t kl = strlen(keys[k]);
        long long v = 0;
        int digits = 0;

        if (*p++ != ';' || strncmp(p, keys[k], kl) != 0 || p[kl] != '=')
            return "bad parameter";
        p += kl + 1;
        while (*p >= '0' && *p <= '9') {
            if (digits++ == 15)
                return "more than 15 digits";
            v = v * 10 + (*p++ - '0');
        }
        if (digits == 0)
            return "no digits";
        *nums[k] = v;
    }
    return *p == '\0' ? NULL : "trailing bytes";
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

/* ---- bounds and arguments ---------------------------------------------------------- */

START_TEST(test_headers_erange)
{
    rl_result allowed = make_result(1, 10, 9, 100, 0, 60, "p");
    rl_result denied = make_result(0, 10, 0, 100, 3, 60, "p");
    rl_header h[6];

    ck_assert_int_eq(rl_headers(&allowed, 0, h, 0), RL_ERANGE);
    ck_assert_int_eq(rl_headers(&allowed, 0, h, 2), RL_ERANGE);
    ck_assert_int_eq(rl_headers(&allowed, 0, h, 3), 3);
    ck_assert_int_eq(rl_headers(&denied, 0, h, 3), RL_ERANGE);
    ck_assert_int_eq(rl_headers(&denied, 0, h, 4), 4);
    ck_assert_int_eq(rl_headers(&allowed, RL_HEADERS_IETF, h, 4), RL_ERANGE);
    ck_assert_int_eq(rl_headers(&allowed, RL_HEADERS_IETF, h, 5), 5);
    ck_assert_int_eq(rl_headers(&denied, RL_HEADERS_IETF, h, 5), RL_ERANGE);
    ck_assert_int_eq(rl_headers(&denied, RL_HEADERS_IETF, h, 6), 6);
}
END_TEST

START_TEST(test_format_allowed_exact)
{
    rl_result r = make_result(1, 100, 42, 1700000060, 0, 60, "api");
    char buf[512];
    const char *expect = "X-RateLimit-Limit: 100\r\n"
                         "X-RateLimit-Remaining: 42\r\n"
                         "X-RateLimit-Reset: 1700000060\r\n";
    int n = rl_headers_format(&r, 0, buf, sizeof(buf));

    ck_assert_int_eq(n, (int)strlen(expect));
    ck_assert_str_eq(buf, expect);
}
END_TEST

START_TEST(test_format_denied_exact)
{
    rl_result r = make_result(0, 10, 0, 1700000005, 0, 10, "login");
    char buf[512];
    const char *expect = "X-RateLimit-Limit: 10\r\n"
                         "X-RateLimit-Remaining: 0\r\n"
                         "X-RateLimit-Reset: 1700000005\r\n"
                         "Retry-After: 1\r\n";
    int n = rl_headers_format(&r, 0, buf, sizeof(buf));

    ck_assert_int_eq(n, (int)strlen(expect));
    ck_assert_str_eq(buf, expect);
}
END_TEST

START_TEST(test_format_ietf_exact)
{
    rl_result r = make_result(0, 10, 0, 0, 4, 10, "login");
    char buf[512];
    const char *expect = "X-RateLimit-Limit: 10\r\n"
                         "X-RateLimit-Remaining: 0\r\n"
                         "X-RateLimit-Reset: 0\r\n"
                         "Retry-After: 4\r\n"
                         "RateLimit-Policy: \"login\";q=10;w=10\r\n"
                         "RateLimit: \"login\";r=0;t=4\r\n";
    int n = rl_headers_format(&r, RL_HEADERS_IETF, buf, sizeof(buf));

    ck_assert_int_eq(n, (int)strlen(expect));
    ck_assert_str_eq(buf, expect);
    /* draft-10 as 1.0 wrote it: t counts to reset_at (0, in the past). */
    n = rl_headers_format(&r, RL_HEADERS_IETF | RL_HEADERS_DRAFT10, buf,
                          sizeof(buf));
    ck_assert_int_eq(n, (int)strlen(expect));
    ck_assert_str_eq(strstr(buf, "RateLimit: "),
                     "RateLimit: \"login\";r=0;t=0\r\n");
}
END_TEST

START_TEST(test_format_matches_headers)
{
    rl_result r = make_result(0, 77, 0, 0, 12, 30, "a b");
    rl_header h[6];
    char expect[1024] = "";
    char buf[1024];
    int n = rl_headers(&r, RL_HEADERS_IETF, h, 6);

    ck_assert_int_eq(n, 6);
    for (int i = 0; i < n; i++) {
        strcat(expect, h[i].name);
        strcat(expect, ": ");
        strcat(expect, h[i].value);
        strcat(expect, "\r\n");
    }
    ck_assert_int_eq(rl_headers_format(&r, RL_HEADERS_IETF, buf, sizeof(buf)),
                     (int)strlen(expect));
    ck_assert_str_eq(buf, expect);
}
END_TEST

START_TEST(test_format_exact_fit)
{
    rl_result r = make_result(0, 10, 0, 1700000005, 9, 10, "login");
    char big[512], buf[512];
    int len = rl_headers_format(&r, 0, big, sizeof(big));

    ck_assert_int_gt(len, 0);
    ck_assert_uint_eq((size_t)len, strlen(big));

    /* len + 1 bytes: fits, same output. */
    memset(buf, 'Q', sizeof(buf));
    ck_assert_int_eq(rl_headers_format(&r, 0, buf, (size_t)len + 1), len);
    ck_assert_str_eq(buf, big);

    /* len bytes: no room for the NUL. */
    memset(buf, 'Q', sizeof(buf));
    ck_assert_int_eq(rl_headers_format(&r, 0, buf, (size_t)len), RL_ERANGE);
    ck_assert_int_eq(buf[0], '\0');
    ck_assert_int_eq(buf[len], 'Q'); /* nothing written past len */

    /* 1 byte: empty string. */
    memset(buf, 'Q', sizeof(buf));
    ck_assert_int_eq(rl_headers_format(&r, 0, buf, 1), RL_ERANGE);
    ck_assert_int_eq(buf[0], '\0');
    ck_assert_int_eq(buf[1], 'Q');

    /* 0 bytes: nothing written at all. */
    memset(buf, 'Q', sizeof(buf));
    ck_assert_int_eq(rl_headers_format(&r, 0, buf, 0), RL_ERANGE);
    ck_assert_int_eq(buf[0], 'Q');
}
END_TEST

START_TEST(test_worst_case_sizes)
{
    /* The man pages promise 396 bytes for the headers, 58 for the body. */
    rl_result r = RL_RESULT_INIT;
    char buf[RL_HEADERS_FORMAT_MAX], body[RL_BODY_FORMAT_MAX];

    memset(&r, 0, sizeof(r));
    r.size = sizeof(r);
    r.limit = r.remaining = r.reset_at = r.retry_after = r.window = INT64_MAX;
    memset(r.rule_id, 'a', sizeof(r.rule_id));
    ck_assert_int_eq(rl_headers_format(&r, RL_HEADERS_IETF, buf, sizeof(buf)),
                     (int)sizeof(buf) - 1);
    ck_assert_int_eq(rl_body_format(&r, body, sizeof(body)),
                     (int)sizeof(body) - 1);
}
END_TEST

START_TEST(test_null_arguments)
{
    rl_result r = make_result(0, 10, 0, 100, 3, 60, "p");
    rl_header h[6];
    char buf[256];

    ck_assert_int_eq(rl_headers(NULL, 0, h, 6), RL_EINVAL);
    ck_assert_int_eq(rl_headers(&r, 0, NULL, 6), RL_EINVAL);
    ck_assert_int_eq(rl_headers(&r, 0, NULL, 0), RL_EINVAL);
    ck_assert_int_eq(rl_headers(NULL, 0, NULL, 0), RL_EINVAL);
    ck_assert_int_eq(rl_headers_format(NULL, 0, buf, sizeof(buf)), RL_EINVAL);
    ck_assert_int_eq(rl_headers_format(&r, 0, NULL, sizeof(buf)), RL_EINVAL);
    ck_assert_int_eq(rl_headers_format(&r, 0, NULL, 0), RL_EINVAL);
    ck_assert_int_eq(rl_body_format(NULL, buf, sizeof(buf)), RL_EINVAL);
    ck_assert_int_eq(rl_body_format(&r, NULL, sizeof(buf)), RL_EINVAL);
    ck_assert_int_eq(rl_body_format(&r, NULL, 0), RL_EINVAL);
}
END_TEST

START_TEST(test_unknown_options)
{
    rl_result r = make_result(1, 10, 9, 100, 0, 60, "p");
    rl_header h[6];
    char buf[256];
    /* 0x02 is RL_HEADERS_DRAFT10, which only qualifies RL_HEADERS_IETF. */
    const unsigned bad[] = {0x02, 0x04, 0x80, 0x06, 0x80000000u, UINT_MAX};

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        strcpy(buf, "untouched");
        ck_assert_int_eq(rl_headers(&r, bad[i], h, 6), RL_EINVAL);
        ck_assert_int_eq(rl_headers_format(&r, bad[i], buf, sizeof(buf)),
                         RL_EINVAL);
        ck_assert_str_eq(buf, "untouched");
    }
    ck_assert_int_eq(rl_headers(&r, 0, h, 6), 3);
    ck_assert_int_eq(rl_headers(&r, RL_HEADERS_IETF, h, 6), 5);
    ck_assert_int_eq(rl_headers(&r, RL_HEADERS_IETF | RL_HEADERS_DRAFT10, h, 6),
                     5);
}
END_TEST

/* ---- the body ------------------------------------------------------------------------ */

START_TEST(test_body_denied_exact)
{
    rl_result r = make_result(0, 10, 0, 100, 17, 60, "p");
    char buf[128];
    const char *expect = "{\"error\":\"rate_limited\",\"retryAfter\":17}";

    ck_assert_int_eq(rl_body_format(&r, buf, sizeof(buf)), (int)strlen(expect));
    ck_assert_str_eq(buf, expect);
}
END_TEST

START_TEST(test_body_denied_clamped)
{
    rl_result r = make_result(0, 10, 0, 100, -40, 60, "p");
    char buf[128];
    const char *expect = "{\"error\":\"rate_limited\",\"retryAfter\":1}";

    ck_assert_int_eq(rl_body_format(&r, buf, sizeof(buf)), (int)strlen(expect));
    ck_assert_str_eq(buf, expect);
    r.retry_after = 0;
    ck_assert_int_eq(rl_body_format(&r, buf, sizeof(buf)), (int)strlen(expect));
    ck_assert_str_eq(buf, expect);
}
END_TEST

START_TEST(test_body_allowed_empty)
{
    rl_result r = make_result(1, 10, 9, 100, 5, 60, "p");
    char buf[128];

    memset(buf, 'Q', sizeof(buf));
    ck_assert_int_eq(rl_body_format(&r, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "");
    memset(buf, 'Q', sizeof(buf));
    ck_assert_int_eq(rl_body_format(&r, buf, 1), 0);
    ck_assert_int_eq(buf[0], '\0');
    ck_assert_int_eq(rl_body_format(&r, buf, 0), RL_ERANGE);
}
END_TEST

START_TEST(test_body_exact_fit)
{
    rl_result r = make_result(0, 10, 0, 100, 123, 60, "p");
    const char *expect = "{\"error\":\"rate_limited\",\"retryAfter\":123}";
    size_t len = strlen(expect);
    char buf[128];

    memset(buf, 'Q', sizeof(buf));
    ck_assert_int_eq(rl_body_format(&r, buf, len + 1), (int)len);
    ck_assert_str_eq(buf, expect);

    memset(buf, 'Q', sizeof(buf));
    ck_assert_int_eq(rl_body_format(&r, buf, len), RL_ERANGE);
    ck_assert_int_eq(buf[0], '\0');
    ck_assert_int_eq(buf[len], 'Q');

    memset(buf, 'Q', sizeof(buf));
    ck_assert_int_eq(rl_body_format(&r, buf, 0), RL_ERANGE);
    ck_assert_int_eq(buf[0], 'Q');
}
END_TEST

/* ---- property: random results never produce unsafe bytes ---------------------------------- */

static void random_fill(void *p, size_t n, uint64_t *seed)
{
    unsigned char *b = p;

    for (size_t i = 0; i < n; i++) {
        if (i % 8 == 0) {
            uint64_t v = xorshift64(seed);
            for (size_t j = 0; j < 8 && i + j < n; j++)
                b[i + j] = (unsigned char)(v >> (8 * j));
        }
    }
}

/*
 * Checks a header block: exactly `lines` lines "Name: value\r\n", every
 * other byte printable ASCII.  Returns NULL or what is wrong.
 */
static const char *check_block(const char *buf, int len, int lines)
{
    int seen = 0, line_start = 1;

    if (len < 0)
        return "error return";
    if (strlen(buf) != (size_t)len)
        return "length mismatch";
    for (int i = 0; i < len; i++) {
        unsigned char c = (unsigned char)buf[i];

        if (c == '\r') {
            if (i + 1 >= len || buf[i + 1] != '\n' || line_start)
                return "bare CR or empty line";
            seen++;
            i++;
            line_start = 1;
            continue;
        }
        if (c < 0x20 || c > 0x7e)
            return "unsafe byte";
        line_start = 0;
    }
    if (!line_start)
        return "last line not terminated";
    return seen == lines ? NULL : "wrong number of lines";
}

static const char *check_value(const char *v, size_t cap)
{
    size_t vl = strnlen(v, cap);

    if (vl == 0 || vl >= cap)
        return "value empty or not terminated";
    for (size_t k = 0; k < vl; k++) {
        unsigned char c = (unsigned char)v[k];
        if (c < 0x20 || c > 0x7e)
            return "unsafe value byte";
    }
    return NULL;
}

/*
 * draft-11's promises on one RateLimit value: r / t never above q / w, and
 * a denial's t equal to Retry-After (never before the window's end).  Only
 * judged where every number is below 2^31, so the products are exact.
 */
static const char *draft11_promises(const rl_result *res, long long r,
                                    long long t)
{
    const long long small = 1LL << 31;
    long long q = res->limit, w = res->window < 1 ? 1 : res->window;

    if (!res->allowed && res->retry_after >= 1 && res->retry_after < small &&
        t != res->retry_after)
        return "denied: t is not Retry-After";
    if (q < 1 || q >= small || w >= small || r >= small || t >= small)
        return NULL;
    return r * w <= q * t ? NULL : "r / t above q / w";
}

/* One random result through all three calls; NULL or what is wrong. */
static const char *property_once(const rl_result *r, unsigned options)
{
    rl_header h[6];
    char buf[1024], body[128], pol[128];
    long long a, b;
    int n, len, want = 3 + (r->allowed == 0) + (options ? 2 : 0);
    const char *err;

    n = rl_headers(r, options, h, 6);
    if (n != want)
        return "wrong header count";
    for (int i = 0; i < n; i++) {
        if (strnlen(h[i].name, sizeof(h[i].name)) >= sizeof(h[i].name))
            return "name not terminated";
        if ((err = check_value(h[i].value, sizeof(h[i].value))) != NULL)
            return err;
    }
    if (options) {
        if ((err = parse_ietf(h[n - 2].value, pol, sizeof(pol), "q", &a, "w",
                              &b)) != NULL)
            return err;
        if (b < 1)
            return "window below 1";
        if ((err = parse_ietf(h[n - 1].value, pol, sizeof(pol), "r", &a, "t",
                              &b)) != NULL)
            return err;
        if (!(options & RL_HEADERS_DRAFT10) &&
            (err = draft11_promises(r, a, b)) != NULL)
            return err;
    }

    len = rl_headers_format(r, options, buf, sizeof(buf));
    if ((err = check_block(buf, len, want)) != NULL)
        return err;

    len = rl_body_format(r, body, sizeof(body));
    if (len < 0 || strlen(body) != (size_t)len)
        return "body length";
    if ((len == 0) != (r->allowed != 0))
        return "body present iff denied";
    for (int i = 0; i < len; i++)
        if ((unsigned char)body[i] < 0x20 || (unsigned char)body[i] > 0x7e)
            return "unsafe body byte";
    return NULL;
}

START_TEST(test_property_random_results)
{
    uint64_t seed = 0x9e3779b97f4a7c15ULL;
    rl_result r = RL_RESULT_INIT;
    int denied = 0, ietf = 0;

    for (int iter = 0; iter < 100000; iter++) {
        static const unsigned modes[] = {
            0, RL_HEADERS_IETF, RL_HEADERS_IETF | RL_HEADERS_DRAFT10,
            RL_HEADERS_IETF};
        unsigned options = modes[xorshift64(&seed) % 4];
        const char *err;

        random_fill(&r, sizeof(r), &seed);
        r.size = sizeof(r);
        if (iter % 3 == 0) { /* numbers a rule could give */
            r.limit = (int64_t)(xorshift64(&seed) % 1000);
            r.remaining = (int64_t)(xorshift64(&seed) % 1200);
            r.window = (int64_t)(xorshift64(&seed) % 4000);
            r.retry_after = (int64_t)(xorshift64(&seed) % 4000);
            r.reset_at_ms = (int64_t)time(NULL) * 1000 +
                            (int64_t)(xorshift64(&seed) % 5000000);
        }
        /* Bias the interesting cases now and then. */
        if (iter % 4 == 0)
            r.allowed = 0;
        if (iter % 7 == 0)
            r.rule_id[xorshift64(&seed) % sizeof(r.rule_id)] = '\0';
        denied += r.allowed == 0;
        ietf += options != 0;

        err = property_once(&r, options);
        if (err != NULL)
            ck_abort_msg("iteration %d (options %u): %s", iter, options, err);
    }
    /* The generator really exercised both paths. */
    ck_assert_int_gt(denied, 20000);
    ck_assert_int_gt(ietf, 60000);
}
END_TEST

/* ---- the runner --------------------------------------------------------------------------- */

static Suite *headers_suite(void)
{
    Suite *s = suite_create("headers");
    TCase *tc = tcase_create("redis");
    TCase *ti = tcase_create("ietf");
    TCase *tb = tcase_create("bounds");
    TCase *tbody = tcase_create("body");
    TCase *tp = tcase_create("property");

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

    tcase_add_test(tb, test_headers_erange);
    tcase_add_test(tb, test_format_allowed_exact);
    tcase_add_test(tb, test_format_denied_exact);
    tcase_add_test(tb, test_format_ietf_exact);
    tcase_add_test(tb, test_format_matches_headers);
    tcase_add_test(tb, test_format_exact_fit);
    tcase_add_test(tb, test_worst_case_sizes);
    tcase_add_test(tb, test_null_arguments);
    tcase_add_test(tb, test_unknown_options);
    suite_add_tcase(s, tb);

    tcase_add_test(tbody, test_body_denied_exact);
    tcase_add_test(tbody, test_body_denied_clamped);
    tcase_add_test(tbody, test_body_allowed_empty);
    tcase_add_test(tbody, test_body_exact_fit);
    suite_add_tcase(s, tbody);

    /* 100000 iterations: generous under valgrind and sanitizers. */
    tcase_set_timeout(tp, 600);
    tcase_add_test(tp, test_property_random_results);
    suite_add_tcase(s, tp);

    return s;
}

int main(void)
{
    return run_suite(headers_suite());
}
