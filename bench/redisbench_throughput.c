/*
 * redisbench_throughput.c -- groups 1 and 2 of redisbench: throughput_64,
 * throughput_64_many and throughput_1, each beside redis-benchmark running
 * the library's own script.  Method: docs/BENCHMARKS.md, "How each bench
 * measures".
 */
#include "redisbench.h"
/* ---- throughput (groups 1 and 2) ------------------------------------------ */

/* The script's ARGV for one request of a rule (what algo_params_init()
 * computes): algorithm, limit, burst (the limit for token bucket and GCRA),
 * window ms, p and q, cost 1, soft 0. */
void script_args(long long v8[8], int algo, long long limit,
                 long long window_s)
{
    long long wms = window_s * 1000LL, g = algo_gcd64(wms, limit);
    long long bucket = algo == 1 || algo == 3;

    v8[0] = algo;
    v8[1] = limit;
    v8[2] = bucket ? limit : 0;
    v8[3] = wms;
    v8[4] = wms / g;
    v8[5] = limit / g;
    v8[6] = 1;
    v8[7] = 0;
}

/* ---- redis-benchmark ----------------------------------------------------- */

typedef struct rb_argv {
    char port[16], c[16], P[16], nb[32], r[32], a8[8][24];
    char *argv[40];
} rb_argv;

/* redis-benchmark's command line in a->argv, and as one string in cmd. */
static void rb_args(const options *o, const char *prog, const char *sha,
                    int clients, int pipeline, unsigned long long n,
                    unsigned long long keyspace, const char *key,
                    const long long v8[8], rb_argv *a, char *cmd,
                    size_t cmdlen)
{
    size_t len = 0;
    int ac = 0;

    snprintf(a->port, sizeof a->port, "%d", o->port);
    snprintf(a->c, sizeof a->c, "%d", clients);
    snprintf(a->P, sizeof a->P, "%d", pipeline);
    snprintf(a->nb, sizeof a->nb, "%llu", n);
    snprintf(a->r, sizeof a->r, "%llu", keyspace);
    for (int i = 0; i < 8; i++)
        snprintf(a->a8[i], sizeof a->a8[i], "%lld", v8[i]);
    const char *v[] = {prog,     "-h",     "127.0.0.1", "-p",     a->port,
                       "-c",     a->c,     "-P",        a->P,     "-n",
                       a->nb,    "-r",     a->r,        "--csv",  "EVALSHA",
                       sha,      "1",      key,         "0",      "c",
                       "11",     a->a8[0], a->a8[1],    a->a8[2], a->a8[3],
                       a->a8[4], a->a8[5], "0",         "1",      "1",
                       "4",      a->a8[6], a->a8[7],    ""};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        a->argv[ac++] = (char *)v[i];
        len += (size_t)snprintf(cmd + len, len < cmdlen ? cmdlen - len : 0,
                                "%s%s", i ? " " : "", v[i]);
    }
    a->argv[ac] = NULL;
}

/* Runs argv with its stdout read into buf (the last buflen - 1 bytes, the
 * figures being on the last line); *wall_s is how long it took.  0, or -1
 * with err when it cannot run or fails. */
