/*
 * check_rulechange.c -- a rule reloaded with another limit, burst, window
 * or algorithm keeps each client's level (issue 9): every algorithm x
 * store (memory on a hand clock; Redis plain; Redis compact; a real 3+3
 * Redis Cluster) x change (limit up, limit down, burst up, burst down,
 * window changed, algorithm changed), asserted against what the
 * definition in src/base/algo.h (algo_convert) gives from the client's level;
 * the issue's two failing cases as they were reported; all-or-nothing
 * migration; which lookups a changed rule pays for.  The pure parts that
 * need no store (ruleset_inherit(), the shapes' units, algo_convert's
 * table) are check_rulechange_inherit.c.
 *
 * The memory store runs on a hand clock, which also stamps the changes
 * (ruleset_set_clock), so every figure is exact: what is available right
 * after the change, how many pass, the wait to the millisecond.  Redis
 * decides by its own clock (TIME): there each figure is bounded by the
 * time measured around the call, and waits poll for the outcome with a
 * deadline.  Windows are an hour long (or half), so no window ends during
 * a case (a case waits out the last seconds of an hour before it starts).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "limiter.h"
#include "ratelimit.h"
#include "redis_harness.h"
#include "ruleset.h"
#include "testutil.h"
#include "timeutil.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SLACK_MS 2000
#else
#define SLACK_MS 250
#endif

enum { MEMORY, PLAIN, COMPACT, CLUSTER };
static const char *const store_names[] = {"memory", "redis plain",
                                          "redis compact", "cluster"};

static rh_server srv;
static rh_cluster cl;

static void nap_ms(int64_t ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* ---- a limiter on one of the stores ------------------------------------- */

typedef struct env {
    int store;
    rl_limiter *lim;
} env;

static void env_open(env *e, int store)
{
    char uri[1024];
    rl_config *cfg;
    int rc;

    e->store = store;
    if (store == MEMORY) {
        e->lim = limiter_with("[]");
        clock_set(T0 + 1000); /* an hour has just begun */
        ruleset_set_clock(test_clock, NULL);
        return;
    }
    ruleset_set_clock(NULL, NULL);
    cfg = rl_config_new();
    if (store == CLUSTER) {
        ck_assert_msg(rh_cluster_start(&cl, 3, 1, 1000) == 0,
                      "rh_cluster_start: see stderr");
        rh_cluster_uri(&cl, 0, uri, sizeof uri);
    } else {
        ck_assert_int_eq(rh_start(&srv, NULL), 0);
        rh_uri(&srv, uri, sizeof uri);
    }
    ck_assert_int_eq(rl_config_set(cfg, "store", uri), RL_OK);
    /* every charge must be Redis's decision (charge() asserts it): a
     * deadline a loaded 2-core machine cannot miss (500 ms once was) */
    ck_assert_int_eq(rl_config_set(cfg, "timeout_ms", "3000"), RL_OK);
    if (store == COMPACT)
        ck_assert_int_eq(rl_config_set(cfg, "redis_layout", "compact"),
                         RL_OK);
    rc = rl_limiter_new(&e->lim, cfg);
    rl_config_free(cfg);
    ck_assert_msg(rc == RL_OK, "rl_limiter_new: %s", rl_errmsg(NULL));
}

static void env_close(env *e)
{
    rl_limiter_free(e->lim);
    if (e->store == CLUSTER)
        rh_cluster_stop(&cl);
    else if (e->store != MEMORY)
        rh_stop(&srv);
}

static int64_t env_now(const env *e)
{
    return e->store == MEMORY ? atomic_load(&test_now) : real_ms();
}

static void load(env *e, const char *json)
{
    ck_assert_msg(rl_rules_load_string(e->lim, json) == RL_OK, "%s: %s",
                  json, rl_errmsg(e->lim));
}

