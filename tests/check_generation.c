/*
 * check_generation.c -- rule versions that survive a restore (ratelimitd(8),
 * GENERATIONS), with every part real: a redis-server, ratelimitd on a
 * SQLite file, and two limiters on rules_source (their timed pull set to
 * an hour, so only the push can bring a change within the test's wait).
 *
 * A database backed up at version 1, changed up to 5, restored: the fleet
 * runs the limit of the next change made through it.  A second ratelimitd
 * on a new database and the same Redis: it says at /healthz that the key
 * is not its database's, leaves it alone until a change is made through
 * it, which the fleet then runs; the first then says the same.  /healthz
 * answers 503 with the reason while Redis refuses the service (a wrong
 * password) or stays away past --redis-grace-ms.  A limiter refuses a set
 * of the same generation and an older version, counts it in its metrics
 * and logs it naming both versions.  Every wait is for a condition, with
 * a deadline.
 */
#include <check.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ratelimit.h"
#include "redis_harness.h"
#include "rld_harness.h"
#include "testutil.h"
#include "timeutil.h"

#define WAIT_MS 15000
#define ALICE "Bearer " RLD_ALICE_TOKEN

static rh_server redis;
static char uri[256];

/* ---- helpers ------------------------------------------------------------- */

static const char *const *rld_args(void)
{
    static const char *args[3];

    args[0] = "--redis";
    args[1] = uri;
    args[2] = NULL;
    return args;
}

/* PUT rule `id` with this limit through d: 200 asserted. */
static void put_limit(const rld *d, const char *id, int limit)
{
    char path[64], body[128];
    rld_resp r;

    snprintf(path, sizeof path, "/v1/rules/%s", id);
    snprintf(body, sizeof body, "{\"dimension\":\"user\",\"limit\":%d,"
             "\"window_seconds\":60}", limit);
    ck_assert_int_eq(rld_http(d, "PUT", path, RLD_ALICE_TOKEN, NULL, body,
                              strlen(body), &r), 200);
    rld_resp_free(&r);
}

/* /healthz's status; its body into body (may be NULL). */
static long health(const rld *d, char *body, size_t len)
{
    rld_resp r;
    long st = rld_http(d, "GET", "/healthz", NULL, NULL, NULL, 0, &r);

    if (body)
        snprintf(body, len, "%s", r.body ? r.body : "");
    rld_resp_free(&r);
    return st;
}

/* Wait until /healthz answers `status` with `needle` in its body. */
static void wait_health(const rld *d, long status, const char *needle)
{
    char body[2048] = "";
    int64_t start = now_ms();

    while (health(d, body, sizeof body) != status ||
           (needle && !strstr(body, needle))) {
        ck_assert_msg(now_ms() - start < WAIT_MS, "healthz: want %ld %s: %s",
                      status, needle ? needle : "", body);
        sleep_ms(20);
    }
}

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char logged[4096]; /* the last refusal the limiters logged */

static void keep_log(void *arg, int level, const char *msg)
{
    (void)arg;
    (void)level;
    pthread_mutex_lock(&log_mu);
    if (strstr(msg, "refused"))
        snprintf(logged, sizeof logged, "%s", msg);
    pthread_mutex_unlock(&log_mu);
}

/* Wait until the last refusal logged holds both needles. */
static void wait_logged(const char *a, const char *b)
{
    char copy[4096];
    int64_t start = now_ms();

    for (;; sleep_ms(10)) {
        pthread_mutex_lock(&log_mu);
        snprintf(copy, sizeof copy, "%s", logged);
        pthread_mutex_unlock(&log_mu);
        if (strstr(copy, a) && strstr(copy, b))
            return;
        ck_assert_msg(now_ms() - start < WAIT_MS, "%s", copy);
    }
}

static rl_limiter *limiter(void)
{
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;

    ck_assert_int_eq(rl_config_set(cfg, "store", uri), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "rules_source", uri), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "rules_refresh_s", "3600"), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "timeout_ms", "1000"), RL_OK);
    ck_assert_int_eq(rl_config_set_log(cfg, keep_log, NULL), RL_OK);
    ck_assert_msg(rl_limiter_new(&lim, cfg) == RL_OK, "%s", rl_errmsg(NULL));
    rl_config_free(cfg);
    return lim;
}

