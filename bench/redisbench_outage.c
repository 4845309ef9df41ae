/*
 * redisbench_outage.c -- group 6 of redisbench: the circuit breaker
 * against a hung server (breaker-open latency, probes, admissions per
 * failure mode, time to close).  The server is a private one the test
 * harness starts (tests/redis_harness.c), hung by SIGSTOP (rh_pause: the
 * kernel still accepts connections, nothing answers) and resumed by
 * SIGCONT (rh_resume) on every way out.  Method: docs/BENCHMARKS.md,
 * "How each bench measures".
 */
#include "redisbench.h"
#include "redis_harness.h"

static rh_server srv; /* the server this group hangs */
static const char *const mode[3] = {"open", "closed", "fallback"};

/* The counters at one moment: the limiter's, its Redis store's. */
typedef struct snap {
    rl_stats b;
    store_redis_stats s;
} snap;

#define DB(a, z, f) ((double)((z).b.f - (a).b.f)) /* rl_stats: z - a  */
#define DS(a, z, f) ((double)((z).s.f - (a).s.f)) /* store stats     */

static void snap_take(rl_limiter *lim, snap *s)
{
    s->b = (rl_stats)RL_STATS_INIT;
    rl_stats_get(lim, &s->b);
    store_redis_stats_get(limiter_store(lim), &s->s);
}

/* A limiter on the hung server (redis) or the memory store: timeout
 * OUT_TIMEOUT_MS, breaker after OUT_FAILURES, fleet OUT_FLEET, and n rules
 * id[i] in failure mode fm[i], each `algo`, limit per window_s. */
static rl_limiter *out_limiter(const options *o, int redis, int n,
                               const char *const *id, const char *const *fm,
                               int algo, long long limit, long long window_s,
                               long long cooldown_ms, char *err)
{
    char uri[64] = "memory://", c[24], rules[1024];
    size_t k = 0;

    for (int i = 0; i < n; i++)
        k += (size_t)snprintf(rules + k, sizeof rules - k,
                              "%s{\"rule_id\":\"%s\",\"dimension\":\"user\","
                              "\"limit\":%lld,\"window_seconds\":%lld,"
                              "\"algorithm\":\"%s\",\"failure_mode\":\"%s\"}%s",
                              i ? "," : "[", id[i], limit, window_s,
                              algo_names[algo], fm[i], i + 1 < n ? "" : "]");
    if (redis)
        snprintf(uri, sizeof uri, "redis://127.0.0.1:%d", o->port);
    snprintf(c, sizeof c, "%lld", cooldown_ms);
    return bench_limiter(
        (const char *const[]){"store", uri, "rules", rules,
                              "timeout_ms", BENCH_STR(OUT_TIMEOUT_MS),
                              "breaker_failures", BENCH_STR(OUT_FAILURES),
                              "breaker_cooldown_ms", c,
                              "fleet_size", BENCH_STR(OUT_FLEET), NULL},
        err);
}

/* rl_allow(), timed (ns may be NULL); -1 (err set) when it fails. */
static int out_allow(rl_limiter *lim, const char *key, const char *rule,
                     rl_result *res, uint64_t *ns, char *err)
{
    uint64_t t0 = now_ns();
    int rc = rl_allow(lim, key, rule, 1, res);

    if (ns)
        *ns = now_ns() - t0;
    if (rc != RL_OK)
        set_err(err, "rl_allow", rc, errtext(lim));
    return rc != RL_OK ? -1 : 0;
}

/* How long the checks before the fault may take to come out healthy: one
 * that outlived OUT_TIMEOUT_MS on a busy machine is degraded, and the count
 * starts again until this deadline. */
#define OUT_HEALTHY_WAIT_MS 10000

/* Checks while Redis answers, until `rounds` rounds in a row came back
 * undegraded (or OUT_HEALTHY_WAIT_MS passed); then the breaker closed. */
