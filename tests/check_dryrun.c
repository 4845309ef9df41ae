/*
 * check_dryrun.c -- dry runs (src/telemetry/: dryrun.c, hll.c, dryrun_report.c):
 * a rule in mode "log" counts exactly the checks it would have rejected,
 * on the memory store with a driven clock, on a real redis-server and on
 * the fallback when that server is gone; distinct clients within the
 * sketch's bound; counts carried across rule-set swaps while the rule
 * counts the same thing; threads (exact totals, also across swaps); the
 * fleet report written into a real Redis by two limiters and merged; the
 * HyperLogLog estimator's error on known cardinalities; the report value's
 * format and its strict parser.
 */
#include <check.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "dryrun.h"
#include "dryrun_report.h"
#include "hll.h"
#include "redis_harness.h"
#include "testutil.h"

/* The sketch's documented bound: 3 standard errors of 1.04 / sqrt(m). */
#define HLL_SE (1.04 / 32.0)
#define HLL_BOUND (3 * HLL_SE)

/* An estimate of n distinct keys within that bound. */
static int near(uint64_t estimate, uint64_t n)
{
    return fabs((double)estimate - (double)n) <= HLL_BOUND * (double)n;
}

static const char *const algos[] = {"sliding_window", "token_bucket",
                                    "fixed_window", "gcra"};

/* A one-rule set: rule "r" on users at /api, `limit` per hour; the rule's
 * version is the set's. */
static void one_rule(char *buf, size_t len, int version, const char *algo,
                     const char *mode, int limit, const char *extra)
{
    snprintf(buf, len,
             "{\"version\":%d,\"rules\":[{\"rule_id\":\"r\","
             "\"dimension\":\"user\",\"match\":{\"endpoint\":\"/api\"},"
             "\"limit\":%d,\"window_seconds\":3600,\"algorithm\":\"%s\","
             "\"mode\":\"%s\",\"version\":%d%s}]}",
             version, limit, algo, mode, version, extra);
}

static rl_dryrun dry(rl_limiter *lim, const char *id)
{
    rl_dryrun d = {.size = sizeof d};

    ck_assert_msg(rl_rule_dryrun_get(lim, id, &d) == RL_OK, "%s",
                  rl_errmsg(lim));
    return d;
}

/* The block behind a rule of the set in force (the test is the writer). */
static const struct dryrun *block_of(rl_limiter *lim, const char *id)
{
    return ruleset_find(rcu_peek(&lim->rules), id)->dry;
}

/* `clients` users x n checks of /api each, interleaved; counts the denied
 * and the soft-flagged results. */
static void drive(rl_limiter *lim, int clients, int n, int first_client,
                  int *denied, int *soft)
{
    char user[32];
    rl_result res = RL_RESULT_INIT;

    *denied = *soft = 0;
    for (int i = 0; i < n; i++) {
        for (int c = 0; c < clients; c++) {
            rl_request req = {.size = sizeof(rl_request), .endpoint = "/api", .user = user, .cost = 1};
            snprintf(user, sizeof user, "client-%d", first_client + c);
            ck_assert_msg(rl_check(lim, &req, &res) == RL_OK, "%s",
                          rl_errmsg(lim));
            *denied += !res.allowed;
            *soft += (res.flags & RL_FLAG_SOFT) != 0;
        }
    }
}

/* ---- the sketch --------------------------------------------------------- */

/* The estimator on known cardinalities, over many key sets each: every
 * estimate within 3 standard errors, and their root mean square error
 * within 1.5 standard errors (sampling slack over a few dozen sets). */
static void accuracy(unsigned n, int trials)
{
    double sq = 0, worst = 0;
    char key[48];

    for (int t = 0; t < trials; t++) {
        hll h;
        double e, rel;

        memset(&h, 0, sizeof h);
        for (unsigned i = 0; i < n; i++) {
            int len = snprintf(key, sizeof key, "user:%d-%u", t, i);
            hll_add(&h, key, (size_t)len);
            if (i % 7 == 0) /* repeats change nothing */
                hll_add(&h, key, (size_t)len);
        }
        e = hll_estimate(&h);
        rel = fabs(e - n) / n;
        ck_assert_msg(rel <= HLL_BOUND, "%u keys, set %d: estimate %.1f",
                      n, t, e);
        sq += rel * rel;
        worst = rel > worst ? rel : worst;
    }
    ck_assert_msg(sqrt(sq / trials) <= 1.5 * HLL_SE,
                  "%u keys: rms error %.4f over %d sets (worst %.4f)", n,
                  sqrt(sq / trials), trials, worst);
}

START_TEST(hll_estimates_within_bound)
{
    hll h;

    memset(&h, 0, sizeof h);
    ck_assert(hll_estimate(&h) == 0);
    hll_add(&h, "only", 4);
    ck_assert_int_eq((int)(hll_estimate(&h) + 0.5), 1);
    accuracy(10, 40);
    accuracy(1000, 40);
    accuracy(3000, 40); /* where the classic estimator switches over */
    accuracy(100000, 8);
}
END_TEST

