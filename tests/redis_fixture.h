/*
 * redis_fixture.h -- what the suites of the Redis store through the
 * public API share (check_redis.c: the fleet-wide limit, key layouts,
 * AUTH, SELECT, restarts, failure modes, bad input, rl_check_many;
 * check_redis_timing.c: checks timed against their timeout, the breaker
 * and the stuck-connection sweep): the rule set, a limiter on a store
 * URI, the count of admissions, the time since a start, and the wait
 * until Redis decides again.  The suites' server `srv` and its `uri` are
 * tests/server_fixtures.h's.
 */
#ifndef RL_TESTS_REDIS_FIXTURE_H
#define RL_TESTS_REDIS_FIXTURE_H

#include <check.h>
#include <string.h>
#include <time.h>

#include "testutil.h"

/* rl_allow() names its rule, whatever the match; rl_check() on /both
 * meets only per-user and per-ip. */
static const char *rules =
    "[{\"rule_id\":\"sw\",\"dimension\":\"user\",\"match\":{\"endpoint\":\"/direct\"},\"limit\":10,"
    "\"window_seconds\":60},"
    " {\"rule_id\":\"tb\",\"dimension\":\"user\",\"match\":{\"endpoint\":\"/direct\"},\"limit\":100,"
    "\"window_seconds\":60,\"burst\":20,\"algorithm\":\"token_bucket\"},"
    " {\"rule_id\":\"per-user\",\"dimension\":\"user\",\"limit\":10,"
    "\"window_seconds\":60,\"match\":{\"endpoint\":\"/both\"}},"
    " {\"rule_id\":\"per-ip\",\"dimension\":\"ip\",\"limit\":2,"
    "\"window_seconds\":60,\"match\":{\"endpoint\":\"/both\"}},"
    " {\"rule_id\":\"open\",\"dimension\":\"user\",\"match\":{\"endpoint\":\"/direct\"},\"limit\":1,"
    "\"window_seconds\":60,\"failure_mode\":\"open\"},"
    " {\"rule_id\":\"closed\",\"dimension\":\"user\",\"match\":{\"endpoint\":\"/direct\"},\"limit\":1000,"
    "\"window_seconds\":60,\"failure_mode\":\"closed\"},"
    " {\"rule_id\":\"fb\",\"dimension\":\"user\",\"match\":{\"endpoint\":\"/direct\"},\"limit\":40,"
    "\"window_seconds\":60,\"failure_mode\":\"fallback\"}]";

static inline rl_limiter *open_limiter(const char *store,
                                       const char *extra_name,
                                       const char *extra_value)
{
    /* A loaded 2-core CI machine can stall a loopback reply past the 5 ms
     * default timeout; the timeout tests below set their own.  This suite
     * counts what Redis itself answers (its calls, a restart's empty
     * state, a fallback after it denied): no local deny cache, which
     * tests/check_denycache.c covers.  fleet_size 1 unless extra_name
     * says otherwise: a fallback's share must not depend on whether the
     * "auto" default's first heartbeat counted the fleet before a test
     * stopped Redis (limit / 8 until then).  extra_name NULL: nothing
     * more. */
    const char *opts[] = {"store", store, "rules", rules, "timeout_ms", "500",
                          "deny_cache", "0", "fleet_size", "1", extra_name,
                          extra_value, NULL};

    return limiter_from(opts);
}

static inline int admitted(rl_limiter *lim, const char *key,
                           const char *rule, int n)
{
    rl_result res = RL_RESULT_INIT;
    int ok = 0;

    for (int i = 0; i < n; i++) {
        ck_assert_msg(rl_allow(lim, key, rule, 1, &res) == RL_OK, "%s",
                      rl_errmsg(lim));
        ck_assert_int_eq(res.flags & (RL_FLAG_FALLBACK | RL_FLAG_FAIL_OPEN), 0);
        ok += res.allowed;
    }
    return ok;
}

static inline long elapsed_ms(const struct timespec *a)
{
    struct timespec b;

    clock_gettime(CLOCK_MONOTONIC, &b);
    return (b.tv_sec - a->tv_sec) * 1000 + (b.tv_nsec - a->tv_nsec) / 1000000;
}

/* Wait (bounded) until checks are decided by Redis again: ten in a row,
 * so every pooled connection is back. */
static inline void await_redis(rl_limiter *lim, const char *key)
{
    rl_result res = RL_RESULT_INIT;
    int row = 0;

    for (int i = 0; i < 300; i++) {
        ck_assert_int_eq(rl_allow(lim, key, "sw", 0, &res), RL_OK);
        row = (res.flags & RL_FLAG_FALLBACK) ? 0 : row + 1;
        if (row == 10)
            return;
        if (row)
            continue;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    ck_abort_msg("Redis did not come back within 3 s");
}
#endif
