/*
 * algo_vectors.h -- the random vectors the twin tests run through two
 * implementations of the algorithms and compare step by step
 * (check_lua.c, check_lua_lean.c: the C maths beside the Lua script;
 * check_module.c: beside
 * ratelimit.so too): a rule's random numbers, a step's random cost, and
 * the assertion that two decisions are the same, naming the rule, the
 * step, the time from the base and the cost.  The including suite defines
 * rnd(n), its seeded draw below n, so that each keeps its own sequence.
 */
#ifndef RL_TESTS_ALGO_VECTORS_H
#define RL_TESTS_ALGO_VECTORS_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>

#include "algo.h"

static uint64_t rnd(uint64_t n);

static inline void same_decision(const algo_decision *c,
                                 const algo_decision *x, const char *what,
                                 const algo_params *ap, int step,
                                 int64_t base, int64_t t, int64_t cost)
{
    ck_assert_msg(c->allowed == x->allowed && c->remaining == x->remaining &&
                  c->reset_ms == x->reset_ms && c->retry_ms == x->retry_ms,
                  "%s: %s limit %lld burst %lld window %lld ms, step %d at "
                  "t=%lld cost %lld (base %lld): {%d %lld %lld %lld} vs "
                  "{%d %lld %lld %lld}",
                  what, algo_name(ap->algo), (long long)ap->limit,
                  (long long)ap->burst, (long long)ap->window_ms, step,
                  (long long)(t - base), (long long)cost, (long long)base,
                  c->allowed, (long long)c->remaining, (long long)c->reset_ms,
                  (long long)c->retry_ms, x->allowed,
                  (long long)x->remaining, (long long)x->reset_ms,
                  (long long)x->retry_ms);
}

/* A rule of algorithm algo with random numbers (a sliding log's limit
 * kept to 1..20, its log's size). */
static inline algo_params random_params(int algo)
{
    static const int64_t windows[] = {1, 7, 60, 3600, 86400};
    static const int64_t limits[] = {1, 3, 7, 100, 999983, 1000000};
    algo_params ap;
    char err[200];
    int64_t w = windows[rnd(5)], limit = limits[rnd(6)], burst = 0;

    if (algo == RL_ALGO_SLIDING_LOG)
        limit = 1 + (int64_t)rnd(20);
    if (algo == RL_ALGO_TOKEN_BUCKET || algo == RL_ALGO_GCRA)
        burst = rnd(2) ? 1 + (int64_t)rnd((uint64_t)limit * 2) : 0;
    if (algo_params_init(&ap, algo, limit, burst, w, err, sizeof err) != 0)
        ck_assert_int_eq(algo_params_init(&ap, algo, 10, 0, 1, err,
                                          sizeof err), 0);
    return ap;
}

/* A step's cost: mostly 1, some 0, some over the capacity. */
static inline int64_t next_cost(const algo_params *ap)
{
    int64_t cap = ap->burst ? ap->burst : ap->limit;

    switch (rnd(6)) {
    case 0: return 0;
    case 1: return cap + (int64_t)rnd(3); /* over the capacity */
    case 2: return 1 + (int64_t)rnd((uint64_t)cap);
    default: return 1;
    }
}

/* GCRA's rule for the token bucket, the same vector for every
 * implementation (check_algo.c's token_bucket_clock_back_refills_nothing
 * tells the steps): 100 a minute, burst 20 (p = 600, q = 1), a new key
 * charged at base + dt; a clock gone back by d ms counts d units fewer
 * (never more tokens), down to -cap, and a denial's retry counts the
 * refill time still to come.  Before that rule the steps at 4800 said 8
 * tokens left (the level held at its last charge's time, 6000). */
typedef struct bucket_step {
    int64_t dt, cost;
    int allowed;
    int64_t remaining, retry, reset_dt;
} bucket_step;

static const bucket_step bucket_clock_back[] = {
    {0, 20, 1, 0, 0, 12000},
    {6000, 2, 1, 8, 0, 13200},       /* 10 refilled, 2 charged        */
    {4800, 1, 1, 5, 0, 13800},       /* 1200 ms back: 6, not 8        */
    {4800, 5, 1, 0, 0, 16800},
    {4000, 1, 0, 0, 1400, 16800},    /* level -800: 800 ms, then 600   */
    {4000 - 86400000LL, 1, 0, 0, 12600, 4000 - 86400000LL + 24000},
    {16800, 20, 1, 0, 0, 28800},     /* full again when it said        */
};

/* One step's decision against its expected one (base: the run's time 0). */
static inline void bucket_step_assert(const bucket_step *s,
                                      const algo_decision *d, int64_t base,
                                      const char *what, const char *step,
                                      size_t i)
{
    ck_assert_msg(d->allowed == s->allowed &&
                  d->remaining == s->remaining &&
                  d->retry_ms == s->retry &&
                  d->reset_ms == base + s->reset_dt,
                  "%s: %s %zu: {%d %lld %lld %lld} want "
                  "{%d %lld %lld %lld}", what, step, i, d->allowed,
                  (long long)d->remaining, (long long)d->retry_ms,
                  (long long)(d->reset_ms - base), s->allowed,
                  (long long)s->remaining, (long long)s->retry,
                  (long long)s->reset_dt);
}

/* The start of the compact layout's epoch after t for the vectors' rule
 * (L = burst * p / q + 2 = 12002 ms; bucket_clock_back_run checks it). */
static inline int64_t bucket_vector_epoch(int64_t t)
{
    return t - t % 12002 + 12002;
}

