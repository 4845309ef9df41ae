/*
 * metricsbench.c -- rlbench metrics: checks per CPU second of rl_check()
 * with metrics=1 beside metrics=0 in the same run (ABBA pairs over fresh
 * limiter pairs; issue 10's target >= 0.97x).  Method: docs/BENCHMARKS.md,
 * "How each bench measures".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchmodes.h"
#include "benchutil.h"
#include "ratelimit.h"

#define OFF 0 /* metrics off: the reference */
#define ON 1  /* metrics on                  */
#define KEY_STRIDE 16
#define MAX_PAIRS AB_MAX_PAIRS /* per instance */
#define MAX_INSTANCES 16

typedef struct options {
    unsigned long long keys, calls, pairs, instances;
    int json, aa, quick;
    const char *store;      /* NULL: the memory store */
} options;

/* A case: its rules and threads. */
typedef struct bench_case {
    const char *name;       /* after "metrics_check_" */
    int deny, threads, distinct, aa;
} bench_case;

static const bench_opt opts[] = {
    BENCH_OPT_JSON_ROW(options),
    BENCH_OPT_QUICK_ROW(options),
    {"--aa", BENCH_OPT_FLAG, OPT_AT(aa),
     .help = "every case with metrics off on both sides"},
    {"--keys", BENCH_OPT_COUNT, OPT_AT(keys), 2, 1e8, 100000, 10000, NULL,
     "distinct users"},
    {"--calls", BENCH_OPT_COUNT, OPT_AT(calls), 100, 1e12, 2000, 1000, NULL,
     "checks per timed block"},
    {"--pairs", BENCH_OPT_COUNT, OPT_AT(pairs), 1, MAX_PAIRS, 40, 10, NULL,
     "ABBA pairs per instance"},
    {"--instances", BENCH_OPT_COUNT, OPT_AT(instances), 1, MAX_INSTANCES, 8,
     2, NULL, "fresh limiter pairs per case"},
    {"--store", BENCH_OPT_NAME, OPT_AT(store), -1, -1, -1, -1, NULL,
     "run on this store (e.g. redis://127.0.0.1:6379)"},
};

static const bench_opts table = {
    .rows = opts, .n = sizeof opts / sizeof opts[0], .prog = "rlbench metrics",
    .about = "checks per CPU second of rl_check() with metrics on, beside "
             "metrics off."};

static rl_limiter *make_limiter(const options *o, int metrics,
                                const bench_case *c, char *err)
{
    char rules[1024];

    snprintf(rules, sizeof rules,
             "{\"rules\":[{\"rule_id\":\"user\",\"dimension\":\"user\","
             "\"match\":{\"endpoint\":\"/api\"},\"limit\":%lld,"
             "\"window_seconds\":3600},{\"rule_id\":\"ip\",\"dimension\":"
             "\"ip\",\"limit\":1000000000,\"window_seconds\":3600},"
             "{\"rule_id\":\"all\",\"dimension\":\"%s\",\"limit\":"
             "1000000000,\"window_seconds\":3600}]}",
             c->deny ? 1LL : 1000000000LL, c->distinct ? "api_key" : "global");
    return bench_limiter((const char *const[]){
                             "metrics", metrics ? "1" : "0", "rules", rules,
                             "store", o->store,
                             "timeout_ms", o->store ? "1000" : NULL, NULL},
                         err);
}

/* A case's pairs over its instances: per pair, the threads' mean ns per
 * check on each side, and off / on. */
typedef struct result {
    double ns[2][MAX_PAIRS * MAX_INSTANCES];
    double ratio[MAX_PAIRS * MAX_INSTANCES];
    double wall_ratio[MAX_PAIRS * MAX_INSTANCES];
    size_t n;
    unsigned long long denied[2];
} result;

/* The q-quantile of the n sorted values v (nearest rank). */
static double quantile(const double *v, size_t n, double q)
{
    size_t i = (size_t)(q * (double)(n - 1) + 0.5);

    return v[i < n ? i : n - 1];
}

/* One instance: o->pairs ABBA pairs on lim, side `first` opening the
 * first pair, CPU ns a check, added to out. */
