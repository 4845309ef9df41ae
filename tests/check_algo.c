/*
 * check_algo.c -- the four algorithms as pure functions: the design note's
 * worked numbers, long-run exact counts, and the edge cases (cost above the
 * limit, cost 0, huge costs, 1 s and 1 day windows, clock steps).
 */
#include <check.h>
#include <string.h>

#include "algo.h"
#include "algo_vectors.h"
#include "ratelimit.h"
#include "settle.h"
#include "testutil.h"

/* algo_vectors.h's draw (token_bucket_decides_as_gcra's walk). */
static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(uint64_t n)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (rng >> 33) % n;
}

static algo_params params(int algo, int64_t limit, int64_t burst, int64_t w)
{
    algo_params ap;
    char err[200];

    ck_assert_msg(algo_params_init(&ap, algo, limit, burst, w, err,
                                   sizeof err) == 0, "%s", err);
    return ap;
}

/* Charge `cost` until denied at time `now`; return how many passed. */
static int64_t drain(const algo_params *ap, algo_state *st, int64_t now,
                     int64_t cost)
{
    algo_decision d;
    int64_t n = 0;

    for (;;) {
        algo_apply(ap, st, now, cost, &d);
        if (!d.allowed)
            return n;
        n++;
    }
}

START_TEST(token_bucket_design_note)
{
    /* 100 req/min with burst 20: r = 100/60 = 1.67 tokens/s, B = 20. */
    algo_params ap = params(RL_ALGO_TOKEN_BUCKET, 100, 20, 60);
    algo_state st = {0};
    algo_decision d;

    ck_assert_int_eq(ap.p, 600); /* one token every 600 ms */
    ck_assert_int_eq(ap.q, 1);
    ck_assert_int_eq(drain(&ap, &st, T0, 1), 20);
    algo_apply(&ap, &st, T0, 1, &d);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_int_eq(d.retry_ms, 600);   /* (cost - tokens) / r        */
    ck_assert_int_eq(d.remaining, 0);
    ck_assert_int_eq(d.reset_ms, T0 + 20 * 600); /* full again        */
    algo_apply(&ap, &st, T0 + 599, 1, &d);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_int_eq(d.retry_ms, 1);
    /* After 6 s, 6 x 1.67 = 10 tokens. */
    ck_assert_int_eq(drain(&ap, &st, T0 + 6000, 1), 10);
    /* Idle for a minute: full (20), never more. */
    ck_assert_int_eq(drain(&ap, &st, T0 + 66000, 1), 20);
}
END_TEST

START_TEST(sliding_window_design_note)
{
    /* 60 s window at 1:15: estimate = prev x 0.75 + current. */
    algo_params ap = params(RL_ALGO_SLIDING_WINDOW, 100, 0, 60);
    algo_state st = {0};
    algo_decision d;
    int64_t w0 = T0; /* T0 is a multiple of 60 s */

    for (int i = 0; i < 80; i++) { /* 80 in the minute before */
        algo_apply(&ap, &st, w0 + 30000, 1, &d);
        ck_assert(d.allowed);
    }
    for (int i = 0; i < 10; i++) { /* 10 so far at 1:15 */
        algo_apply(&ap, &st, w0 + 75000, 1, &d);
        ck_assert(d.allowed);
    }
    /* 80 x 0.75 + 10 = 70: 30 remain. */
    ck_assert_int_eq(d.remaining, 30);
    ck_assert_int_eq(drain(&ap, &st, w0 + 75000, 1), 30);
    algo_apply(&ap, &st, w0 + 75000, 1, &d);
    ck_assert_int_eq(d.allowed, 0);
    /* The next unit fits once 80 x (60 - e)/60 + 40 + 1 <= 100, that is at
     * e = 15.75 s: 750 ms from now. */
    ck_assert_int_eq(d.retry_ms, 750);
    algo_apply(&ap, &st, w0 + 75749, 1, &d);
    ck_assert_int_eq(d.allowed, 0);
    algo_apply(&ap, &st, w0 + 75750, 1, &d);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_int_eq(d.reset_ms, w0 + 120000);
}
END_TEST

