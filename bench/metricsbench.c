/*
 * metricsbench.c -- what the metrics (rl_metrics_write(3)) cost the
 * request path: checks per second of rl_check() on the memory store with
 * the option metrics=1, beside the same limiter with metrics=0 measured in
 * the same run (the reference).
 *
 * Two limiters hold the same three rules a request to /api is charged
 * (per user, per ip, global; an hour's window) and the same --keys users,
 * already charged once; one counts metrics (per rule: one atomic add per
 * charge on its thread's cache line; the latency histogram: two clock
 * reads and two adds per check), the other not.  Two cases: "pass" (a
 * limit of 10^9) and "deny" (a per-user limit of 1, spent by that first
 * charge).  Each thread runs --rounds rounds; a round times one block of
 * --calls checks on each limiter, back to back, alternating which goes
 * first, so drift on a shared machine lands on both alike.  A figure is
 * checks/s from the median over rounds of the block's mean ns per check
 * (2 threads: the threads' mean per round), ratio = on / off: 1.00 is
 * free, the target is >= 0.97; ratio_paired is the median over rounds of
 * each round's own ratio (its two blocks ran back to back), which cancels
 * a shared machine's drift better.  After each case the on-limiter's text is
 * rendered once (rl_metrics_write) and its bytes and time printed; last,
 * the rendering of a limiter with 1000 rules (the median of 21; on the
 * --store given, its shards counted: a cluster's masters).  With
 * --store URI (a Redis server) the same cases run on that store, the
 * figures named redis_*; both limiters share its keys (a user's count is
 * the two limiters' together: the deny case denies alike on both).
 *
 *   metricsbench [--json] [--quick] [--keys N] [--calls N] [--rounds N]
 *                [--store URI]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchutil.h"
#include "ratelimit.h"

#define ENF 0 /* metrics off: the reference */
#define LOG 1 /* metrics on                  */
#define KEY_STRIDE 16
#define MAX_ROUNDS 1000

typedef struct options {
    unsigned long long keys, calls, rounds;
    int json;
    const char *store;      /* NULL: the memory store */
} options;

typedef struct worker {
    rl_limiter *lim[2];
    const char *keys;
    uint32_t *seq;          /* calls key indexes */
    size_t calls;
    int rounds;
    pthread_barrier_t *bar;
    double ns[2][MAX_ROUNDS]; /* out: mean ns per check, per round */
    unsigned long long denied[2];
    int rc;
    char err[ERRLEN];
} worker;

static void usage(FILE *f)
{
    fprintf(f, "usage: metricsbench [--json] [--quick] [--keys N] "
               "[--calls N] [--rounds N]\n"
               "checks/s of rl_check() with metrics on, beside metrics off.\n"
               "  --keys N    distinct users (default 100000)\n"
               "  --calls N   checks per timed block (default 20000)\n"
               "  --rounds N  blocks per limiter and thread (default 40, "
               "max 1000)\n"
               "  --quick     10000 keys, 5000 calls, 10 rounds\n"
               "  --store URI run on this store (e.g. redis://127.0.0.1:6379)\n");
}

static int parse_args(int argc, char **argv, options *o)
{
    *o = (options){100000, 20000, 40, 0, NULL};
    for (int i = 1; i < argc; i++) {
        unsigned long long *dst = NULL;
        if (strcmp(argv[i], "--json") == 0)
            o->json = 1;
        else if (strcmp(argv[i], "--quick") == 0)
            o->keys = 10000, o->calls = 5000, o->rounds = 10;
        else if (strcmp(argv[i], "--keys") == 0)
            dst = &o->keys;
        else if (strcmp(argv[i], "--calls") == 0)
            dst = &o->calls;
        else if (strcmp(argv[i], "--rounds") == 0)
            dst = &o->rounds;
        else if (strcmp(argv[i], "--store") == 0 && i + 1 < argc)
            o->store = argv[++i];
        else if (strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 1;
        } else {
            usage(stderr);
            return 2;
        }
        if (dst && (i + 1 >= argc || parse_count(argv[++i], dst) != 0)) {
            usage(stderr);
            return 2;
        }
    }
    if (!o->keys || o->keys > 100000000ULL || o->calls < 100 ||
        !o->rounds || o->rounds > MAX_ROUNDS) {
        usage(stderr);
        return 2;
    }
    return 0;
}

