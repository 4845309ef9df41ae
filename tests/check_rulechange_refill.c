/*
 * check_rulechange_refill.c -- a bucket rule changed under a client
 * refills it at the new rate from the change, never at the old one
 * (issue 23, N1): on the memory store and shm:// (a hand clock, exact
 * figures) and on a real redis-server in both layouts (Redis's clock:
 * bounds from the times measured around the calls).  The two
 * cases, for token_bucket and gcra:
 *
 *   - 10/s burst 10 lowered to 1/s burst 10 right after the client
 *     drained: 1.1 s later 1 of 12 requests passes (the old rule would
 *     have refilled all 10 by then, and the client was taken as new);
 *   - 5/s burst 2 raised to burst 4 after a drain: the denial's
 *     retry_after_ms is the shortest wait (a request passes then, not
 *     before), and 450 ms after the change 2 pass, not 4.
 *
 * The memory and shm stores' own states and Redis's keys expire once the
 * old rule refilled them; a client without state then is taken as the
 * emptiest it can have been (algo_convert_unknown), so these hold in
 * every store, expired or not.
 */
#include <check.h>
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "limiter.h"
#include "ratelimit.h"
#include "redis_harness.h"
#include "ruleset.h"
#include "store.h"
#include "testutil.h"
#include "timeutil.h"

enum { MEMORY, SHM, PLAIN, COMPACT };
static const char *const store_names[] = {"memory", "shm", "redis plain",
                                          "redis compact"};
static const char *const algos[] = {"token_bucket", "gcra"};

static rh_server srv;
static char shm_name[64];

typedef struct env {
    int store;
    rl_limiter *lim;
} env;

static int hand(const env *e) { return e->store == MEMORY || e->store == SHM; }