/* A charge of `cost` to client `user` under rule `id`; never degraded. */
static rl_result charge(env *e, const char *user, const char *id,
                        int64_t cost)
{
    rl_result res = RL_RESULT_INIT;

    ck_assert_msg(rl_allow(e->lim, user, id, cost, &res) == RL_OK, "%s",
                  rl_errmsg(e->lim));
    ck_assert_msg(!(res.flags & (RL_FLAG_FALLBACK | RL_FLAG_FAIL_OPEN |
                                 RL_FLAG_FAIL_CLOSED)),
                  "%s: the store failed (flags %u)", store_names[e->store],
                  res.flags);
    return res;
}

/* The rule `id` of the set in force. */
static const rl_rule *rule_now(env *e, const char *id)
{
    const rl_rule *r = ruleset_find(rcu_peek(&e->lim->rules), id);

    ck_assert_ptr_nonnull(r);
    return r;
}

/* Redis decides by its own clock: keep a case's hour-long windows from
 * ending under it (wait out the last 20 s of an hour, and of a half). */
static void clear_of_window_ends(const env *e)
{
    if (e->store == MEMORY)
        return;
    while (1800000 - real_ms() % 1800000 < 20000)
        nap_ms(100);
}

/* ---- the matrix -------------------------------------------------------- */

/* One change of one rule: the client is charged `pre` units under the
 * old numbers, then the rule is reloaded with the new ones.  By the
 * definition, the client then has `avail` units (buckets: whole tokens;
 * windows: the limit less what it used), at most `cap`; a bucket refills
 * one every `per_unit_ms` from the change on (0: a window, which gives
 * nothing back within a case); the old bucket refilled one every
 * `old_per_unit_ms` (0: a window). */
typedef struct change {
    const char *what;
    const char *before, *after;   /* the rule's numbers, JSON members  */
    int pre;
    int64_t avail, cap, per_unit_ms, old_per_unit_ms;
    int kept;                     /* the same shape: the state as it is */
} change;


#define BUCKET(algo, limit, window, burst)                                     \
    "\"algorithm\":\"" algo "\",\"limit\":" #limit                             \
    ",\"window_seconds\":" #window ",\"burst\":" #burst
#define WINDOW(algo, limit, window)                                            \
    "\"algorithm\":\"" algo "\",\"limit\":" #limit                             \
    ",\"window_seconds\":" #window

#define CASE(w, b, a, av, cp, per, old, k)                                     \
    {.what = w, .before = b, .after = a, .pre = 6, .avail = av, .cap = cp,    \
     .per_unit_ms = per, .old_per_unit_ms = old, .kept = k}

/* Token bucket and GCRA: 10 per 10 s, burst 10; 6 charged, 4 left. */
#define BUCKET_CASES(A, OTHER, WIN)                                            \
    CASE("limit up", BUCKET(A, 10, 10, 10), BUCKET(A, 100, 10, 10), 4, 10,    \
         100, 1000, 0),                                                        \
    CASE("limit down", BUCKET(A, 10, 10, 10), BUCKET(A, 5, 10, 10), 4, 10,    \
         2000, 1000, 0),                                                       \
    CASE("burst up", BUCKET(A, 10, 10, 10), BUCKET(A, 10, 10, 20), 4, 20,     \
         1000, 1000, 0),                                                       \
    CASE("burst down", BUCKET(A, 10, 10, 10), BUCKET(A, 10, 10, 2), 2, 2,     \
         1000, 1000, 0),                                                       \
    CASE("window changed", BUCKET(A, 10, 10, 10), BUCKET(A, 10, 20, 10), 4,   \
         10, 2000, 1000, 0),                                                   \
    CASE("algorithm changed (bucket)", BUCKET(A, 10, 10, 10),                 \
         BUCKET(OTHER, 10, 10, 10), 4, 10, 1000, 1000, 0),                    \
    CASE("algorithm changed (window)", BUCKET(A, 10, 10, 10),                 \
         WINDOW(WIN, 10, 3600), 4, 10, 0, 1000, 0)

