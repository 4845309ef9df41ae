/*
 * dryrunbench.c -- rlbench dryrun: ns per rl_check() with one rule in mode
 * "log" beside the same rule enforced, in the same run.  Method:
 * docs/BENCHMARKS.md, "How each bench measures".
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchmodes.h"
#include "benchutil.h"
#include "ratelimit.h"

#define ENF 0
#define LOG 1
#define KEY_STRIDE 16
#define MAX_ROUNDS 1000

typedef struct options {
    unsigned long long keys, calls, rounds;
    int json, quick;
} options;

typedef struct worker {
    bench_status st;        /* first: bench_threads() reads it */
    rl_limiter *lim[2];
    const char *keys;
    uint32_t *seq;          /* calls key indexes */
    size_t calls;
    int rounds;
    pthread_barrier_t *bar;
    double ns[2][MAX_ROUNDS]; /* out: mean ns per check, per round */
    unsigned long long denied[2];
} worker;

#define OPT_AT(field) offsetof(options, field)

static const bench_opt opts[] = {
    BENCH_OPT_JSON_ROW(options),
    BENCH_OPT_QUICK_ROW(options),
    {"--keys", BENCH_OPT_COUNT, OPT_AT(keys), 1, 1e8, 100000, 10000, NULL,
     "distinct users"},
    {"--calls", BENCH_OPT_COUNT, OPT_AT(calls), 100, 1e12, 20000, 5000, NULL,
     "checks per timed block"},
    {"--rounds", BENCH_OPT_COUNT, OPT_AT(rounds), 1, MAX_ROUNDS, 40, 10, NULL,
     "blocks per limiter and thread"},
};

static const bench_opts table = {
    .rows = opts, .n = sizeof opts / sizeof opts[0], .prog = "rlbench dryrun",
    .about = "ns per rl_check() with one rule in mode log, beside the same "
             "rule enforced."};

static rl_limiter *make_limiter(const char *mode, long long limit,
                                char *err)
{
    char rules[512];

    snprintf(rules, sizeof rules,
             "{\"rules\":[{\"rule_id\":\"r\",\"dimension\":\"user\","
             "\"match\":{\"endpoint\":\"/api\"},\"limit\":%lld,"
             "\"window_seconds\":3600,\"mode\":\"%s\"}]}", limit, mode);
    return bench_limiter((const char *const[]){"rules", rules, NULL}, err);
}

static int check(worker *w, int which, const char *user)
{
    rl_request req = {.size = sizeof(rl_request), .endpoint = "/api", .user = user, .cost = 1};
    rl_result res = RL_RESULT_INIT;
    int rc = rl_check(w->lim[which], &req, &res);

    if (rc != RL_OK) {
        set_err(w->st.err, "rl_check", rc, errtext(w->lim[which]));
        return w->st.rc = rc;
    }
    w->denied[which] += !res.allowed;
    return RL_OK;
}

static void *worker_main(void *arg)
{
    worker *w = arg;

    for (int which = ENF; which <= LOG; which++) /* warm-up, untimed */
        for (size_t i = 0; i < w->calls && w->st.rc == 0; i++)
            check(w, which, w->keys + (size_t)w->seq[i] * KEY_STRIDE);
    w->denied[ENF] = w->denied[LOG] = 0;
    for (int r = 0; r < w->rounds; r++) {
        for (int k = 0; k < 2; k++) {
            int which = (r + k) % 2; /* alternate which goes first */
            uint64_t t0;

            pthread_barrier_wait(w->bar);
            t0 = now_ns();
            for (size_t i = 0; i < w->calls && w->st.rc == 0; i++)
                check(w, which, w->keys + (size_t)w->seq[i] * KEY_STRIDE);
            w->ns[which][r] = (double)(now_ns() - t0) / (double)w->calls;
        }
    }
    return NULL;
}

typedef struct result {
    double median[2], mean[2];
    unsigned long long denied[2];
} result;

/* Per round, the threads' mean; then the median and mean over rounds. */
static void summarize(worker *w, int threads, int rounds, result *out)
{
    double per_round[MAX_ROUNDS];

    for (int which = ENF; which <= LOG; which++) {
        double sum = 0;
        for (int r = 0; r < rounds; r++) {
            per_round[r] = 0;
            for (int t = 0; t < threads; t++)
                per_round[r] += w[t].ns[which][r] / threads;
            sum += per_round[r];
        }
        sort_doubles(per_round, (size_t)rounds);
        out->median[which] = per_round[rounds / 2];
        out->mean[which] = sum / rounds;
        out->denied[which] = 0;
        for (int t = 0; t < threads; t++)
            out->denied[which] += w[t].denied[which];
    }
}

