/*
 * check_sliding_log.c -- the sliding log (algorithm "sliding_log"): the C
 * maths (algo_log_* in src/base/algo.c) and the Lua maths (lua/sliding_log.lua)
 * twin-tested against a real redis-server on the same (time, cost,
 * refund) sequences, log for log; its window edges in numbers; exactly
 * `limit` admitted per window under many threads, on the memory store and
 * on Redis from several limiters at once; its cap and the stores that
 * refuse it; rule changes; and the memory store's bound on its logs.
 *
 * The test build of the script takes its time from ARGV[1] (as in
 * check_lua.c); times start an hour ahead of the real clock so Redis never
 * expires a key a sequence still uses.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "algo.h"
#include "lua_fixture.h"
#include "redis_harness.h"
#include "testutil.h"
#include "timeutil.h"

/* Its own sequence, not the other twin suites' (twin_rng.h). */
#define TWIN_RNG_SEED 0x9e3779b97f4a7c15ULL
#include "twin_rng.h"

/* ---- the twins ---------------------------------------------------------- */

/* The C side's log: times oldest first, as the memory store keeps them. */
typedef struct clog {
    int64_t t[RL_LOG_LIMIT_MAX];
    size_t n;
} clog;

static void c_apply(const algo_params *ap, clog *l, int64_t now,
                    int64_t cost, algo_decision *d)
{
    size_t drop;
    int64_t at;

    memset(d, 0, sizeof *d);
    algo_log_apply(ap, l->t, l->n, now, cost, d, &drop, &at);
    if (d->changed)
        l->n = algo_log_commit(l->t, l->n, drop, at, cost);
}

/* One request of one key through the script (lua/check.lua's ARGV):
 * mode 'c' (or 'C', the cluster batch mode: the key undeclared, its name
 * after its 4 values) or 'r' (refund `cost` charged at `at`). */
static redisReply *eval1(char mode, const algo_params *ap, const char *key,
                         int64_t now, int64_t cost, int64_t at)
{
    char num[24][24], m[2] = {mode, 0};
    const char *argv[24];
    size_t lens[24];
    int c = 0, cross = mode == 'C';
    redisReply *r;

#define NUM(v) (snprintf(num[c], sizeof num[c], "%lld", (long long)(v)), \
                argv[c] = num[c], c++)
    c = 2; /* EVALSHA and the script's SHA-1: lua_test_eval() */
    argv[c++] = cross ? "0" : "1";
    if (!cross)
        argv[c++] = key;
    NUM(now);
    argv[c++] = m;
    argv[c++] = "11"; /* ARGV[3]: the requests begin at ARGV[11] */
    NUM(ap->algo), NUM(ap->limit), NUM(ap->burst), NUM(ap->window_ms);
    NUM(ap->p), NUM(ap->q);
    argv[c++] = "0"; /* no replaced shapes; the rule is ARGV[4..10] */
    argv[c++] = "1"; /* one request */
    argv[c++] = "1"; /* of one key  */
    argv[c++] = "4"; /* its rule    */
    NUM(cost);
    NUM(mode == 'r' ? at : 0);
    argv[c++] = "";  /* plain layout */
    if (cross)
        argv[c++] = key;
#undef NUM
    r = lua_test_eval(c, argv, lens);
    ck_assert_msg(r->type != REDIS_REPLY_ERROR, "script: %s", r->str);
    return r;
}

static void lua_apply(const algo_params *ap, const char *key, int cross,
                      int64_t now, int64_t cost, algo_decision *d)
{
    redisReply *r = eval1(cross ? 'C' : 'c', ap, key, now, cost, 0);

    lua_answer_shape(r, 1);
    lua_answer(r, 0, d);
    freeReplyObject(r);
}

static void lua_refund(const algo_params *ap, const char *key, int64_t now,
                       int64_t cost, int64_t at)
{
    redisReply *r = eval1('r', ap, key, now, cost, at);

    ck_assert_int_eq(r->type, REDIS_REPLY_INTEGER);
    freeReplyObject(r);
}

