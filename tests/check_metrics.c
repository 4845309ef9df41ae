/*
 * check_metrics.c -- rl_metrics_write() (src/telemetry/metrics.c, metrics_text.c):
 * known traffic in, the exact numbers out.  Per rule on the memory store
 * with a driven clock (checks, allowed, denied, would-deny, near-limit,
 * limit and window), kept across reloads that change the rule and dropped
 * with a rule that leaves; option metrics=0 and near_limit_pct; counts
 * from threads exact; the latency histogram's count; the buffer's
 * RL_ERANGE contract and a write function that stops.  On a real
 * redis-server: the shard's label, breaker and I/O counters, the failure
 * modes' counts once it is killed, timeouts once it hangs, reconnects once
 * it is back, and a unix socket path that needs escaping.
 */
#include <check.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metrics.h"
#include "redis_harness.h"
#include "testutil.h"

#define TEXT_MAX (1 << 20)

/* The metrics text (static: one at a time). */
static const char *metrics(rl_limiter *lim)
{
    static char buf[TEXT_MAX];
    size_t len = 0;

    ck_assert_msg(rl_metrics_write(lim, buf, sizeof buf, &len) == RL_OK,
                  "%s", rl_errmsg(lim));
    ck_assert_uint_eq(strlen(buf), len);
    return buf;
}

