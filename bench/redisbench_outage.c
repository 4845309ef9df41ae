/*
 * redisbench_outage.c -- group 6 of redisbench: the circuit breaker
 * against a hung server (breaker-open latency, probes, admissions per
 * failure mode, time to close).  The server it hangs is a private one the
 * test harness starts (tests/redis_harness.c): stopped by SIGSTOP
 * (rh_pause), so the kernel still accepts connections and bytes and nothing
 * answers, and resumed by SIGCONT (rh_resume); it dies with this process
 * however that ends.  Method: docs/BENCHMARKS.md, "How each bench
 * measures".
 */
#include "redisbench.h"
#include "redis_harness.h"

static rh_server srv; /* the server this group hangs */
static void out_rule(char *buf, size_t len, const char *id, int algo,
                     long long limit, long long window_s, const char *failure)
{
    snprintf(buf, len,
             "{\"rule_id\":\"%s\",\"dimension\":\"user\",\"limit\":%lld,"
             "\"window_seconds\":%lld,\"algorithm\":\"%s\","
             "\"failure_mode\":\"%s\"}",
             id, limit, window_s, algo_names[algo], failure);
}

/* A limiter for the outage figures: Redis (timeout OUT_TIMEOUT_MS, breaker
 * after OUT_FAILURES, the given cooldown, fleet of OUT_FLEET) or, with
 * redis 0, the memory store with the same options and rules. */
static int out_limiter(const options *o, int redis, const char *rules,
                       long long cooldown_ms, rl_limiter **out, char *err)
{
    char uri[64] = "memory://", c[24];

    if (redis)
        snprintf(uri, sizeof uri, "redis://127.0.0.1:%d", o->port);
    snprintf(c, sizeof c, "%lld", cooldown_ms);
    *out = bench_limiter(
        (const char *const[]){"store", uri,
                              "timeout_ms", BENCH_STR(OUT_TIMEOUT_MS),
                              "breaker_failures", BENCH_STR(OUT_FAILURES),
                              "breaker_cooldown_ms", c,
                              "fleet_size", BENCH_STR(OUT_FLEET),
                              "rules", rules, NULL},
        err);
    return *out ? RL_OK : -1;
}

/* rl_allow(), timed; -1 (err set) when it fails. */
static int out_allow(rl_limiter *lim, const char *key, const char *rule,
                     rl_result *res, uint64_t *ns, char *err)
{
    uint64_t t0 = now_ns();
    int rc = rl_allow(lim, key, rule, 1, res);

    if (ns)
        *ns = now_ns() - t0;
    if (rc != RL_OK) {
        set_err(err, "rl_allow", rc, errtext(lim));
        return -1;
    }
    return 0;
}

/* Checks while Redis answers: none may be degraded, the breaker closed. */
static int out_healthy(rl_limiter *lim, const char *key,
                       const char *const *rule, int nrules, int rounds,
                       char *err)
{
    rl_result res = RL_RESULT_INIT;
    rl_stats st = RL_STATS_INIT;

    for (int i = 0; i < rounds; i++)
        for (int r = 0; r < nrules; r++) {
            if (out_allow(lim, key, rule[r], &res, NULL, err))
                return -1;
            if (res.flags & DEGRADED)
                return snprintf(err, ERRLEN, "outage: a check before the "
                                "fault was degraded (flags 0x%x): Redis is "
                                "not answering", res.flags), -1;
        }
    rl_stats_get(lim, &st);
    if (st.breaker_state != RL_BREAKER_CLOSED)
        return snprintf(err, ERRLEN, "outage: breaker state %d before the "
                        "fault", st.breaker_state), -1;
    return 0;
}

/* ---- figures 1 and 2: the breaker open ------------------------------------ */

/* What out_open() measures: the limiters, the K probes until the breaker
 * opens, the latencies with it open ([0]) and of the memory store ([1]),
 * and the counters before the fault (0), when the breaker opened (1) and
 * after the measurement (2). */
typedef struct oo_run {
    rl_limiter *lim, *mem;
    char (*keys)[24];
    hist *h;
    unsigned long long n, not_fb;
    store_redis_stats s0, s1, s2;
    rl_stats b0, b1, b2;
    double probe_max, probe_min, probe_sum;
    int probes, opened_after;
} oo_run;

