/*
 * redisbench_throughput.c -- groups 1 and 2 of redisbench: checks per second and
 * latency, throughput_64 (64 threads of rl_allow), throughput_64_many (2
 * threads x 32 requests per rl_check_many) and throughput_1 (one thread, one
 * check at a time), each beside redis-benchmark running the library's own
 * script by EVALSHA with the library's arguments, on keys of the library's
 * shape, for as many requests: the reference says how hard Redis can be
 * driven with that script on this machine, so the ratio is the client's
 * cost.  CPU use of client, server and the rest tells where a shortfall
 * comes from.
 */
#include "redisbench.h"
/* ---- throughput (groups 1 and 2) ------------------------------------------ */


typedef struct tp_run {
    rl_limiter *lim;
    unsigned long long nkeys;
    int per_call;      /* > 1: rl_check_many() of per_call requests */
    _Atomic int phase; /* 0 warm-up, 1 measured, 2 stop */
} tp_run;

typedef struct tp_worker {
    tp_run *run;
    uint64_t rng;
    unsigned long long calls, fallback, denied;
    hist h;
    int rc;
    char err[ERRLEN];
} tp_worker;

/* throughput_64_many: per_call requests at a time in one rl_check_many()
 * (the rule counts by user: the keys are the same "user:<12 digits>");
 * each request's latency is its call's. */
static void *tp_many_main(void *arg)
{
    tp_worker *w = arg;
    tp_run *r = w->run;
    char user[MANY_PER_CALL][16];
    rl_request req[MANY_PER_CALL];
    rl_result res[MANY_PER_CALL];
    int codes[MANY_PER_CALL], n = r->per_call, ph;

    for (int i = 0; i < MANY_PER_CALL; i++)
        res[i] = (rl_result)RL_RESULT_INIT;

    while ((ph = atomic_load(&r->phase)) < 2) {
        uint64_t t0, t1;
        int rc;

        for (int i = 0; i < n; i++) {
            snprintf(user[i], sizeof user[i], "%012llu",
                     (unsigned long long)pick(&w->rng, r->nkeys));
            req[i] = (rl_request)RL_REQUEST_INIT;
            req[i].user = user[i];
            req[i].cost = 1;
        }
        t0 = now_ns();
        rc = rl_check_many(r->lim, req, res, codes, (size_t)n);
        t1 = now_ns();
        if (rc != RL_OK) {
            set_err(w->err, "rl_check_many", rc, errtext(r->lim));
            w->rc = rc;
            atomic_store(&r->phase, 2);
            break;
        }
        for (int i = 0; i < n; i++)
            if (res[i].flags & RL_FLAG_FALLBACK)
                w->fallback++;
        if (ph == 1 && atomic_load(&r->phase) == 1)
            for (int i = 0; i < n; i++) {
                w->calls++;
                hist_add(&w->h, t1 - t0);
                if (!res[i].allowed)
                    w->denied++;
            }
    }
    return NULL;
}