START_TEST(hll_merge_is_the_union)
{
    hll a, b, u;
    char key[32];

    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    memset(&u, 0, sizeof u);
    for (int i = 0; i < 60000; i++) {
        int len = snprintf(key, sizeof key, "k%d", i);
        hll_add(&a, key, (size_t)len);
        hll_add(&u, key, (size_t)len);
    }
    for (int i = 40000; i < 100000; i++) {
        int len = snprintf(key, sizeof key, "k%d", i);
        hll_add(&b, key, (size_t)len);
        hll_add(&u, key, (size_t)len);
    }
    hll_merge(&a, &b);
    ck_assert_mem_eq(a.reg, u.reg, HLL_M); /* exactly the union's sketch */
    ck_assert_double_le(fabs(hll_estimate(&a) - 100000) / 100000, HLL_BOUND);
}
END_TEST

START_TEST(hll_hex_round_trip)
{
    char hex[HLL_HEX_LEN + 1];
    hll h, back;

    memset(&h, 0, sizeof h);
    for (unsigned i = 0; i < HLL_M; i++)
        h.reg[i] = (uint8_t)(i % (HLL_RANK_MAX + 1));
    hll_to_hex(&h, hex);
    ck_assert_uint_eq(strlen(hex), HLL_HEX_LEN);
    ck_assert(strncmp(hex, "000102030405060708090a0b", 24) == 0);
    ck_assert_int_eq(hll_from_hex(&back, hex, HLL_HEX_LEN), 0);
    ck_assert_mem_eq(h.reg, back.reg, HLL_M);
    hex[0] = 'F';
    hex[1] = 'F'; /* 255: above any rank */
    ck_assert_int_eq(hll_from_hex(&back, hex, HLL_HEX_LEN), -1);
    hex[0] = '3';
    hex[1] = '7'; /* 55: the largest rank */
    ck_assert_int_eq(hll_from_hex(&back, hex, HLL_HEX_LEN), 0);
    hex[1] = '8'; /* 56 */
    ck_assert_int_eq(hll_from_hex(&back, hex, HLL_HEX_LEN), -1);
    hex[0] = 'g';
    ck_assert_int_eq(hll_from_hex(&back, hex, HLL_HEX_LEN), -1);
    ck_assert_int_eq(hll_from_hex(&back, hex, HLL_HEX_LEN - 2), -1);
}
END_TEST

/* ---- the report value ------------------------------------------------- */

static size_t value_of(char *buf, int64_t v, uint64_t checks, uint64_t wd,
                       const char *keys_prefix, int keys)
{
    dryrun_field f = {.version = v, .checks = checks, .would_deny = wd};
    char key[32];

    for (int i = 0; i < keys; i++) {
        int len = snprintf(key, sizeof key, "%s%d", keys_prefix, i);
        hll_add(&f.sketch, key, (size_t)len);
    }
    return dryrun_value_format(buf, &f);
}

START_TEST(value_format_and_parse)
{
    char buf[DRYRUN_VALUE_MAX], bad[DRYRUN_VALUE_MAX + 8];
    dryrun_field f;
    size_t len = value_of(buf, 7, 120, 30, "u", 3), hex_at;

    ck_assert(strncmp(buf, "7 120 30 ", 9) == 0);
    ck_assert_uint_eq(len, 9 + HLL_HEX_LEN);
    ck_assert_uint_eq(strlen(buf), len);
    ck_assert_int_eq(dryrun_value_parse(buf, len, &f), 0);
    ck_assert_int_eq(f.version, 7);
    ck_assert_uint_eq(f.checks, 120);
    ck_assert_uint_eq(f.would_deny, 30);
    ck_assert_int_eq((int)(hll_estimate(&f.sketch) + 0.5), 3);
    hex_at = 9;
    /* Each of these must be refused. */
    const char *heads[] = {"07 120 30 ", "7 120 130 ", "-7 120 30 ",
                           "7  120 30 ", "7 120 30  ", "7 +120 30 ", "7 0 5 ", "7 3 10 ",
                           "9223372036854775808 1 1 ",
                           "7 18446744073709551616 1 ", "7 120 ", ""};
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
        int n = snprintf(bad, sizeof bad, "%s%s", heads[i], buf + hex_at);
        ck_assert_msg(dryrun_value_parse(bad, (size_t)n, &f) == -1, "%s",
                      heads[i]);
    }
    memcpy(bad, buf, len);
    ck_assert_int_eq(dryrun_value_parse(bad, len - 1, &f), -1);
    bad[len] = ' ';
    ck_assert_int_eq(dryrun_value_parse(bad, len + 1, &f), -1);
    /* The largest numbers parse. */
    dryrun_field big = {.version = INT64_MAX, .checks = UINT64_MAX,
                        .would_deny = UINT64_MAX};
    len = dryrun_value_format(buf, &big);
    ck_assert_int_eq(dryrun_value_parse(buf, len, &f), 0);
    ck_assert_int_eq(f.version, INT64_MAX);
    ck_assert(f.checks == UINT64_MAX && f.would_deny == UINT64_MAX);
}
END_TEST

