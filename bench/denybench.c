/*
 * denybench.c -- redisbench deny: Redis calls per check with the deny
 * cache and with leases, each beside the same run without.  Method:
 * docs/BENCHMARKS.md, "How each bench measures".
 */
#include <time.h>

#include "serverbench.h"

#define OFF 0 /* deny_cache=0: the reference */
#define ON 1  /* the default                 */

typedef struct options {
    unsigned long long seconds, limit;
    int json, quick;
    unsigned long long fleet, lease, partner;
} options;

#define FLEET_MAX 64

typedef struct run {
    unsigned long long checks, admitted, cached, calls;
    unsigned long long degraded; /* answers of the failure mode (leases) */
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

static int parse_args(int argc, char **argv, options *o)
{
    int rc;

    *o = (options){0};
    if ((rc = bench_opt_args(argc, argv, &table, o)) != 0)
        return rc;
    if (o->lease > o->partner / 2) {
        fprintf(stderr, "redisbench deny: --lease above --partner / 2\n");
        return 2;
    }
    return 0;
}

/* Calls of the command `cmd` so far (INFO commandstats); -1: unknown. */
static double calls_of(const rh_server *srv, const char *cmd)
{
    return (double)rh_cmdstat_calls(srv, cmd);
}

static double evalsha_calls(const rh_server *srv)
{
    return calls_of(srv, "evalsha") + calls_of(srv, "fcall");
}

static rl_limiter *make_limiter(const char *uri, const options *o, int on,
                                char *err)
{
    char rules[256];

    snprintf(rules, sizeof rules,
             "[{\"rule_id\":\"abuse\",\"dimension\":\"user\","
             "\"algorithm\":\"token_bucket\",\"limit\":%llu,"
             "\"window_seconds\":60}]", o->limit);
    return bench_limiter((const char *const[]){"store", uri, "rules", rules,
                                               "timeout_ms", "1000",
                                               "deny_cache", on ? NULL : "0",
                                               NULL},
                         err);
}

/* The client's tokens spent, then --seconds of checks at full speed. */
static int abuse(rl_limiter *lim, const rh_server *srv, const options *o,
                 const char *user, run *out, char *err)
{
    rl_request req = RL_REQUEST_INIT;
    rl_result res = RL_RESULT_INIT;
    uint64_t t0, end;
    double before;
    int rc;

    req.user = user;
    req.cost = 1;
    *out = (run){0};
    do { /* spend the bucket */
        if ((rc = rl_check(lim, &req, &res)) != RL_OK) {
            set_err(err, "rl_check", rc, errtext(lim));
            return -1;
        }
    } while (res.allowed);
    before = evalsha_calls(srv);
    t0 = now_ns();
    end = t0 + o->seconds * 1000000000ULL;
    while (now_ns() < end) {
        for (int i = 0; i < 64; i++) {
            if ((rc = rl_check(lim, &req, &res)) != RL_OK) {
                set_err(err, "rl_check", rc, errtext(lim));
                return -1;
            }
            out->checks++;
            out->admitted += res.allowed != 0;
            out->cached += (res.flags & RL_FLAG_CACHED) != 0;
        }
    }
    out->secs = (double)(now_ns() - t0) / 1e9;
    out->calls = (unsigned long long)(evalsha_calls(srv) - before);
    return before < 0 ? -1 : 0;
}

static const text_layout layout = {30, 12, 4, 10, 22, 4};

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
    xnum(&f, "target", 0.01);
    xnum(&f, "calls_per_million_checks", 1e6 * f.value);
    /* once a limit is spent the rest are denials the deny cache answers:
     * the calls over the admitted checks alone, too */
    xnum(&f, "calls_per_admitted",
         (double)r[ON].calls / (double)(r[ON].admitted ? r[ON].admitted : 1));
    xnum(&f, "checks", (double)r[ON].checks);
    xnum(&f, "calls", (double)r[ON].calls);
    xnum(&f, cached, (double)r[ON].cached);
    xnum(&f, "admitted", (double)r[ON].admitted);
    xnum(&f, "checks_ref", (double)r[OFF].checks);
    xnum(&f, "calls_ref", (double)r[OFF].calls);
    xnum(&f, "admitted_ref", (double)r[OFF].admitted);
    emit_figure(&f, o->json, &layout);
    f = (figure){.name = name[1], .unit = "checks/s", .nrefs = 1,
                 .value = (double)r[ON].checks / r[ON].secs,
                 .ref = {(double)r[OFF].checks / r[OFF].secs},
                 .ref_name = {ref}};
    emit_figure(&f, o->json, &layout);
}

static void report(const options *o, const run r[2])
{
    figure f = {.name = "deny_admitted", .value = (double)r[ON].admitted,
                .unit = "requests", .nrefs = 1,
                .ref = {(double)r[OFF].admitted},
                .ref_name = {"deny_cache=0"}};

    if (!o->json)
        print_columns(&layout);
    report_calls(o, "deny", r, "deny_cache=0", "cached");
    xnum(&f, "expected", (double)o->limit * (double)o->seconds / 60.0);
    emit_figure(&f, o->json, &layout);
}

/* ---- leases ------------------------------------------------------------- */

typedef struct member {
    rl_limiter *lim;
    uint64_t end;
    const char *user;
    unsigned long long checks, admitted, leased, degraded;
    int rc;
} member;

/* An answer Redis did not give: the rule's failure mode's (a check that
 * timed out, on a machine too busy to run Redis in time). */
#define DEGRADED (RL_FLAG_FAIL_OPEN | RL_FLAG_FALLBACK | RL_FLAG_FAIL_CLOSED)