START_TEST(sliding_window_retry_when_prev_decays)
{
    algo_params ap = params(RL_ALGO_SLIDING_WINDOW, 100, 0, 60);
    algo_state st = {0};
    algo_decision d;

    for (int i = 0; i < 100; i++)
        algo_apply(&ap, &st, T0 + 1000, 1, &d);
    /* At 1:00 + 0.6 s: estimate 100 x 59.4/60 = 99: one fits. */
    algo_apply(&ap, &st, T0 + 60000, 1, &d);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_int_eq(d.retry_ms, 600);
    algo_apply(&ap, &st, T0 + 60599, 1, &d);
    ck_assert_int_eq(d.allowed, 0);
    algo_apply(&ap, &st, T0 + 60600, 1, &d);
    ck_assert_int_eq(d.allowed, 1);
}
END_TEST

START_TEST(fixed_window_basic)
{
    algo_params ap = params(RL_ALGO_FIXED_WINDOW, 5, 0, 60);
    algo_state st = {0};
    algo_decision d;

    ck_assert_int_eq(drain(&ap, &st, T0 + 10000, 1), 5);
    algo_apply(&ap, &st, T0 + 10000, 1, &d);
    ck_assert_int_eq(d.retry_ms, 50000);
    ck_assert_int_eq(d.reset_ms, T0 + 60000);
    ck_assert_int_eq(drain(&ap, &st, T0 + 60000, 1), 5);
}
END_TEST

START_TEST(gcra_matches_design_numbers)
{
    algo_params ap = params(RL_ALGO_GCRA, 100, 20, 60);
    algo_state st = {0};
    algo_decision d;

    ck_assert_int_eq(drain(&ap, &st, T0, 1), 20);
    algo_apply(&ap, &st, T0, 1, &d);
    ck_assert_int_eq(d.retry_ms, 600);
    ck_assert_int_eq(drain(&ap, &st, T0 + 6000, 1), 10);
    ck_assert_int_eq(drain(&ap, &st, T0 + 66000, 1), 20);
}
END_TEST

/* Exact long-run counts with a rate that is not a whole number of ms: 7 per
 * second is one token every 142.857... ms. */
START_TEST(buckets_count_exactly_over_a_run)
{
    int algos[] = {RL_ALGO_TOKEN_BUCKET, RL_ALGO_GCRA};

    for (int a = 0; a < 2; a++) {
        algo_params ap = params(algos[a], 7, 0, 1);
        algo_state st = {0};
        int64_t total = 0;

        for (int64_t t = 0; t <= 10000; t++)
            total += drain(&ap, &st, T0 + t, 1);
        /* burst 7 + 10 s x 7/s */
        ck_assert_int_eq(total, 7 + 70);
    }
}
END_TEST

START_TEST(windows_count_exactly_over_a_run)
{
    algo_params fw = params(RL_ALGO_FIXED_WINDOW, 7, 0, 1);
    algo_params sw = params(RL_ALGO_SLIDING_WINDOW, 100, 0, 1);
    algo_state a = {0}, b = {0};
    int64_t fixed = 0, sliding = 0;

    for (int64_t t = 0; t < 10000; t++) {
        fixed += drain(&fw, &a, T0 + t, 1);
        sliding += drain(&sw, &b, T0 + t, 1);
    }
    ck_assert_int_eq(fixed, 70);
    /* Under steady demand the sliding window admits its limit per window. */
    ck_assert_int_ge(sliding, 1000 * 97 / 100);
    ck_assert_int_le(sliding, 1000 * 103 / 100);
}
END_TEST

START_TEST(cost_above_capacity_is_denied_for_a_window)
{
    int algos[] = {RL_ALGO_SLIDING_WINDOW, RL_ALGO_TOKEN_BUCKET,
                   RL_ALGO_FIXED_WINDOW, RL_ALGO_GCRA};

    for (int a = 0; a < 4; a++) {
        algo_params ap = params(algos[a], 10, 0, 60);
        algo_state st = {0}, before;
        algo_decision d;

        before = st;
        algo_apply(&ap, &st, T0, 11, &d);
        ck_assert_int_eq(d.allowed, 0);
        ck_assert_int_eq(d.retry_ms, 60000);
        ck_assert_int_eq(d.remaining, 10);
        ck_assert(memcmp(&st, &before, sizeof st) == 0);
        algo_apply(&ap, &st, T0, RL_COST_MAX, &d); /* huge: no overflow */
        ck_assert_int_eq(d.allowed, 0);
        ck_assert_int_eq(d.remaining, 10);
        algo_apply(&ap, &st, T0, 10, &d); /* exactly the limit fits */
        ck_assert_int_eq(d.allowed, 1);
        ck_assert_int_eq(d.remaining, 0);
    }
}
END_TEST