static void *tp_main(void *arg)
{
    tp_worker *w = arg;
    tp_run *r = w->run;
    char key[32];
    int ph;

    while ((ph = atomic_load(&r->phase)) < 2) {
        rl_result res = RL_RESULT_INIT;
        uint64_t t0, t1;
        int rc;

        /* The names redis-benchmark's __rand_int__ makes: 12 digits. */
        snprintf(key, sizeof key, "user:%012llu",
                 (unsigned long long)pick(&w->rng, r->nkeys));
        t0 = now_ns();
        rc = rl_allow(r->lim, key, "bench", 1, &res);
        t1 = now_ns();
        if (rc != RL_OK) {
            set_err(w->err, "rl_allow", rc, errtext(r->lim));
            w->rc = rc;
            atomic_store(&r->phase, 2);
            break;
        }
        if (res.flags & RL_FLAG_FALLBACK)
            w->fallback++;
        if (ph == 1 && atomic_load(&r->phase) == 1) {
            w->calls++;
            hist_add(&w->h, t1 - t0);
            if (!res.allowed)
                w->denied++;
        }
    }
    return NULL;
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
    char port[16], c[16], P[16], nb[32], r[32], a8[8][24], buf[8192];
    char *argv[40];
    int ac = 0, fds[2], status = 0;
    size_t got = 0, len = 0;
    posix_spawn_file_actions_t fa;
    pid_t pid;
    uint64_t t0;
    char *line, *fld[16];
    int nf = 0;

    if (prog == NULL || *prog == '\0')
        prog = "redis-benchmark";
    snprintf(port, sizeof port, "%d", o->port);
    snprintf(c, sizeof c, "%d", clients);
    snprintf(P, sizeof P, "%d", pipeline);
    snprintf(nb, sizeof nb, "%llu", n);
    snprintf(r, sizeof r, "%llu", keyspace);
    for (int i = 0; i < 8; i++)
        snprintf(a8[i], sizeof a8[i], "%lld", v8[i]);
    {
        const char *v[] = {prog,  "-h",  "127.0.0.1", "-p",  port,  "-c",
                           c,     "-P",  P,           "-n",  nb,    "-r",
                           r,     "--csv", "EVALSHA", sha,   "1",   key,
                           "0",   "c",   "11",
                           a8[0], a8[1], a8[2],       a8[3],
                           a8[4], a8[5], "0",
                           "1",   "1",   "4",         a8[6], a8[7], ""};
        for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
            argv[ac++] = (char *)v[i];
            len += (size_t)snprintf(out->cmd + len,
                                    len < sizeof out->cmd ? sizeof out->cmd - len : 0,
                                    "%s%s", i ? " " : "", v[i]);
        }
        argv[ac] = NULL;
    }
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
        ssize_t k = read(fds[0], buf + got, sizeof buf - 1 - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        got += (size_t)k;
        if (got == sizeof buf - 1)
            got = 0; /* keep the tail: the figures are on the last line */
    }
    buf[got] = '\0';
    close(fds[0]);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    out->wall_s = (double)(now_ns() - t0) / 1e9;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return snprintf(err, ERRLEN, "%s failed (status %d)", prog, status),
               -1;
    /* "test","rps","avg","min","p50","p95","p99","max" -- the last line. */
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

