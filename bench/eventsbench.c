/*
 * eventsbench.c -- redisbench events: rejection events' cost on the
 * request path (on beside off, benchutil's bench_ab) and their delivery.
 * Method: docs/BENCHMARKS.md, "How each bench measures".
 */
#include "serverbench.h"

#define OFF 0
#define ON 1
#define THREADS 8
#define KEY_STRIDE 16
#define STREAM "rl:events"
#define MAXLEN "100000"

typedef struct options {
    unsigned long long keys, calls, rounds, rate, seconds;
    int json, quick;
} options;

static const bench_opt opts[] = {
    BENCH_OPT_JSON_ROW(options),
    BENCH_OPT_QUICK_ROW(options),
    {"--keys", BENCH_OPT_COUNT, OPT_AT(keys), 1, 1e12, 100000, 10000, NULL,
     "distinct users (cost)"},
    {"--calls", BENCH_OPT_COUNT, OPT_AT(calls), 100, 1e12, 20000, 5000, NULL,
     "checks per timed block (cost)"},
    {"--rounds", BENCH_OPT_COUNT, OPT_AT(rounds), 1, AB_MAX_PAIRS, 40, 10,
     NULL, "blocks per side (cost)"},
    {"--rate", BENCH_OPT_COUNT, OPT_AT(rate), 1, 1e12, 100000, 100000, NULL,
     "denials a second (delivery)"},
    {"--seconds", BENCH_OPT_COUNT, OPT_AT(seconds), 1, 1e6, 10, 2, NULL,
     "the delivery run's length"},
};

static const bench_opts table = {
    .rows = opts, .n = sizeof opts / sizeof opts[0],
    .prog = "redisbench events",
    .about = "rejection events: cost on the request path, delivery."};

static const text_layout layout = {22, 10, 1, 9, 10, 3};

/* The sender's counts in the metrics text: sent, then dropped by reason. */
static const char *const series[4] = {
    "ratelimit_events_sent_total",
    "ratelimit_events_dropped_total{reason=\"ring_full\"}",
    "ratelimit_events_dropped_total{reason=\"redis_away\"}",
    "ratelimit_events_dropped_total{reason=\"rejected\"}"};

static rl_limiter *make_limiter(const char *events_uri, char *err)
{
    return bench_limiter(
        (const char *const[]){"rules",
                              "[{\"rule_id\":\"r\",\"dimension\":\"user\","
                              "\"match\":{\"endpoint\":\"/api\"},\"limit\":1,"
                              "\"window_seconds\":3600}]",
                              "events_maxlen", MAXLEN,
                              "events_redis", events_uri, NULL},
        err);
}

/* events_cost_deny_1t: every user's one spent, then ABBA blocks of denials
 * on the two limiters; medians of the blocks' ns a check. */
static int cost(const options *o, rl_limiter **lim, char *err)
{
    static hist h[2];
    static ab_result res;
    static double ns[2][AB_MAX_PAIRS];
    double med[2];
    bench_input in;
    ab_run ab = {.lim = {lim[OFF], lim[ON]}, .stride = KEY_STRIDE,
                 .calls = o->calls, .pairs = (int)o->rounds, .blocks = 2,
                 .h = h, .pause_ms = 1};
    figure f;
    int rc;

    if (bench_input_make(&in, o->keys, KEY_STRIDE, o->calls, 0, table.prog))
        return snprintf(err, ERRLEN, "out of memory"), -1;
    ab.keys = in.keys;
    rc = bench_ab_charge(&ab, o->keys, err) ||
         bench_ab(&ab, in.seq, 1, &res, table.prog, err);
    bench_input_free(&in);
    if (rc)
        return -1;
    for (int w = OFF; w <= ON; w++) {
        for (int p = 0; p < ab.pairs; p++)
            ns[w][p] = res.wall[p][w];
        med[w] = median_of(ns[w], o->rounds);
    }
    f = (figure){.name = "events_cost_deny_1t", .value = 1e9 / med[ON],
                 .unit = "checks/s", .nrefs = 1, .ref = {1e9 / med[OFF]},
                 .ref_name = {"events_off"}};
    XLIST(&f, XN("ns", med[ON]), XN("ref_ns", med[OFF]),
          XN("p99_ns", hist_pct(&h[ON], 0.99)),
          XN("ref_p99_ns", hist_pct(&h[OFF], 0.99)));
    emit_figure(&f, o->json, &layout);
    return 0;
}

/* ---- delivery ------------------------------------------------------------- */