/* Sliding and fixed window: 10 per hour; 6 used, 4 left.  A window has
 * no burst: "burst up" and "burst down" do not apply (the parser refuses
 * a burst on a window rule). */
#define WINDOW_CASES(A, OTHER, BKT)                                            \
    CASE("limit up", WINDOW(A, 10, 3600), WINDOW(A, 20, 3600), 14, 20, 0, 0, \
         1),                                                                   \
    CASE("limit down", WINDOW(A, 10, 3600), WINDOW(A, 5, 3600), 0, 5, 0, 0,  \
         1),                                                                   \
    CASE("window changed", WINDOW(A, 10, 3600), WINDOW(A, 10, 1800), 4, 10,   \
         0, 0, 0),                                                             \
    CASE("algorithm changed (window)", WINDOW(A, 10, 3600),                   \
         WINDOW(OTHER, 10, 3600), 4, 10, 0, 0, 0),                            \
    CASE("algorithm changed (bucket)", WINDOW(A, 10, 3600),                   \
         BUCKET(BKT, 10, 10, 10), 4, 10, 1000, 0, 0)

static const change cases[] = {
    BUCKET_CASES("token_bucket", "gcra", "sliding_window"),
    BUCKET_CASES("gcra", "token_bucket", "fixed_window"),
    WINDOW_CASES("sliding_window", "fixed_window", "token_bucket"),
    WINDOW_CASES("fixed_window", "sliding_window", "gcra"),
};
#define NCASES (sizeof cases / sizeof cases[0])

/* What a case's client has `e` ms after the change, from `avail`. */
static int64_t units_at(const change *c, int64_t avail, int64_t e)
{
    int64_t u = avail;

    if (c->per_unit_ms && e > 0)
        u += e / c->per_unit_ms;
    return u < c->cap ? u : c->cap;
}

/* A rule set of every case, with the old or the new numbers: case i is
 * rule "c<i>" on endpoint "/c<i>"; the client of case i is user "u<i>". */
static char *case_rules(int after)
{
    size_t cap = 64 + NCASES * 256, n = 0;
    char *s = malloc(cap);

    ck_assert_ptr_nonnull(s);
    n += (size_t)snprintf(s + n, cap - n, "[");
    for (size_t i = 0; i < NCASES; i++)
        n += (size_t)snprintf(s + n, cap - n,
                              "%s{\"rule_id\":\"c%zu\",\"dimension\":\"user\","
                              "\"match\":{\"endpoint\":\"/c%zu\"},%s}",
                              i ? "," : "", i, i,
                              after ? cases[i].after : cases[i].before);
    snprintf(s + n, cap - n, "]");
    return s;
}

typedef struct seen {
    int64_t pre_at;      /* the first charge before the change        */
    int64_t since;       /* the change, as the rule remembers it      */
    int64_t lo, hi;      /* bounds of `avail` as the store may see it  */
    int64_t denied_at;   /* the first denial after draining           */
} seen;

/* The change's time and the client's level at it: exactly `avail` on the
 * hand clock; on Redis up to what the old bucket refilled between the
 * first charge and the change. */
static void level_bounds(const change *c, const rl_rule *r, int64_t reload,
                         seen *s)
{
    int same = r->nprev == 0;

    s->since = same ? reload : r->prev[0].since_ms;
    s->lo = c->avail;
    s->hi = c->avail;
    if (c->old_per_unit_ms) /* at most this refilled since the charges */
        s->hi += (s->since - s->pre_at) / c->old_per_unit_ms;
    if (s->hi > c->cap)
        s->hi = c->cap;
}

/* Right after the change, one rl_check_many() call looks at every case
 * (cost 0, one request per case: on Redis, one batch whose rule table
 * carries every rule with its old shape): what is left is what the
 * definition gives. */
