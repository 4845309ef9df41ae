/*
 * redisbench_throughput.c -- groups 1 and 2 of redisbench: throughput_64,
 * throughput_64_many and throughput_1, each beside redis-benchmark running
 * the library's own script.  Method: docs/BENCHMARKS.md, "How each bench
 * measures".
 */
#include "redisbench.h"

/* redis-benchmark -n n -r keyspace of the library's script, one request of
 * a rule (algo, limit per window_s) a call, in out (its figures, how long it
 * ran, its command line): KEYS[1] is `key` (with __rand_int__), ARGV the
 * time "0", "c", and what redis_node.c sends for one op (lua/check.lua):
 * "11", where the requests begin after a table of one rule (ARGV[4..10]:
 * algorithm, limit, burst (the limit for token bucket and GCRA), window ms,
 * p and q (what algo_params_init() computes), and "0" replaced shapes),
 * then one request of one key ("1" "1"): the index of its rule "4", cost
 * 1, soft 0 and the field "" (the plain layout).  --csv: the last line has
 * the figures.  The library may batch many requests into one call of this
 * script; the reference sends one request per call. */
int run_redis_benchmark(const options *o, const char *sha, int clients,
                        int pipeline, unsigned long long n,
                        unsigned long long keyspace, const char *key,
                        int algo, long long limit, long long window_s,
                        rb_result *out, char *err)
{
    const char *prog = getenv("REDIS_BENCHMARK");
    long long wms = window_s * 1000LL, g = algo_gcd64(wms, limit);
    char line[1024], last[1024] = "";
    uint64_t t0 = now_ns();
    FILE *p;
    int st;

    prog = prog && *prog ? prog : "redis-benchmark";
    snprintf(out->cmd, sizeof out->cmd, "%s -h 127.0.0.1 -p %d -c %d -P %d "
             "-n %llu -r %llu --csv EVALSHA %s 1 '%s' 0 c 11 %d %lld %lld "
             "%lld %lld %lld 0 1 1 4 1 0 ''", prog, o->port, clients,
             pipeline, n, keyspace, sha, key, algo, limit,
             algo == 1 || algo == 3 ? limit : 0, wms, wms / g, limit / g);
    if ((p = popen(out->cmd, "r")) == NULL)
        return snprintf(err, ERRLEN, "cannot run %s: %s", prog,
                        strerror(errno)), -1;
    while (fgets(line, sizeof line, p))
        if (line[0] == '"')
            memcpy(last, line, sizeof last);
    st = pclose(p);
    out->wall_s = (double)(now_ns() - t0) / 1e9;
    if (st != 0)
        return snprintf(err, ERRLEN, "%s failed (status %d)", prog, st), -1;
    if (sscanf(last, "\"EVALSHA%*[^\"]\",\"%lf\",\"%*f\",\"%*f\",\"%lf\","
               "\"%*f\",\"%lf\"", &out->rps, &out->p50_ms, &out->p99_ms) != 3 ||
        !(out->rps > 0))
        return snprintf(err, ERRLEN, "%s: unexpected CSV \"%.200s\"", prog,
                        last), -1;
    return 0;
}

/* ---- one throughput figure ------------------------------------------------- */

int tp_start(tp *t, const options *o, const hot_pool *hot, int threads,
             int per_call, int key_digits, char *err)
{
    memset(t, 0, sizeof *t);
    atomic_store(&t->l.run.cur, -1);
    t->l.run.hot = hot;
    t->l.run.nkeys = o->keys;
    t->l.run.per_call = per_call;
    t->l.run.key_digits = key_digits;
    t->l.run.stop = &g_stop;
    if (limiter_one_rule(o, "bench", 0, BIG_LIMIT, BIG_WINDOW_S,
                         &t->l.run.lim, err))
        return -1;
    return tp_load_start(&t->l, threads, err);
}

void tp_measure_begin(tp *t, const pidset *ps)
{
    cpu_take(&t->c0, ps);
    store_redis_stats_get(limiter_store(t->l.run.lim), &t->s0);
    t->t0 = now_ns();
    atomic_store(&t->l.run.phase, 1);
}

void tp_measure_end(tp *t, const pidset *ps)
{
    atomic_store(&t->l.run.phase, 0); /* stop counting; keep the load on */
    t->t1 = now_ns();
    store_redis_stats_get(limiter_store(t->l.run.lim), &t->s1);
    cpu_take(&t->c1, ps);
}