START_TEST(merge_keeps_the_highest_version)
{
    char buf[DRYRUN_VALUE_MAX];
    dryrun_report r;
    size_t len;

    dryrun_report_init(&r);
    ck_assert_uint_eq(dryrun_report_distinct(&r), 0);
    len = value_of(buf, 3, 500, 100, "old", 50);
    ck_assert_int_eq(dryrun_merge(&r, buf, len), 1);
    len = value_of(buf, 4, 10, 4, "a", 2);
    ck_assert_int_eq(dryrun_merge(&r, buf, len), 1); /* replaces v3 */
    len = value_of(buf, 4, 20, 6, "a", 3);           /* overlaps: a0..a2 */
    ck_assert_int_eq(dryrun_merge(&r, buf, len), 1);
    len = value_of(buf, 2, 999, 999, "x", 9);
    ck_assert_int_eq(dryrun_merge(&r, buf, len), 0); /* older: left out */
    ck_assert_int_eq(dryrun_merge(&r, "4 1 1 00", 8), -1);
    ck_assert_int_eq(r.version, 4);
    ck_assert_uint_eq(r.checks, 30);
    ck_assert_uint_eq(r.would_deny, 10);
    ck_assert_uint_eq(r.limiters, 2);
    ck_assert_uint_eq(r.stale, 2);
    ck_assert_uint_eq(r.invalid, 1);
    ck_assert_uint_eq(dryrun_report_distinct(&r), 3);
    /* Sums saturate rather than wrap. */
    dryrun_field huge = {.version = 4, .checks = UINT64_MAX - 1,
                         .would_deny = UINT64_MAX - 1};
    len = dryrun_value_format(buf, &huge);
    ck_assert_int_eq(dryrun_merge(&r, buf, len), 1);
    ck_assert(r.checks == UINT64_MAX && r.would_deny == UINT64_MAX);
}
END_TEST

/* ---- counting on the memory store ------------------------------------ */

/* 3 clients x 12 checks over a limit of 5: the log rule lets all 36 pass,
 * flags and counts exactly the 21 an enforced twin denies, and counts 3
 * distinct clients; every algorithm. */
START_TEST(log_counts_what_enforce_denies)
{
    const char *algo = algos[_i];
    char rules[512];
    int denied, soft, enforce_denied;
    rl_limiter *lim;
    rl_dryrun d;

    one_rule(rules, sizeof rules, 1, algo, "enforce", 5, "");
    lim = limiter_with(rules);
    drive(lim, 3, 12, 0, &enforce_denied, &soft);
    ck_assert_int_eq(enforce_denied, 3 * (12 - 5));
    d = dry(lim, "r");
    ck_assert_int_eq(d.mode, RL_RULE_MODE_ENFORCE); /* never logged: zeros */
    ck_assert(d.checks == 0 && d.would_deny == 0 && d.distinct == 0);
    ck_assert_int_eq(d.since_ms, 0);
    ck_assert_int_eq(d.version, 1);
    rl_limiter_free(lim);

    one_rule(rules, sizeof rules, 1, algo, "log", 5, "");
    lim = limiter_with(rules);
    drive(lim, 3, 12, 0, &denied, &soft);
    ck_assert_int_eq(denied, 0);
    ck_assert_int_eq(soft, enforce_denied);
    d = dry(lim, "r");
    ck_assert_int_eq(d.mode, RL_RULE_MODE_LOG);
    ck_assert_uint_eq(d.checks, 36);
    ck_assert_uint_eq(d.would_deny, (uint64_t)enforce_denied);
    ck_assert(near(d.distinct, 3));
    ck_assert_int_gt(d.since_ms, 1700000000000LL); /* wall time, ms */
    /* Two hours later (a sliding window also weighs the hour before) the
     * clients have their limit back. */
    clock_add(2 * 3600 * 1000);
    drive(lim, 3, 5, 0, &denied, &soft);
    ck_assert_int_eq(soft, 0);
    d = dry(lim, "r");
    ck_assert_uint_eq(d.checks, 51);
    ck_assert_uint_eq(d.would_deny, 21);
    rl_limiter_free(lim);
}
END_TEST

/* rl_allow and rl_check_many count like rl_check; a log rule beside an
 * enforced one counts its own would-be denials. */
START_TEST(every_entry_point_counts)
{
    rl_limiter *lim = limiter_with(
        "[{\"rule_id\":\"shadow\",\"dimension\":\"user\",\"limit\":2,"
        "\"window_seconds\":60,\"mode\":\"log\"},"
        " {\"rule_id\":\"real\",\"dimension\":\"ip\",\"limit\":100,"
        "\"window_seconds\":60}]");
    rl_request reqs[6];
    rl_result res[6];
    int codes[6];
    rl_dryrun d;

    results_init(res, 6);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(rl_allow(lim, "user:direct", "shadow", 1, res),
                         RL_OK);
    for (int i = 0; i < 6; i++)
        reqs[i] = (rl_request){.size = sizeof(rl_request), .user = i < 3 ? "x" : "y", .ip = "10.0.0.1",
                               .cost = 1};
    ck_assert_int_eq(rl_check_many(lim, reqs, res, codes, 6), RL_OK);
    for (int i = 0; i < 6; i++)
        ck_assert(res[i].allowed);
    ck_assert_uint_eq(res[2].flags, RL_FLAG_SOFT);
    d = dry(lim, "shadow");
    ck_assert_uint_eq(d.checks, 10);
    ck_assert_uint_eq(d.would_deny, 2 + 1 + 1);
    ck_assert(near(d.distinct, 3));
    d = dry(lim, "real");
    ck_assert(d.checks == 0 && d.mode == RL_RULE_MODE_ENFORCE);
    ck_assert_ptr_null(block_of(lim, "real")); /* enforced: pays nothing */
    rl_limiter_free(lim);
}
END_TEST

