/*
 * check_fleet.c -- the fallback's share with the default options, against
 * a real redis-server.  fleet_size is "auto" by default: four limiters on
 * one server count each other through their heartbeats, and while the
 * server is stopped (SIGSTOP) each one's fallback admits limit / 4 of a
 * key, so the fleet together admits the limit, not four times it (with
 * fleet_size 1, the old default, every limiter admitted the whole limit).
 * Until the first heartbeat counts, the divisor is fleet_size_unknown.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "redis_harness.h"
#include "server_fixtures.h"
#include "testutil.h"
#include "timeutil.h"

#define FLEET 4
#define LIMIT 20
#define WINDOW_S 60

static const char *rules =
    "[{\"rule_id\":\"fb\",\"dimension\":\"user\",\"limit\":20,"
    "\"window_seconds\":60,\"failure_mode\":\"fallback\"}]";

static rl_limiter *open_default(const char *store)
{
    const char *opts[] = {"store", store, "rules", rules, NULL};

    return limiter_from(opts);
}

static int64_t fleet_size_of(rl_limiter *lim)
{
    rl_stats st = RL_STATS_INIT;

    ck_assert_int_eq(rl_stats_get(lim, &st), RL_OK);
    return (int64_t)st.fleet_size;
}

/* Checks of one key while the store is stopped, until the fallback
 * denies one (its share spent) or `until`: how many the limiter admitted,
 * every one decided by the fallback. */
static int admitted_in_blip(rl_limiter *lim, const char *key, int64_t until)
{
    rl_result res = RL_RESULT_INIT;
    int n = 0;

    while (now_ms() < until) {
        ck_assert_int_eq(rl_allow(lim, key, "fb", 1, &res), RL_OK);
        ck_assert_msg(!res.allowed || (res.flags & RL_FLAG_FALLBACK),
                      "admitted by Redis while it was stopped");
        if (!res.allowed && (res.flags & RL_FLAG_FALLBACK))
            break;
        n += res.allowed;
    }
    return n;
}

typedef struct blip {
    rl_limiter *lim;
    int64_t until;
    int admitted;
} blip;

static void *blip_main(void *arg)
{
    blip *b = arg;

    b->admitted = admitted_in_blip(b->lim, "user:blip", b->until);
    return NULL;
}

/* Four limiters with the default options: each counts the fleet (4), and
 * a stop of the server (as long as it takes each fallback to spend its
 * share: the first checks wait out timeout_ms) admits at most limit +
 * limit x blip / window + one check per limiter of a fresh key between
 * them. */
START_TEST(a_blip_with_defaults_admits_the_limit_once)
{
    rl_limiter *lim[FLEET];
    int64_t blip_ms;
    pthread_t th[FLEET];
    blip b[FLEET];
    int64_t t0;
    int total = 0, bound;

    for (int i = 0; i < FLEET; i++)
        lim[i] = open_default(uri);
    t0 = now_ms();
    for (int i = 0; i < FLEET; i++)
        while (fleet_size_of(lim[i]) != FLEET) {
            ck_assert_msg(now_ms() - t0 < 10000, "limiter %d counts %lld", i,
                          (long long)fleet_size_of(lim[i]));
            sleep_ms(10);
        }
    ck_assert_int_eq(rh_pause(&srv), 0);
    t0 = now_ms();
    for (int i = 0; i < FLEET; i++) { /* the limiters check at once */
        b[i] = (blip){.lim = lim[i], .until = t0 + 10000};
        pthread_create(&th[i], NULL, blip_main, &b[i]);
    }
    for (int i = 0; i < FLEET; i++) {
        pthread_join(th[i], NULL);
        total += b[i].admitted;
    }
    ck_assert_int_eq(rh_resume(&srv), 0);
    blip_ms = now_ms() - t0;
    bound = LIMIT + (int)(LIMIT * blip_ms / (WINDOW_S * 1000)) + FLEET;
    fprintf(stderr, "  4 limiters, defaults, %lld ms blip: admitted %d, "
            "bound %d (limit %d)\n", (long long)blip_ms, total, bound, LIMIT);
    ck_assert_int_le(total, bound);
    ck_assert_int_ge(total, LIMIT - FLEET); /* each spent its share */
    for (int i = 0; i < FLEET; i++)
        rl_limiter_free(lim[i]);
}
END_TEST

/* Started while the server is away: no count yet, so the fallback divides
 * by fleet_size_unknown (8 by default), never by 1. */
START_TEST(an_uncounted_fleet_assumes_fleet_size_unknown)
{
    const char *opts[] = {"store", uri, "rules", rules, "degraded_start",
                          "1", NULL};
    rl_limiter *lim;

    ck_assert_int_eq(rh_pause(&srv), 0);
    lim = limiter_from(opts);
    ck_assert_int_eq(fleet_size_of(lim), 8);
    ck_assert_int_le(admitted_in_blip(lim, "user:new", now_ms() + 10000),
                     LIMIT / 8);
    ck_assert_int_eq(rh_resume(&srv), 0);
    rl_limiter_free(lim);
}
END_TEST

/* The memory store has no fleet to count: "auto" means 1. */
START_TEST(memory_store_auto_is_one)
{
    rl_limiter *lim = open_default("memory://");

    ck_assert_int_eq(fleet_size_of(lim), 1);
    rl_limiter_free(lim);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fleet");
    TCase *tc = tcase_create("defaults");

    if (!rh_available()) {
        fprintf(stderr, "redis-server not found: skipping\n");
        return 77;
    }
    tcase_add_checked_fixture(tc, srv_up, srv_down);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, a_blip_with_defaults_admits_the_limit_once);
    tcase_add_test(tc, an_uncounted_fleet_assumes_fleet_size_unknown);
    tcase_add_test(tc, memory_store_auto_is_one);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
