/*
 * dryrunbench.c -- rlbench dryrun: ns per rl_check() with one rule in mode
 * "log" beside the same rule enforced, in the same run.  Method:
 * docs/BENCHMARKS.md, "How each bench measures".
 */
#include <pthread.h>

#include "benchmodes.h"
#include "benchutil.h"

#define ENF 0
#define LOG 1
#define KEY_STRIDE 16

typedef struct options {
    unsigned long long keys, calls, rounds;
    int json, quick;
} options;

static const bench_opt opts[] = {
    BENCH_OPT_JSON_ROW(options),
    BENCH_OPT_QUICK_ROW(options),
    {"--keys", BENCH_OPT_COUNT, OPT_AT(keys), 1, 1e8, 100000, 10000, NULL,
     "distinct users"},
    {"--calls", BENCH_OPT_COUNT, OPT_AT(calls), 100, 1e12, 20000, 5000, NULL,
     "checks per timed block"},
    {"--rounds", BENCH_OPT_COUNT, OPT_AT(rounds), 1, AB_MAX_PAIRS, 40, 10, NULL,
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

typedef struct result {
    double median[2], mean[2];
    unsigned long long denied[2];
} result;

/* Per side, the median and the mean over rounds of the threads' mean. */
static void summarize(const ab_result *ab, int rounds, result *out)
{
    double per_round[AB_MAX_PAIRS];

    for (int which = ENF; which <= LOG; which++) {
        double sum = 0;
        for (int r = 0; r < rounds; r++)
            sum += per_round[r] = ab->wall[r][which];
        out->median[which] = median_of(per_round, (size_t)rounds);
        out->mean[which] = sum / rounds;
        out->denied[which] = ab->denied[which];
    }
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

    XLIST(&f, XN("threads", threads), XN("mean", r->mean[LOG]),
          XN("ref_mean", r->mean[ENF]), XN("enforce_denied", r->denied[ENF]),
          XN("log_rule_checks", d->checks),
          XN("log_rule_would_deny", d->would_deny),
          XN("log_rule_distinct", d->distinct), XN("true_distinct", distinct));
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
    ab_run ab = {.keys = keys, .stride = KEY_STRIDE, .calls = o->calls,
                 .pairs = (int)o->rounds, .blocks = 2};
    static ab_result res;
    int rc = -1;

    if (lim[ENF] && (lim[LOG] = make_limiter("log", limit, err))) {
        ab.lim[ENF] = lim[ENF];
        ab.lim[LOG] = lim[LOG];
        rc = bench_ab_charge(&ab, o->keys, err);
    }
    for (int threads = 1; threads <= 2 && rc == 0; threads++) {
        rl_dryrun d = {.size = sizeof d};
        result r;
        if ((rc = bench_ab(&ab, seqs, threads, &res, "rlbench dryrun", err)))
            break;
        summarize(&res, (int)o->rounds, &r);
        if ((rc = rl_rule_dryrun_get(lim[LOG], "r", &d)) != RL_OK)
            set_err(err, "rl_rule_dryrun_get", rc, errtext(lim[LOG]));
        else
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
