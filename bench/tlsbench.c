/*
 * tlsbench.c -- redisbench tls: the same load over TLS beside TCP to one
 * private server, turns alternated.  Method: docs/BENCHMARKS.md, "How each
 * bench measures".
 */
#include "redisutil.h"
#include "serverbench.h"
#include "tls_certs.h"

#define TURNS 2
#define PASSWORD "tlsbench-pw"

static const char rules[] =
    "[{\"rule_id\":\"bench\",\"dimension\":\"user\",\"limit\":1000000000,"
    "\"window_seconds\":3600}]";

typedef struct options {
    unsigned long long seconds, threads, keys;
    int json, quick;
} options;

typedef struct result {
    double per_s, p50_us, p99_us;
    uint64_t errors;
} result;

static const text_layout layout = {18, 12, 1, 8, 18, 3};

static rl_limiter *open_limiter(const char *store, const char *ca)
{
    char err[ERRLEN] = "";
    rl_limiter *lim = bench_limiter(
        (const char *const[]){"store", store, "rules", rules, "timeout_ms",
                              "1000", "tls_ca_file", ca, NULL},
        err);

    if (!lim)
        fprintf(stderr, "redisbench tls: %s: %s\n", store, err);
    return lim;
}

/* One turn of o->seconds on lim: tp_load's threads of rl_allow(), keys
 * drawn uniformly; a failed or degraded check is an error. */
static result turn(rl_limiter *lim, const options *o)
{
    static tp_load l;
    tp_sums sum = {0};
    char err[ERRLEN];
    uint64_t start = now_ns();

    memset(&l, 0, sizeof l);
    l.run.lim = lim;
    l.run.nkeys = o->keys;
    l.run.per_call = 1;
    if (tp_load_for(&l, (int)o->threads, (long)o->seconds * 1000, &sum,
                    err) != 0) {
        fprintf(stderr, "redisbench tls: %s\n", err);
        sum.errors++;
    }
    return (result){.per_s = (double)sum.calls /
                             ((double)(now_ns() - start) / 1e9),
                    .p50_us = hist_pct(&sum.all, 0.50) / 1e3,
                    .p99_us = hist_pct(&sum.all, 0.99) / 1e3,
                    .errors = sum.errors + sum.degraded};
}

static void keep_best(result *best, result r)
{
    if (r.per_s > best->per_s) {
        best->per_s = r.per_s;
        best->p50_us = r.p50_us;
    }
    if (best->p99_us == 0 || r.p99_us < best->p99_us)
        best->p99_us = r.p99_us;
    best->errors += r.errors;
}

static void emit(const char *name, double tls, double tcp, const char *unit,
                 const options *o, uint64_t errors)
{
    figure f = {.name = name, .value = tls, .unit = unit, .nrefs = 1,
                .ref = {tcp}, .ref_name = {"tcp"}};

    XLIST(&f, XN("threads", o->threads), XN("seconds_per_turn", o->seconds),
          XN("turns", TURNS), XN("errors", errors));
    emit_figure(&f, o->json, &layout);
}

static const bench_opt opts[] = {
    BENCH_OPT_JSON_ROW(options),
    BENCH_OPT_QUICK_ROW(options),
    {"--seconds", BENCH_OPT_COUNT, OPT_AT(seconds), 1, 1e6, 3, 1, NULL,
     "each turn's length"},
    {"--threads", BENCH_OPT_COUNT, OPT_AT(threads), 1, TP_MAX_THREADS, 16, 16,
     NULL, "checking threads"},
    {"--keys", BENCH_OPT_COUNT, OPT_AT(keys), 1, 1e12, 10000, 10000, NULL,
     "keys drawn from"},
};

static const bench_opts table = {
    .rows = opts, .n = sizeof opts / sizeof opts[0], .prog = "redisbench tls",
    .about = "checks/s, p50 and p99 over TLS beside TCP."};

int tls_main(int argc, char **argv, sb_env *env)
{
    options o = {0};
    rh_server *s = &env->srv;
    char dir[64], path[4][128], tcp_uri[128], tls_uri[128];
    rl_limiter *tcp, *tls;
    result best_tcp = {0}, best_tls = {0};
    rh_tls t;
    int rc = bench_opt_args(argc, argv, &table, &o);

    if (rc || tls_certs_make(dir, sizeof dir) != 0)
        return rc == 1 ? 0 : 2;
    snprintf(path[0], sizeof path[0], "%s/server.crt", dir);
    snprintf(path[1], sizeof path[1], "%s/server.key", dir);
    snprintf(path[2], sizeof path[2], "%s/ca.crt", dir);
    t = (rh_tls){.cert_file = path[0], .key_file = path[1],
                 .ca_file = path[2], .auth_clients = "no"};
    if (rh_start_tls(s, PASSWORD, &t) != 0)
        return tls_certs_remove(dir), 1;
    snprintf(tcp_uri, sizeof tcp_uri, "redis://:%s@127.0.0.1:%d/0", PASSWORD,
             s->port);
    snprintf(tls_uri, sizeof tls_uri, "rediss://:%s@127.0.0.1:%d/0",
             PASSWORD, s->tls_port);
    tcp = open_limiter(tcp_uri, NULL);
    tls = open_limiter(tls_uri, path[2]);
    if (!tcp || !tls)
        return rh_stop(s), tls_certs_remove(dir), 1;
    if (!o.json)
        print_columns(&layout);
    for (int k = 0; k < TURNS; k++) {
        keep_best(&best_tcp, turn(tcp, &o));
        keep_best(&best_tls, turn(tls, &o));
    }
    emit("tls_checks_per_s", best_tls.per_s, best_tcp.per_s, "1/s", &o,
         best_tls.errors + best_tcp.errors);
    emit("tls_p50_us", best_tls.p50_us, best_tcp.p50_us, "us", &o,
         best_tls.errors + best_tcp.errors);
    emit("tls_p99_us", best_tls.p99_us, best_tcp.p99_us, "us", &o,
         best_tls.errors + best_tcp.errors);
    rl_limiter_free(tcp);
    rl_limiter_free(tls);
    rh_stop(s);
    tls_certs_remove(dir);
    return 0;
}
