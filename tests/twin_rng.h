/*
 * twin_rng.h -- the seeded random numbers of the suites that twin-test the
 * C maths against the Lua maths (or ratelimit.so) on random walks
 * (lua_twin_fixture.h's check_lua.c and check_lua_lean.c,
 * check_sliding_log.c, check_module.c): the RNG, its fixture that reseeds
 * it before each test, and the number of walks a test takes.  A suite may
 * define TWIN_RNG_SEED before it includes this (check_sliding_log.c and
 * check_module.c draw their own sequences); the per-test server and
 * connection are lua_fixture.h's.
 */
#ifndef RL_TESTS_TWIN_RNG_H
#define RL_TESTS_TWIN_RNG_H

#include <stdint.h>
#include <stdlib.h>

#include "lua_fixture.h"
#include "testutil.h"

#ifndef TWIN_RNG_SEED
#define TWIN_RNG_SEED 88172645463325252ULL
#endif
static uint64_t rng = TWIN_RNG_SEED;

static inline uint64_t rnd(uint64_t n)
{
    return (xorshift64(&rng) % n);
}

/* The twin suites' fixture: lua_fixture.h's, the RNG reseeded first, so
 * a test draws the same sequence whether Check forks it (a fresh copy of
 * the seed) or not (CK_FORK=no, as tests/sanitize.sh runs the suites:
 * the state would carry over from the tests before, whose draws depend on
 * their own base times, the real clock's when each began). */
static inline void twin_setup(void)
{
    rng = TWIN_RNG_SEED;
    setup();
}

/* How many of a test's n random walks (rules, pairs, rounds: each a new
 * draw of parameters, then its full run of steps) it takes: all n, or
 * n / RL_TEST_WALK_DIV (at least 1) when that is set.  tests/sanitize.sh
 * sets it for its ASan+UBSan run (the walks under the sanitizer were most
 * of its time: Redis round trips, run natively either way); the native
 * runs (make check, build.sh check) leave it unset.  Each walk draws its
 * numbers after the walk before, from the seed twin_setup resets: a test
 * of one run of walks takes the first ones of the full run, step for step
 * (a test of several runs, each after the one before, draws the later
 * runs from other places of the sequence). */
static inline int twin_walks(int n)
{
    const char *env = getenv("RL_TEST_WALK_DIV");
    int div = env && *env ? atoi(env) : 1;

    if (div <= 1)
        return n;
    return n / div > 0 ? n / div : 1;
}

#endif