/* One limiter of the fleet: the partner's checks at full speed. */
static void *partner_checks(void *arg)
{
    member *m = arg;
    rl_request req = RL_REQUEST_INIT;
    rl_result res = RL_RESULT_INIT;

    req.user = m->user;
    req.cost = 1;
    while (now_ns() < m->end && m->rc == RL_OK)
        for (int i = 0; i < 64 && m->rc == RL_OK; i++) {
            m->rc = rl_check(m->lim, &req, &res);
            m->checks++;
            m->admitted += res.allowed != 0;
            m->leased += (res.flags & RL_FLAG_LEASED) != 0;
            m->degraded += (res.flags & DEGRADED) != 0;
        }
    return NULL;
}

static rl_limiter *lease_limiter(const char *uri, const options *o, int on,
                                 char *err)
{
    char rules[256], lease[48] = "";

    if (on)
        snprintf(lease, sizeof lease, ",\"lease\":%llu", o->lease);
    snprintf(rules, sizeof rules,
             "[{\"rule_id\":\"partner\",\"dimension\":\"user\","
             "\"algorithm\":\"fixed_window\",\"limit\":%llu,"
             "\"window_seconds\":60%s}]", o->partner, lease);
    return bench_limiter((const char *const[]){"store", uri, "rules", rules,
                                               "timeout_ms", "1000", NULL},
                         err);
}

/* Both runs inside one minute's window: wait for the next minute when
 * fewer seconds than they need are left in this one. */
static void lease_window(const options *o)
{
    struct timespec ts;
    long long need = 2 * (long long)o->seconds + 4, left;

    clock_gettime(CLOCK_REALTIME, &ts);
    left = 60 - ts.tv_sec % 60;
    if (need < 60 && left < need)
        usleep((useconds_t)(left * 1000000 - ts.tv_nsec / 1000 + 100000));
}

/* The fleet checks the partner for --seconds, leases on or off. */
static int lease_fleet(const char *uri, const rh_server *srv,
                       const options *o, int on, run *out, char *err)
{
    member m[FLEET_MAX] = {{0}};
    pthread_t t[FLEET_MAX];
    double before;
    uint64_t t0;
    size_t n = 0;
    int rc = 0;

    *out = (run){0};
    for (; n < o->fleet; n++)
        if (!(m[n].lim = lease_limiter(uri, o, on, err)))
            break;
    before = evalsha_calls(srv) + calls_of(srv, "eval");
    t0 = now_ns();
    for (size_t i = 0; n == o->fleet && i < n; i++) {
        m[i].end = t0 + o->seconds * 1000000000ULL;
        m[i].user = on ? "partner-on" : "partner-off";
        pthread_create(&t[i], NULL, partner_checks, &m[i]);
    }
    for (size_t i = 0; n == o->fleet && i < n; i++) {
        pthread_join(t[i], NULL);
        if (m[i].rc != RL_OK && !rc) {
            set_err(err, "rl_check", m[i].rc, errtext(m[i].lim));
            rc = -1;
        }
        out->checks += m[i].checks;
        out->admitted += m[i].admitted;
        out->cached += m[i].leased;
        out->degraded += m[i].degraded;
    }
    out->secs = (double)(now_ns() - t0) / 1e9;
    out->calls = (unsigned long long)(evalsha_calls(srv) +
                                      calls_of(srv, "eval") - before);
    for (size_t i = 0; i < n; i++)
        rl_limiter_free(m[i].lim);
    return n == o->fleet ? rc : -1;
}

static void report_lease(const options *o, const run r[2])
{
    double held = (double)o->fleet * (double)(o->lease - 1);
    /* a fixed window: never above the limit but by the answers Redis did
     * not give (degraded: a check that timed out, the rule's fallback);
     * when the partner asks beyond it, at most fleet x (lease - 1) below
     * (held, unspent) */
    figure f = {.name = "lease_admitted", .value = (double)r[ON].admitted,
                .unit = "requests", .nrefs = 2,
                .ref = {(double)o->partner, (double)o->partner - held},
                .ref_name = {"the limit", "limit - fleet*(lease-1)"}};

    report_calls(o, "lease", r, "no lease", "leased");
    xnum(&f, "fleet", (double)o->fleet);
    xnum(&f, "lease", (double)o->lease);
    xnum(&f, "bound_over", 0);
    xnum(&f, "degraded", (double)r[ON].degraded);
    xnum(&f, "bound_under", held);
    xnum(&f, "admitted_ref", (double)r[OFF].admitted);
    emit_figure(&f, o->json, &layout);
}

int deny_main(int argc, char **argv, sb_env *env)
{
    options o;
    run r[2];
    char err[ERRLEN] = "";
    int rc = parse_args(argc, argv, &o);

    if (rc)
        return rc == 1 ? 0 : rc;
    bench_params(&table, &o, o.json);
    for (int on = OFF; on <= ON && rc == 0; on++) {
        rl_limiter *lim = make_limiter(env->uri, &o, on, err);
        rc = !lim || abuse(lim, &env->srv, &o,
                           on ? "abuser-on" : "abuser-off", &r[on],
                           err) != 0;
        rl_limiter_free(lim);
    }
    if (!rc)
        report(&o, r);
    if (!rc)
        lease_window(&o);
    for (int on = OFF; on <= ON && rc == 0; on++)
        rc = lease_fleet(env->uri, &env->srv, &o, on, &r[on], err) != 0;
    if (rc)
        fprintf(stderr, "redisbench deny: %s\n", err);
    else
        report_lease(&o, r);
    return rc;
}
