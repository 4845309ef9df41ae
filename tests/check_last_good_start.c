/*
 * check_last_good_start.c -- a limiter restarted while its Redis is away,
 * with rules_source=store and a last good rules_file, starts from that
 * copy and says so (issue 23), instead of failing unless degraded_start=1:
 * a real redis-server, stopped.  The store is degraded from the start
 * (each rule's failure mode decides: here fail-open, flagged), the rules
 * are the file's, and once the server is back the limiter's checks are
 * Redis's again.  Without a rules_file it still fails with RL_ESTORE.
 */
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ratelimit.h"
#include "redis_harness.h"
#include "testutil.h"
#include "timeutil.h"

#define RULES                                                                  \
    "{\"version\":3,\"rules\":[{\"rule_id\":\"r\",\"dimension\":\"user\","     \
    "\"limit\":4,\"window_seconds\":60,\"failure_mode\":\"open\"}]}"

static pthread_mutex_t heard_mu = PTHREAD_MUTEX_INITIALIZER;
static char heard[8192];

static void capture(void *arg, int level, const char *msg)
{
    (void)arg;
    pthread_mutex_lock(&heard_mu);
    if (level <= RL_LOG_WARN && strlen(heard) + strlen(msg) + 2 < sizeof heard)
        strcat(strcat(heard, msg), "\n");
    pthread_mutex_unlock(&heard_mu);
}

static int heard_has(const char *needle)
{
    int yes;

    pthread_mutex_lock(&heard_mu);
    yes = strstr(heard, needle) != NULL;
    pthread_mutex_unlock(&heard_mu);
    return yes;
}

static rl_config *config(const char *uri, const char *file)
{
    rl_config *cfg = rl_config_new();

    ck_assert_int_eq(rl_config_set(cfg, "store", uri), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "rules_source", "store"), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "connect_timeout_ms", "300"), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "timeout_ms", "3000"), RL_OK);
    if (file)
        ck_assert_int_eq(rl_config_set(cfg, "rules_file", file), RL_OK);
    ck_assert_int_eq(rl_config_set_log(cfg, capture, NULL), RL_OK);
    return cfg;
}

START_TEST(store_away_at_start_starts_from_the_last_good_copy)
{
    rh_server srv;
    char uri[512], file[] = "/tmp/rl-lastgood-XXXXXX";
    int fd = mkstemp(file);
    rl_config *cfg;
    rl_limiter *lim = NULL;
    rl_rules_status st = RL_RULES_STATUS_INIT;
    rl_result res = RL_RESULT_INIT;
    int64_t deadline;
    int rc;

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, RULES, strlen(RULES)), (ssize_t)strlen(RULES));
    close(fd);
    ck_assert_int_eq(rh_start(&srv, NULL), 0);
    rh_uri(&srv, uri, sizeof uri);
    ck_assert_int_eq(rh_kill(&srv), 0); /* the outage: a server stopped */

    /* without a last good copy: still RL_ESTORE (no degraded_start) */
    cfg = config(uri, NULL);
    ck_assert_int_eq(rl_limiter_new(&lim, cfg), RL_ESTORE);
    rl_config_free(cfg);
    ck_assert_ptr_null(lim);

    cfg = config(uri, file);
    rc = rl_limiter_new(&lim, cfg);
    rl_config_free(cfg);
    ck_assert_msg(rc == RL_OK, "rl_limiter_new: %s", rl_errmsg(NULL));
    ck_assert_int_eq(rl_rules_status_get(lim, &st), RL_OK);
    ck_assert_int_eq(st.version, 3);
    ck_assert_int_eq(st.origin, RL_RULES_FROM_LAST_GOOD);
    ck_assert_msg(heard_has("starting without it"), "log: %s", heard);
    ck_assert_msg(heard_has("starting from the last good copy"), "log: %s",
                  heard);
    /* the file's rule, decided by its failure mode while Redis is away */
    ck_assert_int_eq(rl_allow(lim, "u", "r", 1, &res), RL_OK);
    ck_assert(res.allowed);
    ck_assert_int_eq(res.limit, 4);
    ck_assert_uint_ne(res.flags & DECIDED_ELSEWHERE, 0);

    /* Redis back: its decisions again, within the reconnect backoff */
    ck_assert_int_eq(rh_restart(&srv), 0);
    deadline = real_ms() + 20000;
    do {
        usleep(50000);
        ck_assert_int_eq(rl_allow(lim, "u", "r", 1, &res), RL_OK);
    } while ((res.flags & DECIDED_ELSEWHERE) && real_ms() < deadline);
    ck_assert_msg(!(res.flags & DECIDED_ELSEWHERE), "Redis never decided");
    rl_limiter_free(lim);
    rh_stop(&srv);
    unlink(file);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("last_good_start");
    TCase *tc = tcase_create("redis");

    tcase_set_timeout(tc, 60);
    if (rh_available())
        tcase_add_test(tc, store_away_at_start_starts_from_the_last_good_copy);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
