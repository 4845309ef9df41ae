/*
 * denybench.c -- redisbench deny: Redis calls per check with the deny
 * cache and with leases, each beside the same run without.  Method:
 * docs/BENCHMARKS.md, "How each bench measures".
 */

#include "serverbench.h"

#define OFF 0 /* deny_cache=0, or no lease: the reference */
#define ON 1
#define FLEET_MAX 64
/* An answer Redis did not give: the rule's failure mode's. */
#define DEGRADED (RL_FLAG_FAIL_OPEN | RL_FLAG_FALLBACK | RL_FLAG_FAIL_CLOSED)

typedef struct options {
    unsigned long long seconds, limit;
    int json, quick;
    unsigned long long fleet, lease, partner;
} options;

/* A run's counts; `cached`: checks with the deny cache's (or the lease's)
 * flag. */
typedef struct run {
    unsigned long long checks, admitted, cached, calls, degraded;
    double secs;
} run;

static const bench_opt opts[] = {
    BENCH_OPT_JSON_ROW(options),
    BENCH_OPT_QUICK_ROW(options),
    {"--seconds", BENCH_OPT_COUNT, OPT_AT(seconds), 1, 1e6, 5, 2, NULL,
     "each run's length"},
    {"--limit", BENCH_OPT_COUNT, OPT_AT(limit), 1, 1e12, 600, 600, NULL,
     "the client's tokens a minute"},
    {"--fleet", BENCH_OPT_COUNT, OPT_AT(fleet), 1, FLEET_MAX, 8, 8, NULL,
     "limiters sharing the leased rule"},
    {"--lease", BENCH_OPT_COUNT, OPT_AT(lease), 2, 1e12, 1000, 1000, NULL,
     "units per lease (at most --partner / 2)"},
    {"--partner", BENCH_OPT_COUNT, OPT_AT(partner), 4, 1e12, 1000000,
     1000000, NULL, "the leased rule's limit a minute"},
};

static const bench_opts table = {
    .rows = opts, .n = sizeof opts / sizeof opts[0],
    .prog = "redisbench deny",
    .about = "Redis calls per check: deny cache and leases, on beside off."};

static const text_layout layout = {30, 12, 4, 10, 22, 4};

/* The script's calls so far (INFO commandstats: EVALSHA and FCALL, and
 * with leases EVAL too); below 0: unknown. */
static double script_calls(const rh_server *srv, int lease)
{
    return (double)(rh_cmdstat_calls(srv, "evalsha") +
                    rh_cmdstat_calls(srv, "fcall") +
                    (lease ? rh_cmdstat_calls(srv, "eval") : 0));
}

/* The abusive client's token bucket of --limit a minute (deny_cache off
 * unless on), or with lease the partner's fixed window of --partner a
 * minute (with "lease" when on). */
static rl_limiter *make_limiter(const char *uri, const options *o,
                                int lease, int on, char *err)
{
    char rules[256], lz[48] = "";

    if (lease && on)
        snprintf(lz, sizeof lz, ",\"lease\":%llu", o->lease);
    snprintf(rules, sizeof rules,
             "[{\"rule_id\":\"%s\",\"dimension\":\"user\",\"algorithm\":"
             "\"%s\",\"limit\":%llu,\"window_seconds\":60%s}]",
             lease ? "partner" : "abuse",
             lease ? "fixed_window" : "token_bucket",
             lease ? o->partner : o->limit, lz);
    return bench_limiter((const char *const[]){"store", uri, "rules", rules,
                                               "timeout_ms", "1000",
                                               "deny_cache",
                                               lease || on ? NULL : "0",
                                               NULL},
                         err);
}

/* One limiter of the run: the client's checks at full speed until end. */
typedef struct member {
    bench_status st; /* first: bench_threads() reads it */
    rl_limiter *lim;
    rl_request req;
    uint64_t end;
    int flag;        /* what r.cached counts */
    run r;
} member;

static void *member_checks(void *arg)
{
    member *m = arg;
    rl_result res = RL_RESULT_INIT;

    while (now_ns() < m->end && m->st.rc == RL_OK)
        for (int i = 0; i < 64 && m->st.rc == RL_OK; i++) {
            if ((m->st.rc = rl_check(m->lim, &m->req, &res)) != RL_OK)
                set_err(m->st.err, "rl_check", m->st.rc, errtext(m->lim));
            m->r.checks++;
            m->r.admitted += res.allowed != 0;
            m->r.cached += (res.flags & m->flag) != 0;
            m->r.degraded += (res.flags & DEGRADED) != 0;
        }
    return NULL;
}

/* The deny cache's run (one client, its tokens spent first) or the
 * leases' (--fleet limiters at once, threads of this one process), on or
 * off, for --seconds: its counts in out. */
