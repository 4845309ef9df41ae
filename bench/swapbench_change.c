/*
 * swapbench_change.c -- swapbench's (b) and (c): how soon a change (SET +
 * PUBLISH, or a PUT to a real ratelimitd, tests/rld_harness.c) reaches a
 * limiter, by push and by pull.  Method: docs/BENCHMARKS.md, "How each
 * bench measures".
 */
#include "swapbench.h"

/* PUT rule r<i> (per user, `limit` per 60 s) to ratelimitd; *sent_ns and
 * *acked_ns when the request left and when its 200 came back.  0, or -1
 * with the reason in err. */
static int put_rule(rld *d, unsigned long long i, long long limit,
                    uint64_t *sent_ns, uint64_t *acked_ns, char *err)
{
    char path[64], body[128];
    rld_resp r;
    long st;

    snprintf(path, sizeof path, "/v1/rules/r%llu", i);
    snprintf(body, sizeof body, "{\"dimension\":\"user\",\"limit\":%lld,"
             "\"window_seconds\":60}", limit);
    *sent_ns = now_ns();
    st = rld_http(d, "PUT", path, RLD_ALICE_TOKEN, NULL, body, strlen(body),
                  &r);
    *acked_ns = now_ns();
    if (st != 200)
        snprintf(err, ERRLEN, "PUT %s: HTTP %ld %.200s", path, st, r.body);
    rld_resp_free(&r);
    return st == 200 ? 0 : -1;
}

/* ratelimitd started, publishing to redis_uri, with rules r0..r{n-1} PUT
 * (r0's limit 1, the others RULE_LIMIT): 0, or -1 with err set. */
static int rld_setup(rld *d, const char *redis_uri, unsigned long long n,
                     char *err)
{
    const char *args[] = {"--redis", redis_uri, NULL};
    uint64_t a, b;

    memset(d, 0, sizeof *d);
    if (!rld_available() || rld_start(d, args) != 0)
        return snprintf(err, ERRLEN, "cannot start ratelimitd (set "
                        "RATELIMITD, or build tools/ratelimitd)"), -1;
    for (unsigned long long i = 0; i < n; i++)
        if (put_rule(d, i, i ? RULE_LIMIT : 1, &a, &b, err) != 0)
            return -1;
    return 0;
}

typedef struct change_ctx {
    int minimal;               /* the rule form (options)               */
    redisContext *c;           /* changes SET + PUBLISHed here, or     */
    rld *service;              /* PUT to this ratelimitd               */
    unsigned long long rules;  /* rules in each set                     */
} change_ctx;

/* Make change number `version`: rule r0 gets `limit`.  By hand, as
 * ratelimitd's part of the contract (SET the whole set, PUBLISH its
 * version; *from_ns is the moment before), or through ratelimitd (a PUT;
 * *from_ns is when its 200 came back).  *took_ns: how long it took. */
static int make_change(change_ctx *cc, long long version, long long limit,
                       uint64_t *from_ns, uint64_t *took_ns, char *err)
{
    uint64_t t0 = now_ns();
    char *text;
    redisReply *r;
    int ok;

    if (cc->service) {
        ok = put_rule(cc->service, 0, limit, &t0, from_ns, err) == 0;
        *took_ns = *from_ns - t0;
        return ok ? 0 : -1;
    }
    *from_ns = t0;
    if (!(text = rule_set(cc->rules, cc->minimal, version, limit)))
        return snprintf(err, ERRLEN, "change: out of memory"), -1;
    r = redisCommand(cc->c, "SET rl:rules %s", text);
    free(text);
    ok = r && r->type != REDIS_REPLY_ERROR;
    freeReplyObject(r);
    r = ok ? redisCommand(cc->c, "PUBLISH rl:rules %lld", version) : NULL;
    ok = r && r->type == REDIS_REPLY_INTEGER;
    freeReplyObject(r);
    *took_ns = now_ns() - t0;
    if (!ok)
        snprintf(err, ERRLEN, "change %lld: %s", version,
                 cc->c->err ? cc->c->errstr : "error reply");
    return ok ? 0 : -1;
}

