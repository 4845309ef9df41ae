/*
 * eventsbench.c -- redisbench events: rejection events' cost on the
 * request path (on beside off) and their delivery.  Method:
 * docs/BENCHMARKS.md, "How each bench measures".
 */
#include "serverbench.h"

#define OFF 0
#define ON 1
#define THREADS 8
#define MAX_ROUNDS 1000
#define KEY_STRIDE 16
#define STREAM "rl:events"
#define MAXLEN "100000"

typedef struct options {
    unsigned long long keys, calls, rounds, rate, seconds;
    int json, quick;
} options;

static const char rules[] =
    "{\"rules\":[{\"rule_id\":\"r\",\"dimension\":\"user\",\"match\":"
    "{\"endpoint\":\"/api\"},\"limit\":1,\"window_seconds\":3600}]}";

static const bench_opt opts[] = {
    BENCH_OPT_JSON_ROW(options),
    BENCH_OPT_QUICK_ROW(options),
    {"--keys", BENCH_OPT_COUNT, OPT_AT(keys), 1, 1e12, 100000, 10000, NULL,
     "distinct users (cost)"},
    {"--calls", BENCH_OPT_COUNT, OPT_AT(calls), 100, 1e12, 20000, 5000, NULL,
     "checks per timed block (cost)"},
    {"--rounds", BENCH_OPT_COUNT, OPT_AT(rounds), 1, MAX_ROUNDS, 40, 10, NULL,
     "blocks per side (cost)"},
    {"--rate", BENCH_OPT_COUNT, OPT_AT(rate), 1, 1e12, 100000, 100000, NULL,
     "denials a second (delivery)"},
    {"--seconds", BENCH_OPT_COUNT, OPT_AT(seconds), 1, 1e6, 10, 2, NULL,
     "the delivery run's length"},
};

static const bench_opts table = {
    .rows = opts, .n = sizeof opts / sizeof opts[0],
    .prog = "redisbench events",
    .about = "rejection events: cost on the request path, delivery."};

static rl_limiter *make_limiter(const char *events_uri, char *err)
{
    return bench_limiter((const char *const[]){"rules", rules,
                                               "events_maxlen", MAXLEN,
                                               "events_redis", events_uri,
                                               NULL},
                         err);
}

static int deny(rl_limiter *lim, const char *user)
{
    rl_request req = {.size = sizeof req, .endpoint = "/api", .user = user,
                      .cost = 1};
    rl_result res = RL_RESULT_INIT;

    return rl_check(lim, &req, &res);
}

/* ---- cost ----------------------------------------------------------------- */

static int cost(const options *o, rl_limiter **lim, const char *keys)
{
    static double ns[2][MAX_ROUNDS];
    hist h[2] = {0};
    uint64_t st = 0xE7E7;
    static const text_layout layout = {22, 10, 1, 9, 10, 3};
    figure f = {0};

    for (size_t i = 0; i < o->keys; i++) /* spend each user's one */
        for (int w = OFF; w <= ON; w++)
            if (deny(lim[w], keys + i * KEY_STRIDE) != RL_OK)
                return -1;
    for (unsigned long long r = 0; r < o->rounds; r++)
        for (int k = 0; k < 2; k++) {
            int w = (int)((r + (unsigned long long)k) % 2);
            uint64_t t0 = now_ns();
            for (size_t i = 0; i < o->calls; i++) {
                const char *u = keys + pick(&st, o->keys) * KEY_STRIDE;
                uint64_t t1 = (i & 15) ? 0 : now_ns();
                deny(lim[w], u);
                if (t1)
                    hist_add(&h[w], now_ns() - t1);
            }
            ns[w][r] = (double)(now_ns() - t0) / (double)o->calls;
            usleep(1000); /* let the sender drain beside, not within */
        }
    for (int w = OFF; w <= ON; w++)
        sort_doubles(ns[w], o->rounds);
    f = (figure){.name = "events_cost_deny_1t",
                  .value = 1e9 / ns[ON][o->rounds / 2], .unit = "checks/s",
                  .nrefs = 1, .ref = {1e9 / ns[OFF][o->rounds / 2]},
                  .ref_name = {"events_off"}};
    xnum(&f, "ns", ns[ON][o->rounds / 2]);
    xnum(&f, "ref_ns", ns[OFF][o->rounds / 2]);
    xnum(&f, "p99_ns", hist_pct(&h[ON], 0.99));
    xnum(&f, "ref_p99_ns", hist_pct(&h[OFF], 0.99));
    emit_figure(&f, o->json, &layout);
    return 0;
}

/* ---- delivery ------------------------------------------------------------- */

