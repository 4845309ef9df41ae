/*
 * clusterbench_failover.c -- the group failover of `redisbench cluster`
 * (issue 15); it changes the cluster, so it runs last.  Method:
 * docs/BENCHMARKS.md, "How each bench measures".
 */
#include "clusterbench.h"

#define FO_THREADS 8
#define FO_TIMEOUT_MS "50"
#define FO_HANG_MS 400
#define FO_TARGET_MS 100.0
#define FO_WAIT_S 30.0
#define FO_DEGRADED (RL_FLAG_FALLBACK | RL_FLAG_FAIL_OPEN | RL_FLAG_FAIL_CLOSED)

typedef struct fo_load {
    rl_limiter *lim;
    unsigned long long nkeys;
    _Atomic int stop;
    _Atomic unsigned long long checks, degraded, errors;
    /* the watcher */
    char key[32];              /* a client of the victim's slot        */
    _Atomic int64_t since_ns;  /* set: note the first check by Redis   */
    _Atomic int64_t first_ok_ns;
    pthread_t th[FO_THREADS + 1];
} fo_load;

static void fo_count(fo_load *l, int rc, const rl_result *res)
{
    atomic_fetch_add(&l->checks, 1);
    if (rc != RL_OK)
        atomic_fetch_add(&l->errors, 1);
    else if (res->flags & FO_DEGRADED)
        atomic_fetch_add(&l->degraded, 1);
}

static void *fo_worker(void *arg)
{
    fo_load *l = arg;
    rl_result res = RL_RESULT_INIT;
    uint64_t rng = now_ns() | 1;
    char key[32];

    while (!atomic_load(&l->stop)) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        snprintf(key, sizeof key, "user:%llu",
                 (unsigned long long)(rng % l->nkeys));
        fo_count(l, rl_allow(l->lim, key, "big", 1, &res), &res);
    }
    return NULL;
}

static void *fo_watcher(void *arg)
{
    fo_load *l = arg;
    rl_result res = RL_RESULT_INIT;

    while (!atomic_load(&l->stop)) {
        int rc = rl_allow(l->lim, l->key, "big", 1, &res);
        if (rc == RL_OK && !(res.flags & FO_DEGRADED) &&
            atomic_load(&l->since_ns) && !atomic_load(&l->first_ok_ns))
            atomic_store(&l->first_ok_ns, (int64_t)now_ns());
        sleep_s(0.001);
    }
    return NULL;
}

/* A client whose state lives in `slot`. */
static void key_in_slot(char *buf, size_t len, int slot)
{
    for (unsigned long long id = 0;; id++) {
        int n = snprintf(buf, len, "user:%llu", id);
        if ((int)rh_key_slot(buf, (size_t)n) == slot)
            return;
    }
}

/* The load on, after the master of slot (*victim) and its replica
 * (*replica) are found: 0, or -1 with err set. */
static int fo_start(fo_load *l, const char *uri, const options *o,
                    int slot, int *victim, int *replica, char *err)
{
    char rule[256], rules[300];

    *victim = rh_cluster_master_of(&cl, slot);
    if (*victim < 0 || (*replica = rh_cluster_replica_of(&cl, *victim)) < 0)
        return snprintf(err, ERRLEN, "failover: no master or replica for "
                        "slot %d", slot), -1;
    one_rule(rule, sizeof rule, "big", 0, BIG_LIMIT, BIG_WINDOW_S, 0);
    snprintf(rules, sizeof rules, "{\"rules\":[%s]}", rule);
    l->nkeys = o->keys;
    key_in_slot(l->key, sizeof l->key, slot);
    if (!(l->lim = bench_limiter(
              (const char *const[]){"store", uri, "timeout_ms", FO_TIMEOUT_MS,
                                    "rules", rules, NULL},
              err)))
        return -1;
    for (int i = 0; i < FO_THREADS; i++)
        pthread_create(&l->th[i], NULL, fo_worker, l);
    pthread_create(&l->th[FO_THREADS], NULL, fo_watcher, l);
    sleep_s(WARM_S);
    return 0;
}

static void fo_stop(fo_load *l)
{
    atomic_store(&l->stop, 1);
    for (int i = 0; i <= FO_THREADS; i++)
        pthread_join(l->th[i], NULL);
    rl_limiter_free(l->lim);
}

/* Send cmd to node i (NULL: none), then poll its ROLE every ms until it
 * is a master: the time it became one (ns), or 0 after FO_WAIT_S. */
