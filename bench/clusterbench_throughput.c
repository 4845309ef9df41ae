/*
 * clusterbench_throughput.c -- group 3 of clusterbench: checks per second
 * and p50/p99 latency of 64 threads of rl_allow (and of 2 threads x 32 per
 * rl_check_many) against the single server, then against the cluster,
 * whose figures have the single server's as reference, with the CPU of
 * client, masters, replicas and the rest of the machine and the servers'
 * EVALSHA time per check: what a cluster costs or gives on this machine.
 */
#include "clusterbench.h"
/* ---- group 3: throughput ---------------------------------------------- */

/* CONFIG RESETSTAT on every server in cs[0..n) / their EVALSHA totals. */
static int reset_all(redisContext **cs, int n, char *err)
{
    for (int i = 0; i < n; i++)
        if (bcmd_ok(cs[i], err, "CONFIG RESETSTAT"))
            return -1;
    return 0;
}

/* The load started, warmed up, measured for o->seconds with the servers'
 * command counts summed into cs, stopped; an error of any check fails it. */
static int tp_measured(const options *o, const char *name, const char *uri,
                       int per_call, const pidset *ps, redisContext **servers,
                       int nservers, tp *t, cmdstats *cs, char *err)
{
    int rc = -1;

    if (tp_start(t, uri, NULL, o->keys, per_call, err))
        goto out;
    sleep_s(WARM_S);
    if (interrupted(err) || reset_all(servers, nservers, err))
        goto out;
    tp_measure_begin(t, ps);
    sleep_s(o->seconds);
    tp_measure_end(t, ps);
    if (interrupted(err))
        goto out;
    for (int i = 0; i < nservers; i++)
        if (cmdstats_add(servers[i], cs, err))
            goto out;
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
                         int nservers, const tp *t, const cmdstats *cs,
                         const tp_figs *ref, const char *ref_name,
                         const tp_figs *out)
{
    figure f = {0};
    double secs = (double)(t->t1 - t->t0) / 1e9;
    double checks = (double)(t->s1.checks - t->s0.checks);
    double calls = (double)(t->s1.batches - t->s0.batches);
    cpu_use cu = cpu_diff(&t->c0, &t->c1);

    f = (figure){.name = name, .value = out->rate, .unit = "checks/s"};
    if (ref) {
        f.nrefs = 1;
        f.ref[0] = ref->rate;
        f.ref_name[0] = ref_name;
    }
    xnum(&f, "threads", per_call > 1 ? THREADS / per_call : THREADS);
    xnum(&f, "per_call", per_call);
    xnum(&f, "keys", (double)o->keys);
    xnum(&f, "seconds", secs);
    xnum(&f, "checks", (double)t->sum.calls);
    xnum(&f, "p50_us", out->p50);
    xnum(&f, "p99_us", out->p99);
    xnum(&f, "fallback", (double)t->sum.fallback);
    xnum(&f, "degraded", (double)t->sum.degraded);
    xnum(&f, "denied", (double)t->sum.denied);
    xnum(&f, "servers", nservers);
    xnum(&f, "server_usec_per_check",
         (double)t->sum.calls > 0 ? cs_script_usec(cs) / (double)t->sum.calls
                              : NAN);
    xnum(&f, "evalsha_calls", cs_script_calls(cs));
    xnum(&f, "checks_per_batch", calls > 0 ? checks / calls : NAN);
    xnum(&f, "evalsha_calls_per_check",
         (double)t->sum.calls > 0 ? cs_script_calls(cs) / (double)t->sum.calls
                              : NAN);
    xnum(&f, "client_cpu", cu.client);
    xnum(&f, "redis_cpu", cu.redis);
    xnum(&f, "replica_cpu", cu.replica);
    xnum(&f, "other_cpu", cu.other);
    xnum(&f, "steal_cpu", cu.steal);
    xnum(&f, "nproc", (double)sysconf(_SC_NPROCESSORS_ONLN));
    xnum(&f, "timeouts", (double)(t->s1.timeouts - t->s0.timeouts));
    xnum(&f, "moved", (double)(t->s1.moved - t->s0.moved));
    if (cluster_up) {
        xnum(&f, "failovers", failovers());
        xnum(&f, "cluster_start_s", cluster_start_s);
    }
    xnum(&f, "loadavg_1m", loadavg1());
    emit(o, &f);
}

/* <name>_p50 and _p99, beside ref's when given. */
static void tp_emit_latency(const options *o, const char *name, const tp *t,
                            const tp_figs *ref, const tp_figs *out)
{
    char nm[2][64];
    const double v[2] = {out->p50, out->p99};
    const double r[2] = {ref ? ref->p50 : 0, ref ? ref->p99 : 0};

    snprintf(nm[0], sizeof nm[0], "%s_p50", name);
    snprintf(nm[1], sizeof nm[1], "%s_p99", name);
    for (int i = 0; i < 2; i++) {
        figure f = {.name = nm[i], .value = v[i], .unit = "us"};
        if (ref) {
            f.nrefs = 1;
            f.ref[0] = r[i];
            f.ref_name[0] = i == 0 ? "ref_p50" : "ref_p99";
        }
        if (i == 0)
            xnum(&f, "samples", (double)t->sum.all.n);
        else
            xnum(&f, "p999_us", hist_pct(&t->sum.all, 0.999) / 1000.0);
        emit(o, &f);
    }
}

int throughput(const options *o, const char *name, const char *uri,
               int per_call, const pidset *ps, redisContext **servers,
               int nservers, const tp_figs *ref, const char *ref_name,
               tp_figs *out, char *err)
{
    tp t;
    cmdstats cs = {0};

    if (tp_measured(o, name, uri, per_call, ps, servers, nservers, &t, &cs,
                    err))
        return -1;
    out->rate = (double)t.sum.calls / ((double)(t.t1 - t.t0) / 1e9);
    out->p50 = hist_pct(&t.sum.all, 0.50) / 1000.0;
    out->p99 = hist_pct(&t.sum.all, 0.99) / 1000.0;
    tp_emit_rate(o, name, per_call, nservers, &t, &cs, ref, ref_name, out);
    tp_emit_latency(o, name, &t, ref, out);
    return 0;
}