/* The value of one series ("name{labels}"), or -1 if absent. */
static double value(const char *text, const char *series)
{
    size_t n = strlen(series);

    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p)
        if (strncmp(p, series, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    return -1;
}

static double rule_value(const char *text, const char *family,
                         const char *rule)
{
    char series[256];

    snprintf(series, sizeof series, "ratelimit_rule_%s{rule=\"%s\"}", family,
             rule);
    return value(text, series);
}

#define RULE_EQ(text, fam, rule, v) \
    ck_assert_msg(rule_value(text, fam, rule) == (v), "%s{%s}: %g, not %g", \
                  fam, rule, rule_value(text, fam, rule), (double)(v))

/* Two rules: "a" enforces 10 per hour per user on /a; "b" logs 3 per hour
 * per ip on /b.  `la` replaces a's limit. */
static void two_rules(char *buf, size_t len, int version, int la,
                      const char *third)
{
    snprintf(buf, len,
             "{\"version\":%d,\"rules\":["
             "{\"rule_id\":\"a\",\"dimension\":\"user\",\"match\":{\"endpoint\":"
             "\"/a\"},\"limit\":%d,\"window_seconds\":3600}%s%s]}",
             version, la, third ? "," : "", third ? third : "");
}

static const char rule_b[] =
    "{\"rule_id\":\"b\",\"dimension\":\"ip\",\"match\":{\"endpoint\":\"/b\"},"
    "\"limit\":3,\"window_seconds\":60,\"mode\":\"log\"}";

static int check_a(rl_limiter *lim, const char *user)
{
    rl_request req = {.size = sizeof req, .endpoint = "/a", .user = user,
                      .cost = 1};
    rl_result res = RL_RESULT_INIT;

    ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
    return res.allowed;
}

static void check_b(rl_limiter *lim, const char *ip)
{
    rl_request req = {.size = sizeof req, .endpoint = "/b", .ip = ip,
                      .cost = 1};
    rl_result res = RL_RESULT_INIT;

    ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
    ck_assert_int_eq(res.allowed, 1);
}

/* Of this thread's checks numbered [from, to), those the memory store
 * times: one in METRICS_SAMPLE_MEMORY (the thread's tick, metrics.h). */
static double timed(unsigned from, unsigned to)
{
    double n = 0;

    for (unsigned k = from; k != to; k++)
        n += k % METRICS_SAMPLE_MEMORY == 0;
    return n;
}

START_TEST(rule_counts)
{
    char rules[1024];
    rl_limiter *lim;
    const char *t;
    unsigned tick0;

    two_rules(rules, sizeof rules, 1, 10, rule_b);
    lim = limiter_with(rules);
    tick0 = metrics_self()->tick;
    for (int i = 0; i < 13; i++) /* 10 pass (remaining 9..0), 3 denied */
        check_a(lim, "u1");
    check_a(lim, "u2");          /* remaining 9 */
    for (int i = 0; i < 5; i++)  /* 3 pass, 2 would be denied */
        check_b(lim, "10.0.0.1");
    t = metrics(lim);
    RULE_EQ(t, "checks_total", "a", 14);
    RULE_EQ(t, "allowed_total", "a", 11);
    RULE_EQ(t, "denied_total", "a", 3);
    RULE_EQ(t, "would_deny_total", "a", 0);
    /* near: passed with less than 20 % of 10 left: remaining 1 and 0 */
    RULE_EQ(t, "near_limit_total", "a", 2);
    RULE_EQ(t, "checks_total", "b", 5);
    RULE_EQ(t, "allowed_total", "b", 3);
    RULE_EQ(t, "denied_total", "b", 0);
    RULE_EQ(t, "would_deny_total", "b", 2);
    /* near: less than 0.6 left: remaining 0 */
    RULE_EQ(t, "near_limit_total", "b", 1);
    RULE_EQ(t, "fail_open_total", "a", 0);
    RULE_EQ(t, "fallback_total", "b", 0);
    RULE_EQ(t, "limit", "a", 10);
    RULE_EQ(t, "window_seconds", "b", 60);
    ck_assert_uint_eq(metrics_self()->tick - tick0, 19);
    ck_assert(value(t, "ratelimit_check_duration_seconds_count"
                       "{store=\"memory\"}") ==
              timed(tick0, metrics_self()->tick));
    ck_assert(value(t, "ratelimit_check_duration_seconds_bucket"
                       "{store=\"memory\",le=\"+Inf\"}") ==
              timed(tick0, metrics_self()->tick));
    ck_assert(value(t, "ratelimit_rules_version") == 1);
    ck_assert(value(t, "ratelimit_rules_loads_total") == 1);
    ck_assert(value(t, "ratelimit_fleet_size") == 1);
    ck_assert_ptr_nonnull(strstr(t, "# TYPE ratelimit_rule_checks_total "
                                    "counter\n"));
    ck_assert_ptr_nonnull(strstr(t, "# TYPE ratelimit_check_duration_seconds"
                                    " histogram\n"));
    rl_limiter_free(lim);
}
END_TEST

/* A changed rule keeps its counts, a new one starts at 0, a rule that
 * left is gone from the text; a refused set counts as a load failure. */
START_TEST(across_reloads)
{
    char rules[1024];
    rl_limiter *lim;
    const char *t;

    two_rules(rules, sizeof rules, 1, 10, rule_b);
    lim = limiter_with(rules);
    for (int i = 0; i < 4; i++)
        check_a(lim, "u1");
    check_b(lim, "10.0.0.1");
    two_rules(rules, sizeof rules, 2, 20,
              "{\"rule_id\":\"c\",\"dimension\":\"user\",\"match\":"
              "{\"endpoint\":\"/c\"},\"limit\":5,"
              "\"window_seconds\":1}");
    ck_assert_int_eq(rl_rules_load_string(lim, rules), RL_OK);
    check_a(lim, "u1");
    t = metrics(lim);
    RULE_EQ(t, "checks_total", "a", 5);
    RULE_EQ(t, "limit", "a", 20);
    RULE_EQ(t, "checks_total", "c", 0);
    ck_assert(rule_value(t, "checks_total", "b") == -1);
    ck_assert(rule_value(t, "limit", "b") == -1);
    ck_assert_int_ne(rl_rules_load_string(lim, "{\"rules\":[{}]}"), RL_OK);
    t = metrics(lim);
    ck_assert(value(t, "ratelimit_rules_version") == 2);
    ck_assert(value(t, "ratelimit_rules_loads_total") == 2);
    ck_assert(value(t, "ratelimit_rules_load_failures_total"
                       "{reason=\"invalid\"}") == 1);
    rl_limiter_free(lim);
}
END_TEST

static rl_limiter *limiter_opts(const char *k1, const char *v1,
                                const char *k2, const char *v2)
{
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;
    char rules[1024];

    two_rules(rules, sizeof rules, 1, 10, rule_b);
    ck_assert_int_eq(rl_config_set(cfg, "rules", rules), RL_OK);
    if (k1)
        ck_assert_int_eq(rl_config_set(cfg, k1, v1), RL_OK);
    if (k2)
        ck_assert_int_eq(rl_config_set(cfg, k2, v2), RL_OK);
    ck_assert_int_eq(rl_limiter_new(&lim, cfg), RL_OK);
    rl_config_free(cfg);
    clock_set(T0);
    store_memory_set_clock(limiter_store(lim), test_clock, NULL);
    return lim;
}

START_TEST(options)
{
    rl_config *cfg = rl_config_new();
    rl_limiter *lim;
    const char *t;

    ck_assert_int_eq(rl_config_set(cfg, "near_limit_pct", "101"), RL_EOPTION);
    ck_assert_int_eq(rl_config_set(cfg, "near_limit_pct", "-1"), RL_EOPTION);
    ck_assert_int_eq(rl_config_set(cfg, "metrics", "2"), RL_EOPTION);
    rl_config_free(cfg);

    lim = limiter_opts("metrics", "0", "fleet_size", "3");
    check_a(lim, "u1");
    t = metrics(lim);
    ck_assert(rule_value(t, "checks_total", "a") == -1); /* not counted */
    RULE_EQ(t, "limit", "a", 10);                        /* still shown */
    ck_assert(value(t, "ratelimit_check_duration_seconds_count"
                       "{store=\"memory\"}") == 0);
    ck_assert(value(t, "ratelimit_fleet_size") == 3);
    rl_limiter_free(lim);

    /* 50 %: of 10, remaining 4..0 are near */
    lim = limiter_opts("near_limit_pct", "50", NULL, NULL);
    for (int i = 0; i < 10; i++)
        check_a(lim, "u1");
    RULE_EQ(metrics(lim), "near_limit_total", "a", 5);
    rl_limiter_free(lim);
}
END_TEST

static int stop_writing(void *arg, const char *p, size_t n)
{
    (void)p;
    (void)n;
    return ++*(int *)arg;
}

START_TEST(buffer_contract)
{
    char rules[1024], small[64], *big;
    rl_limiter *lim;
    size_t need = 0, len = 0;
    int calls = 0;

    two_rules(rules, sizeof rules, 1, 10, rule_b);
    lim = limiter_with(rules);
    ck_assert_int_eq(rl_metrics_write(lim, small, sizeof small, &need),
                     RL_ERANGE);
    ck_assert_uint_gt(need, sizeof small);
    ck_assert_uint_eq(strlen(small), sizeof small - 1);
    ck_assert_int_eq(rl_metrics_write(lim, NULL, 0, &len), RL_ERANGE);
    ck_assert_uint_eq(len, need);
    big = malloc(need);
    ck_assert_int_eq(rl_metrics_write(lim, big, need, &len), RL_OK);
    ck_assert_uint_eq(len, need - 1);
    ck_assert_uint_eq(strlen(big), len);
    free(big);
    ck_assert_int_eq(rl_metrics_write(lim, NULL, 1, &len), RL_EINVAL);
    ck_assert_int_eq(rl_metrics_write_cb(lim, NULL, NULL), RL_EINVAL);
    ck_assert_int_eq(rl_metrics_write_cb(lim, stop_writing, &calls), RL_EIO);
    ck_assert_int_eq(calls, 1);
    rl_limiter_free(lim);
}
END_TEST

#define THREADS 4
#define PER_THREAD (64 * 300) /* a whole number of timing periods */

static void *hammer(void *arg)
{
    rl_limiter *lim = arg;
    char user[32];

    for (int i = 0; i < PER_THREAD; i++) {
        snprintf(user, sizeof user, "u%d", i % 500);
        check_a(lim, user);
    }
    return NULL;
}

START_TEST(threads_exact)
{
    char rules[1024];
    pthread_t th[THREADS];
    rl_limiter *lim;
    const char *t;

    two_rules(rules, sizeof rules, 1, 1000000, NULL);
    lim = limiter_with(rules);
    for (int i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, hammer, lim), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    t = metrics(lim);
    RULE_EQ(t, "checks_total", "a", THREADS * PER_THREAD);
    RULE_EQ(t, "allowed_total", "a", THREADS * PER_THREAD);
    ck_assert(value(t, "ratelimit_check_duration_seconds_count"
                       "{store=\"memory\"}") == THREADS * PER_THREAD / METRICS_SAMPLE_MEMORY);
    rl_limiter_free(lim);
}
END_TEST

/* ---- a real redis-server ------------------------------------------------ */

static const char fail_rules[] =
    "{\"version\":1,\"rules\":["
    "{\"rule_id\":\"o\",\"dimension\":\"user\",\"match\":{\"endpoint\":\"/o\"},"
    "\"limit\":100,\"window_seconds\":60,\"failure_mode\":\"open\"},"
    "{\"rule_id\":\"f\",\"dimension\":\"user\",\"match\":{\"endpoint\":\"/f\"},"
    "\"limit\":100,\"window_seconds\":60,\"failure_mode\":\"fallback\"},"
    "{\"rule_id\":\"c\",\"dimension\":\"user\",\"match\":{\"endpoint\":\"/c\"},"
    "\"limit\":100,\"window_seconds\":60,\"failure_mode\":\"closed\"}]}";

static rl_limiter *redis_limiter(const char *uri)
{
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;

    ck_assert_int_eq(rl_config_set(cfg, "store", uri), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "rules", fail_rules), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "timeout_ms", "200"), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "breaker_failures", "2"), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "breaker_cooldown_ms", "100"), RL_OK);
    /* every check asks the server: the shard's counts are the judge (a
     * client the waits below exhaust would be answered from the cache) */
    ck_assert_int_eq(rl_config_set(cfg, "deny_cache", "0"), RL_OK);
    rl_config_set_log(cfg, NULL, NULL);
    ck_assert_msg(rl_limiter_new(&lim, cfg) == RL_OK, "%s", rl_errmsg(NULL));
    rl_config_free(cfg);
    return lim;
}

