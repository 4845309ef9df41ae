/*
 * check_lua.c -- the C maths (src/algo.c) and the Lua maths (lua/) make the
 * same decisions, step for step, on the same (time, cost) sequences, against
 * a real redis-server.  The test build of the script takes its time from
 * ARGV[1], so both sides see identical clocks; times start an hour ahead of
 * the real clock so Redis never expires a key the sequence still uses.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algo.h"
#include "redis_harness.h"
#include "testutil.h"

extern const char rl_lua_check_test[];
extern const size_t rl_lua_check_test_len;

static rh_server srv;
static redisContext *ctx;

static void setup(void)
{
    ck_assert_int_eq(rh_start(&srv, NULL), 0);
    ck_assert_ptr_nonnull(ctx = rh_connect(&srv));
}

static void teardown(void)
{
    redisFree(ctx);
    rh_stop(&srv);
}

static uint64_t rng = 88172645463325252ULL;

static uint64_t rnd(uint64_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng % n;
}

/* One charge through the Lua script on `key`. */
static void lua_apply(const algo_params *ap, const char *key, int64_t now,
                      int64_t cost, algo_decision *d)
{
    char a[12][24];
    const char *argv[16];
    size_t lens[16];
    /* clock, mode, 1 request of 1 key, then the key's 8 values */
    int64_t vals[] = {now, 0, 1, 1, ap->algo, ap->limit, ap->burst,
                      ap->window_ms, ap->p, ap->q, cost, 0};
    redisReply *r;

    argv[0] = "EVAL";
    argv[1] = rl_lua_check_test;
    argv[2] = "1";
    argv[3] = key;
    for (int i = 0; i < 12; i++) {
        snprintf(a[i], sizeof a[i], "%lld", (long long)vals[i]);
        argv[4 + i] = a[i];
    }
    argv[5] = "c";
    for (int i = 0; i < 16; i++)
        lens[i] = i == 1 ? rl_lua_check_test_len : strlen(argv[i]);
    r = redisCommandArgv(ctx, 16, argv, lens);
    ck_assert_ptr_nonnull(r);
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 5,
                  "script reply type %d: %s", r->type,
                  r->type == REDIS_REPLY_ERROR ? r->str : "");
    d->allowed = r->element[0]->integer == 1;
    d->remaining = r->element[1]->integer;
    d->reset_ms = r->element[2]->integer;
    d->retry_ms = r->element[3]->integer;
    ck_assert_int_eq(r->element[4]->integer, now);
    freeReplyObject(r);
}

static algo_params random_params(int algo)
{
    static const int64_t windows[] = {1, 7, 60, 3600, 86400};
    static const int64_t limits[] = {1, 3, 7, 100, 999983, 1000000};
    algo_params ap;
    char err[200];
    int64_t w = windows[rnd(5)], limit = limits[rnd(6)], burst = 0;

    if (algo == RL_ALGO_TOKEN_BUCKET || algo == RL_ALGO_GCRA)
        burst = rnd(2) ? 1 + (int64_t)rnd((uint64_t)limit * 2) : 0;
    if (algo_params_init(&ap, algo, limit, burst, w, err, sizeof err) != 0)
        ck_assert_int_eq(algo_params_init(&ap, algo, 10, 0, 1, err,
                                          sizeof err), 0);
    return ap;
}

/* A sequence of steps: mostly small moves, some jumps, some steps back. */
static int64_t next_time(const algo_params *ap, int64_t t, int64_t base)
{
    switch (rnd(8)) {
    case 0: return t;                                  /* same ms      */
    case 1: return t + 1 + (int64_t)rnd(5);            /* a few ms     */
    case 2: return t + (int64_t)rnd((uint64_t)ap->window_ms / 4 + 1);
    case 3: return t + ap->window_ms + (int64_t)rnd(1000);  /* a window */
    case 4: return t - (int64_t)rnd(2000) < base ? base : t - (int64_t)rnd(2000);
    default: return t + (int64_t)rnd((uint64_t)ap->q ? 2000 : 10);
    }
}