/* The reference subscriber: when each version's PUBLISH reached it. */
typedef struct subscriber {
    redisContext *c;
    uint64_t *at;              /* by version                            */
    unsigned long long max;
    _Atomic int stop;
} subscriber;

static void *subscriber_main(void *arg)
{
    subscriber *s = arg;
    redisReply *r;

    while (!atomic_load(&s->stop) &&
           redisGetReply(s->c, (void **)&r) == REDIS_OK) {
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
            r->element[2]->type == REDIS_REPLY_STRING) {
            unsigned long long v = strtoull(r->element[2]->str, NULL, 10);
            if (v < s->max)
                s->at[v] = now_ns();
        }
        freeReplyObject(r);
    }
    return NULL;
}

static rl_limiter *source_limiter(const char *uri, int push, char *err)
{
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;
    int rc = RL_ENOMEM;

    if (cfg && (rc = rl_config_set_log(cfg, NULL, NULL)) == RL_OK &&
        (rc = rl_config_set(cfg, "rules_source", uri)) == RL_OK &&
        (rc = rl_config_set(cfg, "rules_push", push ? "1" : "0")) == RL_OK &&
        (rc = rl_config_set(cfg, "rules_refresh_s", push ? "3600" : "1")) ==
            RL_OK)
        rc = rl_limiter_new(&lim, cfg);
    if (rc != RL_OK)
        set_err(err, "limiter", rc, errtext(NULL));
    rl_config_free(cfg);
    return lim;
}

static int64_t enforced(rl_limiter *lim)
{
    rl_result res = RL_RESULT_INIT;

    return rl_allow(lim, "user:1", "r0", 0, &res) == RL_OK ? res.limit : -1;
}

typedef struct run {
    hist lat, ref;
    unsigned long long done;
} run;

/* Changes first..first+n-1 (limit = version), each timed from just
 * before make_change() (a PUT: from its 200) to the limiter enforcing it
 * (0 when it did before the 200). */
static int time_changes(const options *o, change_ctx *cc, rl_limiter *lim,
                        subscriber *sub, int pull, long long first, run *out,
                        char *err)
{
    uint64_t rng = 7;

    for (unsigned long long i = 0; i < o->changes; i++) {
        long long v = first + (long long)i;
        uint64_t t0, took, deadline;
        if (pull) /* a uniform phase against the 1 s pull */
            sleep_ns(pick(&rng, 1000000) * 1000);
        if (make_change(cc, v, v, &t0, &took, err) != 0)
            return -1;
        deadline = t0 + CHANGE_DEADLINE_S * 1000000000ULL;
        while (enforced(lim) != v) {
            if (now_ns() > deadline)
                return snprintf(err, ERRLEN, "change %lld not enforced in "
                                "%d s", v, CHANGE_DEADLINE_S), -1;
            sleep_ns(POLL_US * 1000);
        }
        hist_add(&out->lat, now_ns() - t0);
        if (sub && sub->at[v] > t0)
            hist_add(&out->ref, sub->at[v] - t0);
        if (cc->service)
            hist_add(&out->ref, took);
        out->done++;
    }
    return 0;
}

/* change_<what>_p50_ms and _p99_ms, beside ref50 and ref99. */
static void emit_pair(const options *o, const char *what, const run *r,
                      const char *ref_name, double ref50, double ref99)
{
    const double p[2] = {0.50, 0.99}, ref[2] = {ref50, ref99};

    for (int i = 0; i < 2; i++) {
        char name[40];
        figure f = {.name = name, .value = hist_pct(&r->lat, p[i]) / 1e6,
                    .unit = "ms", .nrefs = 1, .ref_name = {ref_name},
                    .ref = {ref[i]}};

        snprintf(name, sizeof name, "change_%s_p%.0f_ms", what, p[i] * 100);
        XLIST(&f, XN("changes", r->done), XN("rules", o->rules));
        emit_figure(&f, o->json, &layout);
    }
}

