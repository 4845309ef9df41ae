/*
 * check_contention.c -- eight threads hammering one key through rl_allow(),
 * on the memory store, with time driven by hand in phases: in each phase
 * every thread charges until it is denied, then all meet at a barrier and
 * the clock moves on.  Demand is continuous, so each algorithm must admit
 * exactly what its definition allows over the run; a race that let two
 * threads spend the same unit would show as one admission too many.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>

#include "testutil.h"

#define THREADS 8

typedef struct run {
    rl_limiter *lim;
    const char *rule;
    int64_t start, step;     /* ms */
    int phases;
    pthread_barrier_t start_b, end_b;
    _Atomic int64_t admitted;
} run;

static void *worker(void *arg)
{
    run *r = arg;
    rl_result res = RL_RESULT_INIT;

    for (int p = 0; p < r->phases; p++) {
        pthread_barrier_wait(&r->start_b);
        for (;;) {
            int rc = rl_allow(r->lim, "user:hot", r->rule, 1, &res);
            if (rc != RL_OK || !res.allowed)
                break;
            atomic_fetch_add(&r->admitted, 1);
        }
        pthread_barrier_wait(&r->end_b);
    }
    return NULL;
}

/* Run `phases` phases from `start`, `step` ms apart; return admissions. */
static int64_t hammer(rl_limiter *lim, const char *rule, int64_t start,
                      int64_t step, int phases)
{
    pthread_t th[THREADS];
    run r = {.lim = lim, .rule = rule, .start = start, .step = step,
             .phases = phases};

    atomic_init(&r.admitted, 0);
    pthread_barrier_init(&r.start_b, NULL, THREADS + 1);
    pthread_barrier_init(&r.end_b, NULL, THREADS + 1);
    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, worker, &r);
    for (int p = 0; p < phases; p++) {
        clock_set(start + p * step);
        pthread_barrier_wait(&r.start_b);
        pthread_barrier_wait(&r.end_b);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&r.start_b);
    pthread_barrier_destroy(&r.end_b);
    return atomic_load(&r.admitted);
}

static const char *rules =
    "[{\"rule_id\":\"tb\",\"dimension\":\"user\",\"limit\":7,"
    "\"window_seconds\":1,\"burst\":5,\"algorithm\":\"token_bucket\"},"
    " {\"rule_id\":\"gcra\",\"dimension\":\"user\",\"limit\":7,"
    "\"window_seconds\":1,\"burst\":5,\"algorithm\":\"gcra\"},"
    " {\"rule_id\":\"fw\",\"dimension\":\"user\",\"limit\":50,"
    "\"window_seconds\":1,\"algorithm\":\"fixed_window\"},"
    " {\"rule_id\":\"sw\",\"dimension\":\"user\",\"limit\":200,"
    "\"window_seconds\":1,\"algorithm\":\"sliding_window\"},"
    " {\"rule_id\":\"fw60\",\"dimension\":\"user\",\"limit\":100,"
    "\"window_seconds\":60,\"algorithm\":\"fixed_window\"},"
    " {\"rule_id\":\"sw60\",\"dimension\":\"user\",\"limit\":100,"
    "\"window_seconds\":60,\"algorithm\":\"sliding_window\"}]";

/* 7 per second is one token every 142.857 ms: 20 s in 13 ms steps. */
START_TEST(token_bucket_and_gcra_admit_exactly)
{
    const char *ids[] = {"tb", "gcra"};

    for (int i = 0; i < 2; i++) {
        rl_limiter *lim = limiter_with(rules);
        int phases = 20000 / 13 + 1;
        int64_t span = (int64_t)(phases - 1) * 13;
        int64_t got = hammer(lim, ids[i], T0, 13, phases);

        /* burst 5 + floor(span x 7 / 1000) */
        ck_assert_int_eq(got, 5 + span * 7 / 1000);
        rl_limiter_free(lim);
    }
}
END_TEST

START_TEST(fixed_window_admits_exactly)
{
    rl_limiter *lim = limiter_with(rules);
    /* 10 s in 50 ms steps, from a window start: 10 windows of 50. */
    int64_t got = hammer(lim, "fw", T0, 50, 200);

    ck_assert_int_eq(got, 10 * 50);
    rl_limiter_free(lim);
}
END_TEST

START_TEST(sliding_window_within_three_percent)
{
    rl_limiter *lim = limiter_with(rules);
    int64_t got = hammer(lim, "sw", T0, 10, 2000); /* 20 windows */

    ck_assert_int_le(got, 20 * 200 * 103 / 100);
    ck_assert_int_ge(got, 20 * 200 * 97 / 100);
    rl_limiter_free(lim);
}
END_TEST

/* The limit spent in a window's last second, then a burst in the next
 * window's first second, 8 threads at each step. */
START_TEST(window_edge_sliding_vs_fixed)
{
    rl_limiter *lim = limiter_with(rules);
    int64_t fixed = hammer(lim, "fw60", T0 + 59000, 50, 40);
    int64_t sliding = hammer(lim, "sw60", T0 + 59000, 50, 40);

    ck_assert_int_eq(fixed, 200); /* 2x: what a fixed window allows */
    ck_assert_int_ge(sliding, 100);
    ck_assert_int_le(sliding, 110); /* at most 1.1x the limit */
    rl_limiter_free(lim);
}
END_TEST

/* Real clock, real threads, no phases: the token bucket never admits more
 * than burst + elapsed x rate. */
static void *free_run(void *arg)
{
    run *r = arg;
    rl_result res = RL_RESULT_INIT;

    for (int i = 0; i < 20000; i++) {
        if (rl_allow(r->lim, "user:free", "tbr", 1, &res) != RL_OK)
            break;
        if (res.allowed)
            atomic_fetch_add(&r->admitted, 1);
    }
    return NULL;
}

START_TEST(real_clock_bucket_bound)
{
    rl_limiter *lim = NULL;
    pthread_t th[THREADS];
    run r = {0};
    struct timespec a, b;
    int64_t elapsed_ms;

    ck_assert_int_eq(rl_limiter_new(&lim, NULL), RL_OK);
    ck_assert_int_eq(rl_rules_load_string(lim,
        "[{\"rule_id\":\"tbr\",\"dimension\":\"user\",\"limit\":1000,"
        "\"window_seconds\":1,\"burst\":100,\"algorithm\":\"token_bucket\"}]"),
        RL_OK);
    r.lim = lim;
    atomic_init(&r.admitted, 0);
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, free_run, &r);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    elapsed_ms = (b.tv_sec - a.tv_sec) * 1000 +
                 (b.tv_nsec - a.tv_nsec) / 1000000 + 1;
    /* 1 per ms; +1 ms of slack for where the first check fell. */
    ck_assert_int_le(atomic_load(&r.admitted), 100 + elapsed_ms + 1);
    ck_assert_int_ge(atomic_load(&r.admitted), 100);
    rl_limiter_free(lim);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("contention");
    TCase *tc = tcase_create("contention");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, token_bucket_and_gcra_admit_exactly);
    tcase_add_test(tc, fixed_window_admits_exactly);
    tcase_add_test(tc, sliding_window_within_three_percent);
    tcase_add_test(tc, window_edge_sliding_vs_fixed);
    tcase_add_test(tc, real_clock_bucket_bound);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