static rl_limiter *make_limiter(const options *o, int metrics,
                                long long limit, char *err)
{
    char rules[1024];
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;
    int rc;

    snprintf(rules, sizeof rules,
             "{\"rules\":[{\"rule_id\":\"user\",\"dimension\":\"user\","
             "\"match\":{\"endpoint\":\"/api\"},\"limit\":%lld,"
             "\"window_seconds\":3600},{\"rule_id\":\"ip\",\"dimension\":"
             "\"ip\",\"limit\":1000000000,\"window_seconds\":3600},"
             "{\"rule_id\":\"all\",\"dimension\":\"global\",\"limit\":"
             "1000000000,\"window_seconds\":3600}]}", limit);
    if (!cfg || rl_config_set(cfg, "metrics", metrics ? "1" : "0") != RL_OK ||
        rl_config_set(cfg, "rules", rules) != RL_OK ||
        (o->store && (rl_config_set(cfg, "store", o->store) != RL_OK ||
                      rl_config_set(cfg, "timeout_ms", "1000") != RL_OK))) {
        set_err(err, "rl_config_set", RL_EOPTION, errtext(NULL));
        rl_config_free(cfg);
        return NULL;
    }
    if ((rc = rl_limiter_new(&lim, cfg)) != RL_OK)
        set_err(err, "rl_limiter_new", rc, errtext(NULL));
    rl_config_free(cfg);
    return lim;
}

static int check(worker *w, int which, const char *user)
{
    rl_request req = {.size = sizeof(rl_request), .endpoint = "/api", .user = user, .ip = user, .cost = 1};
    rl_result res = RL_RESULT_INIT;
    int rc = rl_check(w->lim[which], &req, &res);

    if (rc != RL_OK) {
        set_err(w->err, "rl_check", rc, errtext(w->lim[which]));
        return w->rc = rc;
    }
    w->denied[which] += !res.allowed;
    return RL_OK;
}

