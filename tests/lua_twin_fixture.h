/*
 * lua_twin_fixture.h -- the frame of the suites that twin-test the test
 * build of the check script (tests/lua_test_script.c) against the C maths
 * (src/base/algo.c) on a real redis-server: check_lua.c (the general path,
 * both layouts, refunds, rule changes) and check_lua_lean.c (the lean
 * path, batches).  Here: the script call of one request (lua_eval, in its
 * modes: the cluster batch "C", short requests), one charge and one refund
 * through it (lua_apply, the lean path's lean_apply, lua_refund), plain
 * Redis commands, the random times and the two random twin runs both
 * suites drive in their modes (differential: C and Lua on the same
 * sequences; refund_restores: a refunded client and its twin).  One file
 * of tests held them all until it passed the 900 lines; the modes are
 * static here, so each suite has its own.  Its per-test server and
 * connection are lua_fixture.h's; the seeded RNG and its fixture,
 * twin_setup, twin_rng.h's.
 */
#ifndef RL_TESTS_LUA_TWIN_FIXTURE_H
#define RL_TESTS_LUA_TWIN_FIXTURE_H

#include <check.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo.h"
#include "algo_vectors.h"
#include "lua_fixture.h"
#include "redis_harness.h"
#include "testutil.h"
#include "timeutil.h"
#include "twin_rng.h"

/* A shape the rule of a part replaced: its numbers, its shape (the last
 * part of the key name; the old state's name is the part's key with its
 * shape replaced by this one) and when it was replaced. */
typedef struct oldshape {
    const algo_params *ap;
    const char *shape;
    int64_t since;
} oldshape;

/* One part of a script call: a rule's state key (or compact base name),
 * its field ("" = the plain layout), params, cost, and the 8th value (soft
 * for a check, the charge's time for a refund); with `old`, the shapes
 * its rule replaced (the key then ends in `shape`). */
typedef struct part {
    const char *key, *field;
    const algo_params *ap;
    int64_t cost, last;
    const char *shape;      /* its key's last part, with old shapes    */
    const oldshape *old;
    int nold;
} part;

/* Checks go in the cluster batch mode "C" (keys undeclared, each key's
 * name after its 4 values), which must decide exactly as "c". */
static int cross_mode;

/* Plain hard checks go as short requests (a key count "-n", then only each
 * key's rule index and cost), which must decide exactly as the long form:
 * what src/redis/redis_script.c sends for them. */
static int short_mode;

/* One script call of one request of n parts, in mode 'c' or 'r': a rule
 * table of one rule per part (lua/check.lua), then the part's keys. */
static inline redisReply *lua_eval(char mode, int64_t now, const part *pt,
                                   int n)
{
    enum { MAXP = 4, MAXARG = 256 };
    int cross = cross_mode && mode == 'c';
    int brief = short_mode && mode == 'c' && !cross;
    char num[MAXARG][24], mstr[2] = {cross ? 'C' : mode, 0};
    const char *argv[MAXARG];
    size_t lens[MAXARG];
    int c = 0;
    redisReply *r;

    ck_assert_int_le(n, MAXP);
#define NUM(v) (snprintf(num[c], sizeof num[c], "%lld", (long long)(v)), \
                argv[c] = num[c], c++)