/* The limit rule `id` has in lim (a fresh key each call), -1: none. */
static long long limit_of(rl_limiter *lim, const char *id)
{
    static unsigned n;
    char key[64];
    rl_result res = RL_RESULT_INIT;

    snprintf(key, sizeof key, "user:probe-%u-%d", n++, (int)getpid());
    if (rl_allow(lim, key, id, 1, &res) != RL_OK)
        return -1;
    return res.limit;
}

/* Wait until both limiters run rule `id` at `limit`. */
static void fleet_runs(rl_limiter *const *lims, const char *id, int limit)
{
    int64_t start = now_ms();

    for (int i = 0; i < 2; i++)
        while (limit_of(lims[i], id) != limit) {
            ck_assert_msg(now_ms() - start < WAIT_MS,
                          "limiter %d runs %s at %lld, not %d (version "
                          "%lld)", i, id, limit_of(lims[i], id), limit,
                          (long long)rl_rules_version(lims[i]));
            sleep_ms(10);
        }
}

static void copy_file(const char *from, const char *to)
{
    char buf[8192];
    size_t n;
    FILE *in = fopen(from, "rb"), *out;

    unlink(to);
    if (!in)
        return; /* a -wal that is not there */
    ck_assert_ptr_nonnull(out = fopen(to, "wb"));
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
    fclose(in);
    ck_assert_int_eq(fclose(out), 0);
}

/* The database's files (main, -wal) from `from` to `to` + the suffix. */
static void copy_db(const char *from, const char *to)
{
    static const char *const sfx[] = {"", "-wal", "-shm"};
    char a[400], b[400];

    for (size_t i = 0; i < 3; i++) {
        snprintf(a, sizeof a, "%s%s", from, sfx[i]);
        snprintf(b, sizeof b, "%s%s", to, sfx[i]);
        copy_file(a, b);
    }
}

static void setup(void)
{
    ck_assert_msg(rld_available(), "ratelimitd not built");
    ck_assert_int_eq(rh_start(&redis, NULL), 0);
    ck_assert_ptr_nonnull(rh_uri(&redis, uri, sizeof uri));
}

static void teardown(void)
{
    rh_stop(&redis);
}

/* ---- the cases -------------------------------------------------------------- */

/* Back up at version 1, change to 5, restore, change: the fleet runs the
 * change. */
START_TEST(a_restored_database_reaches_the_fleet)
{
    rld d = {0};
    rl_limiter *lims[2];
    char backup[400];

    ck_assert_int_eq(rld_start(&d, rld_args()), 0);
    put_limit(&d, "r", 1);
    ck_assert_int_eq(rld_stop(&d), 0);
    snprintf(backup, sizeof backup, "%s/backup.db", d.dir);
    copy_db(d.db, backup); /* version 1 */
    ck_assert_int_eq(rld_start(&d, rld_args()), 0);
    for (int limit = 2; limit <= 5; limit++)
        put_limit(&d, "r", limit);
    lims[0] = limiter();
    lims[1] = limiter();
    fleet_runs(lims, "r", 5);

    ck_assert_int_eq(rld_stop(&d), 0);
    copy_db(backup, d.db); /* the restore */
    ck_assert_int_eq(rld_start(&d, rld_args()), 0);
    fleet_runs(lims, "r", 1); /* the database's set, published at start */
    put_limit(&d, "r", 7);
    fleet_runs(lims, "r", 7);
    wait_health(&d, 200, "\"ok\":true");
    rl_limiter_free(lims[0]);
    rl_limiter_free(lims[1]);
    rld_cleanup(&d);
}
END_TEST

/* A second ratelimitd on a new database and the same Redis. */
START_TEST(a_second_service_is_loud_and_its_change_reaches_the_fleet)
{
    rld a = {0}, b = {0};
    rl_limiter *lims[2];

    ck_assert_int_eq(rld_start(&a, rld_args()), 0);
    for (int limit = 1; limit <= 5; limit++)
        put_limit(&a, "r", limit);
    lims[0] = limiter();
    lims[1] = limiter();
    fleet_runs(lims, "r", 5);

    ck_assert_int_eq(rld_start(&b, rld_args()), 0);
    wait_health(&b, 503, "not this database's set");
    /* its empty set did not replace the fleet's */
    ck_assert_int_eq(limit_of(lims[0], "r"), 5);
    put_limit(&b, "r", 9);
    fleet_runs(lims, "r", 9);
    wait_health(&b, 200, "\"ok\":true");
    wait_health(&a, 503, "another database publishes there");
    /* and back: a change through the first replaces the second's */
    put_limit(&a, "r", 11);
    fleet_runs(lims, "r", 11);
    wait_health(&a, 200, "\"ok\":true");
    wait_health(&b, 503, "another database publishes there");
    rl_limiter_free(lims[0]);
    rl_limiter_free(lims[1]);
    rld_cleanup(&b);
    rld_cleanup(&a);
}
END_TEST

