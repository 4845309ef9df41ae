/*
 * check_headers_ietf.c -- the IETF RateLimit / RateLimit-Policy pair from
 * real decisions: a limiter on the memory store decides with each of the
 * four algorithms (limit 10 per 60 s, burst 10), and rl_headers() must
 * write exactly the strings rl_headers(3) documents, in the draft-11
 * default and with RL_HEADERS_DRAFT10.  Also: a denial's t equals its
 * Retry-After (draft-11 section 6), r / t never advertises more than q / w,
 * and no partition key (pk) nor any byte of the client's key is written.
 * And the digits of every header's numbers (decimal.h's decimal_put, also
 * the RESP encoder's): exactly printf's, around every power of ten, at
 * both ends of int64, over a stride of the 9- and 10-digit range where
 * the last eight digits are written in one word, and a random sample;
 * the same for the portable path (digit pairs: decimal_portable.c), which
 * big-endian machines take.
 *
 * The store runs on the hand clock (testutil.h), set to the real time when
 * a test starts, because rl_headers() measures t against the real clock.
 * Where the expected t depends on that clock (a window's end), the test
 * reads the clock before and after the call and retries until both give
 * the same expectation: no race with the second hand.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "decimal.h"
#include "ratelimit.h"
#include "testutil.h"
#include "timeutil.h"

#define LIMIT 10
#define WINDOW_S 60
#define MS 1000
/* Tries at a clock-stable format before giving up (each takes microseconds). */
#define STABLE_TRIES 100

#define RULE(id, algo)                                                         \
    "{\"rule_id\":\"" id "\",\"dimension\":\"ip\",\"limit\":10,"               \
    "\"window_seconds\":60,\"burst\":10,\"algorithm\":\"" algo "\"}"
#define RULE_W(id, algo)                                                       \
    "{\"rule_id\":\"" id "\",\"dimension\":\"ip\",\"limit\":10,"               \
    "\"window_seconds\":60,\"algorithm\":\"" algo "\"}"
#define RULES                                                                  \
    "[" RULE("tb", "token_bucket") "," RULE("gcra", "gcra") ","               \
    RULE_W("fw", "fixed_window") "," RULE_W("sw", "sliding_window") "]"

/* A key that is personal data: it must never reach a header. */
#define CLIENT "203.0.113.77"

static const unsigned IETF = RL_HEADERS_IETF;
static const unsigned DRAFT10 = RL_HEADERS_IETF | RL_HEADERS_DRAFT10;

static int64_t ceil_div(int64_t a, int64_t b)
{
    return a <= 0 ? 0 : (a + b - 1) / b;
}

/* A limiter whose store clock stands at the real time now. */
static rl_limiter *limiter_now(void)
{
    rl_limiter *lim = limiter_with(RULES);

    clock_set(real_ms());
    return lim;
}

/* `cost` units of rule `id` for CLIENT, n times; the last result. */
static rl_result charge(rl_limiter *lim, const char *id, int n)
{
    rl_result res = RL_RESULT_INIT;

    for (int i = 0; i < n; i++)
        ck_assert_int_eq(rl_allow(lim, CLIENT, id, 1, &res), RL_OK);
    return res;
}

/*
 * The t rl_headers(3) promises for an admitted result at real time now:
 * draft-11 the longer of the time to reset_at_ms (rounded up) and the time
 * q / w takes to grant r; draft-10 the whole seconds to reset_at.
 */
static int64_t expected_t(const rl_result *res, unsigned options, int64_t now)
{
    if (options & RL_HEADERS_DRAFT10) {
        int64_t d = res->reset_at - now / MS;
        return d > 0 ? d : 0;
    }
    int64_t to_reset = ceil_div(res->reset_at_ms - now, MS);
    int64_t pace = ceil_div(res->remaining * WINDOW_S, LIMIT);
    return to_reset > pace ? to_reset : pace;
}

/* The RateLimit value of res in options, with the t expected_t() gives at
 * the very moment rl_headers() read the clock. */
