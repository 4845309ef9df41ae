/*
 * outagebench.c -- redisbench outage: what a short and a long Redis
 * outage cost in admissions, 4 processes x 4 threads, fleet_size 1, 4,
 * auto and the defaults.  Method: docs/BENCHMARKS.md, "How each bench
 * measures".
 */
#include <sys/mman.h>
#include <sys/wait.h>

#include "redisutil.h"
#include "serverbench.h"

#define PROCS 4
#define THREADS 4
#define RUN_S 12
#define STOP_AT_S 2
#define LIMIT 200
#define WINDOW_S 10
#define ALLOWED (LIMIT + RUN_S * LIMIT / WINDOW_S)

typedef struct shared {
    _Atomic int ready, go, stop;
    _Atomic long admitted, local, checks;
} shared;

static rl_limiter *open_limiter(const char *uri, const char *fleet)
{
    char rules[256], err[ERRLEN];
    int dflt = strcmp(fleet, "default") == 0; /* fleet_size not set */

    snprintf(rules, sizeof rules,
             "[{\"rule_id\":\"tb\",\"dimension\":\"user\",\"limit\":%d,"
             "\"window_seconds\":%d,\"algorithm\":\"token_bucket\","
             "\"failure_mode\":\"fallback\"}]", LIMIT, WINDOW_S);
    return bench_limiter((const char *const[]){
                             "store", uri, "rules", rules,
                             "fleet_size", dflt ? NULL : fleet,
                             "fleet_name", dflt ? NULL : "outagebench", NULL},
                         err);
}

/* One process of the fleet: THREADS threads checking the victim from go
 * to stop; what they counted added to sh. */
static void child(shared *sh, const char *uri, const char *fleet)
{
    static tp_load l;
    tp_sums sum = {0};
    char err[ERRLEN];

    l.run = (tp_run){.lim = open_limiter(uri, fleet), .rule = "tb",
                     .key = "user:victim", .per_call = 1, .stop = &sh->stop};
    if (!l.run.lim) {
        fprintf(stderr, "redisbench outage: limiter: %s\n", rl_errmsg(NULL));
        _exit(1);
    }
    atomic_fetch_add(&sh->ready, 1);
    while (!atomic_load(&sh->go))
        bench_sleep_ms(1);
    tp_load_for(&l, THREADS, 1000L * RUN_S * 2, &sum, err);
    atomic_fetch_add(&sh->admitted,
                     (long)(sum.calls - sum.errors - sum.denied));
    atomic_fetch_add(&sh->local, (long)sum.local);
    atomic_fetch_add(&sh->checks, (long)(sum.calls - sum.errors));
    rl_limiter_free(l.run.lim);
    _exit(0);
}

/* One run: the fleet for RUN_S seconds, the server stopped for outage_ms
 * STOP_AT_S seconds in.  0, or -1 (a process failed). */
static int run(rh_server *srv, const char *fleet, long outage_ms, int json)
{
    shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    char uri[128];
    pid_t pid[PROCS];
    int bad = 0, st;
    long bound, adm;
    redisContext *c = rh_connect(srv);

    if (sh == MAP_FAILED || !c)
        return -1;
    freeReplyObject(redisCommand(c, "FLUSHALL"));
    redisFree(c);
    memset(sh, 0, sizeof *sh);
    rh_uri(srv, uri, sizeof uri);
    for (int p = 0; p < PROCS; p++)
        if ((pid[p] = fork()) == 0)
            child(sh, uri, fleet);
    while (atomic_load(&sh->ready) < PROCS)
        bench_sleep_ms(5);
    bench_sleep_ms(1500); /* fleet_size auto: every heartbeat counted */
    atomic_store(&sh->go, 1);
    bench_sleep_ms(STOP_AT_S * 1000);
    rh_pause(srv);
    bench_sleep_ms(outage_ms);
    rh_resume(srv);
    bench_sleep_ms(RUN_S * 1000 - STOP_AT_S * 1000 - outage_ms);
    atomic_store(&sh->stop, 1);
    for (int p = 0; p < PROCS; p++)
        bad |= waitpid(pid[p], &st, 0) < 0 || !WIFEXITED(st) ||
               WEXITSTATUS(st) != 0;
    bound = ALLOWED + LIMIT * outage_ms / (WINDOW_S * 1000L) + PROCS;
    adm = atomic_load(&sh->admitted);
    if (json)
        printf("{\"figure\":\"outage_admitted\",\"outage_ms\":%ld,"
               "\"fleet_size\":\"%s\",\"admitted\":%ld,\"local\":%ld,"
               "\"checks\":%ld,\"allowed_by_rule\":%d,\"bound\":%ld,"
               "\"ratio\":%.3f}\n",
               outage_ms, fleet, adm, atomic_load(&sh->local),
               atomic_load(&sh->checks), ALLOWED, bound, (double)adm / ALLOWED);
    else
        printf("outage %5ld ms, fleet_size %-7s: admitted %5ld of %d "
               "(%.2fx; bound %ld: %s; %ld local) in %ld checks\n",
               outage_ms, fleet, adm, ALLOWED, (double)adm / ALLOWED, bound,
               adm <= bound ? "within" : "OVER", atomic_load(&sh->local),
               atomic_load(&sh->checks));
    fflush(stdout);
    munmap(sh, sizeof *sh);
    return bad ? -1 : 0;
}

int outage_main(int argc, char **argv, sb_env *env)
{
    static const char *const fleets[] = {"1", "4", "auto", "default"};
    int json = 0, defaults_only = 0, rc = 0; /* --defaults: the 100 ms
                                                blip, default options only */

    for (int i = 1; i < argc; i++) {
        int j = strcmp(argv[i], "--json") == 0;
        int d = strcmp(argv[i], "--defaults") == 0;
        if (!j && !d)
            return fprintf(stderr, "usage: redisbench outage [--json] "
                           "[--defaults]\n"), 2;
        json |= j;
        defaults_only |= d;
    }
    for (long ms = 100; ms <= (defaults_only ? 100 : 3000); ms += 2900)
        for (int f = defaults_only ? 3 : 0; f < 4; f++)
            rc |= run(&env->srv, fleets[f], ms, json);
    return rc ? 1 : 0;
}