START_TEST(get_checks_its_arguments)
{
    rl_limiter *lim = limiter_with(
        "[{\"rule_id\":\"r\",\"dimension\":\"user\",\"limit\":1,"
        "\"window_seconds\":60,\"mode\":\"log\"}]");
    struct {
        rl_dryrun d;
        unsigned char tail[16];
    } big;
    rl_dryrun d = {.size = sizeof d};
    rl_result res = RL_RESULT_INIT;

    ck_assert_int_eq(rl_rule_dryrun_get(lim, "nope", &d), RL_ENORULE);
    ck_assert_ptr_nonnull(strstr(rl_errmsg(lim), "nope"));
    ck_assert_int_eq(rl_rule_dryrun_get(lim, "bad\nid", &d), RL_ENORULE);
    ck_assert_ptr_null(strchr(rl_errmsg(lim), '\n'));
    ck_assert_int_eq(rl_rule_dryrun_get(NULL, "r", &d), RL_EINVAL);
    ck_assert_int_eq(rl_rule_dryrun_get(lim, NULL, &d), RL_EINVAL);
    ck_assert_int_eq(rl_rule_dryrun_get(lim, "r", NULL), RL_EINVAL);
    d.size = offsetof(rl_dryrun, since_ms); /* older than any version */
    ck_assert_int_eq(rl_rule_dryrun_get(lim, "r", &d), RL_EINVAL);
    /* A caller built against a later header: only what we know is
     * written, size is left as given. */
    rl_allow(lim, "k", "r", 1, &res);
    rl_allow(lim, "k", "r", 1, &res);
    memset(&big, 0xa5, sizeof big);
    big.d.size = sizeof big;
    ck_assert_int_eq(rl_rule_dryrun_get(lim, "r", &big.d), RL_OK);
    ck_assert_uint_eq(big.d.size, sizeof big);
    ck_assert_uint_eq(big.d.checks, 2);
    ck_assert_uint_eq(big.d.would_deny, 1);
    for (size_t i = 0; i < sizeof big.tail; i++)
        ck_assert_uint_eq(big.tail[i], 0xa5);
    rl_limiter_free(lim);
}
END_TEST

/* ---- carried across swaps ---------------------------------------------- */


static void load(rl_limiter *lim, int version, const char *mode, int limit,
                 const char *extra)
{
    char rules[512];

    one_rule(rules, sizeof rules, version, "sliding_window", mode, limit,
             extra);
    ck_assert_msg(rl_rules_load_string(lim, rules) == RL_OK, "%s",
                  rl_errmsg(lim));
}

