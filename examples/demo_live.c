/*
 * demo_live.c -- the demo's live part: a fleet of gateway processes whose
 * rules come from Redis (rules_source), serving one client steadily while
 * an operator changes the rule with rlctl (examples/demo.sh does that,
 * a few seconds in).  Every second each gateway reports what it admitted
 * and which rule-set version it runs; the table shows the fleet following
 * the change within the second, without a restart.
 *
 *   demo --live N SECONDS STORE
 */
#include <ratelimit.h>

#include "demo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PER_SECOND 10 /* searches each gateway serves a second */
#define MAX_GATEWAYS 16

/* What one gateway did in one second. */
typedef struct tick {
    int second;
    long long version, limit;
    int admitted, denied;
} tick;

static void sleep_until(const struct timespec *t)
{
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, t, NULL) != 0)
        ;
}

static rl_limiter *open_live(const char *store)
{
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;

    /* rules from the store's own Redis, where ratelimitd publishes them;
     * the library's messages are not for this table */
    if (!cfg || rl_config_set(cfg, "store", store) != RL_OK ||
        rl_config_set(cfg, "rules_source", "store") != RL_OK ||
        rl_config_set(cfg, "timeout_ms", "200") != RL_OK ||
        rl_config_set_log(cfg, NULL, NULL) != RL_OK ||
        rl_limiter_new(&lim, cfg) != RL_OK)
        fprintf(stderr, "demo: %s\n", rl_errmsg(NULL));
    rl_config_free(cfg);
    return lim;
}

/* One gateway: PER_SECOND searches by alice a second, evenly spread, and
 * a tick down the pipe at the end of each second. */
static void gateway(int out, int seconds, const char *store)
{
    rl_request req = {.size = sizeof(rl_request), .endpoint = "/search", .tier = "free",
                      .user = "alice", .ip = "203.0.113.5", .cost = 1};
    rl_limiter *lim = open_live(store);
    struct timespec at;
    rl_result res = RL_RESULT_INIT;

    if (!lim)
        _exit(1);
    clock_gettime(CLOCK_MONOTONIC, &at);
    for (int s = 1; s <= seconds; s++) {
        tick t = {.second = s};
        for (int i = 0; i < PER_SECOND; i++) {
            at.tv_nsec += 1000000000L / PER_SECOND;
            if (at.tv_nsec >= 1000000000L) {
                at.tv_sec++;
                at.tv_nsec -= 1000000000L;
            }
            sleep_until(&at);
            if (rl_check(lim, &req, &res) != RL_OK)
                _exit(1);
            res.allowed ? t.admitted++ : t.denied++;
            if (strcmp(res.rule_id, "search-per-user") == 0)
                t.limit = res.limit;
        }
        t.version = rl_rules_version(lim);
        if (write(out, &t, sizeof t) != sizeof t)
            _exit(1);
    }
    rl_limiter_free(lim);
    _exit(0);
}

/* One line of the table: second s of every gateway. */
static void print_second(const tick *t, int n, int *total)
{
    int admitted = 0, denied = 0;

    printf("  %2ds   ", t[0].second);
    for (int i = 0; i < n; i++) {
        printf(" v%-3lld", t[i].version);
        admitted += t[i].admitted;
        denied += t[i].denied;
    }
    *total += admitted;
    printf("  %8d %8d %10d    %lld/min\n", admitted, denied, *total,
           t[0].limit);
    fflush(stdout);
}

int live(int n, int seconds, const char *store)
{
    int fds[MAX_GATEWAYS][2], total = 0, ok = 1;
    tick t[MAX_GATEWAYS];

    if (n < 1 || n > MAX_GATEWAYS)
        return 2;
    printf("%d gateways, each serving %d searches a second by free-tier "
           "user alice;\nthe rules come from Redis, where ratelimitd "
           "publishes each change\n\n", n, PER_SECOND);
    printf("  time    %-*s  admitted   denied  admitted  search-per-user\n",
           5 * n, "rule-set version");
    printf("          %-*s  (fleet, this second)   in all\n", 5 * n,
           "(each gateway)");
    fflush(stdout);
    for (int i = 0; i < n; i++) {
        if (pipe(fds[i]) != 0)
            return 1;
        if (fork() == 0) {
            close(fds[i][0]);
            gateway(fds[i][1], seconds, store);
        }
        close(fds[i][1]);
    }
    for (int s = 1; s <= seconds && ok; s++) {
        for (int i = 0; i < n && ok; i++)
            ok = read(fds[i][0], &t[i], sizeof t[i]) == sizeof t[i];
        if (ok)
            print_second(t, n, &total);
    }
    for (int i = 0; i < n; i++)
        close(fds[i][0]);
    while (wait(NULL) > 0)
        ;
    if (!ok)
        fprintf(stderr, "demo: a gateway failed\n");
    return ok ? 0 : 1;
}
