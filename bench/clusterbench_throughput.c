/*
 * clusterbench_throughput.c -- the timed load of `redisbench cluster`
 * (redisutil.h's tp_load: TP_THREADS threads of rl_allow, or rl_check_many
 * of MANY_PER_CALL, keys drawn uniformly or, while a slot moves, half from
 * its clients) with the store's counters and the CPU of client, masters,
 * replicas and the rest of the machine around the measured span; and the
 * group throughput: checks/s and p50/p99 against one server, then the
 * cluster beside it.
 */
#include "clusterbench.h"

/* utime + stime of a process, all its threads, in seconds; 0 if gone. */
static double proc_cpu(pid_t pid)
{
    char buf[1024];
    unsigned long long ut = 0, st = 0;
    const char *p;

    /* state is field 3, utime 14, stime 15 */
    if (pid <= 0 || (p = proc_stat((long)pid, buf, sizeof buf)) == NULL ||
        sscanf(p, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
               &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void cpu_take_pids(cpu_snap *s, const pidset *ps)
{
    struct rusage ru;

    memset(s, 0, sizeof *s);
    machine_cpu(&s->busy, &s->steal);
    getrusage(RUSAGE_SELF, &ru);
    s->self = rusage_seconds(&ru);
    for (int i = 0; i < ps->nmaster; i++)
        s->redis += proc_cpu(ps->master[i]);
    for (int i = 0; i < ps->nreplica; i++)
        s->replica += proc_cpu(ps->replica[i]);
    s->wall = now_ns();
}

int tp_start(tp *t, const options *o, const hot_pool *hot, int per_call,
             char *err)
{
    memset(t, 0, sizeof *t);
    atomic_store(&t->l.run.cur, -1);
    t->l.run.hot = hot;
    t->l.run.nkeys = o->keys;
    t->l.run.per_call = per_call;
    t->l.run.stop = &g_stop;
    if (limiter_one_rule(o, "bench", 0, BIG_LIMIT, BIG_WINDOW_S,
                         &t->l.run.lim, err))
        return -1;
    return tp_load_start(&t->l, TP_THREADS / per_call,
                         err); /* tp_stop() joins what started */
}

void tp_measure_begin(tp *t, const pidset *ps)
{
    cpu_take_pids(&t->c0, ps);
    store_redis_stats_get(limiter_store(t->l.run.lim), &t->s0);
    t->t0 = now_ns();
    atomic_store(&t->l.run.phase, 1);
}

void tp_measure_end(tp *t, const pidset *ps)
{
    atomic_store(&t->l.run.phase, 0); /* stop counting; keep the load on */
    t->t1 = now_ns();
    store_redis_stats_get(limiter_store(t->l.run.lim), &t->s1);
    cpu_take_pids(&t->c1, ps);
}

void tp_stop(tp *t)
{
    tp_load_stop(&t->l, &t->sum);
    if (t->l.run.lim)
        rl_limiter_free(t->l.run.lim);
    t->l.run.lim = NULL;
}

/* ---- the group throughput ----------------------------------------------- */

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

    if (tp_start(t, o, NULL, per_call, err))
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
    xnum(&f, "threads", TP_THREADS / per_call);
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
    xnum(&f, "server_usec_per_check", cs[1] / (double)t->sum.calls);
    xnum(&f, "evalsha_calls", cs[0]);
    xnum(&f, "checks_per_batch", calls > 0 ? checks / calls : NAN);
    xnum(&f, "evalsha_calls_per_check", cs[0] / (double)t->sum.calls);
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
    tp_emit_latency(o, name, &t, ref, out);
    return 0;
}