static void *worker_main(void *arg)
{
    worker *w = arg;

    for (int which = ENF; which <= LOG; which++) /* warm-up, untimed */
        for (size_t i = 0; i < w->calls && w->rc == 0; i++)
            check(w, which, w->keys + (size_t)w->seq[i] * KEY_STRIDE);
    w->denied[ENF] = w->denied[LOG] = 0;
    for (int r = 0; r < w->rounds; r++) {
        for (int k = 0; k < 2; k++) {
            int which = (r + k) % 2; /* alternate which goes first */
            uint64_t t0;

            pthread_barrier_wait(w->bar);
            t0 = now_ns();
            for (size_t i = 0; i < w->calls && w->rc == 0; i++)
                check(w, which, w->keys + (size_t)w->seq[i] * KEY_STRIDE);
            w->ns[which][r] = (double)(now_ns() - t0) / (double)w->calls;
        }
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

typedef struct result {
    double median[2], mean[2];
    double paired;           /* median over rounds of off ns / on ns */
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
        qsort(per_round, (size_t)rounds, sizeof *per_round, cmp_double);
        out->median[which] = per_round[rounds / 2];
        out->mean[which] = sum / rounds;
        out->denied[which] = 0;
        for (int t = 0; t < threads; t++)
            out->denied[which] += w[t].denied[which];
    }
    /* Paired: each round's two blocks ran back to back, so their ratio
     * cancels the drift of a shared machine better than the medians'. */
    for (int r = 0; r < rounds; r++) {
        double on = 0, off = 0;
        for (int t = 0; t < threads; t++)
            on += w[t].ns[LOG][r], off += w[t].ns[ENF][r];
        per_round[r] = off / on;
    }
    qsort(per_round, (size_t)rounds, sizeof *per_round, cmp_double);
    out->paired = per_round[rounds / 2];
}

static int run_case(const options *o, rl_limiter **lim, const char *keys,
                    uint32_t *const *seqs, int threads, result *out,
                    char *err)
{
    static worker w[2];
    pthread_t tid[2];
    pthread_barrier_t bar;
    int rc = 0;

    pthread_barrier_init(&bar, NULL, (unsigned)threads);
    for (int t = 0; t < threads; t++) {
        w[t] = (worker){.lim = {lim[ENF], lim[LOG]}, .keys = keys,
                        .seq = seqs[t], .calls = (size_t)o->calls,
                        .rounds = (int)o->rounds, .bar = &bar};
        if (pthread_create(&tid[t], NULL, worker_main, &w[t]) != 0) {
            fprintf(stderr, "metricsbench: pthread_create failed\n");
            exit(1);
        }
    }
    for (int t = 0; t < threads; t++)
        pthread_join(tid[t], NULL);
    pthread_barrier_destroy(&bar);
    for (int t = 0; t < threads; t++) {
        if (w[t].rc != 0 && rc == 0) {
            rc = w[t].rc;
            memcpy(err, w[t].err, ERRLEN);
        }
    }
    if (rc == 0)
        summarize(w, threads, (int)o->rounds, out);
    return rc;
}

static const text_layout layout = {24, 10, 1, 4, 14, 3};

static void emit_case(const options *o, const char *name, int threads,
                      const result *r, double bytes, double render_us)
{
    figure f = {0};

    f.name = name;
    f.value = 1e9 / r->median[LOG];
    f.unit = "checks/s";
    f.nrefs = 1;
    f.ref[0] = 1e9 / r->median[ENF];
    f.ref_name[0] = "metrics_off";
    xnum(&f, "threads", threads);
    xnum(&f, "ratio_paired", r->paired);
    xnum(&f, "ns", r->median[LOG]);
    xnum(&f, "ref_ns", r->median[ENF]);
    xnum(&f, "mean_ns", r->mean[LOG]);
    xnum(&f, "ref_mean_ns", r->mean[ENF]);
    xnum(&f, "denied", (double)r->denied[LOG]);
    xnum(&f, "metrics_bytes", bytes);
    xnum(&f, "metrics_render_us", render_us);
    emit_figure(&f, o->json, &layout);
}

/* One rendering of lim's metrics: its bytes, and the time in *us. */
static double render(rl_limiter *lim, double *us)
{
    static char buf[1 << 20];
    size_t len = 0;
    uint64_t t0 = now_ns();

    if (rl_metrics_write(lim, buf, sizeof buf, &len) != RL_OK)
        return -1;
    *us = (double)(now_ns() - t0) / 1e3;
    return (double)len;
}

/* One case (pass or deny) on 1 and 2 threads, on fresh limiters whose
 * users have each been charged once. */
static int bench_case(const options *o, const char *keys,
                      uint32_t *const *seqs, int deny, char *err)
{
    static const char *names[2][2][2] = {
        {{"metrics_check_pass_1t", "metrics_check_pass_2t"},
         {"metrics_check_deny_1t", "metrics_check_deny_2t"}},
        {{"redis_metrics_check_pass_1t", "redis_metrics_check_pass_2t"},
         {"redis_metrics_check_deny_1t", "redis_metrics_check_deny_2t"}}};
    long long limit = deny ? 1 : 1000000000LL;
    rl_limiter *lim[2] = {make_limiter(o, 0, limit, err), NULL};
    int rc = -1;

    if (lim[ENF] && (lim[LOG] = make_limiter(o, 1, limit, err))) {
        worker w = {.lim = {lim[ENF], lim[LOG]}};
        rc = 0;
        for (size_t i = 0; i < o->keys && rc == 0; i++)
            for (int which = ENF; which <= LOG && rc == 0; which++)
                rc = check(&w, which, keys + i * KEY_STRIDE);
        if (rc)
            memcpy(err, w.err, ERRLEN);
    }
    for (int threads = 1; threads <= 2 && rc == 0; threads++) {
        result r;
        double us = 0, bytes;
        if ((rc = run_case(o, lim, keys, seqs, threads, &r, err)) == 0) {
            bytes = render(lim[LOG], &us);
            emit_case(o, names[o->store != NULL][deny][threads - 1],
                      threads, &r, bytes, us);
        }
    }
    rl_limiter_free(lim[ENF]);
    rl_limiter_free(lim[LOG]);
    return rc;
}

/* The shards in a metrics text: its breaker_state series. */
static int count_shards(const char *text)
{
    const char *want = "\nratelimit_store_breaker_state{";
    int n = 0;

    for (const char *p = text; (p = strstr(p, want)); p++)
        n++;
    return n;
}

/* One /metrics rendering with RENDER_RULES rules, each charged once:
 * the median time of RENDER_RUNS, the bytes and the shards. */
#define RENDER_RULES 1000
#define RENDER_RUNS 21

static int render_big(const options *o, char *err)
{
    size_t cap = RENDER_RULES * 220 + 64, at, len = 0;
    char *rules = malloc(cap), *text = malloc(1 << 22);
    double us[RENDER_RUNS];
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;
    figure f = {0};
    int rc = -1;

    if (!rules || !text || !cfg)
        goto out;
    at = (size_t)snprintf(rules, cap, "{\"rules\":[");
    for (int i = 0; i < RENDER_RULES; i++)
        at += (size_t)snprintf(rules + at, cap - at,
                               "%s{\"rule_id\":\"rule-%04d\",\"dimension\":"
                               "\"user\",\"match\":{\"endpoint\":\"/r%d\"},"
                               "\"limit\":100,\"window_seconds\":60}",
                               i ? "," : "", i, i);
    snprintf(rules + at, cap - at, "]}");
    if (rl_config_set(cfg, "rules", rules) != RL_OK ||
        (o->store && rl_config_set(cfg, "store", o->store) != RL_OK) ||
        (rc = rl_limiter_new(&lim, cfg)) != RL_OK) {
        set_err(err, "rl_limiter_new", rc, errtext(NULL));
        rc = -1;
        goto out;
    }
    for (int i = 0; i < RENDER_RULES; i++) {
        char ep[16];
        rl_request req = {.size = sizeof req, .endpoint = ep, .user = "u",
                          .cost = 1};
        rl_result res = RL_RESULT_INIT;
        snprintf(ep, sizeof ep, "/r%d", i);
        rl_check(lim, &req, &res);
    }
    for (int k = 0; k < RENDER_RUNS; k++) {
        uint64_t t0 = now_ns();
        if ((rc = rl_metrics_write(lim, text, 1 << 22, &len)) != RL_OK) {
            set_err(err, "rl_metrics_write", rc, errtext(lim));
            goto out;
        }
        us[k] = (double)(now_ns() - t0) / 1e3;
    }
    qsort(us, RENDER_RUNS, sizeof us[0], cmp_double);
    f.name = "metrics_render_1000_rules";
    f.value = us[RENDER_RUNS / 2];
    f.unit = "us";
    xnum(&f, "bytes", (double)len);
    xnum(&f, "rules", RENDER_RULES);
    xnum(&f, "shards", count_shards(text));
    xnum(&f, "min_us", us[0]);
    xnum(&f, "max_us", us[RENDER_RUNS - 1]);
    emit_figure(&f, o->json, &layout);
    rc = 0;
out:
    rl_limiter_free(lim);
    rl_config_free(cfg);
    free(rules);
    free(text);
    return rc;
}

int main(int argc, char **argv)
{
    options o;
    char err[ERRLEN] = "", *keys;
    uint32_t *seqs[2];
    int rc = parse_args(argc, argv, &o);

    if (rc)
        return rc == 1 ? 0 : 2;
    keys = malloc((size_t)o.keys * KEY_STRIDE);
    seqs[0] = malloc((size_t)o.calls * sizeof *seqs[0]);
    seqs[1] = malloc((size_t)o.calls * sizeof *seqs[1]);
    if (!keys || !seqs[0] || !seqs[1]) {
        fprintf(stderr, "metricsbench: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < o.keys; i++)
        snprintf(keys + i * KEY_STRIDE, KEY_STRIDE, "%u", (unsigned)i);
    for (int t = 0; t < 2; t++) {
        uint64_t st = 0xD27A0000ULL + (uint64_t)t;
        for (size_t i = 0; i < o.calls; i++)
            seqs[t][i] = (uint32_t)pick(&st, o.keys);
    }
    if (o.json)
        printf("{\"name\":\"params\",\"keys\":%llu,\"calls\":%llu,"
               "\"rounds\":%llu,\"library\":\"%s\",\"loadavg_1m\":%.2f}\n",
               o.keys, o.calls, o.rounds, rl_version_string(), loadavg1());
    else {
        printf("metricsbench: libratelimit %s, keys=%llu, calls=%llu x %llu "
               "rounds, loadavg=%.2f\n", rl_version_string(), o.keys,
               o.calls, o.rounds, loadavg1());
        print_columns(&layout);
    }
    for (int deny = 0; deny <= 1 && rc == 0; deny++)
        rc = bench_case(&o, keys, seqs, deny, err);
    if (rc == 0)
        rc = render_big(&o, err);
    if (rc)
        fprintf(stderr, "metricsbench: %s\n", err);
    free(keys);
    free(seqs[0]);
    free(seqs[1]);
    return rc ? 1 : 0;
}