static int out_healthy(rl_limiter *lim, const char *key,
                       const char *const *rule, int nrules, int rounds,
                       char *err)
{
    uint64_t end = now_ns() + OUT_HEALTHY_WAIT_MS * 1000000ULL;
    rl_result res = RL_RESULT_INIT;
    snap s;

    for (int ok = 0; ok < rounds * nrules;) {
        if (now_ns() > end)
            return snprintf(err, ERRLEN, "outage: checks before the fault "
                            "still degraded (flags 0x%x) after %d ms: Redis "
                            "is not answering", res.flags,
                            OUT_HEALTHY_WAIT_MS), -1;
        if (out_allow(lim, key, rule[ok % nrules], &res, NULL, err))
            return -1;
        ok = res.flags & DEGRADED ? 0 : ok + 1;
    }
    snap_take(lim, &s);
    if (s.b.breaker_state != RL_BREAKER_CLOSED)
        return snprintf(err, ERRLEN, "outage: breaker state %d before the "
                        "fault", s.b.breaker_state), -1;
    return 0;
}

/* The server hung while during(arg) runs, resumed however it ends: 0, or
 * -1 when a step fails. */
static int out_hang(int (*during)(void *, char *), void *arg, char *err)
{
    int rc;

    if (rh_pause(&srv) != 0)
        return snprintf(err, ERRLEN, "outage: cannot stop the server"), -1;
    rc = during(arg, err);
    if (rh_resume(&srv) != 0 && rc == 0)
        rc = (snprintf(err, ERRLEN, "outage: cannot resume the server"), -1);
    return rc;
}

/* ---- figures 1 and 2: the breaker open ------------------------------------ */

/* The Redis limiter ([0]) and the memory store's ([1]), the keys, the
 * latencies with the breaker open ([0]) and of the memory store ([1]); the
 * counters before the fault, when the breaker opened and after. */
typedef struct oo_run {
    rl_limiter *lim[2];
    char keys[OUT_NKEYS][24];
    hist h[2];
    snap s[3];
    unsigned long long n, not_fb;
    double pmax, pmin, psum;
    int probes; /* the checks until the breaker opened */
} oo_run;

/* Checks with Redis stopped until the breaker opens (at most 4 K), then
 * OUT_WARM checks and r->n timed, in alternating blocks of OUT_BLOCK on
 * the open breaker and on the memory store. */