int group_throughput(const options *o, const char *sha, int threads,
                            int per_call, char *err)
{
    const char *name = per_call > 1 ? "throughput_64_many"
                       : threads > 1 ? "throughput_64" : "throughput_1";
    tp_run run;
    tp_worker *w = NULL;
    pthread_t tid[TP_THREADS];
    int started = 0, rc = -1, clients = threads * per_call;
    int pipeline = clients > 1 ? 16 : 1;
    char rules[512], rule[400], refname[48], tmpl[128];
    /* sliding window (0), limit, burst 0, window ms, p, q, cost 1, soft 0;
     * p and q as algo_params_init() computes them. */
    long long v8[8] = {0, BIG_LIMIT, 0, BIG_WINDOW_S * 1000LL, 0, 0, 1, 0};
    long long g = gcd64(v8[3], v8[1]);
    store_redis_stats s0, s1;
    cpu_snap c0, c1, r0, r1;
    cpu_use cu, ru;
    cmdstat cs = {0}, rcs = {0}, pxt = {0}, rpxt = {0};
    hist all;
    unsigned long long calls = 0, fallback = 0, denied = 0;
    uint64_t t0 = 0, t1 = 0;
    double secs, rate, warm = o->seconds / 10 < 1 ? o->seconds / 10 : 1;
    rb_result rb;

    v8[4] = v8[3] / g;
    v8[5] = v8[1] / g;
    memset(&run, 0, sizeof run);
    memset(&all, 0, sizeof all);
    one_rule(rule, sizeof rule, "bench", 0, BIG_LIMIT, BIG_WINDOW_S, 0);
    snprintf(rules, sizeof rules, "{\"rules\":[%s]}", rule);
    if (flush_wait(err) != 0)
        return -1;
    if (make_limiter(o, rules, &run.lim, err) != RL_OK)
        return -1;
    run.nkeys = o->keys;
    run.per_call = per_call;
    if ((w = calloc((size_t)threads, sizeof *w)) == NULL) {
        snprintf(err, ERRLEN, "out of memory");
        goto out;
    }
    for (int t = 0; t < threads; t++) {
        w[t].run = &run;
        w[t].rng = 0xBE4C0000ULL + (uint64_t)t * 7919;
        if (pthread_create(&tid[t], NULL, per_call > 1 ? tp_many_main
                                                       : tp_main,
                           &w[t]) != 0) {
            snprintf(err, ERRLEN, "pthread_create failed");
            atomic_store(&run.phase, 2);
            goto join;
        }
        started++;
    }
    sleep_s(warm);
    if (ctl_ok(err, "CONFIG RESETSTAT") || cpu_take(&c0, err)) {
        atomic_store(&run.phase, 2);
        goto join;
    }
    store_redis_stats_get(limiter_store(run.lim), &s0);
    t0 = now_ns();
    atomic_store(&run.phase, 1);
    sleep_s(o->seconds);
    if (atomic_load(&run.phase) == 1)
        atomic_store(&run.phase, 0); /* stop counting; keep the load on */
    t1 = now_ns();
    store_redis_stats_get(limiter_store(run.lim), &s1);
    if (cpu_take(&c1, err) || cmdstat_get("evalsha", &cs, err) ||
        cmdstat_get("pexpiretime", &pxt, err)) {
        atomic_store(&run.phase, 2);
        goto join;
    }
    atomic_store(&run.phase, 2);
    rc = 0;
join:
    for (int t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
    for (int t = 0; t < started; t++) {
        if (w[t].rc != 0 && rc == 0) {
            memcpy(err, w[t].err, ERRLEN);
            rc = -1;
        }
        calls += w[t].calls;
        fallback += w[t].fallback;
        denied += w[t].denied;
        hist_merge(&all, &w[t].h);
    }
    rl_limiter_free(run.lim);
    run.lim = NULL;
    if (rc != 0)
        goto out;
    rc = -1;
    if (key_template(tmpl, sizeof tmpl, err))
        goto out;
    secs = (double)(t1 - t0) / 1e9;
    rate = (double)calls / secs;
    cu = cpu_diff(&c0, &c1);

    /* The reference: the same script, arguments and key space, from an
     * empty database, for as many requests as the library made. */
    if (flush_wait(err) || clients_wait(1, err) ||
        ctl_ok(err, "CONFIG RESETSTAT") || cpu_take(&r0, err))
        goto out;
    if (run_redis_benchmark(o, sha, clients, pipeline, calls, o->keys, tmpl,
                            v8, &rb, err))
        goto out;
    if (cpu_take(&r1, err) || cmdstat_get("evalsha", &rcs, err) ||
        cmdstat_get("pexpiretime", &rpxt, err))
        goto out;
    if (rcs.calls < (double)calls || rcs.failed > 0 || rcs.rejected > 0) {
        snprintf(err, ERRLEN, "redis-benchmark: %.0f EVALSHA calls, %.0f "
                 "failed, %.0f rejected (expected %llu, 0, 0)", rcs.calls,
                 rcs.failed, rcs.rejected, calls);
        goto out;
    }
    ru = cpu_diff(&r0, &r1);
    snprintf(refname, sizeof refname, "redis_benchmark_c%d_P%d", clients,
             pipeline);

    {
        figure f = {0};
        f.name = name;
        f.value = rate;
        f.unit = "checks/s";
        f.nrefs = 1;
        f.ref[0] = rb.rps;
        f.ref_name[0] = refname;
        xnum(&f, "threads", threads);
        xnum(&f, "per_call", per_call);
        xnum(&f, "keys", (double)o->keys);
        xnum(&f, "seconds", secs);
        xnum(&f, "checks", (double)calls);
        xnum(&f, "target_min_ratio", clients > 1 ? TARGET_TP64 : TARGET_TP1);
        xnum(&f, "fallback", (double)fallback);
        xnum(&f, "denied", (double)denied);
        xnum(&f, "server_usec_per_call", cs.usec_per_call);
        xnum(&f, "ref_server_usec_per_call", rcs.usec_per_call);
        /* Checks that found state (the script reads its expiry) rather
         * than creating the key: the same mix on both sides, or the
         * comparison is off. */
        xnum(&f, "existing_share", cs.calls > 0 ? pxt.calls / cs.calls : NAN);
        xnum(&f, "ref_existing_share",
             rcs.calls > 0 ? rpxt.calls / rcs.calls : NAN);
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
        xnum(&f, "ref_seconds", rb.wall_s);
        xnum(&f, "loadavg_1m", loadavg1());
        xstr(&f, "ref_cmd", rb.cmd);
        emit(o, &f);
    }
    {
        figure f = {0};
        char n50[48], n99[48], nfb[48], nbt[48];
        snprintf(n50, sizeof n50, "%s_p50", name);
        snprintf(n99, sizeof n99, "%s_p99", name);
        snprintf(nfb, sizeof nfb, "%s_fallback", name);
        snprintf(nbt, sizeof nbt, "%s_batching", name);
        f.name = n50;
        f.value = hist_pct(&all, 0.50) / 1000.0;
        f.unit = "us";
        if (clients == 1) { /* one in flight both sides: comparable */
            f.nrefs = 1;
            f.ref[0] = rb.p50_ms * 1000.0;
            f.ref_name[0] = refname;
        } else {
            xnum(&f, "ref_p50_us", rb.p50_ms * 1000.0);
        }
        xnum(&f, "samples", (double)all.n);
        emit(o, &f);
        f = (figure){0};
        f.name = n99;
        f.value = hist_pct(&all, 0.99) / 1000.0;
        f.unit = "us";
        if (clients == 1) {
            f.nrefs = 1;
            f.ref[0] = rb.p99_ms * 1000.0;
            f.ref_name[0] = refname;
        } else {
            xnum(&f, "ref_p99_us", rb.p99_ms * 1000.0);
        }
        xnum(&f, "p999_us", hist_pct(&all, 0.999) / 1000.0);
        emit(o, &f);
        f = (figure){0};
        f.name = nfb; /* results decided by the local fallback: errors */
        f.value = (double)fallback;
        f.unit = "checks";
        xnum(&f, "timeouts", (double)(s1.timeouts - s0.timeouts));
        xnum(&f, "down_fails", (double)(s1.down_fails - s0.down_fails));
        xnum(&f, "reconnects", (double)(s1.reconnects - s0.reconnects));
        emit(o, &f);
        f = (figure){0};
        f.name = nbt; /* the store's own batching: checks per script call */
        f.value = s1.batches > s0.batches
                      ? (double)(s1.checks - s0.checks) /
                            (double)(s1.batches - s0.batches)
                      : NAN;
        f.unit = "checks/script";
        xnum(&f, "checks", (double)(s1.checks - s0.checks));
        xnum(&f, "script_calls", (double)(s1.batches - s0.batches));
        xnum(&f, "writes", (double)(s1.writes - s0.writes));
        xnum(&f, "noscript", (double)(s1.noscript - s0.noscript));
        xnum(&f, "refunds", (double)(s1.refunds - s0.refunds));
        emit(o, &f);
    }
    rc = 0;
out:
    if (run.lim)
        rl_limiter_free(run.lim);
    free(w);
    return rc;
}