static void same(const algo_decision *c, const algo_decision *l,
                 const algo_params *ap, int step, int64_t base, int64_t t,
                 int64_t cost)
{
    ck_assert_msg(c->allowed == l->allowed && c->remaining == l->remaining &&
                  c->reset_ms == l->reset_ms && c->retry_ms == l->retry_ms,
                  "limit %lld window %lld ms, step %d at t=%lld cost %lld: "
                  "C {%d %lld %lld %lld} vs Lua {%d %lld %lld %lld}",
                  (long long)ap->limit, (long long)ap->window_ms, step,
                  (long long)(t - base), (long long)cost, c->allowed,
                  (long long)c->remaining, (long long)c->reset_ms,
                  (long long)c->retry_ms, l->allowed, (long long)l->remaining,
                  (long long)l->reset_ms, (long long)l->retry_ms);
}

/* Redis's log of `key` is C's, time for time (6-byte big-endian times),
 * and the key expires when its newest time leaves the window. */
static void same_log(const clog *l, const algo_params *ap, const char *key)
{
    redisReply *r = redisCommand(ctx, "GET %s", key);
    size_t n;

    ck_assert_ptr_nonnull(r);
    n = r->type == REDIS_REPLY_STRING ? r->len / 6 : 0;
    ck_assert_msg(n == l->n, "%zu times in Redis, %zu in C", n, l->n);
    for (size_t i = 0; i < n; i++) {
        int64_t t = 0;
        for (int b = 0; b < 6; b++)
            t = t * 256 + (unsigned char)r->str[i * 6 + (size_t)b];
        ck_assert_int_eq(t, l->t[i]);
    }
    freeReplyObject(r);
    if (n) {
        r = redisCommand(ctx, "PEXPIRETIME %s", key);
        ck_assert_int_eq(r->integer, l->t[n - 1] + ap->window_ms);
        freeReplyObject(r);
    }
}

static algo_params random_params(void)
{
    static const int64_t windows[] = {1, 7, 60, 3600, 86400};
    static const int64_t limits[] = {1, 3, 7, 100, RL_LOG_LIMIT_MAX};
    algo_params ap;
    char err[200];

    ck_assert_int_eq(algo_params_init(&ap, RL_ALGO_SLIDING_LOG,
                                      limits[rnd(5)], 0, windows[rnd(5)],
                                      err, sizeof err), 0);
    return ap;
}

static int64_t next_cost(const algo_params *ap)
{
    switch (rnd(6)) {
    case 0: return 0;
    case 1: return ap->limit + (int64_t)rnd(3); /* over the limit */
    case 2: return 1 + (int64_t)rnd((uint64_t)ap->limit);
    default: return 1;
    }
}

/* Mostly small moves, some to the oldest time's edge (a ms before it
 * leaves, the ms it leaves), some a window on, some back. */
static int64_t next_time(const algo_params *ap, const clog *l, int64_t t,
                         int64_t base)
{
    int64_t w = ap->window_ms;

    switch (rnd(8)) {
    case 0: return t;
    case 1: return t + 1 + (int64_t)rnd(5);
    case 2: return t + (int64_t)rnd((uint64_t)w / 4 + 1);
    case 3: return t + w + (int64_t)rnd(1000);
    case 4: return t - (int64_t)rnd(2000) < base ? base : t - (int64_t)rnd(2000);
    case 5:
    case 6:
        if (l->n) {
            int64_t edge = l->t[rnd(l->n)] + w - (int64_t)rnd(2);
            return edge < base ? base : edge;
        }
        return t + w - 1;
    default: return t + (int64_t)rnd(2000);
    }
}

/* Random sequences, C beside Lua: the same decisions and the same log at
 * every step; with `refunds`, some admitted charges are refunded (at
 * once or later), on both sides. */