/* Runs the vector through `apply` (one charge of the bucket on its key
 * at a time), asserting every step.  The compact layout (compact != 0)
 * decides alike only within the epoch it last wrote in or the next one
 * (lua/compact.lua): base is then an epoch's start (L = 12002 ms here),
 * and the step a day back is left out. */
static inline void bucket_clock_back_run(
    void (*apply)(const algo_params *ap, int64_t now, int64_t cost,
                  algo_decision *d),
    int64_t base, int compact, const char *what)
{
    algo_params ap;
    char err[200];

    ck_assert_int_eq(algo_params_init(&ap, RL_ALGO_TOKEN_BUCKET, 100, 20, 60,
                                      err, sizeof err), 0);
    for (size_t i = 0; i < sizeof bucket_clock_back /
                                sizeof bucket_clock_back[0]; i++) {
        const bucket_step *s = &bucket_clock_back[i];
        algo_decision d;

        if (compact && s->dt < 0)
            continue;
        if (compact)
            ck_assert_int_eq(base % (ap.burst * ap.p / ap.q + 2), 0);
        apply(&ap, base + s->dt, s->cost, &d);
        bucket_step_assert(s, &d, base, what, "step", i);
    }
}

/* A refund on the same bucket, taken at now (GCRA's rule, as the
 * charges): the level at now plus cost, capped at the burst, the state
 * (that level, now).  Steps with refund set give back cost and decide
 * nothing.  Before that rule a refund capped the level held at its last
 * charge's time: at 4800 (1200 ms back) a plain key said full at 6000,
 * step 3 then {16 left, reset 6600}, and the lean "0" key full at 4200,
 * {19 left, reset 4900}; now both say full at 4800.  After now (step 7)
 * the refill time is today's (15000). */
typedef struct bucket_refund_step {
    int refund;
    bucket_step s;
} bucket_refund_step;

static const bucket_refund_step bucket_refund_clock_back[] = {
    {0, {0, 20, 1, 0, 0, 12000}},
    {0, {6000, 2, 1, 8, 0, 13200}},
    {1, {4800, 15, 0, 0, 0, 0}},        /* 3600 + 9000: full at 4800  */
    {0, {4300, 1, 1, 18, 0, 5400}},     /* 11500 - 600                */
    {1, {5000, 1, 0, 0, 0, 0}},         /* full at 5000, not at 4800  */
    {0, {4900, 1, 1, 18, 0, 5600}},
    {0, {6000, 19, 1, 1, 0, 17400}},
    {1, {9000, 4, 0, 0, 0, 0}},         /* 3600 + 2400 at 9000        */
    {0, {9000, 0, 1, 10, 0, 15000}},
    {0, {9000, 10, 1, 0, 0, 21000}},
    {1, {8000, 1, 0, 0, 0, 0}},         /* -1000 + 600: empty at 8400 */
    {0, {8000, 1, 0, 0, 1000, 20400}},
};

/* Runs that vector: `apply` charges as bucket_clock_back_run's, `refund`
 * gives cost back at now (the charge's time, at_ms, is now too). */
static inline void bucket_refund_run(
    void (*apply)(const algo_params *ap, int64_t now, int64_t cost,
                  algo_decision *d),
    void (*refund)(const algo_params *ap, int64_t now, int64_t cost),
    int64_t base, const char *what)
{
    algo_params ap;
    char err[200];

    ck_assert_int_eq(algo_params_init(&ap, RL_ALGO_TOKEN_BUCKET, 100, 20, 60,
                                      err, sizeof err), 0);
    for (size_t i = 0; i < sizeof bucket_refund_clock_back /
                                sizeof bucket_refund_clock_back[0]; i++) {
        const bucket_step *s = &bucket_refund_clock_back[i].s;
        algo_decision d;

        if (bucket_refund_clock_back[i].refund) {
            refund(&ap, base + s->dt, s->cost);
            continue;
        }
        apply(&ap, base + s->dt, s->cost, &d);
        bucket_step_assert(s, &d, base, what, "refund step", i);
    }
}

/* Both vectors in both layouts, for a suite whose `apply` and `refund`
 * charge its key and field *key, *field: these point them at a plain key
 * from base() (the suite's time), then at a compact key and field from
 * the epoch after base(); `side` starts the messages ("Lua plain"). */
typedef void (*bucket_apply_fn)(const algo_params *ap, int64_t now,
                                int64_t cost, algo_decision *d);

static inline void bucket_clock_back_layouts(bucket_apply_fn apply,
                                             const char **key,
                                             const char **field,
                                             int64_t (*base)(void),
                                             const char *side)
{
    char what[2][32];

    snprintf(what[0], sizeof what[0], "%s plain", side);
    snprintf(what[1], sizeof what[1], "%s compact", side);
    *key = "rl:{vec}:tb", *field = "";
    bucket_clock_back_run(apply, base(), 0, what[0]);
    *key = "rlc:{vec}:tb:m1", *field = "77";
    bucket_clock_back_run(apply, bucket_vector_epoch(base()), 1, what[1]);
}

static inline void bucket_refund_layouts(
    bucket_apply_fn apply,
    void (*refund)(const algo_params *ap, int64_t now, int64_t cost),
    const char **key, const char **field, int64_t (*base)(void),
    const char *side)
{
    char what[2][32];

    snprintf(what[0], sizeof what[0], "%s plain", side);
    snprintf(what[1], sizeof what[1], "%s compact", side);
    *key = "rl:{vec}:tbr", *field = "";
    bucket_refund_run(apply, refund, base(), what[0]);
    *key = "rlc:{vec}:tbr:m1", *field = "78";
    bucket_refund_run(apply, refund, bucket_vector_epoch(base()), what[1]);
}

#endif