typedef struct pacer {
    bench_status st; /* first: bench_threads() reads it */
    rl_limiter *lim;
    double per_ns;   /* checks per ns, this thread's share */
    uint64_t t0, until;
    unsigned long long done, denied;
    int id;
} pacer;

/* Denials at the thread's share of --rate, paced against the clock. */
static void *pace(void *arg)
{
    pacer *p = arg;
    char user[32];
    rl_request req = {.size = sizeof req, .endpoint = "/api", .user = user,
                      .cost = 1};

    for (uint64_t now = now_ns(); now < p->until; now = now_ns()) {
        rl_result res = RL_RESULT_INIT;
        if ((double)p->done >= (double)(now - p->t0) * p->per_ns) {
            usleep(200);
            continue;
        }
        snprintf(user, sizeof user, "t%d-%llu", p->id, p->done % 1000);
        if (rl_check(p->lim, &req, &res) == RL_OK && !res.allowed)
            p->denied++; /* each user's first check passes */
        p->done++;
    }
    return NULL;
}

/* The value of a series in the metrics text, -1 when it is not there. */
static double metric(const char *text, const char *name)
{
    size_t n = strlen(name);

    for (const char *p = text; p; p = strchr(p, '\n'), p = p ? p + 1 : p)
        if (strncmp(p, name, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    return -1;
}

/* events_delivery_8t: the events sent beside the denials offered, once
 * every one is sent or counted lost (10 s at most). */
static int delivery(const options *o, const rh_server *srv, const char *uri,
                    char *err)
{
    static char text[1 << 16];
    static pacer p[THREADS];
    rl_limiter *lim = make_limiter(uri, err);
    double offered = 0, checks = 0, v[4] = {0}, sum = 0;
    uint64_t t0 = now_ns();
    redisContext *c;
    redisReply *r;
    size_t len;

    if (!lim)
        return -1;
    for (int t = 0; t < THREADS; t++)
        p[t] = (pacer){.lim = lim, .per_ns = (double)o->rate / THREADS / 1e9,
                       .t0 = t0, .until = t0 + o->seconds * 1000000000ULL,
                       .id = t};
    bench_threads(p, sizeof p[0], THREADS, pace, table.prog, err);
    for (int t = 0; t < THREADS; t++)
        offered += (double)p[t].denied, checks += (double)p[t].done;
    for (int i = 0; i < 1000 && (!i || sum < offered); i++) {
        usleep(i ? 10000 : 0);
        rl_metrics_write(lim, text, sizeof text, &len);
        sum = 0;
        for (int k = 0; k < 4; k++)
            sum += v[k] = metric(text, series[k]);
    }
    rl_limiter_free(lim);
    c = rh_connect(srv);
    r = c ? redisCommand(c, "XLEN " STREAM) : NULL;
    figure f = {.name = "events_delivery_8t", .value = v[0],
                .unit = "events", .nrefs = 1, .ref = {offered},
                .ref_name = {"denials"}};
    XLIST(&f, XN("seconds", o->seconds), XN("checks", checks),
          XN("rate_target", o->rate), XN("dropped_ring_full", v[1]),
          XN("dropped_redis_away", v[2]), XN("dropped_rejected", v[3]),
          XN("stream_len", r && r->type == REDIS_REPLY_INTEGER
                               ? (double)r->integer : -1),
          XN("maxlen", atof(MAXLEN)));
    emit_figure(&f, o->json, &layout);
    freeReplyObject(r);
    redisFree(c);
    return 0;
}

int events_main(int argc, char **argv, sb_env *env)
{
    options o = {0};
    char err[ERRLEN] = "";
    rl_limiter *lim[2] = {NULL, NULL};
    int rc = bench_opt_args(argc, argv, &table, &o);

    if (rc)
        return rc == 1 ? 0 : rc;
    bench_params(&table, &o, o.json);
    rc = !(lim[OFF] = make_limiter(NULL, err)) ||
         !(lim[ON] = make_limiter(env->uri, err)) || cost(&o, lim, err);
    rl_limiter_free(lim[OFF]);
    rl_limiter_free(lim[ON]);
    if (!rc) {
        redisContext *c = rh_connect(&env->srv);
        freeReplyObject(redisCommand(c, "DEL " STREAM));
        redisFree(c);
        rc = delivery(&o, &env->srv, env->uri, err) != 0;
    }
    if (rc)
        fprintf(stderr, "redisbench events: %s\n", err);
    return rc;
}