START_TEST(cost_zero_charges_nothing)
{
    int algos[] = {RL_ALGO_SLIDING_WINDOW, RL_ALGO_TOKEN_BUCKET,
                   RL_ALGO_FIXED_WINDOW, RL_ALGO_GCRA};

    for (int a = 0; a < 4; a++) {
        algo_params ap = params(algos[a], 3, 0, 60);
        algo_state st = {0};
        algo_decision d;

        algo_apply(&ap, &st, T0, 2, &d);
        algo_apply(&ap, &st, T0, 0, &d);
        ck_assert_int_eq(d.allowed, 1);
        ck_assert_int_eq(d.changed, 0);
        ck_assert_int_eq(d.remaining, 1);
        ck_assert_int_eq(drain(&ap, &st, T0, 1), 1);
        algo_apply(&ap, &st, T0, 0, &d); /* still "allowed": charges 0 */
        ck_assert_int_eq(d.allowed, 1);
        ck_assert_int_eq(d.remaining, 0);
    }
}
END_TEST

START_TEST(one_second_and_one_day_windows)
{
    algo_params sec = params(RL_ALGO_TOKEN_BUCKET, 1000000, 0, 1);
    algo_params day = params(RL_ALGO_SLIDING_WINDOW, 1000000, 0, 86400);
    algo_params gday = params(RL_ALGO_GCRA, 999983, 0, 86400); /* prime */
    algo_state a = {0}, b = {0}, c = {0};
    algo_decision d;

    /* 1M/s: one token per microsecond, i.e. 1000 per ms. */
    algo_apply(&sec, &a, T0, 1000000, &d);
    ck_assert(d.allowed);
    algo_apply(&sec, &a, T0 + 1, 1001, &d);
    ck_assert(!d.allowed);
    algo_apply(&sec, &a, T0 + 1, 1000, &d);
    ck_assert(d.allowed);
    /* 1M/day: a day's worth at once, then nothing until the window moves. */
    algo_apply(&day, &b, T0, 1000000, &d);
    ck_assert(d.allowed);
    algo_apply(&day, &b, T0 + 3600 * 1000, 1, &d);
    ck_assert(!d.allowed);
    ck_assert_int_eq(d.reset_ms, T0 + 86400000LL);
    /* A prime limit per day still counts exactly. */
    ck_assert_int_eq(drain(&gday, &c, T0, 1000), 999);
    algo_apply(&gday, &c, T0 + 86400000LL, 999983, &d);
    ck_assert(d.allowed);
}
END_TEST

START_TEST(clock_steps_back_never_refill)
{
    int algos[] = {RL_ALGO_SLIDING_WINDOW, RL_ALGO_TOKEN_BUCKET,
                   RL_ALGO_FIXED_WINDOW, RL_ALGO_GCRA};

    for (int a = 0; a < 4; a++) {
        algo_params ap = params(algos[a], 10, 0, 60);
        algo_state st = {0};

        ck_assert_int_eq(drain(&ap, &st, T0 + 120000, 1), 10);
        /* Back an hour, then a day: nothing more passes. */
        ck_assert_int_eq(drain(&ap, &st, T0 + 120000 - 3600000, 1), 0);
        ck_assert_int_eq(drain(&ap, &st, T0 - 86400000LL, 1), 0);
        /* Forward a year: a fresh window or a full bucket, no overflow. */
        ck_assert_int_eq(drain(&ap, &st, T0 + 365LL * 86400000, 1), 10);
    }
}
END_TEST

/* GCRA's rule for the token bucket: the level moves back with a clock
 * gone back (d ms back: d * q units fewer, never more tokens), down to
 * -cap, and a debt's refill time still to come counts in a denial's
 * retry.  (Before, the level was held at its last charge's time: 8 at
 * T0 + 4800, and a retry of one token's 600 ms past a debt.) */
