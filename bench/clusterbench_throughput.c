/*
 * clusterbench_throughput.c -- the group throughput of `redisbench
 * cluster`: checks/s, latency and where the CPU went, one server and the
 * cluster.  Method: docs/BENCHMARKS.md, "How each bench measures".
 */
#include "clusterbench.h"

/* CONFIG RESETSTAT on every server in cs[0..n). */
static int reset_all(redisContext **cs, int n, char *err)
{
    for (int i = 0; i < n; i++)
        if (bcmd_ok(cs[i], err, "CONFIG RESETSTAT"))
            return -1;
    return 0;
}

/* The load started, warmed up, measured for o->seconds with the servers'
 * script calls and their usec summed into cs[0..2), stopped; an error of
 * any check fails it. */
static int tp_measured(const options *o, const char *name, int per_call,
                       const pidset *ps, redisContext **servers,
                       int nservers, tp *t, double cs[2], char *err)
{
    int rc = -1;
    cmdstat c;

    if (tp_start(t, o, NULL, TP_THREADS / per_call, per_call, 0, err))
        goto out;
    sleep_s(WARM_S);
    if (interrupted(err) || reset_all(servers, nservers, err))
        goto out;
    tp_measure_begin(t, ps);
    sleep_s(o->seconds);
    tp_measure_end(t, ps);
    if (interrupted(err))
        goto out;
    for (int i = 0; i < nservers; i++) {
        if (cmdstat_script_at(servers[i], &c, err))
            goto out;
        cs[0] += c.calls;
        cs[1] += c.calls * c.usec_per_call;
    }
    rc = 0;
out:
    tp_stop(t);
    if (rc != 0)
        return -1;
    if (t->sum.errors > 0)
        return snprintf(err, ERRLEN, "%s: %llu errors, the first: %.400s",
                        name, t->sum.errors, t->sum.first_err), -1;
    return 0;
}

/* <name>: checks/s (beside ref, named ref_name, when given), with where
 * the CPU went and the servers' script calls per check. */
static void tp_emit_rate(const options *o, const char *name, int per_call,
                         int nservers, const tp *t, const double cs[2],
                         const tp_figs *ref, const char *ref_name,
                         const tp_figs *out)
{
    figure f = {.name = name, .value = out->rate, .unit = "checks/s",
                .nrefs = ref != NULL, .ref = {ref ? ref->rate : 0},
                .ref_name = {ref_name}};
    double secs = (double)(t->t1 - t->t0) / 1e9;
    double checks = (double)(t->s1.checks - t->s0.checks);
    double calls = (double)(t->s1.batches - t->s0.batches);
    cpu_use cu = cpu_diff(&t->c0, &t->c1);

    XLIST(&f, XN("threads", TP_THREADS / per_call), XN("per_call", per_call),
          XN("keys", o->keys), XN("seconds", secs), XN("checks", t->sum.calls),
          XN("p50_us", out->p50), XN("p99_us", out->p99),
          XN("fallback", t->sum.fallback), XN("degraded", t->sum.degraded),
          XN("denied", t->sum.denied), XN("servers", nservers),
          XN("server_usec_per_check", cs[1] / (double)t->sum.calls),
          XN("evalsha_calls", cs[0]),
          XN("checks_per_batch", calls > 0 ? checks / calls : NAN),
          XN("evalsha_calls_per_check", cs[0] / (double)t->sum.calls),
          XN("client_cpu", cu.client), XN("redis_cpu", cu.redis),
          XN("replica_cpu", cu.replica), XN("other_cpu", cu.other),
          XN("steal_cpu", cu.steal),
          XN("nproc", sysconf(_SC_NPROCESSORS_ONLN)),
          XN("timeouts", t->s1.timeouts - t->s0.timeouts),
          XN("moved", t->s1.moved - t->s0.moved));
    if (cluster_up)
        XLIST(&f, XN("failovers", failovers()),
              XN("cluster_start_s", cluster_start_s));
    xnum(&f, "loadavg_1m", loadavg1());
    emit(o, &f);
}

int throughput(const options *o, const char *name, int per_call,
               const pidset *ps, redisContext **servers, int nservers,
               const tp_figs *ref, const char *ref_name, tp_figs *out,
               char *err)
{
    tp t;
    double cs[2] = {0, 0};

    if (tp_measured(o, name, per_call, ps, servers, nservers, &t, cs, err))
        return -1;
    out->rate = (double)t.sum.calls / ((double)(t.t1 - t.t0) / 1e9);
    out->p50 = hist_pct(&t.sum.all, 0.50) / 1000.0;
    out->p99 = hist_pct(&t.sum.all, 0.99) / 1000.0;
    tp_emit_rate(o, name, per_call, nservers, &t, cs, ref, ref_name, out);
    tp_emit_latency(o, name, &t.sum, ref ? (double[2]){ref->p50, ref->p99}
                                         : NULL,
                    (const char *const[2]){"ref_p50", "ref_p99"}, NULL);
    return 0;
}