static int run_instance(const options *o, rl_limiter **lim, const char *keys,
                        uint32_t *const *seqs, int threads, int first,
                        result *out, char *err)
{
    static ab_result ab;
    ab_run r = {.lim = {lim[OFF], lim[ON]}, .keys = keys,
                .stride = KEY_STRIDE, .calls = (size_t)o->calls,
                .pairs = (int)o->pairs, .blocks = 4, .first = first,
                .all_dims = 1};

    if (bench_ab(&r, seqs, threads, &ab, "rlbench metrics", err))
        return -1;
    for (int p = 0; p < (int)o->pairs; p++, out->n++) {
        out->wall_ratio[out->n] = ab.wall[p][OFF] / ab.wall[p][ON];
        out->ns[ON][out->n] = ab.cpu[p][ON];
        out->ns[OFF][out->n] = ab.cpu[p][OFF];
        out->ratio[out->n] = ab.cpu[p][OFF] / ab.cpu[p][ON];
    }
    out->denied[OFF] += ab.denied[OFF];
    out->denied[ON] += ab.denied[ON];
    return 0;
}

static const text_layout layout = {40, 10, 1, 12, 11, 3};

static void emit_case(const options *o, const bench_case *c, result *r,
                      double bytes, double render_us, double load0)
{
    char name[96];
    size_t n = r->n;

    snprintf(name, sizeof name, "%s%smetrics_check_%s",
             o->store ? "redis_" : "", c->aa ? "aa_" : "", c->name);
    sort_doubles(r->ns[ON], n);
    sort_doubles(r->ns[OFF], n);
    sort_doubles(r->ratio, n);
    sort_doubles(r->wall_ratio, n);
    emit_figure(&(figure){.name = name, .unit = "checks/cpu-s",
        .value = 1e9 / quantile(r->ns[ON], n, 0.5), .nrefs = 1,
        .ref = {1e9 / quantile(r->ns[OFF], n, 0.5)},
        .ref_name = {"metrics_off"}, .nextra = 17, .x = {
        {"threads", c->threads},
        {"keys", 0, c->distinct ? "distinct" : "global_rule"},
        {"on_side", 0, c->aa ? "metrics_off" : "metrics_on"},
        {"ratio_paired", quantile(r->ratio, n, 0.5)},
        {"ratio_min", r->ratio[0]},
        {"ratio_p25", quantile(r->ratio, n, 0.25)},
        {"ratio_p75", quantile(r->ratio, n, 0.75)},
        {"ratio_max", r->ratio[n - 1]},
        {"ratio_paired_wall", quantile(r->wall_ratio, n, 0.5)},
        {"pairs", (double)n}, {"ns", quantile(r->ns[ON], n, 0.5)},
        {"ref_ns", quantile(r->ns[OFF], n, 0.5)},
        {"denied", (double)r->denied[ON]}, {"metrics_bytes", bytes},
        {"metrics_render_us", render_us}, {"loadavg_start", load0},
        {"loadavg_end", loadavg1()}}}, o->json, &layout);
}

/* One rendering of lim's metrics: its bytes, the time in *us, the text in
 * *text (when not NULL): 0, or rl_metrics_write()'s code. */
static int render(rl_limiter *lim, double *bytes, double *us,
                  const char **text)
{
    static char buf[1 << 22];
    size_t len = 0;
    uint64_t t0 = now_ns();
    int rc = rl_metrics_write(lim, buf, sizeof buf, &len);

    *us = (double)(now_ns() - t0) / 1e3;
    *bytes = rc == RL_OK ? (double)len : -1;
    if (text)
        *text = buf;
    return rc;
}

/* A fresh pair of limiters (side `first` made first), every user charged
 * once on each. */
static int make_pair(const options *o, const bench_case *c, const char *keys,
                     int first, rl_limiter **lim, char *err)
{
    ab_run r = {.keys = keys, .stride = KEY_STRIDE, .all_dims = 1};

    lim[OFF] = lim[ON] = NULL;
    for (int k = 0; k < 2; k++) {
        int side = k ? !first : first;
        if (!(r.lim[side] = lim[side] =
                  make_limiter(o, side == ON && !c->aa, c, err)))
            return -1;
    }
    return bench_ab_charge(&r, o->keys, err);
}

/* One case over its instances. */
static int bench_case_run(const options *o, const bench_case *c,
                          const char *keys, uint32_t *const *seqs, char *err)
{
    static result r;
    rl_limiter *lim[2] = {NULL, NULL};
    double us = 0, bytes = -1, load0 = loadavg1();
    int rc = 0;

    r.n = 0;
    r.denied[OFF] = r.denied[ON] = 0;
    for (int i = 0; i < (int)o->instances && rc == 0; i++) {
        int first = i % 2;
        if ((rc = make_pair(o, c, keys, first, lim, err)) == 0)
            rc = run_instance(o, lim, keys, seqs, c->threads, first, &r, err);
        if (rc == 0)
            render(lim[ON], &bytes, &us, NULL);
        rl_limiter_free(lim[OFF]);
        rl_limiter_free(lim[ON]);
    }
    if (rc == 0)
        emit_case(o, c, &r, bytes, us, load0);
    return rc;
}