static void probe_all(env *e, seen *sn)
{
    rl_request reqs[NCASES];
    rl_result res[NCASES];
    int codes[NCASES];
    char ep[NCASES][16], user[NCASES][16];
    int64_t t1 = env_now(e), t2;

    results_init(res, NCASES);
    for (size_t i = 0; i < NCASES; i++) {
        snprintf(ep[i], sizeof ep[i], "/c%zu", i);
        snprintf(user[i], sizeof user[i], "u%zu", i);
        reqs[i] = (rl_request){.size = sizeof(rl_request), .endpoint = ep[i], .user = user[i], .cost = 0};
    }
    ck_assert_int_eq(rl_check_many(e->lim, reqs, res, codes, NCASES), RL_OK);
    t2 = env_now(e);
    for (size_t i = 0; i < NCASES; i++) {
        const change *c = &cases[i];
        int64_t lo = units_at(c, sn[i].lo, t1 - sn[i].since);
        int64_t hi = units_at(c, sn[i].hi, t2 - sn[i].since);
        ck_assert_int_eq(codes[i], RL_OK);
        ck_assert_msg(res[i].remaining >= lo && res[i].remaining <= hi,
                      "%s, %s (%s -> %s): %lld left, expected %lld..%lld",
                      store_names[e->store], c->what, c->before, c->after,
                      (long long)res[i].remaining, (long long)lo,
                      (long long)hi);
    }
}

/* Charge case i one by one until denied: as many pass as the client has,
 * never more (no free refill), and the denial says how long to wait. */
static void drain(env *e, size_t i, seen *s)
{
    const change *c = &cases[i];
    char user[16], id[16];
    int64_t t1 = env_now(e), n = 0, lo, hi;
    rl_result res = RL_RESULT_INIT;

    snprintf(user, sizeof user, "user:u%zu", i);
    snprintf(id, sizeof id, "c%zu", i);
    for (;;) {
        res = charge(e, user, id, 1);
        if (!res.allowed)
            break;
        ck_assert_int_le(++n, c->cap + 10);
    }
    s->denied_at = env_now(e);
    lo = units_at(c, s->lo, t1 - s->since);
    hi = units_at(c, s->hi, s->denied_at - s->since);
    ck_assert_msg(n >= lo && n <= hi, "%s, %s (%s -> %s): %lld passed, "
                  "expected %lld..%lld", store_names[e->store], c->what,
                  c->before, c->after, (long long)n, (long long)lo,
                  (long long)hi);
    ck_assert_int_ge(res.retry_after, 1);
    if (c->per_unit_ms) /* the next token, in whole seconds, rounded up */
        ck_assert_int_le(res.retry_after, (c->per_unit_ms + 999) / 1000);
}

/* The hand clock: each bucket case's next token comes exactly one unit
 * after the drain (its level was a whole number of tokens at the change,
 * and all of it was spent then), not a millisecond sooner. */
static void next_token_exact(env *e)
{
    int64_t t = env_now(e);
    static const int64_t units[] = {100, 1000, 2000};
    char user[16], id[16];

    for (size_t k = 0; k < 3; k++) {
        clock_set(t + units[k] - 1);
        for (size_t i = 0; i < NCASES; i++) {
            if (cases[i].per_unit_ms != units[k])
                continue;
            snprintf(user, sizeof user, "user:u%zu", i);
            snprintf(id, sizeof id, "c%zu", i);
            ck_assert_msg(!charge(e, user, id, 1).allowed, "%s: early",
                          cases[i].what);
        }
        clock_set(t + units[k]);
        for (size_t i = 0; i < NCASES; i++) {
            if (cases[i].per_unit_ms != units[k])
                continue;
            snprintf(user, sizeof user, "user:u%zu", i);
            snprintf(id, sizeof id, "c%zu", i);
            ck_assert_msg(charge(e, user, id, 1).allowed, "%s: late",
                          cases[i].what);
        }
    }
}