static int64_t next_cost(const algo_params *ap)
{
    int64_t cap = ap->burst ? ap->burst : ap->limit;

    switch (rnd(6)) {
    case 0: return 0;
    case 1: return cap + (int64_t)rnd(3);  /* over the capacity */
    case 2: return 1 + (int64_t)rnd((uint64_t)cap);
    default: return 1;
    }
}

static void differential(int algo, int rules, int steps)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t base = (int64_t)ts.tv_sec * 1000 + 3600 * 1000;

    for (int r = 0; r < rules; r++) {
        algo_params ap = random_params(algo);
        algo_state st = {0};
        int64_t t = base + (int64_t)rnd(100000);
        char key[64];

        snprintf(key, sizeof key, "rl:{diff}:%s-%d", algo_name(algo), r);
        for (int s = 0; s < steps; s++) {
            algo_decision c, l;
            int64_t cost = next_cost(&ap);

            algo_apply(&ap, &st, t, cost, &c);
            lua_apply(&ap, key, t, cost, &l);
            ck_assert_msg(c.allowed == l.allowed &&
                          c.remaining == l.remaining &&
                          c.reset_ms == l.reset_ms &&
                          c.retry_ms == l.retry_ms,
                          "%s limit %lld burst %lld window %lld ms, step %d "
                          "at t=%lld cost %lld: C {%d %lld %lld %lld} "
                          "Lua {%d %lld %lld %lld}",
                          algo_name(algo), (long long)ap.limit,
                          (long long)ap.burst, (long long)ap.window_ms, s,
                          (long long)(t - base), (long long)cost, c.allowed,
                          (long long)c.remaining, (long long)c.reset_ms,
                          (long long)c.retry_ms, l.allowed,
                          (long long)l.remaining, (long long)l.reset_ms,
                          (long long)l.retry_ms);
            t = next_time(&ap, t, base);
        }
    }
}

START_TEST(sliding_window_same_decisions)
{
    differential(RL_ALGO_SLIDING_WINDOW, 40, 150);
}
END_TEST

START_TEST(token_bucket_same_decisions)
{
    differential(RL_ALGO_TOKEN_BUCKET, 40, 150);
}
END_TEST

START_TEST(fixed_window_same_decisions)
{
    differential(RL_ALGO_FIXED_WINDOW, 40, 150);
}
END_TEST

START_TEST(gcra_same_decisions)
{
    differential(RL_ALGO_GCRA, 40, 150);
}
END_TEST

/* The design note's worked numbers, through Lua alone. */
START_TEST(lua_design_note_numbers)
{
    algo_params ap;
    algo_decision d;
    char err[100];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t t = ((int64_t)ts.tv_sec + 7200) / 60 * 60 * 1000;

    ck_assert_int_eq(algo_params_init(&ap, RL_ALGO_TOKEN_BUCKET, 100, 20, 60,
                                      err, sizeof err), 0);
    for (int i = 0; i < 20; i++) {
        lua_apply(&ap, "rl:{note}:tb", t, 1, &d);
        ck_assert(d.allowed);
    }
    lua_apply(&ap, "rl:{note}:tb", t, 1, &d);
    ck_assert(!d.allowed);
    ck_assert_int_eq(d.retry_ms, 600); /* 1.67 tokens/s */

    ck_assert_int_eq(algo_params_init(&ap, RL_ALGO_SLIDING_WINDOW, 100, 0, 60,
                                      err, sizeof err), 0);
    for (int i = 0; i < 80; i++)
        lua_apply(&ap, "rl:{note}:sw", t + 30000, 1, &d);
    for (int i = 0; i < 10; i++)
        lua_apply(&ap, "rl:{note}:sw", t + 75000, 1, &d);
    ck_assert_int_eq(d.remaining, 30); /* 80 x 0.75 + 10 = 70 */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("lua");
    TCase *tc = tcase_create("lua");

    if (!rh_available()) {
        fprintf(stderr, "check_lua: redis-server not available, skipping\n");
        return 77;
    }
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, sliding_window_same_decisions);
    tcase_add_test(tc, token_bucket_same_decisions);
    tcase_add_test(tc, fixed_window_same_decisions);
    tcase_add_test(tc, gcra_same_decisions);
    tcase_add_test(tc, lua_design_note_numbers);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