void tp_stop(tp *t)
{
    tp_load_stop(&t->l, &t->sum);
    if (t->l.run.lim)
        rl_limiter_free(t->l.run.lim);
    t->l.run.lim = NULL;
}

/* The library's side (the load, the server's script counts) and the
 * reference's (redis-benchmark's figures, the counters around its run). */
typedef struct tp_side {
    tp t;
    cmdstat cs, pxt;
} tp_side;

typedef struct tp_ref {
    rb_result rb;
    cpu_snap r0, r1;
    cmdstat rcs, rpxt;
} tp_ref;

/* The library: `threads` workers on one limiter, sliding window of 10^9
 * per minute (nothing denied), from an empty database, keys of
 * redis-benchmark's 12 digits; a short warm-up, then o->seconds counted. */
static int tp_library(const options *o, int threads, int per_call,
                      tp_side *s, char *err)
{
    int rc;

    memset(s, 0, sizeof *s);
    if (flushall_wait(ctl, err) != 0)
        return -1;
    rc = tp_start(&s->t, o, NULL, threads, per_call, 12, err);
    if (rc == 0) {
        sleep_s(o->seconds / 10 < 1 ? o->seconds / 10 : 1);
        rc = ctl_ok(err, "CONFIG RESETSTAT");
    }
    if (rc == 0) {
        tp_measure_begin(&s->t, &server_ps);
        sleep_s(o->seconds);
        tp_measure_end(&s->t, &server_ps);
        rc = cmdstat_script(&s->cs, err) ||
             cmdstat_get("pexpiretime", &s->pxt, err) ? -1 : 0;
    }
    tp_stop(&s->t);
    if (rc == 0 && s->t.sum.errors)
        rc = (memcpy(err, s->t.sum.first_err, ERRLEN), -1);
    return rc;
}

/* The reference: the same script, arguments and key space, from an empty
 * database, for as many requests as the library made. */
static int tp_reference(const options *o, const char *sha, int clients,
                        unsigned long long calls, const char *tmpl,
                        tp_ref *r, char *err)
{
    memset(r, 0, sizeof *r);
    if (flushall_wait(ctl, err) || clients_wait(ctl, 1, err) ||
        ctl_ok(err, "CONFIG RESETSTAT"))
        return -1;
    cpu_take(&r->r0, &server_ps);
    if (run_redis_benchmark(o, sha, clients, clients > 1 ? 16 : 1, calls,
                            o->keys, tmpl, 0, BIG_LIMIT, BIG_WINDOW_S,
                            &r->rb, err))
        return -1;
    cpu_take(&r->r1, &server_ps);
    if (cmdstat_get("evalsha", &r->rcs, err) ||
        cmdstat_get("pexpiretime", &r->rpxt, err))
        return -1;
    if (r->rcs.calls < (double)calls || r->rcs.failed > 0 ||
        r->rcs.rejected > 0)
        return snprintf(err, ERRLEN, "redis-benchmark: %.0f EVALSHA calls, "
                        "%.0f failed, %.0f rejected (expected %llu, 0, 0)",
                        r->rcs.calls, r->rcs.failed, r->rcs.rejected, calls),
               -1;
    return 0;
}

/* checks/s beside redis-benchmark's requests/s, with where the CPU went;
 * existing_share: checks that found state (the script reads its expiry)
 * rather than creating the key, the same mix on both sides or the
 * comparison is off. */
static void tp_emit_rate(const options *o, const char *name, int threads,
                         int per_call, const tp_side *s, const tp_ref *r,
                         const char *refname)
{
    double secs = (double)(s->t.t1 - s->t.t0) / 1e9;
    double rate = (double)s->t.sum.calls / secs;
    cpu_use cu = cpu_diff(&s->t.c0, &s->t.c1), ru = cpu_diff(&r->r0, &r->r1);
    figure f = {.name = name, .value = rate, .unit = "checks/s", .nrefs = 1,
                .ref = {r->rb.rps}, .ref_name = {refname}, .x = {
        {"threads", threads}, {"per_call", per_call},
        {"keys", (double)o->keys}, {"seconds", secs},
        {"checks", (double)s->t.sum.calls},
        {"target_min_ratio", threads * per_call > 1 ? TARGET_TP64 : TARGET_TP1},
        {"fallback", (double)s->t.sum.fallback},
        {"denied", (double)s->t.sum.denied},
        {"server_usec_per_call", s->cs.usec_per_call},
        {"ref_server_usec_per_call", r->rcs.usec_per_call},
        {"existing_share", s->cs.calls > 0 ? s->pxt.calls / s->cs.calls : NAN},
        {"ref_existing_share",
         r->rcs.calls > 0 ? r->rpxt.calls / r->rcs.calls : NAN},
        {"client_cpu", cu.client}, {"redis_cpu", cu.redis},
        {"other_cpu", cu.other}, {"ref_client_cpu", ru.client},
        {"ref_redis_cpu", ru.redis}, {"ref_other_cpu", ru.other},
        {"steal_cpu", cu.steal + ru.steal},
        {"client_ctx_switches_per_check", cu.csw / rate},
        {"redis_preempted_per_s", cu.preempt},
        {"ref_redis_preempted_per_s", ru.preempt},
        {"ref_seconds", r->rb.wall_s}, {"loadavg_1m", loadavg1()}}};

    emit(o, &f);
}