START_TEST(token_bucket_clock_back_refills_nothing)
{
    algo_params ap = params(RL_ALGO_TOKEN_BUCKET, 100, 20, 60); /* q = 1 */
    algo_state st = {0};
    algo_decision d;
    int64_t exp;

    ck_assert_int_eq(drain(&ap, &st, T0, 2) * 2, 20);
    algo_apply(&ap, &st, T0 + 6000, 2, &d); /* 10 refilled, 2 charged */
    ck_assert_int_eq(d.remaining, 8);
    ck_assert_int_eq(d.reset_ms, T0 + 13200);
    /* 1200 ms back (2 tokens' refill): 6 of 8, the same full time */
    algo_apply(&ap, &st, T0 + 6000 - 1200, 0, &d);
    ck_assert_int_eq(d.allowed, 1);
    ck_assert_int_eq(d.remaining, 6);
    ck_assert_int_eq(d.reset_ms, T0 + 13200);
    algo_apply(&ap, &st, T0 + 6000 - 1201, 0, &d);
    ck_assert_int_eq(d.remaining, 5); /* one unit short of 6 */
    ck_assert_int_eq(drain(&ap, &st, T0 + 6000 - 1200, 1), 6);
    /* empty at T0 + 4800: at T0 + 4000 the level is -800 units */
    algo_apply(&ap, &st, T0 + 4000, 1, &d);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_int_eq(d.remaining, 0);
    ck_assert_int_eq(d.retry_ms, 600 + 800);
    ck_assert_int_eq(d.reset_ms, T0 + 4800 + 12000);
    /* a day back: at least -cap (one burst's refill to come, no overflow) */
    algo_apply(&ap, &st, T0 - 86400000LL, 1, &d);
    ck_assert_int_eq(d.retry_ms, 600 + 12000);
    ck_assert_int_eq(d.reset_ms, T0 - 86400000LL + 24000);

    /* a debt of 5 tokens charged on an empty bucket at T0: its retry
     * counts the 3000 ms of refill to come, then one token's 600 */
    st = (algo_state){0};
    ck_assert_int_eq(drain(&ap, &st, T0, 20), 1);
    ck_assert(settle_state(&ap, 1, 5, T0, T0, &st, 1, &exp));
    ck_assert_int_eq(exp, T0 + 3000 + 12000);
    algo_apply(&ap, &st, T0, 1, &d);
    ck_assert_int_eq(d.allowed, 0);
    ck_assert_int_eq(d.retry_ms, 3000 + 600);
    ck_assert_int_eq(d.reset_ms, exp);
    algo_apply(&ap, &st, T0 + 3599, 1, &d);
    ck_assert_int_eq(d.retry_ms, 1);
    ck_assert_int_eq(drain(&ap, &st, T0 + 3600, 1), 1);
}
END_TEST

/* The shared vector of GCRA's rule (algo_vectors.h), on the C maths. */
static algo_state vec_st;
static void vec_apply(const algo_params *ap, int64_t now, int64_t cost,
                      algo_decision *d)
{
    algo_apply(ap, &vec_st, now, cost, d);
}

START_TEST(token_bucket_clock_back_vector)
{
    vec_st = (algo_state){0};
    bucket_clock_back_run(vec_apply, T0, 0, "C maths");
}
END_TEST

/* A refund at now (algo_vectors.h's refund vector): settle_state's. */
static void vec_refund(const algo_params *ap, int64_t now, int64_t cost)
{
    int64_t exp;

    ck_assert(settle_state(ap, 0, cost, now, now, &vec_st, 1, &exp));
}

START_TEST(token_bucket_refund_at_now_vector)
{
    vec_st = (algo_state){0};
    bucket_refund_run(vec_apply, vec_refund, T0, "C maths");
}
END_TEST

/* The token bucket is a GCRA: on one random walk of times (steps back up
 * to 2 s) and costs, the two allow the same and report the same tokens
 * left, for q = 1 and q > 1. */