/* Redis: each bucket case's next token comes within a unit (plus slack)
 * of its denial; polled, every case at once. */
static void next_token_bounded(env *e, const seen *sn)
{
    int left = 0, done[NCASES] = {0};
    int64_t until = 0;
    char user[16], id[16];

    for (size_t i = 0; i < NCASES; i++) {
        if (!cases[i].per_unit_ms || cases[i].cap == 0) {
            done[i] = 1;
            continue;
        }
        left++;
        if (sn[i].denied_at + cases[i].per_unit_ms + SLACK_MS > until)
            until = sn[i].denied_at + cases[i].per_unit_ms + SLACK_MS;
    }
    while (left > 0) {
        int64_t now = env_now(e);
        for (size_t i = 0; i < NCASES; i++) {
            if (done[i])
                continue;
            snprintf(user, sizeof user, "user:u%zu", i);
            snprintf(id, sizeof id, "c%zu", i);
            if (!charge(e, user, id, 1).allowed) {
                ck_assert_msg(now <= sn[i].denied_at + cases[i].per_unit_ms +
                                         SLACK_MS,
                              "%s, %s: no token %lld ms after the denial",
                              store_names[e->store], cases[i].what,
                              (long long)(now - sn[i].denied_at));
                continue;
            }
            done[i] = 1;
            left--;
        }
        if (left > 0 && now < until)
            nap_ms(10);
    }
}

/* Plain layout, right after the drains: a client whose state moved has
 * no key of the old shape left, and one of the new (a drained bucket's
 * key lives until the bucket is full again, a second at the least). */
static void old_keys_gone(env *e)
{
    redisContext *ctx = rh_connect(&srv);

    ck_assert_ptr_nonnull(ctx);
    for (size_t i = 0; i < NCASES; i++) {
        char id[16], name[128];
        const rl_rule *r;
        redisReply *rep;
        snprintf(id, sizeof id, "c%zu", i);
        r = rule_now(e, id);
        if (r->nprev == 0 || cases[i].avail == 0)
            continue;
        snprintf(name, sizeof name, "rl:{user:u%zu}:%s:%s", i, id,
                 r->prev[0].name);
        rep = redisCommand(ctx, "EXISTS %s", name);
        ck_assert_int_eq(rep->integer, 0);
        freeReplyObject(rep);
        snprintf(name, sizeof name, "rl:{user:u%zu}:%s:%s", i, id,
                 r->shape.name);
        rep = redisCommand(ctx, "EXISTS %s", name);
        ck_assert_int_eq(rep->integer, 1);
        freeReplyObject(rep);
    }
    redisFree(ctx);
}

static void matrix(int store)
{
    env e;
    seen sn[NCASES];
    char *before = case_rules(0), *after = case_rules(1);
    int64_t reload;

    env_open(&e, store);
    clear_of_window_ends(&e);
    load(&e, before);
    for (size_t i = 0; i < NCASES; i++) {
        char user[16], id[16];
        snprintf(user, sizeof user, "user:u%zu", i);
        snprintf(id, sizeof id, "c%zu", i);
        sn[i].pre_at = env_now(&e);
        for (int k = 0; k < cases[i].pre; k++)
            ck_assert(charge(&e, user, id, 1).allowed);
    }
    reload = env_now(&e);
    load(&e, after);
    for (size_t i = 0; i < NCASES; i++) {
        char id[16];
        const rl_rule *r;
        snprintf(id, sizeof id, "c%zu", i);
        r = rule_now(&e, id);
        /* a window's limit is no part of its shape: nothing to remember */
        ck_assert_int_eq(r->nprev, !cases[i].kept);
        level_bounds(&cases[i], r, reload, &sn[i]);
    }
    probe_all(&e, sn);
    for (size_t i = 0; i < NCASES; i++)
        drain(&e, i, &sn[i]);
    if (store == PLAIN) /* before the fastest bucket is full again */
        old_keys_gone(&e);
    if (store == MEMORY)
        next_token_exact(&e);
    else
        next_token_bounded(&e, sn);
    if (store == MEMORY) { /* long after: every client fresh again */
        clock_add(3 * 3600 * 1000);
        for (size_t i = 0; i < NCASES; i++) {
            char user[16], id[16];
            snprintf(user, sizeof user, "user:u%zu", i);
            snprintf(id, sizeof id, "c%zu", i);
            ck_assert_int_eq(charge(&e, user, id, 0).remaining,
                             cases[i].cap);
        }
    }
    free(before);
    free(after);
    env_close(&e);
}