/* Checks with Redis stopped until the breaker opens (at most 4 K). */
static int oo_probe(oo_run *r, const char *rid, char *err)
{
    rl_result res = RL_RESULT_INIT;
    uint64_t ns;

    for (int i = 0; i < 4 * OUT_FAILURES; i++) {
        double ms;
        if (out_allow(r->lim, r->keys[i], rid, &res, &ns, err))
            return -1;
        ms = (double)ns / 1e6;
        r->probe_max = r->probes == 0 || ms > r->probe_max ? ms : r->probe_max;
        r->probe_min = r->probes == 0 || ms < r->probe_min ? ms : r->probe_min;
        r->probe_sum += ms;
        r->probes++;
        rl_stats_get(r->lim, &r->b1);
        if (r->b1.breaker_state == RL_BREAKER_OPEN) {
            r->opened_after = i + 1;
            break;
        }
    }
    if (r->opened_after == 0) {
        snprintf(err, ERRLEN, "outage: the breaker is not open after %d "
                 "failed checks (breaker_failures %d)", r->probes,
                 OUT_FAILURES);
        return -1;
    }
    store_redis_stats_get(limiter_store(r->lim), &r->s1);
    return 0;
}

/* OUT_WARM checks, then r->n timed, in alternating blocks of OUT_BLOCK on
 * the open breaker and on the memory store. */
static int oo_measure(oo_run *r, const char *rid, char *err)
{
    rl_result res = RL_RESULT_INIT;
    uint64_t ns;

    for (int pass = 0; pass < 2; pass++) {
        unsigned long long total = pass ? r->n : OUT_WARM;
        for (unsigned long long done = 0; done < total; done += OUT_BLOCK)
            for (int side = 0; side < 2; side++) {
                rl_limiter *l = side ? r->mem : r->lim;
                for (unsigned long long j = done;
                     j < done + OUT_BLOCK && j < total; j++) {
                    if (out_allow(l, r->keys[j % OUT_NKEYS], rid, &res, &ns,
                                  err))
                        return -1;
                    if (pass)
                        hist_add(&r->h[side], ns);
                    if (!side && !(res.flags & RL_FLAG_FALLBACK))
                        r->not_fb++;
                }
            }
    }
    store_redis_stats_get(limiter_store(r->lim), &r->s2);
    rl_stats_get(r->lim, &r->b2);
    return 0;
}

/* outage_breaker_open_<p>: percentile p of both sides' latencies. */
static figure oo_pct(const hist *h, const char *name, double p)
{
    return (figure){.name = name, .value = hist_pct(&h[0], p) / 1000.0,
                    .unit = "us", .nrefs = 1,
                    .ref = {hist_pct(&h[1], p) / 1000.0},
                    .ref_name = {"memory_store_check"}};
}

static void oo_emit_open(const options *o, const oo_run *r)
{
    const hist *h = r->h;
    figure f = oo_pct(h, "outage_breaker_open_p50", 0.50);

    xnum(&f, "samples", (double)h[0].n);
    xnum(&f, "ref_samples", (double)h[1].n);
    emit(o, &f);
    f = oo_pct(h, "outage_breaker_open_p99", 0.99);
    xnum(&f, "target_max_us", OUT_TARGET_P99_US);
    xnum(&f, "p999_us", hist_pct(&h[0], 0.999) / 1000.0);
    xnum(&f, "ref_p999_us", hist_pct(&h[1], 0.999) / 1000.0);
    xnum(&f, "checks", (double)r->n);
    xnum(&f, "warmup_checks", OUT_WARM);
    /* Socket calls while open (every check after the breaker opened,
     * warm-up included): must be 0. */
    xnum(&f, "network_calls", (double)(r->s2.calls - r->s1.calls));
    xnum(&f, "network_calls_max", 0);
    xnum(&f, "writes", (double)(r->s2.writes - r->s1.writes));
    xnum(&f, "store_errors",
         (double)(r->b2.store_errors - r->b1.store_errors));
    xnum(&f, "not_fallback", (double)r->not_fb);
    xnum(&f, "breaker_state_after", r->b2.breaker_state);
    xnum(&f, "breaker_opens",
         (double)(r->b2.breaker_opens - r->b0.breaker_opens));
    xstr(&f, "failure_mode", "fallback");
    xnum(&f, "fleet_size", OUT_FLEET);
    xnum(&f, "cooldown_ms", OUT_OPEN_COOLDOWN_MS);
    xnum(&f, "keys", OUT_NKEYS);
    xstr(&f, "fault", "sigstop");
    emit(o, &f);
}

