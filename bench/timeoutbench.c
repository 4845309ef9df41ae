/*
 * timeoutbench.c -- redisbench timeout: the checks a busy host denies a
 * fail-closed rule "for store reasons" on a healthy loopback Redis, by
 * timeout_ms and load.  Method: docs/BENCHMARKS.md, "How each bench
 * measures".
 */
#include <signal.h>
#include <sys/wait.h>

#include "redisutil.h"
#include "serverbench.h"

#define THREADS 4
#define RUN_MS 3000
#define MAX_SPIN 8

static const int loads[] = {0, 2, 4};
static const int timeouts[] = {5, 10, 20, 50, 100};
#define NLOADS (sizeof loads / sizeof *loads)
#define NTIMEOUTS (sizeof timeouts / sizeof *timeouts)

static rl_limiter *open_limiter(const char *uri, int timeout_ms)
{
    static const char rules[] =
        "[{\"rule_id\":\"fc\",\"dimension\":\"user\",\"limit\":1000000000,"
        "\"window_seconds\":60,\"failure_mode\":\"closed\"}]";
    char t[16], err[ERRLEN];

    snprintf(t, sizeof t, "%d", timeout_ms);
    return bench_limiter((const char *const[]){"store", uri, "rules", rules,
                                               "timeout_ms", t, "deny_cache",
                                               "0", NULL},
                         err);
}

/* n processes spinning until killed. */
static int spin_start(pid_t *pid, int n)
{
    for (int i = 0; i < n; i++) {
        if ((pid[i] = fork()) < 0)
            return -1;
        if (pid[i] == 0) {
            volatile unsigned long x = 0;
            for (;;)
                x++;
        }
    }
    return 0;
}

static void spin_stop(pid_t *pid, int n)
{
    for (int i = 0; i < n; i++)
        if (pid[i] > 0) {
            kill(pid[i], SIGKILL);
            waitpid(pid[i], NULL, 0);
        }
}

/* One cell: share of checks denied for store reasons (-1: no limiter);
 * each thread checks a key of its own. */
static double measure(const char *uri, int timeout_ms, long *checks,
                      long *opens)
{
    static tp_load l;
    tp_sums sum = {0};
    rl_stats st = RL_STATS_INIT;
    char err[ERRLEN];

    memset(&l, 0, sizeof l);
    if (!(l.run.lim = open_limiter(uri, timeout_ms)))
        return -1;
    l.run.rule = "fc";
    l.run.per_call = 1;
    bench_sleep_ms(200); /* connections up */
    tp_load_for(&l, THREADS, RUN_MS, &sum, err);
    rl_stats_get(l.run.lim, &st);
    *opens = (long)st.breaker_opens;
    *checks = (long)(sum.calls - sum.errors);
    rl_limiter_free(l.run.lim);
    /* fail-closed the rule's only failure mode: degraded = denied so */
    return *checks ? (double)sum.degraded / (double)*checks : 0;
}

int timeout_main(int argc, char **argv, sb_env *env)
{
    int json = argc > 1 && strcmp(argv[1], "--json") == 0;
    int help = argc > 1 && strcmp(argv[1], "--help") == 0;
    double ref = 0;

    if (argc > 1 && !json)
        return fprintf(help ? stdout : stderr,
                       "usage: redisbench timeout [--json]\n"), help ? 0 : 2;
    for (size_t l = 0; l < NLOADS; l++) {
        pid_t pid[MAX_SPIN] = {0};

        if (spin_start(pid, loads[l]) != 0) {
            spin_stop(pid, loads[l]);
            return 1;
        }
        for (size_t t = 0; t < NTIMEOUTS; t++) {
            long checks = 0, opens = 0;
            double d = measure(env->uri, timeouts[t], &checks, &opens);

            if (d < 0) {
                fprintf(stderr, "redisbench timeout: limiter: %s\n",
                        rl_errmsg(NULL));
                spin_stop(pid, loads[l]);
                return 1;
            }
            if (t == 0)
                ref = d;
            if (json)
                printf("{\"figure\":\"store_denials\",\"spinners\":%d,"
                       "\"timeout_ms\":%d,\"checks\":%ld,"
                       "\"denied_store_pct\":%.3f,\"breaker_opens\":%ld,"
                       "\"ratio_to_5ms\":%.3f}\n", loads[l], timeouts[t],
                       checks, 100 * d, opens, ref > 0 ? d / ref : 0);
            else
                printf("spinners %d, timeout_ms %3d: %8ld checks, %6.2f %% "
                       "denied for store reasons (%.3fx 5 ms's), breaker "
                       "opened %ld\n", loads[l], timeouts[t], checks,
                       100 * d, ref > 0 ? d / ref : 0, opens);
            fflush(stdout);
        }
        spin_stop(pid, loads[l]);
    }
    return 0;
}
