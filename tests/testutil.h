/*
 * testutil.h -- helpers shared by the Check suites: a hand-driven clock,
 * a limiter built from a JSON rule set or from its options in one call,
 * a rule's counter
 * read from the metrics text, a check the store must decide, a message
 * free of control bytes and secrets, and a xorshift64 step for random
 * cases.
 */
#ifndef RL_TESTUTIL_H
#define RL_TESTUTIL_H

#include <check.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "limiter.h"
#include "ratelimit.h"
#include "store_memory.h"

/* Every element of an rl_result array set up for rl_check_many(). */
static inline void results_init(rl_result *res, size_t n)
{
    for (size_t i = 0; i < n; i++)
        res[i] = (rl_result)RL_RESULT_INIT;
}

/* 2026-11-29T00:00:00Z in ms: a realistic epoch for window arithmetic. */
#define T0 1796083200000LL

static _Atomic int64_t test_now;

static inline int64_t test_clock(void *arg)
{
    (void)arg;
    return atomic_load(&test_now);
}

static inline void clock_set(int64_t ms) { atomic_store(&test_now, ms); }
static inline void clock_add(int64_t ms) { atomic_fetch_add(&test_now, ms); }

/* A limiter on the memory store with `rules`, on the hand clock at T0. */
static inline rl_limiter *limiter_with(const char *rules)
{
    rl_limiter *lim = NULL;
    int rc = rl_limiter_new(&lim, NULL);

    ck_assert_int_eq(rc, RL_OK);
    clock_set(T0);
    store_memory_set_clock(limiter_store(lim), test_clock, NULL);
    rc = rl_rules_load_string(lim, rules);
    ck_assert_msg(rc == RL_OK, "rules: %s", rl_errmsg(lim));
    return lim;
}

/* A limiter from its options, given as name, value pairs up to a NULL
 * name ({"store", uri, "rules", json, NULL}): an option refused, or a
 * limiter that does not open, fails the test with the library's
 * message. */
static inline rl_limiter *limiter_from(const char *const *opts)
{
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;
    int rc;

    ck_assert_ptr_nonnull(cfg);
    for (; opts[0]; opts += 2)
        ck_assert_msg(rl_config_set(cfg, opts[0], opts[1]) == RL_OK,
                      "%s %s: %s", opts[0], opts[1], rl_errmsg(NULL));
    rc = rl_limiter_new(&lim, cfg);
    rl_config_free(cfg);
    ck_assert_msg(rc == RL_OK, "rl_limiter_new: %s", rl_errmsg(NULL));
    return lim;
}

/* A result's flags when the store did not decide it (a fallback or a
 * fail-open or fail-closed answer). */
#define DECIDED_ELSEWHERE \
    (RL_FLAG_FALLBACK | RL_FLAG_FAIL_OPEN | RL_FLAG_FAIL_CLOSED)

/* rl_allow of cost 1 that the store itself must decide: 1 allowed,
 * 0 denied. */
static inline int allow_decided(rl_limiter *lim, const char *key,
                                const char *rule)
{
    rl_result res = RL_RESULT_INIT;

    ck_assert_msg(rl_allow(lim, key, rule, 1, &res) == RL_OK, "%s",
                  rl_errmsg(lim));
    ck_assert_msg((res.flags & DECIDED_ELSEWHERE) == 0,
                  "%s %s: not decided by the store (flags %#x)", key, rule,
                  res.flags);
    return res.allowed;
}

/* A message or log line that holds no control byte, nor `secret` (if not
 * NULL). */
static inline void assert_clean_text(const char *msg, const char *secret)
{
    for (const char *p = msg; *p; p++)
        ck_assert_msg((unsigned char)*p >= 0x20 && *p != 0x7f,
                      "a control byte in \"%s\"", msg);
    ck_assert_msg(secret == NULL || strstr(msg, secret) == NULL,
                  "a secret in \"%s\"", msg);
}

/* The next number of a xorshift64 sequence kept in *state (seeded not 0):
 * the suites' repeatable pseudo-random cases. */
static inline uint64_t xorshift64(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

/* Run a suite; the exit status says whether anything failed. */
static inline int run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* The rule's counter `family` in the metrics text (rl_metrics_write),
 * or -1 if absent. */
static inline long long rule_metric(rl_limiter *lim, const char *family,
                                    const char *rule)
{
    static char buf[1 << 16];
    char series[128];
    size_t len, n;

    ck_assert_int_eq(rl_metrics_write(lim, buf, sizeof buf, &len), RL_OK);
    n = (size_t)snprintf(series, sizeof series,
                         "ratelimit_rule_%s{rule=\"%s\"} ", family, rule);
    for (const char *p = buf; p; p = strchr(p, '\n'), p = p ? p + 1 : p)
        if (strncmp(p, series, n) == 0)
            return atoll(p + n);
    return -1;
}

#endif