static void oo_emit_probe(const options *o, const oo_run *r)
{
    figure f = {.name = "outage_probe_max_latency", .value = r->probe_max,
                 .unit = "ms", .nrefs = 1, .ref = {OUT_TIMEOUT_MS},
                 .ref_name = {"timeout_ms"}};

    xnum(&f, "checks_to_open", r->opened_after);
    xnum(&f, "breaker_failures", OUT_FAILURES);
    xnum(&f, "min_ms", r->probe_min);
    xnum(&f, "mean_ms", r->probe_sum / r->probes);
    xnum(&f, "timeouts", (double)(r->s1.timeouts - r->s0.timeouts));
    xnum(&f, "network_calls", (double)(r->s1.calls - r->s0.calls));
    xnum(&f, "down_fails", (double)(r->s1.down_fails - r->s0.down_fails));
    xstr(&f, "fault", "sigstop");
    emit(o, &f);
}

/* Figures 1 and 2: Redis stopped, the K checks that time out until the
 * breaker opens, then checks with it open beside a memory-store limiter
 * with the same rule, in alternating blocks (so load drift hits both). */
static int out_open(const options *o, char *bad, char *err)
{
    static const char *const rid[1] = {"oo"};
    char rule[400], rules[512];
    oo_run r = {.n = o->quick ? OUT_CHECKS_QUICK : OUT_CHECKS,
                .b0 = RL_STATS_INIT, .b1 = RL_STATS_INIT,
                .b2 = RL_STATS_INIT};
    int faulted = 0, rc = -1;

    r.h = calloc(2, sizeof *r.h); /* [0] breaker open, [1] memory store */
    r.keys = calloc(OUT_NKEYS, sizeof *r.keys);
    if (r.h == NULL || r.keys == NULL) {
        snprintf(err, ERRLEN, "out of memory");
        goto out;
    }
    for (int i = 0; i < OUT_NKEYS; i++)
        snprintf(r.keys[i], sizeof r.keys[i], "user:%d", i);
    out_rule(rule, sizeof rule, rid[0], 0, BIG_LIMIT, BIG_WINDOW_S,
             "fallback");
    snprintf(rules, sizeof rules, "{\"rules\":[%s]}", rule);
    if (out_limiter(o, 1, rules, OUT_OPEN_COOLDOWN_MS, &r.lim, err) ||
        out_limiter(o, 0, rules, OUT_OPEN_COOLDOWN_MS, &r.mem, err) ||
        out_healthy(r.lim, r.keys[0], rid, 1, 1000, err))
        goto out;
    rl_stats_get(r.lim, &r.b0);
    store_redis_stats_get(limiter_store(r.lim), &r.s0);
    if (rh_pause(&srv) != 0)
        goto out;
    faulted = 1;
    if (oo_probe(&r, rid[0], err) || oo_measure(&r, rid[0], err))
        goto out;
    faulted = 0;
    if (rh_resume(&srv) != 0)
        goto out;
    oo_emit_open(o, &r);
    oo_emit_probe(o, &r);
    if (r.s2.calls != r.s1.calls && !bad[0])
        snprintf(bad, ERRLEN, "outage: %lld network calls with the breaker "
                 "open (must be 0)", (long long)(r.s2.calls - r.s1.calls));
    if (r.b2.breaker_state != RL_BREAKER_OPEN && !bad[0])
        snprintf(bad, ERRLEN, "outage: the breaker left OPEN (state %d) "
                 "during the measurement", r.b2.breaker_state);
    rc = 0;
out:
    if (faulted)
        rh_resume(&srv);
    rl_limiter_free(r.lim);
    rl_limiter_free(r.mem);
    free(r.keys);
    free(r.h);
    return rc;
}

/* ---- figures 3 and 4: the failure modes and the breaker closing ------------ */

static const char *const mode[3] = {"open", "closed", "fallback"};

/* What out_modes() measures: per mode, checks sent, admitted, decided by
 * the mode and the slowest; the counters before the fault (0), at the
 * resumption (1) and when the breaker closed (2); the times (monotonic ns)
 * of the fault, the resumption, the breaker's openings and closing. */