static void ratelimit_value(const rl_result *res, unsigned options,
                            char *got, char *want, size_t len)
{
    rl_header h[RL_HEADERS_MAX];

    for (int i = 0; i < STABLE_TRIES; i++) {
        int64_t before = real_ms();
        int n = rl_headers(res, options, h, RL_HEADERS_MAX);
        int64_t after = real_ms();
        int64_t t = expected_t(res, options, before);

        ck_assert_int_eq(n, res->allowed ? 5 : 6);
        ck_assert_str_eq(h[n - 1].name, "RateLimit");
        if (t != expected_t(res, options, after))
            continue;
        snprintf(got, len, "%s", h[n - 1].value);
        snprintf(want, len, "\"%s\";r=%lld;t=%lld", res->rule_id,
                 (long long)res->remaining, (long long)t);
        return;
    }
    ck_abort_msg("the clock never stood still across one rl_headers()");
}

static void assert_policy(const rl_result *res, unsigned options,
                          const char *want)
{
    rl_header h[RL_HEADERS_MAX];
    int n = rl_headers(res, options, h, RL_HEADERS_MAX);

    ck_assert_int_eq(n, res->allowed ? 5 : 6);
    ck_assert_str_eq(h[n - 2].name, "RateLimit-Policy");
    ck_assert_str_eq(h[n - 2].value, want);
}

/* The value of header `name` in the formatted block for res. */
static void header_of(const rl_result *res, unsigned options,
                      const char *name, char *out, size_t len)
{
    rl_header h[RL_HEADERS_MAX];
    int n = rl_headers(res, options, h, RL_HEADERS_MAX);

    for (int i = 0; i < n; i++)
        if (strcmp(h[i].name, name) == 0) {
            snprintf(out, len, "%s", h[i].value);
            return;
        }
    ck_abort_msg("no %s header", name);
}

/* ---- admitted: r the units left, t per algorithm -------------------------- */

/* Bucket algorithms, 3 of 10 spent: full again in 18 s, but 7 units at
 * 10 per 60 s take 42 s, so t is 42 (draft-11 caps r / t at q / w). */
START_TEST(test_bucket_admitted_paced)
{
    static const char *const ids[] = {"tb", "gcra"};
    rl_limiter *lim = limiter_now();

    for (int i = 0; i < 2; i++) {
        rl_result res = charge(lim, ids[i], 3);
        char got[128], want[128];

        ck_assert_int_eq(res.allowed, 1);
        ck_assert_int_eq(res.remaining, 7);
        ck_assert_int_eq(res.reset_at_ms, atomic_load(&test_now) + 18 * MS);
        snprintf(want, sizeof want, "\"%s\";q=10;w=60", ids[i]);
        assert_policy(&res, IETF, want);
        assert_policy(&res, DRAFT10, want);
        ratelimit_value(&res, IETF, got, want, sizeof got);
        ck_assert_str_eq(got, want);
        snprintf(want, sizeof want, "\"%s\";r=7;t=42", ids[i]);
        ck_assert_str_eq(got, want);
        /* draft-10 as 1.0 wrote it: the whole seconds to reset_at. */
        ratelimit_value(&res, DRAFT10, got, want, sizeof got);
        ck_assert_str_eq(got, want);
    }
    rl_limiter_free(lim);
}
END_TEST

/* Bucket algorithms, 9 of 10 spent: 1 unit left, full again in 54 s, which
 * is longer than 1 unit's 6 s: t = 54 in both drafts (but rounded from ms
 * in draft-11, from whole seconds in draft-10). */
START_TEST(test_bucket_admitted_to_full)
{
    static const char *const ids[] = {"tb", "gcra"};
    rl_limiter *lim = limiter_now();

    for (int i = 0; i < 2; i++) {
        rl_result res = charge(lim, ids[i], 9);
        char got[128], want[128];

        ck_assert_int_eq(res.remaining, 1);
        ratelimit_value(&res, IETF, got, want, sizeof got);
        ck_assert_str_eq(got, want);
        snprintf(want, sizeof want, "\"%s\";r=1;t=54", ids[i]);
        ck_assert_str_eq(got, want);
        ratelimit_value(&res, DRAFT10, got, want, sizeof got);
        ck_assert_str_eq(got, want);
    }
    rl_limiter_free(lim);
}
END_TEST

/* Window algorithms: t runs to the window's end, or longer when the units
 * left would pass q / w sooner (7 left: at least 42 s). */