static void twins(int rules, int steps, int cross, int refunds)
{
    int64_t base = real_ms() / 1000 * 1000 + 3600 * 1000;
    static clog l;

    rules = twin_walks(rules);
    for (int r = 0; r < rules; r++) {
        algo_params ap = random_params();
        int64_t t = base + (int64_t)rnd(100000);
        char key[64];

        memset(&l, 0, sizeof l);
        snprintf(key, sizeof key, "rl:{log}:twin-%d-%d-%d", cross, refunds,
                 r);
        for (int s = 0; s < steps; s++) {
            algo_decision c, lu;
            int64_t cost = next_cost(&ap);

            c_apply(&ap, &l, t, cost, &c);
            lua_apply(&ap, key, cross, t, cost, &lu);
            same(&c, &lu, &ap, s, base, t, cost);
            if (refunds && c.allowed && cost > 0 && rnd(3) == 0) {
                int64_t at = t, later = t + (int64_t)rnd(3) * (int64_t)rnd(
                                              (uint64_t)ap.window_ms);
                l.n = algo_log_refund(l.t, l.n, at, cost);
                lua_refund(&ap, key, later, cost, at);
            }
            same_log(&l, &ap, key);
            t = next_time(&ap, &l, t, base);
        }
    }
}

START_TEST(twins_same_decisions)
{
    twins(40, 150, 0, 0);
}
END_TEST

START_TEST(twins_same_decisions_cluster_batch_mode)
{
    twins(15, 100, 1, 0);
}
END_TEST

START_TEST(twins_same_after_refunds)
{
    twins(40, 150, 0, 1);
}
END_TEST

/* The edges in numbers: 3 per 10 s, charged at +0, +1, +2 ms. */
START_TEST(window_edges)
{
    algo_params ap;
    char err[100];
    static clog l;
    int64_t t0 = (real_ms() / 1000 + 3600) * 1000;
    struct { int64_t dt, cost; int allowed; int64_t remaining, reset, retry; }
    steps[] = {
        {0, 1, 1, 2, 10000, 0},    {1, 1, 1, 1, 10000, 0},
        {2, 1, 1, 0, 10000, 0},    {3, 1, 0, 0, 10000, 9997},
        {9999, 1, 0, 0, 10000, 1}, /* the oldest leaves at +10000 */
        {10000, 1, 1, 0, 10001, 0},
        {10001, 2, 0, 1, 10002, 1}, /* 2 need the +2 gone: at +10002 */
        {10002, 2, 1, 0, 20000, 0},
        {10002, 1, 0, 0, 20000, 9998},  /* the +10000 must leave      */
        {10002, 4, 0, 0, 20000, 10000}, /* above the limit: one window */
        {10002, 0, 1, 0, 20000, 0},     /* a probe charges nothing     */
        {5000, 1, 0, 0, 20000, 9998}, /* clock back: at +10002, as seen */
    };

    ck_assert_int_eq(algo_params_init(&ap, RL_ALGO_SLIDING_LOG, 3, 0, 10,
                                      err, sizeof err), 0);
    memset(&l, 0, sizeof l);
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        algo_decision c, lu;
        c_apply(&ap, &l, t0 + steps[i].dt, steps[i].cost, &c);
        lua_apply(&ap, "rl:{log}:edges", 0, t0 + steps[i].dt, steps[i].cost,
                  &lu);
        same(&c, &lu, &ap, (int)i, t0, t0 + steps[i].dt, steps[i].cost);
        ck_assert_msg(c.allowed == steps[i].allowed &&
                      c.remaining == steps[i].remaining &&
                      c.reset_ms == t0 + steps[i].reset &&
                      c.retry_ms == steps[i].retry,
                      "step %zu: {%d %lld %lld %lld}", i, c.allowed,
                      (long long)c.remaining, (long long)(c.reset_ms - t0),
                      (long long)c.retry_ms);
    }
    same_log(&l, &ap, "rl:{log}:edges");
}
END_TEST