typedef struct om_run {
    rl_limiter *lim;
    const char *key;
    double secs, outage_s;
    rl_stats b0, b1, b2;
    store_redis_stats s0, s1, s2;
    unsigned long long sent[3], adm[3], decided[3], late, after,
        after_degraded, reopens;
    uint64_t max_ns[3], t_stop, t_cont, t_close, t_open_last, t_open_resume,
        t_reopen, t_reconn, opens_seen;
    int64_t rt_first, rt_last; /* CLOCK_REALTIME of the fallback checks */
} om_run;

/* The next tick, OUT_PACE_NS after *next, slept until; a check that
 * outlasted the pace gets no catch-up: 1 (late), the tick now. */
static int om_pace(uint64_t *next)
{
    *next += OUT_PACE_NS;
    if (*next < now_ns()) {
        *next = now_ns();
        return 1;
    }
    sleep_until(CLOCK_MONOTONIC, (int64_t)*next);
    return 0;
}

/* The breaker's openings since the last look (the last one's time in
 * r->t_open_last); st: the stats read. */
static uint64_t om_opens(om_run *r, rl_stats *st)
{
    uint64_t n = 0;

    rl_stats_get(r->lim, st);
    if (st->breaker_opens != r->opens_seen) {
        n = st->breaker_opens - r->opens_seen;
        r->opens_seen = st->breaker_opens;
        r->t_open_last = now_ns();
    }
    return n;
}

/* One check per mode while Redis hangs. */
static int om_round(om_run *r, char *err)
{
    rl_result res = RL_RESULT_INIT;
    uint64_t ns;

    for (int m = 0; m < 3; m++) {
        int64_t rt = rt_ns();
        if (out_allow(r->lim, r->key, mode[m], &res, &ns, err))
            return -1;
        r->sent[m]++;
        r->adm[m] += res.allowed != 0;
        if (ns > r->max_ns[m])
            r->max_ns[m] = ns;
        r->decided[m] += m == 0   ? (res.flags & RL_FLAG_FAIL_OPEN) != 0
                         : m == 1 ? !res.allowed
                                  : (res.flags & RL_FLAG_FALLBACK) != 0;
        if (m == 2) {
            if (r->rt_first == 0)
                r->rt_first = rt;
            r->rt_last = rt;
        }
    }
    return 0;
}

/* The outage: a round every OUT_PACE_NS for r->secs (no catch-up). */
static int om_outage(om_run *r, char *err)
{
    rl_stats st = RL_STATS_INIT;
    uint64_t next;

    r->t_stop = next = now_ns();
    while (now_ns() < r->t_stop + (uint64_t)(r->secs * 1e9)) {
        if (om_round(r, err))
            return -1;
        om_opens(r, &st);
        r->late += (unsigned long long)om_pace(&next);
    }
    rl_stats_get(r->lim, &r->b1);
    store_redis_stats_get(limiter_store(r->lim), &r->s1);
    return 0;
}

/* After the resumption: checks go on at the same pace until the breaker
 * closes (or OUT_CLOSE_WAIT_MS). */
static int om_resume(om_run *r, char *err)
{
    rl_result res = RL_RESULT_INIT;
    rl_stats st = RL_STATS_INIT;
    uint64_t next;

    r->t_cont = next = now_ns();
    r->t_open_resume = r->t_open_last;
    r->outage_s = (double)(r->t_cont - r->t_stop) / 1e9;
    for (;;) {
        for (int m = 0; m < 3; m++) {
            if (out_allow(r->lim, r->key, mode[m], &res, NULL, err))
                return -1;
            r->after++;
            r->after_degraded += (res.flags & DEGRADED) != 0;
        }
        if ((r->reopens += om_opens(r, &st)) && !r->t_reopen)
            r->t_reopen = r->t_open_last;
        if (!r->t_reconn) { /* when the store's connections came back */
            store_redis_stats_get(limiter_store(r->lim), &r->s2);
            if (r->s2.reconnects != r->s1.reconnects)
                r->t_reconn = now_ns();
        }
        if (st.breaker_state == RL_BREAKER_CLOSED) {
            r->t_close = now_ns();
            break;
        }
        if (now_ns() - r->t_cont > OUT_CLOSE_WAIT_MS * 1000000ULL)
            break;
        om_pace(&next);
    }
    rl_stats_get(r->lim, &r->b2);
    store_redis_stats_get(limiter_store(r->lim), &r->s2);
    return 0;
}