static int check_ep(rl_limiter *lim, const char *ep)
{
    rl_request req = {.size = sizeof req, .endpoint = ep, .user = "u",
                      .cost = 1};
    rl_result res = RL_RESULT_INIT;

    ck_assert_msg(rl_check(lim, &req, &res) == RL_OK, "%s", rl_errmsg(lim));
    return res.allowed;
}

static void async_done(rl_async_check *chk, int rc)
{
    ck_assert_int_eq(rc, RL_OK);
    ck_assert(chk->result->allowed);
    (*(int *)chk->data)++;
}

/* n checks of endpoint ep started at once on the async API, waited for
 * on its descriptor (each completes: the store answers or times out). */
static void check_ep_async(rl_limiter *lim, const char *ep, int n)
{
    rl_request req = {.size = sizeof req, .endpoint = ep, .user = "u",
                      .cost = 1};
    rl_result res[8];
    rl_async_check chk[8];
    rl_async *a;
    int done = 0;

    ck_assert_int_le(n, 8);
    ck_assert_int_eq(rl_async_new(lim, 8, &a), RL_OK);
    for (int i = 0; i < n; i++) {
        res[i] = (rl_result)RL_RESULT_INIT;
        chk[i] = (rl_async_check){.size = sizeof chk[i], .cb = async_done,
                                  .data = &done, .result = &res[i]};
        ck_assert_int_eq(rl_check_start(a, &req, &chk[i]), RL_OK);
    }
    while (done < n) {
        struct pollfd p = {.fd = rl_async_fd(a), .events = POLLIN};
        ck_assert_int_ge(poll(&p, 1, 10000), 1);
        ck_assert_int_ge(rl_async_process(a), 0);
    }
    rl_async_free(a);
}