START_TEST(token_bucket_decides_as_gcra)
{
    static const int64_t limits[] = {100, 7};

    for (int k = 0; k < 2; k++) {
        algo_params tb = params(RL_ALGO_TOKEN_BUCKET, limits[k], 12, 60);
        algo_params g = params(RL_ALGO_GCRA, limits[k], 12, 60);
        algo_state st = {0}, sg = {0};
        int64_t now = T0;

        for (int i = 0; i < 20000; i++) {
            algo_decision d, e;
            int64_t cost;

            now += (int64_t)rnd(6000) - 2000;
            cost = (int64_t)rnd(4);
            algo_apply(&tb, &st, now, cost, &d);
            algo_apply(&g, &sg, now, cost, &e);
            ck_assert_msg(d.allowed == e.allowed &&
                          d.remaining == e.remaining,
                          "limit %lld step %d: bucket %d/%lld, gcra "
                          "%d/%lld", (long long)limits[k], i, d.allowed,
                          (long long)d.remaining, e.allowed,
                          (long long)e.remaining);
            if (d.allowed)
                ck_assert_int_eq(d.reset_ms, e.reset_ms);
        }
    }
}
END_TEST

/* The design note's edge case: the limit spent in a window's last second,
 * a burst in the next one's first second. */
START_TEST(window_edge_burst)
{
    algo_params fw = params(RL_ALGO_FIXED_WINDOW, 100, 0, 60);
    algo_params sw = params(RL_ALGO_SLIDING_WINDOW, 100, 0, 60);
    algo_state a = {0}, b = {0};
    int64_t fixed = 0, sliding = 0;

    for (int64_t t = 59000; t < 61000; t += 10) {
        fixed += drain(&fw, &a, T0 + t, 1);
        sliding += drain(&sw, &b, T0 + t, 1);
    }
    ck_assert_int_eq(fixed, 200);           /* the 2x burst             */
    ck_assert_int_le(sliding, 110);         /* at most 1.1x the limit   */
    ck_assert_int_ge(sliding, 100);
}
END_TEST

START_TEST(params_reject_bad_numbers)
{
    algo_params ap;
    char err[200];

    ck_assert_int_eq(algo_params_init(&ap, 0, 0, 0, 60, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "limit"));
    ck_assert_int_eq(algo_params_init(&ap, 0, 10, 0, -1, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "window_seconds"));
    ck_assert_int_eq(algo_params_init(&ap, 0, 10, 5, 60, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "burst"));
    ck_assert_int_eq(algo_params_init(&ap, 9, 10, 0, 60, err, sizeof err), -1);
    ck_assert_int_eq(algo_params_init(&ap, 1, RL_LIMIT_MAX + 1, 0, 60, err,
                                      sizeof err), -1);
    /* A prime limit over 31 days with a large burst needs > 52 bits. */
    ck_assert_int_eq(algo_params_init(&ap, RL_ALGO_TOKEN_BUCKET, 999983,
                                      10000000, 31 * 86400, err, sizeof err),
                     -1);
    ck_assert_ptr_nonnull(strstr(err, "52 bits"));
    ck_assert_int_eq(algo_params_init(&ap, RL_ALGO_SLIDING_WINDOW,
                                      RL_LIMIT_MAX, 0, 31 * 86400, err,
                                      sizeof err), -1);
    ck_assert_int_eq(algo_from_name("leaky"), -1);
    ck_assert_int_eq(algo_from_name("gcra"), RL_ALGO_GCRA);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("algo");
    TCase *tc = tcase_create("algo");

    tcase_add_test(tc, token_bucket_design_note);
    tcase_add_test(tc, sliding_window_design_note);
    tcase_add_test(tc, sliding_window_retry_when_prev_decays);
    tcase_add_test(tc, fixed_window_basic);
    tcase_add_test(tc, gcra_matches_design_numbers);
    tcase_add_test(tc, buckets_count_exactly_over_a_run);
    tcase_add_test(tc, windows_count_exactly_over_a_run);
    tcase_add_test(tc, cost_above_capacity_is_denied_for_a_window);
    tcase_add_test(tc, cost_zero_charges_nothing);
    tcase_add_test(tc, one_second_and_one_day_windows);
    tcase_add_test(tc, clock_steps_back_never_refill);
    tcase_add_test(tc, token_bucket_clock_back_refills_nothing);
    tcase_add_test(tc, token_bucket_decides_as_gcra);
    tcase_add_test(tc, token_bucket_clock_back_vector);
    tcase_add_test(tc, token_bucket_refund_at_now_vector);
    tcase_add_test(tc, window_edge_burst);
    tcase_add_test(tc, params_reject_bad_numbers);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