void tp_emit_latency(const options *o, const char *name, const tp_sums *sum,
                     const double ref_us[2], const char *const ref_name[2],
                     const double x_us[2])
{
    for (int i = 0; i < 2; i++) {
        char nm[64];
        figure f = {.name = nm, .unit = "us", .nrefs = ref_us != NULL,
                    .value = hist_pct(&sum->all, i ? 0.99 : 0.50) / 1e3,
                    .ref = {ref_us ? ref_us[i] : 0},
                    .ref_name = {ref_name[i]}};

        snprintf(nm, sizeof nm, "%s_p%s", name, i ? "99" : "50");
        if (!ref_us && x_us)
            xnum(&f, i ? "ref_p99_us" : "ref_p50_us", x_us[i]);
        if (i == 0)
            xnum(&f, "samples", (double)sum->all.n);
        else
            xnum(&f, "p999_us", hist_pct(&sum->all, 0.999) / 1000.0);
        emit(o, &f);
    }
}

/* <name>_fallback (results decided by the local fallback: errors) and
 * <name>_batching (the store's own batching: checks per script call). */
static void tp_emit_store(const options *o, const char *name,
                          const tp_side *s)
{
    const store_redis_stats *a = &s->t.s0, *b = &s->t.s1;
    char nm[2][48];
    double checks = (double)(b->checks - a->checks);
    double calls = (double)(b->batches - a->batches);
    figure f[2] = {
        {.name = nm[0], .value = (double)s->t.sum.fallback, .unit = "checks",
         .x = {{"timeouts", (double)(b->timeouts - a->timeouts)},
               {"down_fails", (double)(b->down_fails - a->down_fails)},
               {"reconnects", (double)(b->reconnects - a->reconnects)}}},
        {.name = nm[1], .value = calls > 0 ? checks / calls : NAN,
         .unit = "checks/script",
         .x = {{"checks", checks}, {"script_calls", calls},
               {"writes", (double)(b->writes - a->writes)},
               {"noscript", (double)(b->noscript - a->noscript)},
               {"refunds", (double)(b->refunds - a->refunds)}}}};

    snprintf(nm[0], sizeof nm[0], "%s_fallback", name);
    snprintf(nm[1], sizeof nm[1], "%s_batching", name);
    emit(o, &f[0]);
    emit(o, &f[1]);
}

int group_throughput(const options *o, const char *sha, int threads,
                     int per_call, char *err)
{
    const char *name = per_call > 1 ? "throughput_64_many"
                       : threads > 1 ? "throughput_64" : "throughput_1";
    int clients = threads * per_call;
    char refname[48], tmpl[128];
    tp_side s;
    tp_ref r;
    double ref_us[2];

    if (tp_library(o, threads, per_call, &s, err) ||
        key_template(tmpl, sizeof tmpl, err) ||
        tp_reference(o, sha, clients, s.t.sum.calls, tmpl, &r, err))
        return -1;
    snprintf(refname, sizeof refname, "redis_benchmark_c%d_P%d", clients,
             clients > 1 ? 16 : 1);
    tp_emit_rate(o, name, threads, per_call, &s, &r, refname);
    ref_us[0] = r.rb.p50_ms * 1000.0;
    ref_us[1] = r.rb.p99_ms * 1000.0;
    /* against redis-benchmark's own when both sides have one in flight
     * (comparable), else redis-benchmark's beside it */
    tp_emit_latency(o, name, &s.t.sum, clients == 1 ? ref_us : NULL,
                    (const char *const[2]){refname, refname}, ref_us);
    tp_emit_store(o, name, &s);
    return 0;
}