/* A refund of everything a log held deletes its key. */
START_TEST(refund_to_empty_deletes)
{
    algo_params ap;
    algo_decision d;
    char err[100];
    int64_t t0 = (real_ms() / 1000 + 3600) * 1000;
    redisReply *r;

    ck_assert_int_eq(algo_params_init(&ap, RL_ALGO_SLIDING_LOG, 5, 0, 60,
                                      err, sizeof err), 0);
    lua_apply(&ap, "rl:{log}:empty", 0, t0, 3, &d);
    ck_assert(d.allowed);
    lua_refund(&ap, "rl:{log}:empty", t0 + 5, 3, t0);
    r = redisCommand(ctx, "EXISTS rl:{log}:empty");
    ck_assert_int_eq(r->integer, 0);
    freeReplyObject(r);
}
END_TEST

/* ---- rules and stores --------------------------------------------------- */

static int load(rl_limiter *lim, int64_t limit, int64_t window,
                const char *algo, const char *extra)
{
    char json[400];

    snprintf(json, sizeof json,
             "[{\"rule_id\":\"login\",\"dimension\":\"user\",\"limit\":%lld,"
             "\"window_seconds\":%lld,\"algorithm\":\"%s\"%s}]",
             (long long)limit, (long long)window, algo, extra);
    return rl_rules_load_string(lim, json);
}

START_TEST(limit_cap_refused)
{
    rl_limiter *lim = limiter_with("[]");
    char cap[32];

    snprintf(cap, sizeof cap, "at most %lld", (long long)RL_LOG_LIMIT_MAX);
    ck_assert_int_eq(load(lim, RL_LOG_LIMIT_MAX, 60, "sliding_log", ""),
                     RL_OK);
    ck_assert_int_eq(load(lim, RL_LOG_LIMIT_MAX + 1, 60, "sliding_log", ""),
                     RL_ERULE);
    ck_assert_msg(strstr(rl_errmsg(lim), cap) &&
                  strstr(rl_errmsg(lim), "sliding_log"), "%s",
                  rl_errmsg(lim));
    ck_assert_int_eq(load(lim, 10, 60, "sliding_log", ",\"burst\":5"),
                     RL_ERULE);
    ck_assert_ptr_nonnull(strstr(rl_errmsg(lim), "burst"));
    /* other algorithms keep their own bound */
    ck_assert_int_eq(load(lim, 5000, 60, "sliding_window", ""), RL_OK);
    rl_limiter_free(lim);
}
END_TEST

static rl_limiter *open_store(const char *store, const char *opt,
                              const char *val)
{
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;

    ck_assert_int_eq(rl_config_set(cfg, "store", store), RL_OK);
    if (opt)
        ck_assert_int_eq(rl_config_set(cfg, opt, val), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "timeout_ms", "2000"), RL_OK);
    ck_assert_msg(rl_limiter_new(&lim, cfg) == RL_OK, "%s", rl_errmsg(NULL));
    rl_config_free(cfg);
    return lim;
}

/* shm:// and the compact Redis layout keep a fixed state per client: a
 * rule set with a sliding_log rule is refused whole, saying why. */
START_TEST(fixed_size_stores_refuse)
{
    char shm[64], uri[128];
    rl_limiter *lim;

    snprintf(shm, sizeof shm, "shm://rltest-%ld-log", (long)getpid());
    lim = open_store(shm, NULL, NULL);
    ck_assert_int_eq(load(lim, 5, 60, "sliding_log", ""), RL_ERULE);
    ck_assert_msg(strstr(rl_errmsg(lim), "rule \"login\": algorithm "
                                         "sliding_log: shm://"),
                  "%s", rl_errmsg(lim));
    ck_assert_int_eq(load(lim, 5, 60, "sliding_window", ""), RL_OK);
    rl_limiter_free(lim);
    snprintf(shm, sizeof shm, "/rltest-%ld-log", (long)getpid());
    shm_unlink(shm);

    rh_uri(&srv, uri, sizeof uri);
    lim = open_store(uri, "redis_layout", "compact");
    ck_assert_int_eq(load(lim, 5, 60, "sliding_log", ""), RL_ERULE);
    ck_assert_ptr_nonnull(strstr(rl_errmsg(lim), "compact"));
    rl_limiter_free(lim);
    lim = open_store(uri, NULL, NULL); /* plain: kept */
    ck_assert_int_eq(load(lim, 5, 60, "sliding_log", ""), RL_OK);
    rl_limiter_free(lim);
}
END_TEST