START_TEST(test_window_admitted)
{
    static const char *const ids[] = {"fw", "sw"};
    rl_limiter *lim = limiter_now();
    int64_t end = (atomic_load(&test_now) / (WINDOW_S * MS) + 1) * WINDOW_S * MS;

    for (int i = 0; i < 2; i++) {
        for (int spent = 3; spent <= 9; spent += 6) {
            rl_result res = charge(lim, ids[i], spent == 3 ? 3 : 6);
            char got[128], want[128];

            ck_assert_int_eq(res.allowed, 1);
            ck_assert_int_eq(res.remaining, LIMIT - spent);
            ck_assert_int_eq(res.reset_at_ms, end);
            ratelimit_value(&res, IETF, got, want, sizeof got);
            ck_assert_str_eq(got, want);
            ratelimit_value(&res, DRAFT10, got, want, sizeof got);
            ck_assert_str_eq(got, want);
        }
    }
    rl_limiter_free(lim);
}
END_TEST

/* ---- denied: t is Retry-After in draft-11 --------------------------------- */

/* Every algorithm, 11th unit: Retry-After is the wait, RateLimit r=0 and
 * t the same seconds, so Retry-After is never before the window's end.
 * Buckets: one unit every 6 s.  Fixed window: its end.  Sliding window:
 * its end plus the 6 s the previous window's 10 take to weigh 9. */
START_TEST(test_denied_t_is_retry_after)
{
    static const char *const ids[] = {"tb", "gcra", "fw", "sw"};
    rl_limiter *lim = limiter_now();
    int64_t now = atomic_load(&test_now);
    int64_t to_end = (now / (WINDOW_S * MS) + 1) * WINDOW_S * MS - now;
    const int64_t wait_ms[] = {6 * MS, 6 * MS, to_end, to_end + 6 * MS};

    for (int i = 0; i < 4; i++) {
        rl_result res = charge(lim, ids[i], LIMIT + 1);
        char got[128], want[128], retry[32];

        ck_assert_int_eq(res.allowed, 0);
        ck_assert_int_eq(res.retry_after_ms, wait_ms[i]);
        snprintf(want, sizeof want, "%lld",
                 (long long)ceil_div(wait_ms[i], MS));
        header_of(&res, IETF, "Retry-After", retry, sizeof retry);
        ck_assert_str_eq(retry, want);
        header_of(&res, IETF, "RateLimit", got, sizeof got);
        snprintf(want, sizeof want, "\"%s\";r=0;t=%s", ids[i], retry);
        ck_assert_str_eq(got, want);
    }
    rl_limiter_free(lim);
}
END_TEST

/* draft-10 as 1.0 wrote it counts t to reset_at: a bucket denied for 6 s
 * says t=60 (full again), a Retry-After before the reset parameter, which
 * is why draft-11 is the default. */
START_TEST(test_denied_draft10_counts_to_reset)
{
    rl_limiter *lim = limiter_now();
    rl_result res = charge(lim, "tb", LIMIT + 1);
    char got[128], want[128], retry[32];

    ck_assert_int_eq(res.allowed, 0);
    ck_assert_int_eq(res.reset_at_ms, atomic_load(&test_now) + 60 * MS);
    header_of(&res, DRAFT10, "Retry-After", retry, sizeof retry);
    ck_assert_str_eq(retry, "6");
    ratelimit_value(&res, DRAFT10, got, want, sizeof got);
    ck_assert_str_eq(got, want);
    /* reset_at is rounded up to a second, now down: 60 or 61. */
    ck_assert_msg(strcmp(got, "\"tb\";r=0;t=60") == 0 ||
                      strcmp(got, "\"tb\";r=0;t=61") == 0,
                  "draft-10 RateLimit was '%s'", got);
    rl_limiter_free(lim);
}
END_TEST

/* A cost the bucket cannot take yet: r keeps the units left, but never
 * more than q / w grants before Retry-After (5 left, 6 s: 1). */