/* Redis away past the grace period; Redis refusing the password. */
START_TEST(healthz_says_when_the_fleet_cannot_get_the_set)
{
    const char *grace[] = {"--redis", uri, "--redis-grace-ms", "300", NULL};
    char wrong[300];
    const char *bad[] = {"--redis", wrong, NULL};
    rld d = {0}, e = {0};
    rh_server locked;

    ck_assert_int_eq(rld_start(&d, grace), 0);
    wait_health(&d, 200, "\"redis\":\"up\"");
    ck_assert_int_eq(rh_stop(&redis), 0);
    wait_health(&d, 503, "unreachable for");
    ck_assert_int_eq(rh_start(&redis, NULL), 0);
    ck_assert_ptr_nonnull(rh_uri(&redis, uri, sizeof uri));
    rld_cleanup(&d);

    ck_assert_int_eq(rh_start(&locked, "the-right-password"), 0);
    snprintf(wrong, sizeof wrong, "redis://:the-wrong-password@127.0.0.1:%d/0",
             locked.port);
    ck_assert_int_eq(rld_start(&e, bad), 0);
    wait_health(&e, 503, "refuses this service");
    rld_cleanup(&e);
    rh_stop(&locked);
}
END_TEST

/* A set of the generation in force and an older version: refused,
 * counted, logged with both versions. */
START_TEST(a_stale_set_is_counted_and_logged)
{
    rld d = {0};
    rl_limiter *lim;
    redisContext *c;
    redisReply *r;
    char metrics[1 << 16], stale[512], gen[80] = "";
    const char *g;
    size_t len;
    int64_t start = now_ms();

    ck_assert_int_eq(rld_start(&d, rld_args()), 0);
    put_limit(&d, "r", 3);
    put_limit(&d, "r", 4);
    lim = limiter();
    while (rl_rules_version(lim) < 2) {
        ck_assert_msg(now_ms() - start < WAIT_MS, "no version 2");
        sleep_ms(10);
    }
    ck_assert_int_eq(rld_stop(&d), 0); /* nobody puts it back */
    ck_assert_ptr_nonnull(c = rh_connect(&redis));
    ck_assert_ptr_nonnull(r = redisCommand(c, "GET rl:rules"));
    ck_assert_ptr_nonnull(g = strstr(r->str, "\"generation\":\""));
    sscanf(g + 14, "%79[^\"]", gen);
    freeReplyObject(r);
    snprintf(stale, sizeof stale, "{\"version\":1,\"generation\":\"%s\","
             "\"rules\":[{\"rule_id\":\"r\",\"dimension\":\"user\","
             "\"limit\":1,\"window_seconds\":60}]}", gen);
    ck_assert_ptr_nonnull(r = redisCommand(c, "SET rl:rules %s", stale));
    freeReplyObject(r);
    ck_assert_ptr_nonnull(r = redisCommand(c, "PUBLISH rl:rules 1"));
    freeReplyObject(r);
    redisFree(c);
    for (;; sleep_ms(10)) {
        ck_assert_int_eq(rl_metrics_write(lim, metrics, sizeof metrics, &len),
                         RL_OK);
        if (strstr(metrics, "ratelimit_rules_load_failures_total"
                            "{reason=\"stale\"} 1\n"))
            break;
        ck_assert_msg(now_ms() - start < WAIT_MS, "%s", metrics);
    }
    wait_logged("version 1 is older than the version 2 in force", gen);
    ck_assert_int_eq(limit_of(lim, "r"), 4);
    rl_limiter_free(lim);
    rld_cleanup(&d);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("generation");
    TCase *t = tcase_create("generation");

    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 120);
    tcase_add_test(t, a_restored_database_reaches_the_fleet);
    tcase_add_test(t, a_second_service_is_loud_and_its_change_reaches_the_fleet);
    tcase_add_test(t, healthz_says_when_the_fleet_cannot_get_the_set);
    tcase_add_test(t, a_stale_set_is_counted_and_logged);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    if (!rh_available() || !rld_available())
        return 77;
    return run_suite(suite());
}
