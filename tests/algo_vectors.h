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

#endif
