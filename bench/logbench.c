/*
 * logbench.c -- rlbench log: a sliding_log check beside a sliding_window
 * check of the same rule, on the memory store and (with --port) on Redis.
 * Method: docs/BENCHMARKS.md, "How each bench measures".
 */

#include "benchmodes.h"
#include "benchutil.h"

#define MAX_ROUNDS 64
#define MAX_THREADS 16
#define LOG_LIMIT 1000 /* RL_LOG_LIMIT_MAX: the largest limit a log takes */

typedef struct options {
    unsigned long long keys, checks, rounds, port;
    int json;
} options;

typedef struct job {
    bench_status st; /* first: bench_threads() reads it */
    rl_limiter *lim;
    const options *o;
    uint64_t seed;
    unsigned long long n, denied;
} job;

static const text_layout layout = {36, 12, 0, 9, 16, 3};
static const char *const algos[2] = {"sliding_log", "sliding_window"};

static void *run(void *arg)
{
    job *j = arg;
    rl_result res = RL_RESULT_INIT;
    char key[32];

    for (unsigned long long i = 0; i < j->n && j->st.rc == RL_OK; i++) {
        snprintf(key, sizeof key, "user:%llu",
                 (unsigned long long)pick(&j->seed, j->o->keys));
        j->st.rc = rl_allow(j->lim, key, "login", 1, &res);
        j->denied += !res.allowed;
    }
    if (j->st.rc != RL_OK)
        set_err(j->st.err, "rl_allow", j->st.rc, errtext(j->lim));
    return NULL;
}

/* One round on lim: checks/s over `threads` threads. */
static double round_rate(rl_limiter *lim, const options *o, int threads,
                         uint64_t seed, unsigned long long *denied, char *err)
{
    static job jobs[MAX_THREADS];
    uint64_t t0 = now_ns();

    for (int i = 0; i < threads; i++)
        jobs[i] = (job){.lim = lim, .o = o, .seed = seed + (uint64_t)i,
                        .n = o->checks / (unsigned long long)threads};
    if (bench_threads(jobs, sizeof jobs[0], threads, run, "rlbench log",
                      err) != 0)
        return -1;
    t0 = now_ns() - t0;
    for (int i = 0; i < threads; i++)
        *denied += jobs[i].denied;
    return (double)(o->checks / (unsigned long long)threads * threads) /
           ((double)t0 / 1e9);
}

static rl_limiter *limiter(const char *store, const char *algo, char *err)
{
    char rules[256];

    snprintf(rules, sizeof rules,
             "[{\"rule_id\":\"login\",\"dimension\":\"user\",\"limit\":%d,"
             "\"window_seconds\":86400,\"algorithm\":\"%s\"}]",
             LOG_LIMIT, algo);
    return bench_limiter((const char *const[]){"store", store, "timeout_ms",
                                               "1000", "rules", rules, NULL},
                         err);
}

/* Both algorithms on `store`, rounds alternating; one figure. */
static int bench_store(const options *o, const char *label,
                       const char *store, int threads, char *err)
{
    double rate[2][MAX_ROUNDS], med[2];
    unsigned long long denied[2] = {0, 0};
    rl_limiter *lim[2] = {NULL, NULL};
    char name[64];
    figure f = {0};
    int rc = -1;

    for (int a = 0; a < 2; a++)
        if (!(lim[a] = limiter(store, algos[a], err)))
            goto out;
    for (unsigned long long r = 0; r < o->rounds; r++)
        for (int a = 0; a < 2; a++)
            if ((rate[a][r] = round_rate(lim[a], o, threads, 1000 * r + 7,
                                         &denied[a], err)) < 0)
                goto out;
    for (int a = 0; a < 2; a++)
        med[a] = median_of(rate[a], (size_t)o->rounds);
    snprintf(name, sizeof name, "checks_per_s_sliding_log_%s", label);
    f = (figure){.name = name, .value = med[0], .unit = "checks/s", .nrefs = 1,
                  .ref = {med[1]}, .ref_name = {"sliding_window"}};
    XLIST(&f, XN("threads", threads), XN("keys", o->keys),
          XN("checks_per_round", o->checks), XN("rounds", o->rounds));
    xnum(&f, "log_times_per_key_at_end",
         (double)(o->checks * o->rounds) / (double)o->keys);
    XLIST(&f, XN("denied_log", denied[0]), XN("denied_window", denied[1]));
    emit_figure(&f, o->json, &layout);
    rc = 0;
out:
    rl_limiter_free(lim[0]);
    rl_limiter_free(lim[1]);
    return rc;
}

static const bench_opt opts[] = {
    BENCH_OPT_JSON_ROW(options),
    {"--keys", BENCH_OPT_COUNT, OPT_AT(keys), 1, 1e9, 10000, 10000, NULL,
     "clients drawn from"},
    {"--checks", BENCH_OPT_COUNT, OPT_AT(checks), MAX_THREADS, 1e12, 200000,
     200000, NULL, "checks a round"},
    {"--rounds", BENCH_OPT_COUNT, OPT_AT(rounds), 1, MAX_ROUNDS, 5, 5, NULL,
     "rounds, the algorithms alternated"},
    {"--port", BENCH_OPT_COUNT, OPT_AT(port), 1, 65535, -1, -1, NULL,
     "also on the Redis at 127.0.0.1:P"},
};

static const bench_opts table = {
    .rows = opts, .n = sizeof opts / sizeof opts[0], .prog = "rlbench log",
    .about = "a sliding_log check beside a sliding_window check, memory:// "
             "and Redis."};

int log_main(int argc, char **argv)
{
    options o = {0};
    char err[ERRLEN] = "", uri[64];
    uint64_t t0 = now_ns();
    int rc;

    if ((rc = bench_opt_args(argc, argv, &table, &o)) != 0)
        return rc == 1 ? 0 : 2;
    if (!o.json)
        print_columns(&layout);
    if (bench_store(&o, "memory", "memory://", 1, err) != 0)
        goto fail;
    if (o.port) {
        snprintf(uri, sizeof uri, "redis://127.0.0.1:%llu", o.port);
        if (bench_store(&o, "redis", uri, MAX_THREADS, err) != 0)
            goto fail;
    }
    print_done("logbench", o.json, t0);
    return 0;
fail:
    fprintf(stderr, "logbench: %s\n", err);
    return 1;
}