static void nap_ms(int64_t ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static void env_open(env *e, int store)
{
    char uri[1024];

    e->store = store;
    if (store == MEMORY) {
        e->lim = limiter_with("[]");
        ruleset_set_clock(test_clock, NULL);
        return;
    }
    if (store == SHM) {
        snprintf(shm_name, sizeof shm_name, "rl-refill-%d", (int)getpid());
        snprintf(uri, sizeof uri, "shm://%s", shm_name);
        e->lim = limiter_from((const char *const[]){"store", uri, NULL});
        clock_set(real_ms()); /* the region's expiry counts from now */
        limiter_store(e->lim)->vt->set_clock(limiter_store(e->lim),
                                             test_clock, NULL);
        ruleset_set_clock(test_clock, NULL);
        return;
    }
    ruleset_set_clock(NULL, NULL);
    ck_assert_int_eq(rh_start(&srv, NULL), 0);
    rh_uri(&srv, uri, sizeof uri);
    e->lim = limiter_from((const char *const[]){
        "store", uri, "timeout_ms", "3000", "redis_layout",
        store == COMPACT ? "compact" : "plain", NULL});
}

static void env_close(env *e)
{
    char path[80];

    rl_limiter_free(e->lim);
    ruleset_set_clock(NULL, NULL);
    if (e->store == SHM) {
        snprintf(path, sizeof path, "/%s", shm_name);
        shm_unlink(path);
    } else if (!hand(e)) {
        rh_stop(&srv);
    }
}

static int64_t env_now(const env *e)
{
    return hand(e) ? atomic_load(&test_now) : real_ms();
}

static void advance(const env *e, int64_t ms)
{
    if (hand(e))
        clock_add(ms);
    else
        nap_ms(ms);
}

static void load_bucket(env *e, const char *algo, int limit, int burst)
{
    char json[256];

    snprintf(json, sizeof json,
             "[{\"rule_id\":\"b\",\"dimension\":\"user\",\"algorithm\":"
             "\"%s\",\"limit\":%d,\"window_seconds\":1,\"burst\":%d}]",
             algo, limit, burst);
    ck_assert_msg(rl_rules_load_string(e->lim, json) == RL_OK, "%s: %s",
                  json, rl_errmsg(e->lim));
}

/* One request of client u; the store decided it. */
static rl_result charge(env *e, const char *u)
{
    rl_result res = RL_RESULT_INIT;

    ck_assert_msg(rl_allow(e->lim, u, "b", 1, &res) == RL_OK, "%s",
                  rl_errmsg(e->lim));
    ck_assert_msg(!(res.flags & DECIDED_ELSEWHERE), "%s: the store failed "
                  "(flags %u)", store_names[e->store], res.flags);
    return res;
}

/* Charges until one is denied: the client is empty (less than a token)
 * at the time returned, measured after that denial. */
static int64_t drain(env *e, const char *u)
{
    for (int i = 0; i < 100; i++)
        if (!charge(e, u).allowed)
            return env_now(e);
    ck_abort_msg("%s: never denied", store_names[e->store]);
    return 0;
}

static int passes(env *e, const char *u, int n)
{
    int ok = 0;

    for (int i = 0; i < n; i++)
        ok += charge(e, u).allowed;
    return ok;
}

/* 10/s burst 10 -> 1/s burst 10 after a drain; 1.1 s later. */
static void lowered_rate(int store)
{
    for (int a = 0; a < 2; a++) {
        env e;
        int64_t drained, changed, end;
        int ok;

        env_open(&e, store);
        load_bucket(&e, algos[a], 10, 10);
        drained = drain(&e, "low");
        load_bucket(&e, algos[a], 1, 10);
        changed = env_now(&e);
        advance(&e, 1100);
        ok = passes(&e, "low", 12);
        end = env_now(&e);
        if (hand(&e)) {
            ck_assert_msg(ok == 1, "%s %s: %d of 12 passed 1.1 s after the "
                          "change, expected 1", store_names[store],
                          algos[a], ok);
        } else {
            /* less than 1 at the drain, 10/s until the change, 1/s after */
            int64_t most = 1 + (changed - drained) * 10 / 1000 +
                           (end - changed) / 1000;
            ck_assert_msg(ok <= most, "%s %s: %d of 12 passed, at most "
                          "%lld may (%lld ms to the change, %lld after)",
                          store_names[store], algos[a], ok, (long long)most,
                          (long long)(changed - drained),
                          (long long)(end - changed));
        }
        env_close(&e);
    }
}

/* 5/s burst 2 -> burst 4 after a drain: the wait given is the shortest
 * one, and 450 ms after the change what 5/s gave since the drain. */
static void raised_burst(int store)
{
    for (int a = 0; a < 2; a++) {
        env e;
        rl_result r;
        int64_t drained, end;
        int ok;

        env_open(&e, store);
        load_bucket(&e, algos[a], 5, 2);
        drain(&e, "wait");
        load_bucket(&e, algos[a], 5, 4);
        r = charge(&e, "wait");
        ck_assert(!r.allowed);
        ck_assert_msg(r.retry_after_ms >= 1 && r.retry_after_ms <= 200,
                      "%s %s: retry in %lld ms, one token takes 200",
                      store_names[store], algos[a],
                      (long long)r.retry_after_ms);
        if (hand(&e)) {
            ck_assert_int_eq(r.retry_after_ms, 200);
            advance(&e, r.retry_after_ms - 1);
            ck_assert_msg(!charge(&e, "wait").allowed, "%s %s: passed "
                          "before the wait given", store_names[store],
                          algos[a]);
            advance(&e, 1);
        } else {
            advance(&e, r.retry_after_ms);
        }
        ck_assert_msg(charge(&e, "wait").allowed, "%s %s: denied after "
                      "the wait given", store_names[store], algos[a]);

        load_bucket(&e, algos[a], 5, 2); /* back, and up again */
        drained = drain(&e, "late2");
        load_bucket(&e, algos[a], 5, 4);
        advance(&e, 450);
        ok = passes(&e, "late2", 6);
        end = env_now(&e);
        if (hand(&e))
            ck_assert_msg(ok == 2, "%s %s: %d passed 450 ms after the "
                          "change, expected 2", store_names[store], algos[a],
                          ok);
        else
            ck_assert_msg(ok <= 1 + (end - drained) * 5 / 1000,
                          "%s %s: %d passed %lld ms after the drain",
                          store_names[store], algos[a], ok,
                          (long long)(end - drained));
        env_close(&e);
    }
}

START_TEST(lowered_rate_memory) { lowered_rate(MEMORY); }
END_TEST
START_TEST(lowered_rate_shm) { lowered_rate(SHM); }
END_TEST
START_TEST(lowered_rate_redis_plain) { lowered_rate(PLAIN); }
END_TEST
START_TEST(lowered_rate_redis_compact) { lowered_rate(COMPACT); }
END_TEST
START_TEST(raised_burst_memory) { raised_burst(MEMORY); }
END_TEST
START_TEST(raised_burst_shm) { raised_burst(SHM); }
END_TEST
START_TEST(raised_burst_redis_plain) { raised_burst(PLAIN); }
END_TEST
START_TEST(raised_burst_redis_compact) { raised_burst(COMPACT); }
END_TEST

int main(void)
{
    Suite *s = suite_create("rulechange_refill");
    TCase *local = tcase_create("local");
    TCase *redis = tcase_create("redis");

    tcase_set_timeout(local, 30);
    tcase_set_timeout(redis, 60);
    tcase_add_test(local, lowered_rate_memory);
    tcase_add_test(local, lowered_rate_shm);
    tcase_add_test(local, raised_burst_memory);
    tcase_add_test(local, raised_burst_shm);
    tcase_add_test(redis, lowered_rate_redis_plain);
    tcase_add_test(redis, lowered_rate_redis_compact);
    tcase_add_test(redis, raised_burst_redis_plain);
    tcase_add_test(redis, raised_burst_redis_compact);
    suite_add_tcase(s, local);
    suite_add_tcase(s, redis);
    return run_suite(s);
}