static int rb_spawn(const char *prog, char **argv, char *buf, size_t buflen,
                    double *wall_s, char *err)
{
    int fds[2], status = 0;
    size_t got = 0;
    posix_spawn_file_actions_t fa;
    pid_t pid;
    uint64_t t0;

    if (pipe(fds) != 0)
        return snprintf(err, ERRLEN, "pipe: %s", strerror(errno)), -1;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_addclose(&fa, fds[1]);
    t0 = now_ns();
    if ((errno = posix_spawnp(&pid, prog, &fa, NULL, argv, environ)) != 0) {
        snprintf(err, ERRLEN, "cannot run %s: %s", prog, strerror(errno));
        posix_spawn_file_actions_destroy(&fa);
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    for (;;) {
        ssize_t k = read(fds[0], buf + got, buflen - 1 - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        got += (size_t)k;
        if (got == buflen - 1)
            got = 0; /* keep the tail: the figures are on the last line */
    }
    buf[got] = '\0';
    close(fds[0]);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    *wall_s = (double)(now_ns() - t0) / 1e9;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return snprintf(err, ERRLEN, "%s failed (status %d)", prog, status),
               -1;
    return 0;
}

/* "test","rps","avg","min","p50","p95","p99","max" -- the last line. */
static int rb_parse(const char *prog, char *buf, rb_result *out, char *err)
{
    char *line, *fld[16];
    int nf = 0;

    line = strrchr(buf, '"');
    while (line && line > buf && line[-1] != '\n')
        line--;
    if (line == NULL)
        return snprintf(err, ERRLEN, "%s: no CSV output", prog), -1;
    for (char *s = line; nf < 16 && (s = strchr(s, '"')) != NULL;) {
        char *e = strchr(s + 1, '"');
        if (e == NULL)
            break;
        *e = '\0';
        fld[nf++] = s + 1;
        s = e + 1;
    }
    if (nf < 8 || strncmp(fld[0], "EVALSHA", 7) != 0)
        return snprintf(err, ERRLEN, "%s: unexpected CSV \"%.200s\"", prog,
                        line), -1;
    out->rps = strtod(fld[1], NULL);
    out->p50_ms = strtod(fld[4], NULL);
    out->p99_ms = strtod(fld[6], NULL);
    if (!(out->rps > 0))
        return snprintf(err, ERRLEN, "%s: no rate", prog), -1;
    return 0;
}

/* redis-benchmark -n n -r keyspace with the library's script: KEYS[1] is
 * `key` (with __rand_int__), ARGV the time "0", "c", and what
 * redis_node.c sends for one op (lua/check.lua): "11", where the
 * requests begin after a table of one rule (ARGV[4..10]: algorithm,
 * limit, burst, window ms, p, q, and "0" replaced shapes), then one
 * request of one key ("1" "1"): the index of its rule "4", cost, soft and
 * the field "" (the plain layout).  --csv; the last line has the figures.
 * The library may batch many requests into one call of this script; the
 * reference sends one request per call. */
int run_redis_benchmark(const options *o, const char *sha,
                               int clients, int pipeline,
                               unsigned long long n,
                               unsigned long long keyspace, const char *key,
                               const long long v8[8], rb_result *out,
                               char *err)
{
    const char *prog = getenv("REDIS_BENCHMARK");
    char buf[8192];
    rb_argv a;

    if (prog == NULL || *prog == '\0')
        prog = "redis-benchmark";
    rb_args(o, prog, sha, clients, pipeline, n, keyspace, key, v8, &a,
            out->cmd, sizeof out->cmd);
    if (rb_spawn(prog, a.argv, buf, sizeof buf, &out->wall_s, err))
        return -1;
    return rb_parse(prog, buf, out, err);
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
    long long v8[8];

    memset(r, 0, sizeof *r);
    script_args(v8, 0, BIG_LIMIT, BIG_WINDOW_S);
    if (flushall_wait(ctl, err) || clients_wait(ctl, 1, err) ||
        ctl_ok(err, "CONFIG RESETSTAT"))
        return -1;
    cpu_take(&r->r0, &server_ps);
    if (run_redis_benchmark(o, sha, clients, clients > 1 ? 16 : 1, calls,
                            o->keys, tmpl, v8, &r->rb, err))
        return -1;
    cpu_take(&r->r1, &server_ps);
    if (cmdstat_get("evalsha", &r->rcs, err) ||
        cmdstat_get("pexpiretime", &r->rpxt, err))
        return -1;
    if (r->rcs.calls < (double)calls || r->rcs.failed > 0 ||
        r->rcs.rejected > 0) {
        snprintf(err, ERRLEN, "redis-benchmark: %.0f EVALSHA calls, %.0f "
                 "failed, %.0f rejected (expected %llu, 0, 0)", r->rcs.calls,
                 r->rcs.failed, r->rcs.rejected, calls);
        return -1;
    }
    return 0;
}

/* checks/s beside redis-benchmark's requests/s, with where the CPU went. */
static void tp_emit_rate(const options *o, const char *name, int threads,
                         int per_call, const tp_side *s, const tp_ref *r,
                         const char *refname)
{
    double secs = (double)(s->t.t1 - s->t.t0) / 1e9;
    double rate = (double)s->t.sum.calls / secs;
    cpu_use cu = cpu_diff(&s->t.c0, &s->t.c1), ru = cpu_diff(&r->r0, &r->r1);
    figure f = {.name = name, .value = rate, .unit = "checks/s", .nrefs = 1,
                 .ref = {r->rb.rps}, .ref_name = {refname}};

    xnum(&f, "threads", threads);
    xnum(&f, "per_call", per_call);
    xnum(&f, "keys", (double)o->keys);
    xnum(&f, "seconds", secs);
    xnum(&f, "checks", (double)s->t.sum.calls);
    xnum(&f, "target_min_ratio",
         threads * per_call > 1 ? TARGET_TP64 : TARGET_TP1);
    xnum(&f, "fallback", (double)s->t.sum.fallback);
    xnum(&f, "denied", (double)s->t.sum.denied);
    xnum(&f, "server_usec_per_call", s->cs.usec_per_call);
    xnum(&f, "ref_server_usec_per_call", r->rcs.usec_per_call);
    /* Checks that found state (the script reads its expiry) rather than
     * creating the key: the same mix on both sides, or the comparison is
     * off. */
    xnum(&f, "existing_share",
         s->cs.calls > 0 ? s->pxt.calls / s->cs.calls : NAN);
    xnum(&f, "ref_existing_share",
         r->rcs.calls > 0 ? r->rpxt.calls / r->rcs.calls : NAN);
    xnum(&f, "client_cpu", cu.client);
    xnum(&f, "redis_cpu", cu.redis);
    xnum(&f, "other_cpu", cu.other);
    xnum(&f, "ref_client_cpu", ru.client);
    xnum(&f, "ref_redis_cpu", ru.redis);
    xnum(&f, "ref_other_cpu", ru.other);
    xnum(&f, "steal_cpu", cu.steal + ru.steal);
    xnum(&f, "client_ctx_switches_per_check", cu.csw / rate);
    xnum(&f, "redis_preempted_per_s", cu.preempt);
    xnum(&f, "ref_redis_preempted_per_s", ru.preempt);
    xnum(&f, "ref_seconds", r->rb.wall_s);
    xnum(&f, "loadavg_1m", loadavg1());
    xstr(&f, "ref_cmd", r->rb.cmd);
    emit(o, &f);
}

void tp_emit_latency(const options *o, const char *name, const tp_sums *sum,
                     const double ref_us[2], const char *const ref_name[2],
                     const double x_us[2])
{
    char nm[2][64];
    const double pct[2] = {0.50, 0.99};

    for (int i = 0; i < 2; i++) {
        figure f = {.name = nm[i], .value = hist_pct(&sum->all, pct[i]) / 1e3,
                    .unit = "us"};
        snprintf(nm[i], sizeof nm[i], "%s_p%s", name, i ? "99" : "50");
        if (ref_us) {
            f.nrefs = 1;
            f.ref[0] = ref_us[i];
            f.ref_name[0] = ref_name[i];
        } else if (x_us) {
            xnum(&f, i ? "ref_p99_us" : "ref_p50_us", x_us[i]);
        }
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
    const store_redis_stats *s0 = &s->t.s0, *s1 = &s->t.s1;
    char nfb[48], nbt[48];
    figure f = {0};

    snprintf(nfb, sizeof nfb, "%s_fallback", name);
    snprintf(nbt, sizeof nbt, "%s_batching", name);
    f = (figure){.name = nfb, .value = (double)s->t.sum.fallback,
                  .unit = "checks"};
    xnum(&f, "timeouts", (double)(s1->timeouts - s0->timeouts));
    xnum(&f, "down_fails", (double)(s1->down_fails - s0->down_fails));
    xnum(&f, "reconnects", (double)(s1->reconnects - s0->reconnects));
    emit(o, &f);
    f = (figure){0};
    f.name = nbt;
    f.value = s1->batches > s0->batches
                  ? (double)(s1->checks - s0->checks) /
                        (double)(s1->batches - s0->batches)
                  : NAN;
    f.unit = "checks/script";
    xnum(&f, "checks", (double)(s1->checks - s0->checks));
    xnum(&f, "script_calls", (double)(s1->batches - s0->batches));
    xnum(&f, "writes", (double)(s1->writes - s0->writes));
    xnum(&f, "noscript", (double)(s1->noscript - s0->noscript));
    xnum(&f, "refunds", (double)(s1->refunds - s0->refunds));
    emit(o, &f);
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