static int run_case(const options *o, rl_limiter **lim, const char *keys,
                    uint32_t *const *seqs, int threads, result *out,
                    char *err)
{
    static worker w[2];
    pthread_barrier_t bar;
    int rc;

    pthread_barrier_init(&bar, NULL, (unsigned)threads);
    for (int t = 0; t < threads; t++)
        w[t] = (worker){.lim = {lim[ENF], lim[LOG]}, .keys = keys,
                        .seq = seqs[t], .calls = (size_t)o->calls,
                        .rounds = (int)o->rounds, .bar = &bar};
    rc = bench_threads(w, sizeof w[0], threads, worker_main, "dryrunbench",
                       err);
    pthread_barrier_destroy(&bar);
    if (rc == 0)
        summarize(w, threads, (int)o->rounds, out);
    return rc;
}

/* How many distinct users the first `threads` sequences name: after a
 * "deny" case, the distinct clients the log rule saw denied. */
static double true_distinct(const options *o, uint32_t *const *seqs,
                            int threads)
{
    unsigned char *seen = calloc((size_t)o->keys, 1);
    double n = 0;

    if (!seen)
        return -1;
    for (int t = 0; t < threads; t++)
        for (size_t i = 0; i < o->calls; i++)
            if (!seen[seqs[t][i]]++)
                n++;
    free(seen);
    return n;
}

static const text_layout layout = {24, 10, 1, 4, 14, 3};

static void emit_case(const options *o, const char *name, int threads,
                      const result *r, const rl_dryrun *d, double distinct)
{
    figure f = {.name = name, .value = r->median[LOG], .unit = "ns",
                 .nrefs = 1, .ref = {r->median[ENF]},
                 .ref_name = {"enforce_mode"}};

    xnum(&f, "threads", threads);
    xnum(&f, "mean", r->mean[LOG]);
    xnum(&f, "ref_mean", r->mean[ENF]);
    xnum(&f, "enforce_denied", (double)r->denied[ENF]);
    xnum(&f, "log_rule_checks", (double)d->checks);
    xnum(&f, "log_rule_would_deny", (double)d->would_deny);
    xnum(&f, "log_rule_distinct", (double)d->distinct);
    xnum(&f, "true_distinct", distinct);
    emit_figure(&f, o->json, &layout);
}

/* One case (pass or deny) on 1 and 2 threads, on fresh limiters whose
 * users have each been charged once. */
static int bench_case(const options *o, const char *keys,
                      uint32_t *const *seqs, int deny, char *err)
{
    static const char *names[2][2] = {
        {"dryrun_check_pass_1t", "dryrun_check_pass_2t"},
        {"dryrun_check_deny_1t", "dryrun_check_deny_2t"}};
    long long limit = deny ? 1 : 1000000000LL;
    rl_limiter *lim[2] = {make_limiter("enforce", limit, err), NULL};
    int rc = -1;

    if (lim[ENF] && (lim[LOG] = make_limiter("log", limit, err))) {
        worker w = {.lim = {lim[ENF], lim[LOG]}};
        rc = 0;
        for (size_t i = 0; i < o->keys && rc == 0; i++)
            for (int which = ENF; which <= LOG && rc == 0; which++)
                rc = check(&w, which, keys + i * KEY_STRIDE);
        if (rc)
            memcpy(err, w.st.err, ERRLEN);
    }
    for (int threads = 1; threads <= 2 && rc == 0; threads++) {
        rl_dryrun d = {.size = sizeof d};
        result r;
        if ((rc = run_case(o, lim, keys, seqs, threads, &r, err)) == 0 &&
            (rc = rl_rule_dryrun_get(lim[LOG], "r", &d)) != RL_OK)
            set_err(err, "rl_rule_dryrun_get", rc, errtext(lim[LOG]));
        if (rc == 0)
            emit_case(o, names[deny][threads - 1], threads, &r, &d,
                      deny ? true_distinct(o, seqs, threads) : 0);
    }
    rl_limiter_free(lim[ENF]);
    rl_limiter_free(lim[LOG]);
    return rc;
}

int dryrun_main(int argc, char **argv)
{
    options o = {0};
    char err[ERRLEN] = "";
    bench_input in;
    int rc = bench_opt_args(argc, argv, &table, &o);

    if (rc)
        return rc == 1 ? 0 : 2;
    if (bench_input_make(&in, o.keys, KEY_STRIDE, (size_t)o.calls, 0,
                         "dryrunbench") != 0)
        return 1;
    bench_params(&table, &o, o.json);
    if (!o.json)
        print_columns(&layout);
    for (int deny = 0; deny <= 1 && rc == 0; deny++)
        rc = bench_case(&o, in.keys, in.seq, deny, err);
    if (rc)
        fprintf(stderr, "dryrunbench: %s\n", err);
    bench_input_free(&in);
    return rc ? 1 : 0;
}