/* outage_admitted_<mode>: beside what the mode promises. */
static void om_emit_admitted(const options *o, const om_run *r, int m)
{
    int64_t w = OUT_WINDOW_S * 1000000000LL;
    long long windows =
        r->rt_first ? r->rt_last / w - r->rt_first / w + 1 : 0;
    const rl_stats *b0 = &r->b0, *b1 = &r->b1;
    const store_redis_stats *s0 = &r->s0, *s1 = &r->s1;
    static const char *const promised[3] = {
        "every_request", "none", "limit_over_fleet_x_windows"};
    double ref[3] = {(double)r->sent[0], 0,
                     (double)(OUT_LIMIT / OUT_FLEET) * (double)windows};
    char name[48];
    figure f = {.name = name, .value = (double)r->adm[m], .unit = "admitted",
                .nrefs = 1, .ref = {ref[m]}, .ref_name = {promised[m]}};

    snprintf(name, sizeof name, "outage_admitted_%s", mode[m]);
    xstr(&f, "failure_mode", mode[m]);
    xnum(&f, "checks", (double)r->sent[m]);
    xnum(&f, "decided_by_mode", (double)r->decided[m]);
    /* The same from rl_stats_get(): fail_open, fail_closed, fallback. */
    xnum(&f, "stats_decided_by_mode",
         m == 0   ? (double)(b1->fail_open - b0->fail_open)
         : m == 1 ? (double)(b1->fail_closed - b0->fail_closed)
                  : (double)(b1->fallback - b0->fallback));
    xnum(&f, "outage_s", r->outage_s);
    xnum(&f, "pace_ms", (double)OUT_PACE_NS / 1e6);
    xnum(&f, "late_ticks", (double)r->late);
    xnum(&f, "max_check_ms", (double)r->max_ns[m] / 1e6);
    xstr(&f, "algorithm", algo_names[2]);
    xnum(&f, "limit", OUT_LIMIT);
    xnum(&f, "window_s", OUT_WINDOW_S);
    xnum(&f, "fleet_size", OUT_FLEET);
    if (m == 2) {
        xnum(&f, "windows", (double)windows);
        xnum(&f, "pro_rata", (double)OUT_LIMIT / OUT_FLEET * r->secs /
                                 OUT_WINDOW_S);
    }
    xnum(&f, "breaker_opens", (double)(b1->breaker_opens - b0->breaker_opens));
    xnum(&f, "network_calls", (double)(s1->calls - s0->calls));
    xnum(&f, "timeouts", (double)(s1->timeouts - s0->timeouts));
    xnum(&f, "down_fails", (double)(s1->down_fails - s0->down_fails));
    xnum(&f, "reconnects", (double)(s1->reconnects - s0->reconnects));
    xstr(&f, "fault", "sigstop");
    emit(o, &f);
}

/* NAN when `from` (or `to`) never happened. */
static double ms_between(uint64_t from, uint64_t to)
{
    return from && to ? (double)(to - from) / 1e6 : NAN;
}

/* outage_time_to_close: beside breaker_cooldown_ms. */
static void om_emit_close(const options *o, const om_run *r)
{
    const rl_stats *b1 = &r->b1, *b2 = &r->b2;
    const store_redis_stats *s1 = &r->s1, *s2 = &r->s2;
    figure f = {.name = "outage_time_to_close",
                 .value = ms_between(r->t_cont, r->t_close), .unit = "ms",
                 .nrefs = 1, .ref = {OUT_COOLDOWN_MS},
                 .ref_name = {"cooldown_ms"}};

    xnum(&f, "timeout_ms", OUT_TIMEOUT_MS);
    xnum(&f, "breaker_failures", OUT_FAILURES);
    /* A probe goes at most a cooldown after the last opening, and takes at
     * most a timeout. */
    xnum(&f, "expected_max_ms", OUT_COOLDOWN_MS + OUT_TIMEOUT_MS +
                                    (double)OUT_PACE_NS / 1e6);
    xnum(&f, "open_for_ms_at_resume", ms_between(r->t_open_resume, r->t_cont));
    xnum(&f, "last_open_to_close_ms", ms_between(r->t_open_last, r->t_close));
    xnum(&f, "reopens_after_resume", (double)r->reopens);
    xnum(&f, "first_reopen_after_ms", ms_between(r->t_cont, r->t_reopen));
    /* The connections (torn down as stuck during a long outage) are back:
     * the first reconnect after the resumption. */
    xnum(&f, "reconnected_after_ms", ms_between(r->t_cont, r->t_reconn));
    xnum(&f, "checks_after_resume", (double)r->after);
    /* Decided by a failure mode (rl_stats_get(): fail_open + fail_closed +
     * fallback), and of them flagged in the result (RL_FLAG_FAIL_OPEN or
     * RL_FLAG_FALLBACK; "closed" has no flag). */
    xnum(&f, "degraded_after_resume",
         (double)(b2->fail_open - b1->fail_open + b2->fail_closed -
                  b1->fail_closed + b2->fallback - b1->fallback));
    xnum(&f, "flagged_after_resume", (double)r->after_degraded);
    xnum(&f, "network_calls_after_resume", (double)(s2->calls - s1->calls));
    xnum(&f, "down_fails_after_resume",
         (double)(s2->down_fails - s1->down_fails));
    xnum(&f, "reconnects_after_resume",
         (double)(s2->reconnects - s1->reconnects));
    xnum(&f, "breaker_closes",
         (double)(b2->breaker_closes - b1->breaker_closes));
    xstr(&f, "fault", "sigstop");
    emit(o, &f);
}

