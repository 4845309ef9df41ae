/*
 * check_headers_format.c -- tests for the text forms of a result's
 * headers and body: rl_headers_format() and rl_body_format() written
 * exactly, and as rl_headers() says; buffer bounds (ERANGE, an exact
 * fit, the worst case sizes); argument checks; and a property test over
 * random rl_results: never an unsafe byte, nor a draft-11 promise broken.
 * check_headers.c tests rl_headers()'s values; headers_fixture.h is what
 * both share.
 */
#include <check.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "headers_fixture.h"
#include "ratelimit.h"
#include "testutil.h"

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

static Suite *headers_format_suite(void)
{
    Suite *s = suite_create("headers_format");
    TCase *tb = tcase_create("bounds");
    TCase *tbody = tcase_create("body");
    TCase *tp = tcase_create("property");

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
    return run_suite(headers_format_suite());
}