#define PARAMS(ap) (NUM((ap)->algo), NUM((ap)->limit), NUM((ap)->burst), \
                    NUM((ap)->window_ms), NUM((ap)->p), NUM((ap)->q))
    int64_t at[MAXP];
    int reqs_at, moves = 0;

    c = 2; /* EVALSHA and the script's SHA-1: lua_test_eval() */
    NUM(cross ? 0 : n);
    for (int i = 0; !cross && i < n; i++)
        argv[c++] = pt[i].key;
    NUM(now);
    argv[c++] = mstr;
    reqs_at = c++;   /* ARGV[3]: filled in below */
    for (int i = 0; i < n; i++) { /* the rule table: one rule per part */
        int nold = mode == 'r' ? 0 : pt[i].nold;
        at[i] = c - (cross ? 2 : 2 + n); /* its index in ARGV */
        PARAMS(pt[i].ap);
        NUM(nold);
        if (nold)
            argv[c++] = pt[i].shape;
        for (int k = 0; k < nold; k++) {
            PARAMS(pt[i].old[k].ap);
            argv[c++] = pt[i].old[k].shape;
            NUM(pt[i].old[k].since);
        }
    }
    for (int i = 0; i < n; i++)
        moves |= mode != 'r' && pt[i].nold > 0;
    snprintf(num[reqs_at], sizeof num[reqs_at], "%d",
             (moves ? -1 : 1) * (c - (cross ? 2 : 2 + n)));
    argv[reqs_at] = num[reqs_at];
    NUM(1);          /* one request */
    for (int i = 0; i < n; i++)
        brief &= pt[i].field[0] == 0 && pt[i].last == 0;
    NUM(brief ? -n : n); /* of n keys; "-n": 2 values each */
    for (int i = 0; i < n; i++) {
        NUM(at[i]);
        NUM(pt[i].cost);
        if (brief)
            continue;
        NUM(pt[i].last);
        argv[c++] = pt[i].field;
        if (cross)
            argv[c++] = pt[i].key;
    }
#undef PARAMS
#undef NUM
    ck_assert_int_le(c, MAXARG);
    r = lua_test_eval(c, argv, lens);
    ck_assert_msg(r->type != REDIS_REPLY_ERROR, "script: %s", r->str);
    return r;
}

/* Plain-layout charges go to the lean path (lua/lean.lua, check.lua's
 * mode "l": what src/redis/redis_script.c sends a lone one-rule check as):
 * 1 always, 2 every other charge at random, so the lean and the general
 * path read the state the other wrote. */
static int lean_mode;

/* The lean argument's tail (option redis_oldest_limiter): 0 none (1.0,
 * the default), 1 ":1" (1.1: a live q = 1 token bucket's charge is
 * PEXPIREAT alone), 2 either, at random call by call. */
static int lean_oldest;

/* The lean argument of one op, "algo:limit:burst:window:p:q:cost" and
 * the tail, in buf (LEAN_ARG bytes). */
#define LEAN_ARG 160
static inline const char *lean_arg(char *buf, const algo_params *ap,
                                   int64_t cost)
{
    int on = lean_oldest == 1 || (lean_oldest == 2 && rnd(2));

    snprintf(buf, LEAN_ARG, "%d:%lld:%lld:%lld:%lld:%lld:%lld%s", ap->algo,
             (long long)ap->limit, (long long)ap->burst,
             (long long)ap->window_ms, (long long)ap->p, (long long)ap->q,
             (long long)cost, on ? ":1" : "");
    return buf;
}

/* One charge through the lean path: the answer is one string, the op's
 * three doubles and the time. */
/* `now` "0": the lean path reads Redis's clock (PEXPIRETIME - PTTL of a
 * live key, else TIME) instead of a test's time. */
static inline void lean_apply(const algo_params *ap, const char *key,
                              int64_t now, int64_t cost, algo_decision *d)
{
    char t[24], arg[LEAN_ARG];
    const char *argv[] = {"", "", "1", key, t, "l", arg};
    size_t lens[7];
    redisReply *r;

    snprintf(t, sizeof t, "%lld", (long long)now);
    lean_arg(arg, ap, cost);
    r = lua_test_eval(7, argv, lens);
    ck_assert_msg(r->type == REDIS_REPLY_STRING && r->len == 32,
                  "lean reply type %d: %s", r->type,
                  r->type == REDIS_REPLY_ERROR ? r->str : "");
    {   /* lua_answer() reads an array's first element */
        redisReply el = *r, *elp = &el;
        redisReply arr = {.type = REDIS_REPLY_ARRAY, .elements = 1,
                          .element = &elp};
        lua_answer(&arr, 0, d);
        d->expires_ms = lua_answer_value(&arr, 1, 0); /* the time used */
        if (now)
            ck_assert_int_eq(d->expires_ms, now);
    }
    freeReplyObject(r);
}

/* One charge through the Lua script on `key` (and `field`). */
static inline void lua_apply(const algo_params *ap, const char *key,
                             const char *field, int64_t now, int64_t cost,
                             algo_decision *d)
{
    part pt = {.key = key, .field = field, .ap = ap, .cost = cost};
    redisReply *r;

    if (lean_mode && !field[0] && ap->algo != RL_ALGO_SLIDING_LOG &&
        (lean_mode == 1 || rnd(2))) {
        lean_apply(ap, key, now, cost, d);
        return;
    }
    r = lua_eval('c', now, &pt, 1);

    lua_answer_shape(r, 1);
    lua_answer(r, 0, d);
    ck_assert_int_eq(r->element[1]->integer, now);
    freeReplyObject(r);
}