static uint64_t fo_promote(int i, const char *cmd, char *err)
{
    redisContext *c = rh_connect(&cl.node[i]);
    uint64_t t0 = now_ns(), at = 0;
    redisReply *r;

    if (!c)
        return snprintf(err, ERRLEN, "failover: node %d: no connection", i),
               0;
    if (cmd && (r = redisCommand(c, cmd)) != NULL)
        freeReplyObject(r);
    while (!at && (double)(now_ns() - t0) / 1e9 < FO_WAIT_S &&
           !interrupted(err)) {
        r = redisCommand(c, "ROLE");
        if (r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
            r->element[0]->type == REDIS_REPLY_STRING &&
            strcmp(r->element[0]->str, "master") == 0)
            at = now_ns();
        if (r)
            freeReplyObject(r);
        if (!at)
            sleep_s(0.001);
    }
    redisFree(c);
    if (!at && !err[0])
        snprintf(err, ERRLEN, "failover: node %d was not promoted", i);
    return at;
}

static int fo_planned(const options *o, const char *uri, char *err)
{
    fo_load l = {0};
    int victim, replica;
    unsigned long long c0, d0;
    uint64_t t0, at;
    rl_stats st = RL_STATS_INIT;
    store_redis_stats s0, s1;
    figure f = {0};

    if (fo_start(&l, uri, o, 0, &victim, &replica, err))
        return -1;
    c0 = atomic_load(&l.checks), d0 = atomic_load(&l.degraded);
    store_redis_stats_get(limiter_store(l.lim), &s0);
    t0 = now_ns();
    at = fo_promote(replica, "CLUSTER FAILOVER", err);
    sleep_s(0.5);
    rl_stats_get(l.lim, &st);
    store_redis_stats_get(limiter_store(l.lim), &s1);
    fo_stop(&l);
    if (!at)
        return -1;
    f = (figure){.name = "failover_planned_degraded",
                  .value = (double)(atomic_load(&l.degraded) - d0),
                  .unit = "checks"};
    XLIST(&f, XN("checks", atomic_load(&l.checks) - c0),
          XN("errors", atomic_load(&l.errors)),
          XN("breaker_opens", st.breaker_opens),
          XN("switch_ms", (double)(at - t0) / 1e6),
          XN("timeouts", s1.timeouts - s0.timeouts),
          XN("elsewhere", s1.elsewhere - s0.elsewhere),
          XN("moved", s1.moved - s0.moved), XN("threads", FO_THREADS));
    emit(o, &f);
    return 0;
}

/* slot's master hung (SIGSTOP, then its replica takes over) or killed
 * (the cluster promotes its replica): promotion to resumed checks. */
static int fo_resume(const options *o, const char *uri, int slot, int hang,
                     char *err)
{
    fo_load l = {0};
    int victim, replica, rc;
    uint64_t t0, at;
    figure f = {0};

    if (fo_start(&l, uri, o, slot, &victim, &replica, err))
        return -1;
    t0 = now_ns();
    rc = hang ? rh_pause(&cl.node[victim]) : rh_kill(&cl.node[victim]);
    if (rc == 0 && hang)
        sleep_s(FO_HANG_MS / 1000.0);
    at = rc == 0 ? fo_promote(replica, hang ? "CLUSTER FAILOVER TAKEOVER"
                                            : NULL, err) : 0;
    atomic_store(&l.since_ns, (int64_t)(at ? at : 1));
    while (at && !atomic_load(&l.first_ok_ns) &&
           (double)(now_ns() - at) / 1e9 < FO_WAIT_S && !interrupted(err))
        sleep_s(0.001);
    fo_stop(&l);
    if (hang)
        rh_resume(&cl.node[victim]);
    if (!at || !atomic_load(&l.first_ok_ns))
        return err[0] ? -1 : (snprintf(err, ERRLEN, "failover: the keys "
                                       "never resumed"), -1);
    f = (figure){.name = hang ? "failover_hung_resume_ms" : "failover_killed_resume_ms",
                  .value = (double)((uint64_t)atomic_load(&l.first_ok_ns) - at) / 1e6,
                  .unit = "ms", .nrefs = 1, .ref = {FO_TARGET_MS},
                  .ref_name = {"target"}};
    XLIST(&f, XN("promoted_after_ms", (double)(at - t0) / 1e6),
          XN("degraded", atomic_load(&l.degraded)),
          XN("checks", atomic_load(&l.checks)),
          XN("errors", atomic_load(&l.errors)));
    emit(o, &f);
    return 0;
}

int group_failover(const options *o, char *err)
{
    const char *uri = o->uri;

    if (fo_planned(o, uri, err) || rh_cluster_wait_ok(&cl, 20000) != 0 ||
        fo_resume(o, uri, 16383, 1, err) ||
        rh_cluster_wait_ok(&cl, 20000) != 0 ||
        fo_resume(o, uri, 8192, 0, err))
        return err[0] ? -1 : (snprintf(err, ERRLEN, "failover: the cluster "
                                       "did not settle (stderr)"), -1);
    return 0;
}