static int fleet_run(const sb_env *env, const options *o, int lease, int on,
                     run *out, char *err)
{
    static const char *const users[2][2] = {{"abuser-off", "abuser-on"},
                                            {"partner-off", "partner-on"}};
    static member m[FLEET_MAX];
    size_t n = lease ? o->fleet : 1, k;
    rl_result res = RL_RESULT_INIT;
    double before;
    uint64_t t0;
    int rc = 0;

    for (k = 0; k < n && rc == 0; k++) {
        m[k] = (member){.flag = lease ? RL_FLAG_LEASED : RL_FLAG_CACHED,
                        .req = RL_REQUEST_INIT};
        m[k].req.user = users[lease][on];
        m[k].req.cost = 1;
        rc = (m[k].lim = make_limiter(env->uri, o, lease, on, err)) ? 0 : -1;
    }
    res.allowed = !lease; /* the deny cache's client spends its bucket */
    while (rc == 0 && res.allowed)
        if ((rc = rl_check(m[0].lim, &m[0].req, &res)) != RL_OK)
            set_err(err, "rl_check", rc, errtext(m[0].lim));
    before = script_calls(&env->srv, lease);
    t0 = now_ns();
    for (size_t i = 0; i < n; i++)
        m[i].end = t0 + o->seconds * 1000000000ULL;
    if (rc == 0)
        rc = bench_threads(m, sizeof m[0], (int)n, member_checks, table.prog,
                           err);
    *out = (run){.secs = (double)(now_ns() - t0) / 1e9,
                 .calls = (unsigned long long)(script_calls(&env->srv, lease) -
                                               before)};
    for (size_t i = 0; i < k; i++) {
        out->checks += m[i].r.checks;
        out->admitted += m[i].r.admitted;
        out->cached += m[i].r.cached;
        out->degraded += m[i].r.degraded;
        rl_limiter_free(m[i].lim);
    }
    return rc || before < 0 ? -1 : 0;
}

/* <what>_redis_calls_per_check and <what>_checks_per_s, on beside off
 * (named ref); `cached`: what r[].cached counts. */
static void report_calls(const options *o, const char *what, const run r[2],
                         const char *ref, const char *cached)
{
    char name[2][48];
    figure f = {.name = name[0], .unit = "calls", .nrefs = 1,
                .value = (double)r[ON].calls / (double)r[ON].checks,
                .ref = {(double)r[OFF].calls / (double)r[OFF].checks},
                .ref_name = {ref}};

    snprintf(name[0], sizeof name[0], "%s_redis_calls_per_check", what);
    snprintf(name[1], sizeof name[1], "%s_checks_per_s", what);
    XLIST(&f, XN("target", 0.01),
          XN("calls_per_million_checks", 1e6 * f.value),
          XN("calls_per_admitted",
             (double)r[ON].calls / (double)(r[ON].admitted + !r[ON].admitted)),
          XN("checks", r[ON].checks), XN("calls", r[ON].calls),
          XN(cached, r[ON].cached), XN("admitted", r[ON].admitted),
          XN("checks_ref", r[OFF].checks), XN("calls_ref", r[OFF].calls),
          XN("admitted_ref", r[OFF].admitted));
    emit_figure(&f, o->json, &layout);
    f = (figure){.name = name[1], .unit = "checks/s", .nrefs = 1,
                 .value = (double)r[ON].checks / r[ON].secs,
                 .ref = {(double)r[OFF].checks / r[OFF].secs},
                 .ref_name = {ref}};
    emit_figure(&f, o->json, &layout);
}

/* deny_admitted beside deny_cache=0; lease_admitted beside the limit and
 * the bound below it, fleet x (lease - 1) held unspent (a fixed window:
 * never above the limit but by the answers Redis did not give). */
static void report(const options *o, int lease, const run r[2])
{
    double held = (double)o->fleet * (double)(o->lease - 1);
    figure f = {.name = "deny_admitted", .value = (double)r[ON].admitted,
                .unit = "requests", .nrefs = 1,
                .ref = {(double)r[OFF].admitted},
                .ref_name = {"deny_cache=0"}};

    if (!lease) {
        if (!o->json)
            print_columns(&layout);
        report_calls(o, "deny", r, "deny_cache=0", "cached");
        XLIST(&f, XN("expected", (double)o->limit * (double)o->seconds / 60));
        emit_figure(&f, o->json, &layout);
        return;
    }
    f = (figure){.name = "lease_admitted", .value = (double)r[ON].admitted,
                 .unit = "requests", .nrefs = 2,
                 .ref = {(double)o->partner, (double)o->partner - held},
                 .ref_name = {"the limit", "limit - fleet*(lease-1)"}};
    report_calls(o, "lease", r, "no lease", "leased");
    XLIST(&f, XN("fleet", o->fleet), XN("lease", o->lease),
          XN("bound_over", 0), XN("degraded", r[ON].degraded),
          XN("bound_under", held), XN("admitted_ref", r[OFF].admitted));
    emit_figure(&f, o->json, &layout);
}

/* Both lease runs inside one minute's window: wait for the next minute
 * when fewer seconds than they need are left in this one. */
static void lease_window(const options *o)
{
    struct timespec ts;
    long long need = 2 * (long long)o->seconds + 4, left;

    clock_gettime(CLOCK_REALTIME, &ts);
    left = 60 - ts.tv_sec % 60;
    if (need < 60 && left < need)
        usleep((useconds_t)(left * 1000000 - ts.tv_nsec / 1000 + 100000));
}

int deny_main(int argc, char **argv, sb_env *env)
{
    options o = {0};
    run r[2];
    char err[ERRLEN] = "";
    int rc = bench_opt_args(argc, argv, &table, &o);

    if (rc)
        return rc == 1 ? 0 : rc;
    if (o.lease > o.partner / 2) {
        fprintf(stderr, "redisbench deny: --lease above --partner / 2\n");
        return 2;
    }
    bench_params(&table, &o, o.json);
    for (int lease = 0; lease <= 1 && rc == 0; lease++) {
        if (lease)
            lease_window(&o);
        for (int on = OFF; on <= ON && rc == 0; on++)
            rc = fleet_run(env, &o, lease, on, &r[on], err) != 0;
        if (rc == 0)
            report(&o, lease, r);
    }
    if (rc)
        fprintf(stderr, "redisbench deny: %s\n", err);
    return rc;
}