START_TEST(every_change_memory)
{
    matrix(MEMORY);
}
END_TEST

START_TEST(every_change_redis_plain)
{
    matrix(PLAIN);
}
END_TEST

START_TEST(every_change_redis_compact)
{
    matrix(COMPACT);
}
END_TEST

START_TEST(every_change_cluster)
{
    matrix(CLUSTER);
}
END_TEST

/* ---- the issue's two reports --------------------------------------------- */

/* "A gcra rule of 1/s with burst 10, drained, then reloaded as 10/s,
 * denies the client with Retry-After: 1 on every try for about 9 s (and
 * a token_bucket rule on redis:// (plain layout) after the same change is
 * frozen for about 9 s too)."  Now the next token comes 100 ms after the
 * change, and then one every 100 ms. */
static void issue_case(int store, const char *algo)
{
    char before[256], after[256];
    env e;
    rl_result res = RL_RESULT_INIT;
    int64_t since, first = -1, t;
    int passed = 0;

    snprintf(before, sizeof before,
             "[{\"rule_id\":\"api\",\"dimension\":\"user\",\"limit\":1,"
             "\"window_seconds\":1,\"burst\":10,\"algorithm\":\"%s\"}]", algo);
    snprintf(after, sizeof after,
             "[{\"rule_id\":\"api\",\"dimension\":\"user\",\"limit\":10,"
             "\"window_seconds\":1,\"burst\":10,\"algorithm\":\"%s\"}]", algo);
    env_open(&e, store);
    load(&e, before);
    for (int i = 0; i < 10; i++)
        ck_assert(charge(&e, "user:42", "api", 1).allowed);
    res = charge(&e, "user:42", "api", 1);
    ck_assert(!res.allowed);
    ck_assert_int_eq(res.retry_after, 1);
    load(&e, after);
    since = rule_now(&e, "api")->prev[0].since_ms;
    res = charge(&e, "user:42", "api", 1);
    if (env_now(&e) - since < 100) {
        ck_assert(!res.allowed);
        ck_assert_int_eq(res.retry_after, 1); /* 100 ms, rounded up */
    }
    if (store == MEMORY) { /* exact: 100 ms after the change, not 99 */
        clock_set(since + 99);
        ck_assert(!charge(&e, "user:42", "api", 1).allowed);
        for (int k = 1; k <= 10; k++) {
            clock_set(since + 100 * k);
            ck_assert(charge(&e, "user:42", "api", 1).allowed);
            ck_assert(!charge(&e, "user:42", "api", 1).allowed);
        }
        env_close(&e);
        return;
    }
    /* Redis TIME: try every 10 ms for 1.1 s after the change */
    while ((t = env_now(&e)) < since + 1100) {
        if (charge(&e, "user:42", "api", 1).allowed) {
            passed++;
            if (first < 0)
                first = t - since;
        }
        nap_ms(10);
    }
    ck_assert_msg(first >= 0 && first <= 100 + SLACK_MS,
                  "%s on %s: first admitted %lld ms after the change", algo,
                  store_names[store], (long long)first);
    ck_assert_msg(passed >= 5 && passed <= 11,
                  "%s on %s: %d admitted in the 1.1 s after the change at "
                  "10/s", algo, store_names[store], passed);
    env_close(&e);
}