static double shard_value(rl_limiter *lim, const char *family,
                          const char *shard)
{
    char series[1200];

    snprintf(series, sizeof series, "ratelimit_store_%s{shard=\"%s\"}",
             family, shard);
    return value(metrics(lim), series);
}

START_TEST(redis_shard)
{
    rh_server srv;
    char uri[256], shard[64];
    rl_limiter *lim;
    const char *t;

    ck_assert_int_eq(rh_start(&srv, NULL), 0);
    lim = redis_limiter(rh_uri(&srv, uri, sizeof uri));
    snprintf(shard, sizeof shard, "127.0.0.1:%d", srv.port);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(check_ep(lim, "/o"), 1);
        ck_assert_int_eq(check_ep(lim, "/f"), 1);
        ck_assert_int_eq(check_ep(lim, "/c"), 1);
    }
    t = metrics(lim);
    RULE_EQ(t, "checks_total", "o", 3);
    RULE_EQ(t, "fail_open_total", "o", 0);
    ck_assert(value(t, "ratelimit_check_duration_seconds_count"
                       "{store=\"redis\"}") == 9);
    /* async checks are counted and timed as blocking ones are */
    check_ep_async(lim, "/o", 5);
    t = metrics(lim);
    RULE_EQ(t, "checks_total", "o", 8);
    ck_assert(value(t, "ratelimit_check_duration_seconds_count"
                       "{store=\"redis\"}") == 14);
    ck_assert(shard_value(lim, "breaker_state", shard) == 0);
    ck_assert(shard_value(lim, "breaker_opens_total", shard) == 0);
    ck_assert(shard_value(lim, "errors_total", shard) == 0);

    /* Gone: each rule's failure mode decides, and is counted. */
    ck_assert_int_eq(rh_kill(&srv), 0);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(check_ep(lim, "/o"), 1);
        ck_assert_int_eq(check_ep(lim, "/f"), 1);
        ck_assert_int_eq(check_ep(lim, "/c"), 0);
    }
    t = metrics(lim);
    RULE_EQ(t, "fail_open_total", "o", 4);
    RULE_EQ(t, "fallback_total", "f", 4);
    RULE_EQ(t, "fail_closed_total", "c", 4);
    RULE_EQ(t, "denied_total", "c", 4);
    RULE_EQ(t, "checks_total", "c", 7);
    RULE_EQ(t, "checks_total", "o", 12);
    RULE_EQ(t, "fail_open_total", "f", 0);
    /* Failures in one time slice are one (breaker.h): the breaker opens
     * once calls have kept failing for breaker_failures - 1 slices. */
    for (int i = 0; i < 500 && shard_value(lim, "breaker_opens_total",
                                           shard) < 1; i++) {
        check_ep(lim, "/o");
        usleep(10000);
    }
    ck_assert(shard_value(lim, "breaker_opens_total", shard) >= 1);
    ck_assert(shard_value(lim, "breaker_state", shard) != 0);

    /* Back: a connection replaced, the breaker closed again. */
    ck_assert_int_eq(rh_restart(&srv), 0);
    for (int i = 0; i < 500 && shard_value(lim, "breaker_closes_total",
                                           shard) < 1; i++) {
        check_ep(lim, "/o");
        usleep(10000);
    }
    ck_assert(shard_value(lim, "breaker_closes_total", shard) >= 1);
    ck_assert(shard_value(lim, "reconnects_total", shard) >= 1);
    ck_assert(shard_value(lim, "breaker_state", shard) == 0);

    /* Hung: the check gives up at its deadline, counted a timeout. */
    ck_assert_int_eq(rh_pause(&srv), 0);
    check_ep(lim, "/o");
    /* the caller leaves at its deadline whatever the I/O thread does; the
     * thread counts the timeout when it next runs: wait for that with the
     * server still stopped (resumed, its late answer would complete the
     * job instead, as CI once saw on a loaded machine) */
    for (int i = 0; i < 500 && shard_value(lim, "timeouts_total",
                                           shard) < 1; i++)
        usleep(10000);
    ck_assert_int_eq(rh_resume(&srv), 0);
    ck_assert(shard_value(lim, "timeouts_total", shard) >= 1);
    rl_limiter_free(lim);
    rh_stop(&srv);
}
END_TEST