/* Refund `cost` charged at `at` on `key` (and `field`), at `now`. */
static inline void lua_refund(const algo_params *ap, const char *key,
                              const char *field, int64_t now, int64_t cost,
                              int64_t at)
{
    part pt = {.key = key, .field = field, .ap = ap, .cost = cost,
               .last = at};
    redisReply *r = lua_eval('r', now, &pt, 1);

    ck_assert_int_eq(r->type, REDIS_REPLY_INTEGER);
    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
}

static inline redisReply *cmd(const char *fmt, ...)
{
    va_list ap;
    redisReply *r;

    va_start(ap, fmt);
    r = redisvCommand(ctx, fmt, ap);
    va_end(ap);
    ck_assert_ptr_nonnull(r);
    return r;
}

static inline long long cmd_int(const char *fmt, ...)
{
    va_list ap;
    redisReply *r;
    long long v;

    va_start(ap, fmt);
    r = redisvCommand(ctx, fmt, ap);
    va_end(ap);
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(r->type, REDIS_REPLY_INTEGER);
    v = r->integer;
    freeReplyObject(r);
    return v;
}

static inline int is_bucket(int algo)
{
    return algo == RL_ALGO_TOKEN_BUCKET || algo == RL_ALGO_GCRA;
}

/* The compact layout's epoch length (lua/compact.lua): W for the windows,
 * L = ceil(burst*p/q) + 2 ms for the buckets. */
static inline int64_t epoch_ms(const algo_params *ap)
{
    if (!is_bucket(ap->algo))
        return ap->window_ms;
    return (ap->burst * ap->p + ap->q - 1) / ap->q + 2;
}

/* The base time of the differential tests: RL_TEST_BASE_MS when set, to
 * replay a failing run (its failure message prints the base; the RNG's
 * seed is a constant, reset for every test by twin_setup, so the base is
 * all that varies, with CK_FORK=no too), else the real clock an hour
 * ahead, on a whole second.  A replayed base must still be ahead
 * of the real clock by ten minutes or more: Redis expires keys by its own
 * clock, and a key written with an expiry already past would vanish. */
static inline int64_t test_base(void)
{
    const char *env = getenv("RL_TEST_BASE_MS");
    int64_t base;
    char *end;

    if (!env || !*env)
        return real_ms() / 1000 * 1000 + 3600 * 1000;
    base = (int64_t)strtoll(env, &end, 10);
    ck_assert_msg(*end == 0 && base > real_ms() + 600 * 1000,
                  "RL_TEST_BASE_MS=%s: a time in ms at least 10 minutes "
                  "ahead of the real clock (%lld)", env,
                  (long long)real_ms());
    return base;
}

/* A sequence of steps: mostly small moves, some jumps, some steps back. */
static inline int64_t next_time(const algo_params *ap, int64_t t, int64_t base)
{
    switch (rnd(8)) {
    case 0: return t;                                  /* same ms      */
    case 1: return t + 1 + (int64_t)rnd(5);            /* a few ms     */
    case 2: return t + (int64_t)rnd((uint64_t)ap->window_ms / 4 + 1);
    case 3: return t + ap->window_ms + (int64_t)rnd(1000);  /* a window */
    case 4: return t - (int64_t)rnd(2000) < base ? base : t - (int64_t)rnd(2000);
    default: return t + (int64_t)rnd((uint64_t)ap->q ? 2000 : 10);
    }
}

/* The C maths and the Lua maths on the same random (time, cost) sequences.
 * Compact: two clients (fields) of each rule share the base and its hashes;
 * some gaps pass one, two or three epochs, so the previous epoch's hash,
 * and no hash (a stale state), are read.  Steps back stay within the
 * newest epoch seen: the compact layout decides the same only there (see
 * lua/compact.lua; a token bucket also before its last charge's time,
 * since both take GCRA's rule). */