START_TEST(issue_gcra_raised_rate_memory)
{
    issue_case(MEMORY, "gcra");
    issue_case(MEMORY, "token_bucket");
}
END_TEST

START_TEST(issue_token_bucket_raised_rate_redis_plain)
{
    issue_case(PLAIN, "token_bucket");
    issue_case(PLAIN, "gcra");
}
END_TEST

START_TEST(issue_raised_rate_redis_compact)
{
    issue_case(COMPACT, "token_bucket");
    issue_case(COMPACT, "gcra");
}
END_TEST

/* ---- all-or-nothing, cost ----------------------------------------------- */

/* A request whose other rule denies writes nothing: the client's state
 * stays under the old shape (and converts again next time).  b refills a
 * token in 360 s (36 s after the change), so the count it asserts holds
 * however slowly the case runs (valgrind took over a second: a bucket
 * refilling a token a second had given one back). */
static void all_or_nothing(int store)
{
    const char *before =
        "[{\"rule_id\":\"b\",\"dimension\":\"user\",\"limit\":10,"
        "\"window_seconds\":3600,\"burst\":10,\"algorithm\":\"token_bucket\"},"
        " {\"rule_id\":\"w\",\"dimension\":\"user\",\"limit\":1,"
        "\"window_seconds\":3600,\"algorithm\":\"fixed_window\"}]";
    const char *after =
        "[{\"rule_id\":\"b\",\"dimension\":\"user\",\"limit\":100,"
        "\"window_seconds\":3600,\"burst\":10,\"algorithm\":\"gcra\"},"
        " {\"rule_id\":\"w\",\"dimension\":\"user\",\"limit\":1,"
        "\"window_seconds\":3600,\"algorithm\":\"fixed_window\"}]";
    rl_request req = {.size = sizeof(rl_request), .user = "7", .cost = 1};
    rl_result res = RL_RESULT_INIT;
    env e;

    env_open(&e, store);
    clear_of_window_ends(&e);
    load(&e, before);
    for (int i = 0; i < 6; i++) /* 4 tokens left; then w is spent */
        ck_assert(charge(&e, "user:7", "b", 1).allowed);
    ck_assert(charge(&e, "user:7", "w", 1).allowed);
    load(&e, after);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(rl_check(e.lim, &req, &res), RL_OK);
        ck_assert(!res.allowed);
        ck_assert_str_eq(res.rule_id, "w");
    }
    /* b was decided three times and charged never: still 4 */
    ck_assert_int_eq(charge(&e, "user:7", "b", 0).remaining, 4);
    if (store == PLAIN) {
        redisContext *ctx = rh_connect(&srv);
        redisReply *rep = redisCommand(
            ctx, "EXISTS rl:{user:7}:b:t3600:10:10 rl:{user:7}:b:g3600:100:10");
        ck_assert_int_eq(rep->integer, 1); /* the old one only */
        freeReplyObject(rep);
        redisFree(ctx);
    }
    env_close(&e);
}

START_TEST(migration_all_or_nothing_memory)
{
    all_or_nothing(MEMORY);
}
END_TEST

START_TEST(migration_all_or_nothing_redis)
{
    all_or_nothing(PLAIN);
}
END_TEST

/* Calls of `cmd` so far (INFO commandstats). */
static long long cmdstat_calls(const char *cmd)
{
    long long n = rh_cmdstat_calls(&srv, cmd);

    ck_assert_int_ge(n, 0);
    return n;
}

static void reset_stats(void)
{
    redisContext *ctx = rh_connect(&srv);
    freeReplyObject(redisCommand(ctx, "CONFIG RESETSTAT"));
    redisFree(ctx);
}