static int spend(rl_limiter *lim, const char *key, int tries)
{
    rl_result res = RL_RESULT_INIT;
    int got = 0;

    for (int i = 0; i < tries; i++) {
        ck_assert_int_eq(rl_allow(lim, key, "login", 1, &res), RL_OK);
        got += res.allowed;
    }
    return got;
}

/* Leases and reservations give back part of a charge, which a log of
 * times has no rule for: a lease on a log is refused at load, and
 * rl_reserve refuses a request a log rule applies to, charging nothing. */
START_TEST(no_lease_no_reservation)
{
    rl_limiter *lim = limiter_with("[]");
    rl_request req = {.size = sizeof req, .endpoint = "/login",
                      .user = "eve", .cost = 1};
    rl_reservation rsv = RL_RESERVATION_INIT;
    rl_result res = RL_RESULT_INIT;

    ck_assert_int_eq(load(lim, 10, 60, "sliding_log", ",\"lease\":2"),
                     RL_ERULE);
    ck_assert_msg(strstr(rl_errmsg(lim), "lease"), "%s", rl_errmsg(lim));
    ck_assert_int_eq(load(lim, 2, 60, "sliding_log", ""), RL_OK);
    ck_assert_int_eq(rl_reserve(lim, &req, &rsv, &res), RL_ERULE);
    ck_assert_msg(strstr(rl_errmsg(lim), "login"), "%s", rl_errmsg(lim));
    for (int i = 0; i < 5; i++) { /* nothing was charged: 2 pass */
        ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
        ck_assert_int_eq(res.allowed, i < 2);
    }
    rl_limiter_free(lim);
}
END_TEST


/* A limit change keeps the log (its times mean the same under any
 * limit); a change of window or of algorithm starts fresh, and the log
 * of a former shape is left to expire (found again if the rule goes
 * back while it lives, as any algorithm's state). */
static void rule_changes(rl_limiter *lim)
{
    ck_assert_int_eq(load(lim, 3, 60, "sliding_log", ""), RL_OK);
    ck_assert_int_eq(spend(lim, "user:a", 5), 3);
    ck_assert_int_eq(load(lim, 5, 60, "sliding_log", ""), RL_OK);
    ck_assert_int_eq(spend(lim, "user:a", 5), 2);
    ck_assert_int_eq(load(lim, 2, 60, "sliding_log", ""), RL_OK);
    ck_assert_int_eq(spend(lim, "user:a", 5), 0); /* 5 kept, above 2 */
    ck_assert_int_eq(load(lim, 2, 30, "sliding_log", ""), RL_OK);
    ck_assert_int_eq(spend(lim, "user:a", 5), 2);
    ck_assert_int_eq(load(lim, 2, 30, "sliding_window", ""), RL_OK);
    ck_assert_int_eq(spend(lim, "user:a", 5), 2);
    ck_assert_int_eq(load(lim, 2, 30, "sliding_log", ""), RL_OK);
    ck_assert_int_eq(spend(lim, "user:a", 5), 0);
    /* the newest state that converts: the sliding window's 2 */
    ck_assert_int_eq(load(lim, 9, 30, "fixed_window", ""), RL_OK);
    ck_assert_int_eq(spend(lim, "user:a", 10), 7);
}

START_TEST(rule_changes_memory)
{
    rl_limiter *lim = limiter_with("[]");

    rule_changes(lim);
    rl_limiter_free(lim);
}
END_TEST