START_TEST(test_denied_cost_r_paced)
{
    rl_limiter *lim = limiter_now();
    rl_result res = charge(lim, "tb", 5);
    char got[128];

    ck_assert_int_eq(rl_allow(lim, CLIENT, "tb", 8, &res), RL_OK);
    ck_assert_int_eq(res.allowed, 0);
    ck_assert_int_eq(res.remaining, 5);
    ck_assert_int_eq(res.retry_after, 18); /* 3 more units, 6 s each */
    header_of(&res, IETF, "RateLimit", got, sizeof got);
    ck_assert_str_eq(got, "\"tb\";r=3;t=18");
    rl_limiter_free(lim);
}
END_TEST

/* ---- what is never written ------------------------------------------------ */

/* No pk parameter (the key is the client's: an address, a user, an API
 * key) and no byte of the key, in any mode, allowed or denied. */
START_TEST(test_no_partition_key)
{
    static const unsigned modes[] = {RL_HEADERS_IETF,
                                     RL_HEADERS_IETF | RL_HEADERS_DRAFT10};
    rl_limiter *lim = limiter_now();
    char buf[RL_HEADERS_FORMAT_MAX];

    for (int n = 1; n <= LIMIT + 1; n += LIMIT) {
        rl_result res = charge(lim, "fw", n == 1 ? 1 : LIMIT);

        ck_assert_int_eq(res.allowed, n == 1);
        for (int m = 0; m < 2; m++) {
            ck_assert_int_gt(rl_headers_format(&res, modes[m], buf, sizeof buf),
                             0);
            ck_assert_ptr_null(strstr(buf, "pk="));
            ck_assert_ptr_null(strstr(buf, CLIENT));
            ck_assert_ptr_null(strstr(buf, "203.0.113"));
        }
    }
    rl_limiter_free(lim);
}
END_TEST

/* decimal.h compiled with DECIMAL_PORTABLE (decimal_portable.c). */
size_t decimal_put_portable(char *p, int64_t x);

/* Both writers of x, this build's (decimal_put) and the portable one,
 * are printf's "%lld" of x, its length, and no byte past. */
static void assert_decimal(int64_t x)
{
    size_t (*const put[])(char *, int64_t) = {decimal_put,
                                              decimal_put_portable};
    char got[DECIMAL_MAX + 2], want[DECIMAL_MAX + 2];
    size_t n;

    snprintf(want, sizeof want, "%lld", (long long)x);
    for (size_t i = 0; i < sizeof put / sizeof put[0]; i++) {
        memset(got, '#', sizeof got);
        n = put[i](got, x);
        ck_assert_int_eq(got[n], '#');
        got[n] = '\0';
        ck_assert_msg(strcmp(got, want) == 0 && n == strlen(want),
                      "%s(%s) wrote %s", i ? "decimal_put_portable"
                      : "decimal_put", want, got);
    }
}

START_TEST(test_decimal_as_printf)
{
    uint64_t r = 0x9E3779B97F4A7C15ULL, p = 1; /* p: 10^19 after the last */

    for (int i = 0; i < 19; i++, p *= 10)
        for (int64_t d = -3; d <= 3; d++) {
            assert_decimal((int64_t)p + d);
            assert_decimal(-((int64_t)p + d));
        }
    assert_decimal(INT64_MAX);
    assert_decimal(INT64_MIN);
    for (int64_t x = 0; x < 10000000000LL; x += 199999)
        assert_decimal(x);
    for (int i = 0; i < 50000; i++) { /* xorshift: every length */
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        assert_decimal((int64_t)(r >> (r % 64)));
    }
}
END_TEST

static Suite *headers_ietf_suite(void)
{
    Suite *s = suite_create("headers_ietf");
    TCase *ta = tcase_create("admitted");
    TCase *td = tcase_create("denied");
    TCase *tn = tcase_create("never");

    tcase_add_test(ta, test_bucket_admitted_paced);
    tcase_add_test(ta, test_bucket_admitted_to_full);
    tcase_add_test(ta, test_window_admitted);
    tcase_add_test(td, test_denied_t_is_retry_after);
    tcase_add_test(td, test_denied_draft10_counts_to_reset);
    tcase_add_test(td, test_denied_cost_r_paced);
    tcase_add_test(tn, test_no_partition_key);
    tcase_add_test(tn, test_decimal_as_printf);
    suite_add_tcase(s, ta);
    suite_add_tcase(s, td);
    suite_add_tcase(s, tn);
    return s;
}

int main(void)
{
    return run_suite(headers_ietf_suite());
}