/* One /metrics rendering with RENDER_RULES rules, each charged once:
 * the median time of RENDER_RUNS, the bytes and the shards (its
 * breaker_state series). */
#define RENDER_RULES 1000
#define RENDER_RUNS 21

static int render_big(const options *o, char *err)
{
    size_t cap = RENDER_RULES * 220 + 64, at;
    char *rules = malloc(cap);
    const char *text = "", *p;
    double us[RENDER_RUNS], bytes = 0, shards = 0;
    rl_limiter *lim;
    int rc = 0;

    if (rules == NULL)
        return snprintf(err, ERRLEN, "out of memory"), -1;
    at = (size_t)snprintf(rules, cap, "{\"rules\":[");
    for (int i = 0; i < RENDER_RULES; i++)
        at += (size_t)snprintf(rules + at, cap - at,
                               "%s{\"rule_id\":\"rule-%04d\",\"dimension\":"
                               "\"user\",\"match\":{\"endpoint\":\"/r%d\"},"
                               "\"limit\":100,\"window_seconds\":60}",
                               i ? "," : "", i, i);
    snprintf(rules + at, cap - at, "]}");
    lim = bench_limiter((const char *const[]){"rules", rules,
                                              "store", o->store, NULL}, err);
    free(rules);
    if (!lim)
        return -1;
    for (int i = 0; i < RENDER_RULES; i++) {
        char ep[16];
        rl_request req = {.size = sizeof req, .endpoint = ep, .user = "u",
                          .cost = 1};
        rl_result res = RL_RESULT_INIT;
        snprintf(ep, sizeof ep, "/r%d", i);
        rl_check(lim, &req, &res);
    }
    for (int k = 0; k < RENDER_RUNS && rc == 0; k++)
        rc = render(lim, &bytes, &us[k], &text);
    if (rc != RL_OK)
        set_err(err, "rl_metrics_write", rc, errtext(lim));
    rl_limiter_free(lim);
    if (rc != RL_OK)
        return -1;
    for (p = text; (p = strstr(p, "\nratelimit_store_breaker_state{")); p++)
        shards++;
    sort_doubles(us, RENDER_RUNS);
    emit_figure(&(figure){.name = "metrics_render_1000_rules",
        .value = us[RENDER_RUNS / 2], .unit = "us", .nextra = 5, .x = {
        {"bytes", bytes}, {"rules", RENDER_RULES}, {"shards", shards},
        {"min_us", us[0]}, {"max_us", us[RENDER_RUNS - 1]}}},
        o->json, &layout);
    return 0;
}

/* The controls first (metrics off on both sides: the bench's own
 * resolution, with 1 thread and with 2 on distinct keys), then every case
 * (--aa: each as a control too). */
static const bench_case cases[] = {
    {"pass_1t", 0, 1, 0, 1},
    {"pass_2t_distinct", 0, 2, 1, 1},
#define CONTROLS 2 /* the cases above; --aa runs every case so anyway */
    {"pass_1t", 0, 1, 0, 0},
    {"pass_2t", 0, 2, 0, 0},
    {"pass_2t_distinct", 0, 2, 1, 0},
    {"deny_1t", 1, 1, 0, 0},
    {"deny_2t", 1, 2, 0, 0},
    {"deny_2t_distinct", 1, 2, 1, 0},
};

int metrics_main(int argc, char **argv)
{
    options o = {0};
    char err[ERRLEN] = "";
    bench_input in;
    int rc = bench_opt_args(argc, argv, &table, &o);

    if (rc)
        return rc == 1 ? 0 : 2;
    if (bench_input_make(&in, o.keys, KEY_STRIDE, (size_t)o.calls, 1,
                         "metricsbench") != 0)
        return 1;
    bench_params(&table, &o, o.json);
    if (!o.json)
        print_columns(&layout);
    for (size_t i = o.aa ? CONTROLS : 0;
         i < sizeof cases / sizeof cases[0] && rc == 0;
         i++) {
        bench_case c = cases[i];
        c.aa |= o.aa;
        rc = bench_case_run(&o, &c, in.keys, in.seq, err);
    }
    if (rc == 0)
        rc = render_big(&o, err);
    if (rc)
        fprintf(stderr, "metricsbench: %s\n", err);
    bench_input_free(&in);
    return rc ? 1 : 0;
}