START_TEST(rule_changes_redis)
{
    char uri[128];
    rl_limiter *lim;

    rh_uri(&srv, uri, sizeof uri);
    lim = open_store(uri, NULL, NULL);
    rule_changes(lim);
    rl_limiter_free(lim);
}
END_TEST

/* A request's rules are all-or-nothing with a log among them. */
START_TEST(all_or_nothing_memory)
{
    rl_limiter *lim = limiter_with(
        "[{\"rule_id\":\"log\",\"dimension\":\"user\",\"limit\":5,"
        "\"window_seconds\":60,\"algorithm\":\"sliding_log\"},"
        " {\"rule_id\":\"fw\",\"dimension\":\"user\",\"limit\":2,"
        "\"window_seconds\":60,\"algorithm\":\"fixed_window\"}]");
    rl_request req = RL_REQUEST_INIT;
    rl_result res = RL_RESULT_INIT;

    req.user = "u1";
    req.cost = 1;
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
        ck_assert_int_eq(res.allowed, i < 2);
    }
    ck_assert_int_eq(rl_allow(lim, "user:u1", "log", 0, &res), RL_OK);
    ck_assert_int_eq(res.remaining, 3); /* charged for the 2 that passed */
    rl_limiter_free(lim);
}
END_TEST

/* ---- exactness under threads -------------------------------------------- */

#define THREADS 8

typedef struct run {
    rl_limiter *lim[THREADS];
    int phases, tries;
    int64_t start, step;
    pthread_barrier_t start_b, end_b;
    _Atomic int64_t admitted;
    _Atomic int failed;      /* checks that did not return RL_OK */
} run;

static void *worker(void *arg)
{
    run *r = ((void **)arg)[0];
    rl_limiter *lim = ((void **)arg)[1];
    rl_result res = RL_RESULT_INIT;

    for (int p = 0; p < r->phases; p++) {
        pthread_barrier_wait(&r->start_b);
        for (int i = 0; i < r->tries; i++) {
            if (rl_allow(lim, "user:hot", "login", 1, &res) != RL_OK)
                atomic_fetch_add(&r->failed, 1);
            else if (res.allowed)
                atomic_fetch_add(&r->admitted, 1);
        }
        pthread_barrier_wait(&r->end_b);
    }
    return NULL;
}

/* THREADS threads, thread i on r->lim[i], `phases` phases `step` ms apart
 * on the hand clock (memory) or the real one (Redis, phases 1). */
static int64_t hammer(run *r, int hand_clock)
{
    pthread_t th[THREADS];
    void *args[THREADS][2];

    atomic_init(&r->admitted, 0);
    atomic_init(&r->failed, 0);
    pthread_barrier_init(&r->start_b, NULL, THREADS + 1);
    pthread_barrier_init(&r->end_b, NULL, THREADS + 1);
    for (int i = 0; i < THREADS; i++) {
        args[i][0] = r;
        args[i][1] = r->lim[i];
        pthread_create(&th[i], NULL, worker, args[i]);
    }
    for (int p = 0; p < r->phases; p++) {
        if (hand_clock)
            clock_set(r->start + p * r->step);
        pthread_barrier_wait(&r->start_b);
        pthread_barrier_wait(&r->end_b);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&r->start_b);
    pthread_barrier_destroy(&r->end_b);
    ck_assert_int_eq(atomic_load(&r->failed), 0);
    return atomic_load(&r->admitted);
}

/* 100 per 60 s from 59 s into a window: 40 phases 50 ms apart (2 s)
 * admit the limit once, wherever windows fall; then phases a window
 * apart admit it once each. */
START_TEST(memory_exact_under_threads)
{
    rl_limiter *lim = limiter_with("[]");
    run r = {.phases = 40, .tries = 30, .start = T0 + 59000, .step = 50};

    ck_assert_int_eq(load(lim, 100, 60, "sliding_log", ""), RL_OK);
    for (int i = 0; i < THREADS; i++)
        r.lim[i] = lim;
    ck_assert_int_eq(hammer(&r, 1), 100);
    r.start = T0 + 59000 + 60000; /* the first of them leaves here */
    r.phases = 5;
    r.step = 60000;
    ck_assert_int_eq(hammer(&r, 1), 5 * 100);
    rl_limiter_free(lim);
}
END_TEST