START_TEST(counts_carry_while_the_rule_counts_the_same)
{
    char rules[512];
    const struct dryrun *block;
    rl_limiter *lim;
    rl_dryrun d, before;
    int denied, soft;

    one_rule(rules, sizeof rules, 1, "sliding_window", "log", 2, "");
    lim = limiter_with(rules);
    drive(lim, 2, 5, 0, &denied, &soft); /* 10 checks, 6 would deny */
    before = dry(lim, "r");
    ck_assert_uint_eq(before.would_deny, 6);
    block = block_of(lim, "r");
    ck_assert_ptr_nonnull(block);

    load(lim, 2, "log", 2, ",\"failure_mode\":\"open\""); /* unchanged */
    ck_assert_ptr_eq(block_of(lim, "r"), block); /* shared, not copied */
    d = dry(lim, "r");
    ck_assert_uint_eq(d.checks, 10);
    ck_assert_int_eq(d.since_ms, before.since_ms);
    ck_assert_int_eq(d.version, 2);

    load(lim, 3, "enforce", 2, ""); /* flip: frozen, kept */
    drive(lim, 2, 5, 0, &denied, &soft);
    ck_assert_int_eq(denied, 10); /* enforced now, and still spent */
    d = dry(lim, "r");
    ck_assert_int_eq(d.mode, RL_RULE_MODE_ENFORCE);
    ck_assert_uint_eq(d.checks, 10);
    ck_assert_uint_eq(d.would_deny, 6);
    ck_assert(near(d.distinct, 2));

    load(lim, 4, "log", 2, ""); /* back: goes on from there */
    drive(lim, 3, 1, 0, &denied, &soft); /* client-2 is new */
    d = dry(lim, "r");
    ck_assert_uint_eq(d.checks, 13);
    ck_assert_uint_eq(d.would_deny, 8);
    ck_assert(near(d.distinct, 2));
    ck_assert_int_eq(d.since_ms, before.since_ms);

    ck_assert_ptr_eq(block_of(lim, "r"), block);
    load(lim, 5, "log", 3, ""); /* the limit changed: afresh */
    ck_assert_ptr_ne(block_of(lim, "r"), block);
    d = dry(lim, "r");
    ck_assert(d.checks == 0 && d.would_deny == 0 && d.distinct == 0);
    ck_assert_int_ge(d.since_ms, before.since_ms);
    drive(lim, 1, 1, 7, &denied, &soft);
    ck_assert_uint_eq(dry(lim, "r").checks, 1);

    /* Each other part of what is counted starts afresh too: every set
     * below differs from the one before it in one thing. */
#define R(rest) "{\"rule_id\":\"r\",\"limit\":3,\"mode\":\"log\"," rest "}"
    const char *changes[] = {
        R("\"dimension\":\"ip\",\"match\":{\"endpoint\":\"/api\"},"
          "\"window_seconds\":3600"),
        R("\"dimension\":\"ip\",\"match\":{\"endpoint\":\"/api\","
          "\"tier\":\"free\"},\"window_seconds\":3600"),
        R("\"dimension\":\"ip\",\"match\":{\"tier\":\"free\"},"
          "\"window_seconds\":3600"),
        R("\"dimension\":\"ip\",\"match\":{\"tier\":\"free\"},"
          "\"window_seconds\":60"),
        R("\"dimension\":\"ip\",\"match\":{\"tier\":\"free\"},"
          "\"window_seconds\":60,\"algorithm\":\"gcra\""),
        R("\"dimension\":\"ip\",\"match\":{\"tier\":\"free\"},"
          "\"window_seconds\":60,\"algorithm\":\"gcra\",\"burst\":9")};
#undef R
    for (size_t i = 0; i < sizeof changes / sizeof changes[0]; i++) {
        rl_result res = RL_RESULT_INIT;
        snprintf(rules, sizeof rules, "[%s]", changes[i]);
        ck_assert_int_eq(rl_rules_load_string(lim, rules), RL_OK);
        ck_assert_msg(dry(lim, "r").checks == 0, "change %zu kept counts", i);
        ck_assert_int_eq(rl_allow(lim, "k", "r", 1, &res), RL_OK);
    }
    /* A rule that leaves the set and comes back starts afresh. */
    ck_assert_uint_eq(dry(lim, "r").checks, 1);
    ck_assert_int_eq(rl_rules_load_string(lim, "[]"), RL_OK);
    snprintf(rules, sizeof rules, "[%s]", changes[5]);
    ck_assert_int_eq(rl_rules_load_string(lim, rules), RL_OK);
    ck_assert_uint_eq(dry(lim, "r").checks, 0);
    rl_limiter_free(lim);
}
END_TEST

/* ---- threads ------------------------------------------------------------------ */

#define THREADS 4
#define PER_THREAD 20000
#define KEYS 50
#define KEY_LIMIT 100
/* More threads than the metrics' own slots: the rest share the last one
 * (metrics.h), with atomic adds. */
#define MANY_THREADS (METRICS_SLOTS + 8)
#define MANY_PER_THREAD 2000

static atomic_int swaps_done;

typedef struct counter_arg {
    rl_limiter *lim;
    int id;
    int per_thread;
    int swapping;
    pthread_barrier_t *all_up; /* NULL: no waiting for the others */
    int bad;
} counter_arg;


static void *counter(void *p)
{
    counter_arg *a = p;
    char user[16];
    rl_result res = RL_RESULT_INIT;

    for (int i = 0; i < a->per_thread; i++) {
        /* A thread claims its slot on its first count and frees it at
         * exit: with all_up, every thread has counted once before any
         * goes on, and counted all before any exits, so they hold their
         * slots (and share the last) at once. */
        if (a->all_up && i == 1)
            pthread_barrier_wait(a->all_up);
        rl_request req = {.size = sizeof(rl_request), .endpoint = "/api", .user = user, .cost = 1};
        /* With a swapper, a quarter in, wait for its first swap: on a fast
         * machine the counters could otherwise finish before it starts. */
        while (a->swapping && i == a->per_thread / 4 && atomic_load(&swaps_done) == 0)
            sched_yield();
        snprintf(user, sizeof user, "u%d", (i * 7 + a->id) % KEYS);
        if (rl_check(a->lim, &req, &res) != RL_OK || !res.allowed)
            a->bad++;
    }
    if (a->all_up)
        pthread_barrier_wait(a->all_up);
    return NULL;
}

/* n threads (at most MANY_THREADS) count per_thread checks each into one
 * rule (alone, or while another thread swaps in the same rule again and
 * again, each time a new set and a new version).  Every count lands: the
 * totals are exact. */