int bench_change(const options *o, const rh_server *srv, char *err)
{
    char uri[512];
    change_ctx cc = {.rules = o->rules, .minimal = o->minimal};
    subscriber sub = {.max = 2 * o->changes + 3};
    rl_limiter *push = NULL, *pull = NULL;
    run *rp = calloc(2, sizeof *rp);
    pthread_t th;
    uint64_t t;
    int rc = -1;

    rh_uri(srv, uri, sizeof uri);
    sub.at = calloc(sub.max, sizeof *sub.at);
    if (!rp || !sub.at || !(cc.c = rh_connect(srv)) ||
        !(sub.c = rh_connect(srv)) || make_change(&cc, 1, 1, &t, &t, err) != 0)
        goto out;
    /* no receive timeout: the subscriber waits for as long as the run */
    redisSetTimeout(sub.c, (struct timeval){0, 0});
    freeReplyObject(redisCommand(sub.c, "SUBSCRIBE rl:rules"));
    pthread_create(&th, NULL, subscriber_main, &sub);
    if (want(o, "push") && (push = source_limiter(uri, 1, err)) &&
        time_changes(o, &cc, push, &sub, 0, 2, &rp[0], err) == 0)
        emit_pair(o, "push", &rp[0], "publish_to_subscriber",
                  hist_pct(&rp[0].ref, 0.50) / 1e6,
                  hist_pct(&rp[0].ref, 0.99) / 1e6);
    rl_limiter_free(push);
    if (want(o, "pull") && !err[0] && (pull = source_limiter(uri, 0, err)) &&
        time_changes(o, &cc, pull, NULL, 1, (long long)o->changes + 2,
                     &rp[1], err) == 0)
        emit_pair(o, "pull", &rp[1], "uniform_refresh", 500, 990);
    rl_limiter_free(pull);
    atomic_store(&sub.stop, 1);
    make_change(&cc, (long long)sub.max, 1, &t, &t, err); /* wakes sub */
    pthread_join(th, NULL);
    rc = err[0] ? -1 : 0;
out:
    if (rc && !err[0])
        snprintf(err, ERRLEN, "change: cannot set up (redis or memory)");
    if (cc.c)
        redisFree(cc.c);
    if (sub.c)
        redisFree(sub.c);
    free(sub.at);
    free(rp);
    return rc;
}

/* (c) the whole control path: a PUT to ratelimitd, which stores it and
 * publishes the set, to a limiter enforcing it; by push, and by the 1 s
 * pull alone.  Reference: the PUT's own time (sent to 200). */
int bench_put(const options *o, const rh_server *srv, char *err)
{
    char uri[512];
    rld service;
    change_ctx cc = {.service = &service};
    rl_limiter *lim = NULL;
    run *rp = calloc(2, sizeof *rp);
    int rc = -1;

    rh_uri(srv, uri, sizeof uri);
    if (!rp || rld_setup(&service, uri, o->rules, err) != 0)
        goto out;
    for (int pull = 0; pull < 2 && !err[0]; pull++) {
        if (!want(o, pull ? "put_pull" : "put_push"))
            continue;
        if ((lim = source_limiter(uri, !pull, err)) &&
            time_changes(o, &cc, lim, NULL, pull,
                         2 + (long long)(pull * o->changes), &rp[pull],
                         err) == 0)
            emit_pair(o, pull ? "put_pull" : "put_push", &rp[pull],
                      "put_request", hist_pct(&rp[pull].ref, 0.50) / 1e6,
                      hist_pct(&rp[pull].ref, 0.99) / 1e6);
        rl_limiter_free(lim);
        lim = NULL;
    }
    rc = err[0] ? -1 : 0;
out:
    rld_cleanup(&service);
    free(rp);
    return rc;
}