/* A fleet of 4 limiters (2 threads each, their own connections) on one
 * Redis: exactly the limit admitted. */
START_TEST(redis_exact_across_limiters)
{
    char uri[128];
    run r = {.phases = 1, .tries = 60};
    rl_limiter *lims[4];

    rh_uri(&srv, uri, sizeof uri);
    for (int i = 0; i < 4; i++) {
        lims[i] = open_store(uri, NULL, NULL);
        ck_assert_int_eq(load(lims[i], 137, 3600, "sliding_log", ""),
                         RL_OK);
    }
    for (int i = 0; i < THREADS; i++)
        r.lim[i] = lims[i % 4];
    ck_assert_int_eq(hammer(&r, 0), 137);
    for (int i = 0; i < 4; i++)
        rl_limiter_free(lims[i]);
}
END_TEST

/* ---- the memory store's bound ------------------------------------------- */

/* 100,000 clients of a limit-50 log each spending 3 (about 8 MB of
 * logs unbounded), in 1 MiB (the option's least): the store stays within the cap (but for
 * one log's array and its own struct) by evicting. */
START_TEST(memory_logs_bounded)
{
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;
    store_memory_stats st;
    const int64_t max = 1 << 20;
    char key[32];

    ck_assert_int_eq(rl_config_set(cfg, "memory_max_bytes", "1048576"),
                     RL_OK);
    ck_assert_int_eq(rl_limiter_new(&lim, cfg), RL_OK);
    rl_config_free(cfg);
    clock_set(T0);
    store_memory_set_clock(limiter_store(lim), test_clock, NULL);
    ck_assert_int_eq(load(lim, 50, 600, "sliding_log", ""), RL_OK);
    for (int i = 0; i < 100000; i++) {
        snprintf(key, sizeof key, "user:%d", i);
        ck_assert_int_eq(spend(lim, key, 3), 3);
        clock_add(1);
    }
    store_memory_stats_get(limiter_store(lim), &st);
    ck_assert_int_le(st.bytes, max + RL_LOG_LIMIT_MAX * 8 + 64 * 1024);
    ck_assert_int_gt(st.evictions, 0);
    /* the newest clients are still limited */
    ck_assert_int_eq(spend(lim, "user:99999", 60), 47);
    rl_limiter_free(lim);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sliding_log");
    TCase *tc = tcase_create("sliding_log");
    /* The twin tests, long sequences through the Lua script in Redis
     * beside the C maths: a case of their own, which tests/valgrind.sh
     * leaves out (CK_RUN_CASE=sliding_log) for their time, most of it
     * Redis's, which memcheck does not see. */
    TCase *twins = tcase_create("twins");

    if (!rh_available()) {
        fprintf(stderr, "check_sliding_log: no redis-server, skipped\n");
        return 77;
    }
    tcase_add_checked_fixture(twins, twin_setup, teardown);
    tcase_set_timeout(twins, 300);
    tcase_add_test(twins, twins_same_decisions);
    tcase_add_test(twins, twins_same_decisions_cluster_batch_mode);
    tcase_add_test(twins, twins_same_after_refunds);
    suite_add_tcase(s, twins);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, window_edges);
    tcase_add_test(tc, refund_to_empty_deletes);
    tcase_add_test(tc, limit_cap_refused);
    tcase_add_test(tc, fixed_size_stores_refuse);
    tcase_add_test(tc, no_lease_no_reservation);
    tcase_add_test(tc, rule_changes_memory);
    tcase_add_test(tc, rule_changes_redis);
    tcase_add_test(tc, all_or_nothing_memory);
    tcase_add_test(tc, memory_exact_under_threads);
    tcase_add_test(tc, redis_exact_across_limiters);
    tcase_add_test(tc, memory_logs_bounded);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