/* Figures 3 and 4: one limiter, one rule per failure mode (fixed window,
 * OUT_LIMIT per OUT_WINDOW_S, fleet OUT_FLEET), one thread checking each
 * rule every ms; Redis hangs for the outage, then resumes while the checks
 * go on and rl_stats_get() is polled until the breaker closes. */
static int out_modes(const options *o, char *bad, char *err)
{
    char r3[3][300], rules[1024], key[64], warm[64];
    om_run r = {.secs = o->quick ? OUT_SECONDS_QUICK : OUT_SECONDS,
                .key = key, .b0 = RL_STATS_INIT, .b1 = RL_STATS_INIT,
                .b2 = RL_STATS_INIT};
    int faulted = 0, rc = -1;

    for (int m = 0; m < 3; m++)
        out_rule(r3[m], sizeof r3[m], mode[m], 2, OUT_LIMIT, OUT_WINDOW_S,
                 mode[m]);
    snprintf(rules, sizeof rules, "{\"rules\":[%s,%s,%s]}", r3[0], r3[1],
             r3[2]);
    snprintf(warm, sizeof warm, "warm:%ld", (long)getpid());
    snprintf(key, sizeof key, "outage:%ld:%lld", (long)getpid(),
             (long long)(rt_ns() / 1000000));
    if (out_limiter(o, 1, rules, OUT_COOLDOWN_MS, &r.lim, err) ||
        out_healthy(r.lim, warm, mode, 3, 20, err))
        goto out;
    rl_stats_get(r.lim, &r.b0);
    store_redis_stats_get(limiter_store(r.lim), &r.s0);
    r.opens_seen = r.b0.breaker_opens;
    if (rh_pause(&srv) != 0)
        goto out;
    faulted = 1;
    if (om_outage(&r, err))
        goto out;
    faulted = 0;
    if (rh_resume(&srv) != 0 || om_resume(&r, err))
        goto out;
    for (int m = 0; m < 3; m++)
        om_emit_admitted(o, &r, m);
    om_emit_close(o, &r);
    if (r.t_close == 0 && !bad[0])
        snprintf(bad, ERRLEN, "outage: the breaker did not close within "
                 "%d ms of the server's resumption", OUT_CLOSE_WAIT_MS);
    rc = 0;
out:
    if (faulted)
        rh_resume(&srv);
    rl_limiter_free(r.lim);
    return rc;
}

/* On a server of its own, so that it may hang it: o's port and the control
 * connection ctl are that server's while the group runs. */
int group_outage(const options *o, char *err)
{
    char bad[ERRLEN] = "";
    redisContext *main_ctl = ctl;
    options own = *o;
    int rc = -1;

    if (!rh_available() || rh_start(&srv, NULL) != 0)
        return snprintf(err, ERRLEN, "outage: cannot start redis-server"), -1;
    own.port = srv.port;
    if ((ctl = rh_connect(&srv)) == NULL)
        snprintf(err, ERRLEN, "outage: cannot connect to its server");
    else if (out_open(&own, bad, err) == 0 && ctl_ok(err, "PING") == 0 &&
             out_modes(&own, bad, err) == 0)
        rc = bad[0] ? (memcpy(err, bad, ERRLEN), -1) : 0;
    if (ctl)
        redisFree(ctl);
    ctl = main_ctl;
    rh_stop(&srv);
    return rc;
}