static int oo_during(void *arg, char *err)
{
    oo_run *r = arg;
    rl_result res = RL_RESULT_INIT;
    uint64_t ns;

    do {
        if (r->probes == 4 * OUT_FAILURES)
            return snprintf(err, ERRLEN, "outage: the breaker is not open "
                            "after %d failed checks (breaker_failures %d)",
                            r->probes, OUT_FAILURES), -1;
        if (out_allow(r->lim[0], r->keys[r->probes], "oo", &res, &ns, err))
            return -1;
        r->pmax = fmax(r->pmax, (double)ns / 1e6);
        r->pmin = fmin(r->pmin, (double)ns / 1e6);
        r->psum += (double)ns / 1e6;
        r->probes++;
        snap_take(r->lim[0], &r->s[1]);
    } while (r->s[1].b.breaker_state != RL_BREAKER_OPEN);
    for (int pass = 0; pass < 2; pass++) {
        unsigned long long total = pass ? r->n : OUT_WARM;
        for (unsigned long long b = 0; b < total; b += OUT_BLOCK)
            for (int side = 0; side < 2; side++)
                for (unsigned long long i = b; i < b + OUT_BLOCK && i < total;
                     i++) {
                    if (out_allow(r->lim[side], r->keys[i % OUT_NKEYS], "oo",
                                  &res, &ns, err))
                        return -1;
                    if (pass)
                        hist_add(&r->h[side], ns);
                    r->not_fb += !side && !(res.flags & RL_FLAG_FALLBACK);
                }
    }
    snap_take(r->lim[0], &r->s[2]);
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

static void oo_emit(const options *o, const oo_run *r)
{
    const snap *s = r->s;
    figure f = oo_pct(r->h, "outage_breaker_open_p50", 0.50);

    XLIST(&f, XN("samples", r->h[0].n), XN("ref_samples", r->h[1].n));
    emit(o, &f);
    f = oo_pct(r->h, "outage_breaker_open_p99", 0.99);
    XLIST(&f, XN("target_max_us", OUT_TARGET_P99_US),
          XN("p999_us", hist_pct(&r->h[0], 0.999) / 1000.0),
          XN("ref_p999_us", hist_pct(&r->h[1], 0.999) / 1000.0),
          XN("checks", r->n), XN("warmup_checks", OUT_WARM),
          XN("network_calls", DS(s[1], s[2], calls)),
          XN("network_calls_max", 0), XN("writes", DS(s[1], s[2], writes)),
          XN("store_errors", DB(s[1], s[2], store_errors)),
          XN("not_fallback", r->not_fb),
          XN("breaker_state_after", s[2].b.breaker_state),
          XN("breaker_opens", DB(s[0], s[2], breaker_opens)),
          XS("failure_mode", "fallback"), XN("fleet_size", OUT_FLEET),
          XN("cooldown_ms", OUT_OPEN_COOLDOWN_MS), XN("keys", OUT_NKEYS),
          XS("fault", "sigstop"));
    emit(o, &f);
    f = (figure){.name = "outage_probe_max_latency", .value = r->pmax,
                 .unit = "ms", .nrefs = 1, .ref = {OUT_TIMEOUT_MS},
                 .ref_name = {"timeout_ms"}};
    XLIST(&f, XN("checks_to_open", r->probes),
          XN("breaker_failures", OUT_FAILURES), XN("min_ms", r->pmin),
          XN("mean_ms", r->psum / r->probes),
          XN("timeouts", DS(s[0], s[1], timeouts)),
          XN("network_calls", DS(s[0], s[1], calls)),
          XN("down_fails", DS(s[0], s[1], down_fails)),
          XS("fault", "sigstop"));
    emit(o, &f);
}

/* Figures 1 and 2: Redis stopped, the K checks that time out until the
 * breaker opens, then checks with it open beside a memory-store limiter
 * with the same rule (cooldown 60 s: no probe meanwhile). */
static int out_open(const options *o, char *bad, char *err)
{
    static const char *const id[1] = {"oo"}, *const fm[1] = {"fallback"};
    static oo_run r;
    int rc = -1;

    r = (oo_run){.n = o->quick ? OUT_CHECKS_QUICK : OUT_CHECKS,
                 .pmin = INFINITY};
    for (int i = 0; i < OUT_NKEYS; i++)
        snprintf(r.keys[i], sizeof r.keys[i], "user:%d", i);
    for (int i = 0; i < 2; i++)
        if (!(r.lim[i] = out_limiter(o, !i, 1, id, fm, 0, BIG_LIMIT,
                                     BIG_WINDOW_S, OUT_OPEN_COOLDOWN_MS, err)))
            goto out;
    if (out_healthy(r.lim[0], r.keys[0], id, 1, 1000, err))
        goto out;
    snap_take(r.lim[0], &r.s[0]);
    if (out_hang(oo_during, &r, err))
        goto out;
    oo_emit(o, &r);
    if (r.s[2].s.calls != r.s[1].s.calls && !bad[0])
        snprintf(bad, ERRLEN, "outage: %.0f network calls with the breaker "
                 "open (must be 0)", DS(r.s[1], r.s[2], calls));
    if (r.s[2].b.breaker_state != RL_BREAKER_OPEN && !bad[0])
        snprintf(bad, ERRLEN, "outage: the breaker left OPEN (state %d) "
                 "during the measurement", r.s[2].b.breaker_state);
    rc = 0;
out:
    rl_limiter_free(r.lim[0]);
    rl_limiter_free(r.lim[1]);
    return rc;
}

/* ---- figures 3 and 4: the failure modes and the breaker closing ------------ */

/* Per mode, checks sent, admitted, decided by the mode and the slowest;
 * the counters before the fault, at the resumption and when the breaker
 * closed; the times (monotonic ns) of the fault, the resumption, the
 * breaker's last opening, the one at the resumption, the first reopening,
 * the first reconnection and the closing. */
typedef struct om_run {
    rl_limiter *lim;
    const char *key;
    double secs, outage_s;
    snap s[3];
    unsigned long long sent[3], adm[3], decided[3], late, after, flagged,
        reopens;
    uint64_t max_ns[3], t_stop, t_cont, t_open, t_open_resume, t_reopen,
        t_reconn, t_close, opens_seen;
    int64_t rt_first, rt_last; /* CLOCK_REALTIME of the fallback checks */
} om_run;

/* One check per mode, counted as the outage's or (after) the resumed
 * server's. */
static int om_round(om_run *r, int after, char *err)
{
    rl_result res = RL_RESULT_INIT;
    uint64_t ns;

    for (int m = 0; m < 3; m++) {
        int64_t rt = rt_ns();
        if (out_allow(r->lim, r->key, mode[m], &res, &ns, err))
            return -1;
        if (after) {
            r->after++;
            r->flagged += (res.flags & DEGRADED) != 0;
            continue;
        }
        r->sent[m]++;
        r->adm[m] += res.allowed != 0;
        r->max_ns[m] = ns > r->max_ns[m] ? ns : r->max_ns[m];
        r->decided[m] += m == 0   ? (res.flags & RL_FLAG_FAIL_OPEN) != 0
                         : m == 1 ? !res.allowed
                                  : (res.flags & RL_FLAG_FALLBACK) != 0;
        r->rt_first = m == 2 && !r->rt_first ? rt : r->rt_first;
        r->rt_last = m == 2 ? rt : r->rt_last;
    }
    return 0;
}

/* Rounds every OUT_PACE_NS (a round that outlasts it gets no catch-up):
 * through the outage for r->secs, or (after) on the resumed server until
 * the breaker closes (or OUT_CLOSE_WAIT_MS); the breaker's openings (the
 * last one's time in r->t_open) and the store's reconnection followed. */
static int om_loop(om_run *r, int after, char *err)
{
    uint64_t t0 = now_ns(), next = t0, now;
    snap st;

    *(after ? &r->t_cont : &r->t_stop) = t0;
    r->t_open_resume = r->t_open;
    r->outage_s = (double)(t0 - r->t_stop) / 1e9;
    while (after || now_ns() < t0 + (uint64_t)(r->secs * 1e9)) {
        if (om_round(r, after, err))
            return -1;
        snap_take(r->lim, &st);
        now = now_ns();
        if (st.b.breaker_opens != r->opens_seen) {
            r->reopens += after ? st.b.breaker_opens - r->opens_seen : 0;
            r->t_reopen = after && !r->t_reopen ? now : r->t_reopen;
            r->opens_seen = st.b.breaker_opens;
            r->t_open = now;
        }
        if (after && !r->t_reconn && st.s.reconnects != r->s[1].s.reconnects)
            r->t_reconn = now; /* the store's connections came back */
        if (after && st.b.breaker_state == RL_BREAKER_CLOSED) {
            r->t_close = now;
            break;
        }
        if (after && now - t0 > OUT_CLOSE_WAIT_MS * 1000000ULL)
            break;
        next += OUT_PACE_NS;
        if (next < now_ns())
            r->late += !after, next = now_ns();
        else
            sleep_until(CLOCK_MONOTONIC, (int64_t)next);
    }
    snap_take(r->lim, &r->s[1 + after]);
    return 0;
}

static int om_outage(void *arg, char *err)
{
    return om_loop(arg, 0, err);
}

/* outage_admitted_<mode>: beside what the mode promises. */
static void om_emit_admitted(const options *o, const om_run *r, int m)
{
    int64_t w = OUT_WINDOW_S * 1000000000LL;
    double windows =
        r->rt_first ? (double)(r->rt_last / w - r->rt_first / w + 1) : 0;
    const snap *s = r->s;
    static const char *const promised[3] = {
        "every_request", "none", "limit_over_fleet_x_windows"};
    double ref[3] = {(double)r->sent[0], 0,
                     (double)(OUT_LIMIT / OUT_FLEET) * windows};
    double by_stats[3] = {DB(s[0], s[1], fail_open),
                          DB(s[0], s[1], fail_closed),
                          DB(s[0], s[1], fallback)};
    char name[48];
    figure f = {.name = name, .value = (double)r->adm[m], .unit = "admitted",
                .nrefs = 1, .ref = {ref[m]}, .ref_name = {promised[m]}};

    snprintf(name, sizeof name, "outage_admitted_%s", mode[m]);
    XLIST(&f, XS("failure_mode", mode[m]), XN("checks", r->sent[m]),
          XN("decided_by_mode", r->decided[m]),
          XN("stats_decided_by_mode", by_stats[m]),
          XN("outage_s", r->outage_s), XN("pace_ms", OUT_PACE_NS / 1e6),
          XN("late_ticks", r->late), XN("max_check_ms", r->max_ns[m] / 1e6),
          XS("algorithm", algo_names[2]), XN("limit", OUT_LIMIT),
          XN("window_s", OUT_WINDOW_S), XN("fleet_size", OUT_FLEET));
    if (m == 2)
        XLIST(&f, XN("windows", windows),
              XN("pro_rata", (double)OUT_LIMIT / OUT_FLEET * r->secs /
                                 OUT_WINDOW_S));
    XLIST(&f, XN("breaker_opens", DB(s[0], s[1], breaker_opens)),
          XN("network_calls", DS(s[0], s[1], calls)),
          XN("timeouts", DS(s[0], s[1], timeouts)),
          XN("down_fails", DS(s[0], s[1], down_fails)),
          XN("reconnects", DS(s[0], s[1], reconnects)),
          XS("fault", "sigstop"));
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
    const snap *s = r->s;
    figure f = {.name = "outage_time_to_close",
                .value = ms_between(r->t_cont, r->t_close), .unit = "ms",
                .nrefs = 1, .ref = {OUT_COOLDOWN_MS},
                .ref_name = {"cooldown_ms"}};

    XLIST(&f, XN("timeout_ms", OUT_TIMEOUT_MS),
          XN("breaker_failures", OUT_FAILURES),
          XN("expected_max_ms",
             OUT_COOLDOWN_MS + OUT_TIMEOUT_MS + OUT_PACE_NS / 1e6),
          XN("open_for_ms_at_resume", ms_between(r->t_open_resume, r->t_cont)),
          XN("last_open_to_close_ms", ms_between(r->t_open, r->t_close)),
          XN("reopens_after_resume", r->reopens),
          XN("first_reopen_after_ms", ms_between(r->t_cont, r->t_reopen)),
          XN("reconnected_after_ms", ms_between(r->t_cont, r->t_reconn)),
          XN("checks_after_resume", r->after),
          XN("degraded_after_resume",
             DB(s[1], s[2], fail_open) + DB(s[1], s[2], fail_closed) +
                 DB(s[1], s[2], fallback)),
          XN("flagged_after_resume", r->flagged),
          XN("network_calls_after_resume", DS(s[1], s[2], calls)),
          XN("down_fails_after_resume", DS(s[1], s[2], down_fails)),
          XN("reconnects_after_resume", DS(s[1], s[2], reconnects)),
          XN("breaker_closes", DB(s[1], s[2], breaker_closes)),
          XS("fault", "sigstop"));
    emit(o, &f);
}

/* Figures 3 and 4: one limiter, one fixed-window rule per failure mode,
 * one thread checking each rule every ms through the outage, then on
 * while the breaker closes. */
static int out_modes(const options *o, char *bad, char *err)
{
    char key[64], warm[64];
    om_run r = {.secs = o->quick ? OUT_SECONDS_QUICK : OUT_SECONDS,
                .key = key};
    int rc = -1;

    snprintf(warm, sizeof warm, "warm:%ld", (long)getpid());
    snprintf(key, sizeof key, "outage:%ld:%lld", (long)getpid(),
             (long long)(rt_ns() / 1000000));
    if (!(r.lim = out_limiter(o, 1, 3, mode, mode, 2, OUT_LIMIT,
                              OUT_WINDOW_S, OUT_COOLDOWN_MS, err)) ||
        out_healthy(r.lim, warm, mode, 3, 20, err))
        goto out;
    snap_take(r.lim, &r.s[0]);
    r.opens_seen = r.s[0].b.breaker_opens;
    if (out_hang(om_outage, &r, err) || om_loop(&r, 1, err))
        goto out;
    for (int m = 0; m < 3; m++)
        om_emit_admitted(o, &r, m);
    om_emit_close(o, &r);
    if (r.t_close == 0 && !bad[0])
        snprintf(bad, ERRLEN, "outage: the breaker did not close within "
                 "%d ms of the server's resumption", OUT_CLOSE_WAIT_MS);
    rc = 0;
out:
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