/* Only a changed rule's misses look further, and only while the old
 * shape can still hold state: 100 new clients of an unchanged rule cost
 * one read of their state each; of a changed one, two (the new name, then
 * the old); once the old shape's time is over, one again.  A read is a GET,
 * or the INCRBY by which the lean path of a lone check (lua/lean.lua, for a
 * rule with no replaced shape in force) reads and charges a window at once. */
static long long state_reads(void)
{
    return cmdstat_calls("get") + cmdstat_calls("incrby");
}

START_TEST(only_misses_of_changed_rules_look_further)
{
    const char *v1 = "[{\"rule_id\":\"a\",\"dimension\":\"user\","
                     "\"limit\":5,\"window_seconds\":60},"
                     " {\"rule_id\":\"k\",\"dimension\":\"user\","
                     "\"limit\":5,\"window_seconds\":60}]";
    const char *v2 = "[{\"rule_id\":\"a\",\"dimension\":\"user\","
                     "\"limit\":5,\"window_seconds\":120},"
                     " {\"rule_id\":\"k\",\"dimension\":\"user\","
                     "\"limit\":5,\"window_seconds\":60}]";
    char user[32];
    env e;

    env_open(&e, PLAIN);
    load(&e, v1);
    load(&e, v2);
    ck_assert_int_eq(rule_now(&e, "a")->nprev, 1);
    reset_stats();
    for (int i = 0; i < 100; i++) {
        snprintf(user, sizeof user, "user:k%d", i);
        charge(&e, user, "k", 1);
    }
    ck_assert_int_eq(state_reads(), 100);
    reset_stats();
    for (int i = 0; i < 100; i++) {
        snprintf(user, sizeof user, "user:a%d", i);
        charge(&e, user, "a", 1);
    }
    ck_assert_int_eq(state_reads(), 200);
    reset_stats();
    for (int i = 0; i < 100; i++) { /* hits: one GET */
        snprintf(user, sizeof user, "user:a%d", i);
        charge(&e, user, "a", 1);
    }
    ck_assert_int_eq(state_reads(), 100);
    /* a change stamped long ago: its old shape's time is over */
    ruleset_set_clock(test_clock, NULL);
    clock_set(real_ms() - 3600 * 1000);
    load(&e, v1);
    ck_assert_int_eq(rule_now(&e, "a")->nprev, 1);
    ck_assert_int_lt(rule_now(&e, "a")->prev[0].until_ms, real_ms());
    reset_stats();
    for (int i = 0; i < 100; i++) {
        snprintf(user, sizeof user, "user:b%d", i);
        charge(&e, user, "a", 1);
    }
    ck_assert_int_eq(state_reads(), 100);
    env_close(&e);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rulechange");
    TCase *pure = tcase_create("memory");
    TCase *redis = tcase_create("redis");
    TCase *cluster = tcase_create("cluster");
    int redis_ok = rh_available(), cluster_ok = redis_ok &&
                                               rh_cluster_available();

    tcase_add_test(pure, every_change_memory);
    tcase_add_test(pure, issue_gcra_raised_rate_memory);
    tcase_add_test(pure, migration_all_or_nothing_memory);
    suite_add_tcase(s, pure);
    if (redis_ok) {
        tcase_set_timeout(redis, 60);
        tcase_add_test(redis, every_change_redis_plain);
        tcase_add_test(redis, every_change_redis_compact);
        tcase_add_test(redis, issue_token_bucket_raised_rate_redis_plain);
        tcase_add_test(redis, issue_raised_rate_redis_compact);
        tcase_add_test(redis, migration_all_or_nothing_redis);
        tcase_add_test(redis, only_misses_of_changed_rules_look_further);
        suite_add_tcase(s, redis);
    } else {
        fprintf(stderr, "check_rulechange: no redis-server, memory only\n");
    }
    if (cluster_ok) {
        tcase_set_timeout(cluster, 120);
        tcase_add_test(cluster, every_change_cluster);
        suite_add_tcase(s, cluster);
    }
    return run_suite(s);
}