typedef struct pacer {
    rl_limiter *lim;
    double per_ns;            /* checks per ns, this thread's share */
    uint64_t t0, until;
    unsigned long long done, denied;
    int id;
} pacer;

static void *pace(void *arg)
{
    pacer *p = arg;
    char user[32];

    for (uint64_t now = now_ns(); now < p->until; now = now_ns()) {
        double due = (double)(now - p->t0) * p->per_ns;
        if ((double)p->done >= due) {
            usleep(200);
            continue;
        }
        rl_request req = {.size = sizeof req, .endpoint = "/api",
                          .user = user, .cost = 1};
        rl_result res = RL_RESULT_INIT;
        snprintf(user, sizeof user, "t%d-%llu", p->id, p->done % 1000);
        if (rl_check(p->lim, &req, &res) == RL_OK && !res.allowed)
            p->denied++; /* each user's first check passes */
        p->done++;
    }
    return NULL;
}

static double metric(const char *text, const char *series)
{
    size_t n = strlen(series);

    for (const char *p = text; p; p = strchr(p, '\n'), p = p ? p + 1 : p)
        if (strncmp(p, series, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    return -1;
}

static int delivery(const options *o, const rh_server *srv, const char *uri,
                    char *err)
{
    static char text[1 << 16];
    static const text_layout layout = {22, 10, 1, 9, 10, 3};
    rl_limiter *lim = make_limiter(uri, err);
    pthread_t th[THREADS];
    pacer p[THREADS];
    unsigned long long offered = 0, checks = 0;
    size_t len;
    redisContext *c;
    redisReply *r;
    figure f = {0};

    if (!lim)
        return -1;
    for (int t = 0; t < THREADS; t++) {
        p[t] = (pacer){.lim = lim, .per_ns = (double)o->rate / THREADS / 1e9,
                       .t0 = now_ns(), .id = t};
        p[t].until = p[t].t0 + o->seconds * 1000000000ULL;
        pthread_create(&th[t], NULL, pace, &p[t]);
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        offered += p[t].denied;
        checks += p[t].done;
    }
    /* Let the sender finish (every event sent or counted lost, 10 s at
     * most), then read its counts. */
    for (int i = 0; i < 1000; i++) {
        rl_metrics_write(lim, text, sizeof text, &len);
        if (metric(text, "ratelimit_events_sent_total") +
                metric(text, "ratelimit_events_dropped_total"
                             "{reason=\"ring_full\"}") +
                metric(text, "ratelimit_events_dropped_total"
                             "{reason=\"redis_away\"}") +
                metric(text, "ratelimit_events_dropped_total"
                             "{reason=\"rejected\"}") >= (double)offered)
            break;
        usleep(10000);
    }
    rl_limiter_free(lim);
    c = rh_connect(srv);
    r = c ? redisCommand(c, "XLEN " STREAM) : NULL;
    f = (figure){.name = "events_delivery_8t",
                  .value = metric(text, "ratelimit_events_sent_total"),
                  .unit = "events", .nrefs = 1, .ref = {(double)offered},
                  .ref_name = {"denials"}};
    xnum(&f, "seconds", (double)o->seconds);
    xnum(&f, "checks", (double)checks);
    xnum(&f, "rate_target", (double)o->rate);
    xnum(&f, "dropped_ring_full",
         metric(text, "ratelimit_events_dropped_total{reason=\"ring_full\"}"));
    xnum(&f, "dropped_redis_away",
         metric(text, "ratelimit_events_dropped_total{reason=\"redis_away\"}"));
    xnum(&f, "dropped_rejected",
         metric(text, "ratelimit_events_dropped_total{reason=\"rejected\"}"));
    xnum(&f, "stream_len", r && r->type == REDIS_REPLY_INTEGER
                               ? (double)r->integer : -1);
    xnum(&f, "maxlen", atof(MAXLEN));
    emit_figure(&f, o->json, &layout);
    freeReplyObject(r);
    redisFree(c);
    return 0;
}

int events_main(int argc, char **argv, sb_env *env)
{
    options o = {0};
    char err[ERRLEN] = "", *keys;
    rl_limiter *lim[2] = {NULL, NULL};
    int rc = bench_opt_args(argc, argv, &table, &o);

    if (rc)
        return rc == 1 ? 0 : rc;
    if (!(keys = bench_keys(o.keys, KEY_STRIDE)))
        return 1;
    bench_params(&table, &o, o.json);
    rc = !(lim[OFF] = make_limiter(NULL, err)) ||
         !(lim[ON] = make_limiter(env->uri, err)) ||
         cost(&o, lim, keys) != 0;
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
    free(keys);
    return rc;
}