static void run_counters(int n, int per_thread, int swapping)
{
    char rules[512];
    rl_limiter *lim;
    pthread_t t[MANY_THREADS];
    counter_arg a[MANY_THREADS];
    pthread_barrier_t all_up;
    rl_dryrun d;
    uint64_t total = (uint64_t)n * (uint64_t)per_thread;
    int version = 1;

    one_rule(rules, sizeof rules, 1, "sliding_window", "log", KEY_LIMIT, "");
    lim = limiter_with(rules); /* the clock stands still: KEY_LIMIT each */
    ck_assert_int_eq(pthread_barrier_init(&all_up, NULL, (unsigned)n), 0);
    for (int i = 0; i < n; i++) {
        a[i] = (counter_arg){.lim = lim, .id = i, .per_thread = per_thread,
                             .swapping = swapping, .all_up = &all_up};
        ck_assert_int_eq(pthread_create(&t[i], NULL, counter, &a[i]), 0);
    }
    /* At least one swap whatever the counters have done; more until they are
     * half way (they wait for the first one, a quarter in). */
    while (swapping) {
        load(lim, ++version, "log", KEY_LIMIT, "");
        atomic_fetch_add(&swaps_done, 1);
        if (dry(lim, "r").checks >= total / 2)
            break;
    }
    for (int i = 0; i < n; i++) {
        pthread_join(t[i], NULL);
        ck_assert_int_eq(a[i].bad, 0);
    }
    pthread_barrier_destroy(&all_up);
    d = dry(lim, "r");
    ck_assert_uint_eq(d.checks, total);
    ck_assert_uint_eq(d.would_deny, total - KEYS * KEY_LIMIT);
    ck_assert_msg(near(d.distinct, KEYS), "distinct %" PRIu64, d.distinct);
    rl_limiter_free(lim);
}

START_TEST(threads_count_exactly)
{
    run_counters(THREADS, PER_THREAD, 0);
}
END_TEST

START_TEST(threads_count_exactly_across_swaps)
{
    run_counters(THREADS, PER_THREAD, 1);
    ck_assert_int_gt(atomic_load(&swaps_done), 0);
}
END_TEST

/* Threads past the owned slots count in the shared one: exact too. */
START_TEST(threads_sharing_a_slot_count_exactly)
{
    run_counters(MANY_THREADS, MANY_PER_THREAD, 0);
}
END_TEST

/* ---- a real Redis ------------------------------------------------------- */

static rl_limiter *redis_limiter(const char *store, const char *rules)
{
    const char *opts[] = {"store", store, "rules", rules,
                          "timeout_ms", "500", NULL};

    return limiter_from(opts);
}

/* A log rule and an enforced twin over the same traffic on one server:
 * the log rule counts what the twin denied; then the server is gone and
 * the fallback decides, and is counted the same way; a log rule failing
 * "closed" would have denied every check. */
START_TEST(redis_and_its_fallback_count)
{
    static const char *twins =
        "[{\"rule_id\":\"shadow\",\"dimension\":\"user\",\"limit\":5,"
        "\"window_seconds\":3600,\"algorithm\":\"token_bucket\","
        "\"mode\":\"log\",\"match\":{\"endpoint\":\"/api\"}},"
        " {\"rule_id\":\"twin\",\"dimension\":\"user\",\"limit\":5,"
        "\"window_seconds\":3600,\"algorithm\":\"token_bucket\","
        "\"match\":{\"endpoint\":\"/twin\"}},"
        " {\"rule_id\":\"strict\",\"dimension\":\"user\",\"limit\":1000,"
        "\"window_seconds\":3600,\"failure_mode\":\"closed\","
        "\"mode\":\"log\",\"match\":{\"endpoint\":\"/strict\"}}]";
    rh_server srv;
    char uri[512], user[16];
    rl_limiter *lim;
    rl_result res = RL_RESULT_INIT;
    rl_dryrun d;
    int twin_denied = 0, fb = 0;

    ck_assert_int_eq(rh_start(&srv, NULL), 0);
    rh_uri(&srv, uri, sizeof uri);
    lim = redis_limiter(uri, twins);
    for (int i = 0; i < 12; i++) {
        for (int c = 0; c < 3; c++) {
            rl_request log_req = {.size = sizeof(rl_request), .endpoint = "/api", .user = user, .cost = 1};
            rl_request twin_req = log_req;
            twin_req.endpoint = "/twin";
            snprintf(user, sizeof user, "c%d", c);
            ck_assert_int_eq(rl_check(lim, &log_req, &res), RL_OK);
            ck_assert(res.allowed);
            ck_assert_uint_eq(res.flags & RL_FLAG_FALLBACK, 0);
            ck_assert_int_eq(rl_check(lim, &twin_req, &res), RL_OK);
            twin_denied += !res.allowed;
        }
    }
    ck_assert_int_eq(twin_denied, 21);
    d = dry(lim, "shadow");
    ck_assert_uint_eq(d.checks, 36);
    ck_assert_uint_eq(d.would_deny, 21);
    ck_assert(near(d.distinct, 3));

    /* The server is gone: the fallback (limit 5 / fleet of 1) decides. */
    store_memory_set_clock(lim->fallback, test_clock, NULL);
    clock_set(T0);
    ck_assert_int_eq(rh_kill(&srv), 0);
    for (int i = 0; i < 12; i++) {
        for (int c = 10; c < 13; c++) {
            rl_request req = {.size = sizeof(rl_request), .endpoint = "/api", .user = user, .cost = 1};
            snprintf(user, sizeof user, "c%d", c);
            ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
            ck_assert(res.allowed && (res.flags & RL_FLAG_FALLBACK));
            fb += (res.flags & RL_FLAG_SOFT) != 0;
            req.endpoint = "/strict";
            ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
            ck_assert(res.allowed);
            ck_assert_uint_eq(res.flags, RL_FLAG_SOFT | RL_FLAG_FAIL_CLOSED);
        }
    }
    ck_assert_int_eq(fb, 21);
    d = dry(lim, "shadow");
    ck_assert_uint_eq(d.checks, 72);
    ck_assert_uint_eq(d.would_deny, 42);
    ck_assert(near(d.distinct, 6));
    d = dry(lim, "strict");
    ck_assert_uint_eq(d.checks, 36);
    ck_assert_uint_eq(d.would_deny, 36);
    ck_assert(near(d.distinct, 3));
    rl_limiter_free(lim);
    rh_stop(&srv);
}
END_TEST