/* A shard label that needs escaping: a unix socket reached through a
 * link whose name holds a double quote and a backslash. */
START_TEST(shard_label_escaped)
{
    rh_server srv;
    char link[512], uri[600], esc[1100], *o = esc;
    rl_limiter *lim;

    ck_assert_int_eq(rh_start(&srv, NULL), 0);
    snprintf(link, sizeof link, "%s/q\"b\\s.sock", srv.dir);
    ck_assert_int_eq(symlink(srv.unix_path, link), 0);
    snprintf(uri, sizeof uri, "unix://%s", link);
    lim = redis_limiter(uri);
    ck_assert_int_eq(check_ep(lim, "/o"), 1);
    for (const char *p = link; *p; p++) {
        if (*p == '"' || *p == '\\')
            *o++ = '\\';
        *o++ = *p;
    }
    *o = '\0';
    ck_assert(shard_value(lim, "breaker_state", esc) == 0);
    rl_limiter_free(lim);
    rh_stop(&srv);
}
END_TEST

static Suite *metrics_suite(void)
{
    Suite *s = suite_create("metrics");
    TCase *mem = tcase_create("memory");
    TCase *red = tcase_create("redis");

    tcase_add_test(mem, rule_counts);
    tcase_add_test(mem, across_reloads);
    tcase_add_test(mem, options);
    tcase_add_test(mem, buffer_contract);
    tcase_add_test(mem, threads_exact);
    tcase_set_timeout(mem, 60);
    suite_add_tcase(s, mem);
    if (rh_available()) {
        tcase_add_test(red, redis_shard);
        tcase_add_test(red, shard_label_escaped);
        tcase_set_timeout(red, 60);
        suite_add_tcase(s, red);
    }
    return s;
}

int main(void)
{
    return run_suite(metrics_suite());
}