static inline void differential(int algo, int rules, int steps, int compact)
{
    int64_t base = test_base();

    rules = twin_walks(rules);
    for (int r = 0; r < rules; r++) {
        algo_params ap = random_params(algo);
        algo_state st[2] = {{0}, {0}};
        int64_t t = base + (int64_t)rnd(100000), tmax = t;
        int64_t e_ms = epoch_ms(&ap);
        char key[64], field[2][16] = {"", ""};

        if (!compact) {
            snprintf(key, sizeof key, "rl:{diff%d}:%s-%d", lean_mode,
                     algo_name(algo), r);
        } else {
            uint64_t f = rnd(1u << 31);
            snprintf(key, sizeof key, "rlc:{%u}:diff-%s-%d:x",
                     (unsigned)rnd(65536), algo_name(algo), r);
            snprintf(field[0], sizeof field[0], "%llu", (unsigned long long)f);
            snprintf(field[1], sizeof field[1], "%llu",
                     (unsigned long long)((f + 1 + rnd(1000)) % (1u << 31)));
        }
        for (int s = 0; s < steps; s++) {
            algo_decision c, l;
            int64_t cost = next_cost(&ap);
            int who = compact ? (int)rnd(2) : 0;

            algo_apply(&ap, &st[who], t, cost, &c);
            lua_apply(&ap, key, field[who], t, cost, &l);
            same_decision(&c, &l, compact ? "C vs Lua compact" : "C vs Lua",
                          &ap, s, base, t, cost);
            if (!compact) {
                t = next_time(&ap, t, base);
                continue;
            }
            int64_t lo = tmax - tmax % e_ms;
            t = rnd(10) == 0 ? tmax + (int64_t)rnd((uint64_t)(3 * e_ms))
                             : next_time(&ap, t, lo);
            t = t < lo ? lo : t; /* next_time's step back may pass lo */
            tmax = t > tmax ? t : tmax;
        }
    }
}

/* A refund gives back exactly what its charge took: client A is charged
 * and refunded (at once, or later, in another window or epoch), client B,
 * its twin, is not, and after every step both decide alike.  The clock
 * never goes back here. */
static inline void refund_restores(int algo, int compact)
{
    int64_t base = test_base();

    for (int r = 0, walks = twin_walks(30); r < walks; r++) {
        algo_params ap = random_params(algo);
        int64_t t = base + (int64_t)rnd(100000);
        char ka[64], kb[64];
        const char *fa = compact ? "1234567" : "";
        const char *fb = compact ? "2147483647" : "";

        if (compact) {
            snprintf(ka, sizeof ka, "rlc:{7}:refund-%s-%d:x",
                     algo_name(algo), r);
            strcpy(kb, ka);
        } else {
            snprintf(ka, sizeof ka, "rl:{refund}:%s-%d-a", algo_name(algo), r);
            snprintf(kb, sizeof kb, "rl:{refund}:%s-%d-b", algo_name(algo), r);
        }
        for (int s = 0; s < 80; s++) {
            algo_decision da, db;
            int64_t cost = next_cost(&ap);

            if (rnd(3) == 0) { /* A alone, then the refund */
                lua_apply(&ap, ka, fa, t, cost, &da);
                int64_t at = t;
                switch (rnd(3)) {
                case 0: break;
                case 1: t += (int64_t)rnd(5); break;
                default: t += (int64_t)rnd((uint64_t)(2 * epoch_ms(&ap))); break;
                }
                if (da.allowed && cost > 0)
                    lua_refund(&ap, ka, fa, t, cost, at);
            } else {
                lua_apply(&ap, ka, fa, t, cost, &da);
                lua_apply(&ap, kb, fb, t, cost, &db);
                same_decision(&da, &db, compact ? "compact, A vs B"
                                                : "plain, A vs B",
                              &ap, s, base, t, cost);
            }
            lua_apply(&ap, ka, fa, t, 0, &da); /* a probe charges nothing */
            lua_apply(&ap, kb, fb, t, 0, &db);
            same_decision(&da, &db, compact ? "compact probe, A vs B"
                                            : "plain probe, A vs B",
                          &ap, s, base, t, 0);
            int64_t next = next_time(&ap, t, t);
            t = next > t ? next : t; /* never back */
        }
    }
}

#endif