/* n users, from `first` on, each denied after its first check. */
static void deny_users(rl_limiter *lim, int first, int n)
{
    char user[24];
    rl_result res = RL_RESULT_INIT;

    for (int u = first; u < first + n; u++) {
        rl_request req = {.size = sizeof(rl_request), .endpoint = "/api", .user = user, .cost = 1};
        snprintf(user, sizeof user, "user-%d", u);
        for (int k = 0; k < 2; k++)
            ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
    }
}

/* Two limiters (each its own process in a fleet) publish into one Redis;
 * the merge sums their counts and estimates the union of their clients;
 * rules in mode enforce and rules with nothing counted are not written. */
START_TEST(publish_from_two_limiters_and_merge)
{
    char rules[1024], value[DRYRUN_VALUE_MAX], err[128];
    rh_server srv;
    rl_limiter *a, *b;
    redisContext *c;
    redisReply *r;
    dryrun_report rep;
    dryrun_field f;

    snprintf(rules, sizeof rules,
             "{\"version\":9,\"rules\":[{\"rule_id\":\"r\","
             "\"dimension\":\"user\",\"limit\":1,\"window_seconds\":3600,"
             "\"mode\":\"log\",\"version\":7},"
             " {\"rule_id\":\"idle\",\"dimension\":\"ip\",\"limit\":1,"
             "\"window_seconds\":3600,\"mode\":\"log\"},"
             " {\"rule_id\":\"enforced\",\"dimension\":\"user\",\"limit\":"
             "1000000,\"window_seconds\":3600}]}");
    a = limiter_with(rules);
    b = limiter_with(rules);
    deny_users(a, 0, 60000);     /* a: users 0..59999 */
    deny_users(b, 40000, 60000); /* b: users 40000..99999: 100000 in all */
    ck_assert_int_eq(rh_start(&srv, NULL), 0);
    c = rh_connect(&srv);
    ck_assert_ptr_nonnull(c);

    ck_assert_int_eq(dryrun_publish(a, c, "host-a:1"), 1);
    ck_assert_int_eq(dryrun_publish(b, c, "host-b:2"), 1);
    ck_assert_int_eq(dryrun_fetch(c, "r", &rep, err, sizeof err), RL_OK);
    ck_assert_int_eq(rep.version, 7);
    ck_assert_uint_eq(rep.limiters, 2);
    ck_assert_uint_eq(rep.checks, 240000);
    ck_assert_uint_eq(rep.would_deny, 120000);
    ck_assert_msg(fabs((double)dryrun_report_distinct(&rep) - 100000) <=
                      HLL_BOUND * 100000,
                  "distinct %" PRIu64, dryrun_report_distinct(&rep));

    /* What is in Redis: the documented value, a day to live. */
    r = redisCommand(c, "HGET rl:dryrun:{r} host-a:1");
    ck_assert(r && r->type == REDIS_REPLY_STRING);
    ck_assert_int_eq(dryrun_value_parse(r->str, r->len, &f), 0);
    ck_assert(f.version == 7 && f.checks == 120000 && f.would_deny == 60000);
    ck_assert(strncmp(r->str, "7 120000 60000 ", 15) == 0);
    freeReplyObject(r);
    r = redisCommand(c, "PTTL rl:dryrun:{r}");
    ck_assert(r && r->type == REDIS_REPLY_INTEGER);
    ck_assert_int_gt(r->integer, DRYRUN_TTL_MS - 60000);
    ck_assert_int_le(r->integer, DRYRUN_TTL_MS);
    freeReplyObject(r);
    r = redisCommand(c, "EXISTS rl:dryrun:{idle} rl:dryrun:{enforced}");
    ck_assert(r && r->type == REDIS_REPLY_INTEGER && r->integer == 0);
    freeReplyObject(r);

    /* A limiter still on an older version, and garbage, are left out. */
    dryrun_field old = {.version = 6, .checks = 5, .would_deny = 5};
    size_t len = dryrun_value_format(value, &old);
    freeReplyObject(redisCommand(c, "HSET rl:dryrun:{r} old %b", value, len));
    freeReplyObject(redisCommand(c, "HSET rl:dryrun:{r} junk %s", "7 1 2 x"));
    ck_assert_int_eq(dryrun_fetch(c, "r", &rep, err, sizeof err), RL_OK);
    ck_assert_uint_eq(rep.limiters, 2);
    ck_assert_uint_eq(rep.stale, 1);
    ck_assert_uint_eq(rep.invalid, 1);
    ck_assert_uint_eq(rep.checks, 240000);

    /* Nobody reported: an empty merge. */
    ck_assert_int_eq(dryrun_fetch(c, "idle", &rep, err, sizeof err), RL_OK);
    ck_assert_uint_eq(rep.limiters, 0);
    ck_assert_int_eq(dryrun_fetch(c, "no}such", &rep, err, sizeof err),
                     RL_EINVAL);
    ck_assert_int_eq(dryrun_publish(a, c, "has space"), RL_EINVAL);
    ck_assert_int_eq(dryrun_publish(a, c, ""), RL_EINVAL);

    /* A key of the wrong type: an error reply, the rest still read. */
    freeReplyObject(redisCommand(c, "DEL rl:dryrun:{r}"));
    freeReplyObject(redisCommand(c, "SET rl:dryrun:{r} x"));
    ck_assert_int_eq(dryrun_publish(a, c, "host-a:1"), RL_ESTORE);
    ck_assert_ptr_nonnull(strstr(rl_errmsg(a), "WRONGTYPE"));
    r = redisCommand(c, "PING");
    ck_assert(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);

    /* The server gone: RL_ESTORE, saying why. */
    rh_kill(&srv);
    ck_assert_int_eq(dryrun_publish(a, c, "host-a:1"), RL_ESTORE);
    ck_assert_str_ne(rl_errmsg(a), "");
    redisFree(c);
    rh_stop(&srv);
    rl_limiter_free(a);
    rl_limiter_free(b);
}
END_TEST

/* Reports too big for one write, to a server that died: hiredis's second
 * write meets the reset connection, and the process (which does not ignore
 * SIGPIPE here) must live through it. */
START_TEST(publish_to_a_dead_server_raises_no_sigpipe)
{
    enum { RULES = 300 };
    int sndbuf = 4096;
    char *rules = malloc(RULES * 100 + 16), id[16];
    size_t at = 0;
    rh_server srv;
    redisContext *c;
    rl_limiter *lim;
    rl_result res = RL_RESULT_INIT;

    at += (size_t)sprintf(rules + at, "[");
    for (int i = 0; i < RULES; i++)
        at += (size_t)sprintf(rules + at, "%s{\"rule_id\":\"r%d\",\"dimension\""
                              ":\"user\",\"limit\":1,\"window_seconds\":60,"
                              "\"mode\":\"log\"}", i ? "," : "", i);
    sprintf(rules + at, "]");
    lim = limiter_with(rules);
    free(rules);
    for (int i = 0; i < RULES; i++) {
        snprintf(id, sizeof id, "r%d", i);
        ck_assert_int_eq(rl_allow(lim, "user:1", id, 1, &res), RL_OK);
    }
    ck_assert_int_eq(rh_start(&srv, NULL), 0);
    c = rh_connect(&srv);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(dryrun_publish(lim, c, "me"), RULES);
    /* A small send buffer: the 600 KiB go out in many writes. */
    ck_assert_int_eq(setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf,
                                sizeof sndbuf), 0);
    rh_kill(&srv);
    ck_assert_int_eq(dryrun_publish(lim, c, "me"), RL_ESTORE);
    redisFree(c);
    rh_stop(&srv);
    rl_limiter_free(lim);
}
END_TEST

static Suite *dryrun_suite(void)
{
    Suite *s = suite_create("dryrun");
    TCase *tc = tcase_create("sketch");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, hll_estimates_within_bound);
    tcase_add_test(tc, hll_merge_is_the_union);
    tcase_add_test(tc, hll_hex_round_trip);
    tcase_add_test(tc, value_format_and_parse);
    tcase_add_test(tc, merge_keeps_the_highest_version);
    suite_add_tcase(s, tc);

    tc = tcase_create("memory");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, log_counts_what_enforce_denies, 0,
                        sizeof algos / sizeof algos[0]);
    tcase_add_test(tc, every_entry_point_counts);
    tcase_add_test(tc, get_checks_its_arguments);
    tcase_add_test(tc, counts_carry_while_the_rule_counts_the_same);
    tcase_add_test(tc, threads_count_exactly);
    tcase_add_test(tc, threads_count_exactly_across_swaps);
    tcase_add_test(tc, threads_sharing_a_slot_count_exactly);
    suite_add_tcase(s, tc);

    tc = tcase_create("redis");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, redis_and_its_fallback_count);
    tcase_add_test(tc, publish_from_two_limiters_and_merge);
    tcase_add_test(tc, publish_to_a_dead_server_raises_no_sigpipe);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(dryrun_suite());
}
