/*
 * check_lua.c -- the C maths (src/base/algo.c) and the Lua maths (lua/) make the
 * same decisions, step for step, on the same (time, cost) sequences, against
 * a real redis-server.  The test build of the script takes its time from
 * ARGV[1], so both sides see identical clocks; times start an hour ahead of
 * the real clock so Redis never expires a key the sequence still uses.
 *
 * Every check runs in both state layouts: the plain one (field "", one key
 * per client and rule) and the compact one (a field in small per-epoch
 * hashes shared by many clients, lua/compact.lua).
 */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algo.h"
#include "algo_vectors.h"
#include "lua_fixture.h"
#include "redis_harness.h"
#include "testutil.h"
#include "timeutil.h"

static uint64_t rng = 88172645463325252ULL;

static uint64_t rnd(uint64_t n)
{
    return (xorshift64(&rng) % n);
}

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
static redisReply *lua_eval(char mode, int64_t now, const part *pt, int n)
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

    argv[c++] = "EVAL";
    argv[c++] = rl_lua_check_test;
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
    for (int i = 0; i < c; i++)
        lens[i] = i == 1 ? rl_lua_check_test_len : strlen(argv[i]);
    r = redisCommandArgv(ctx, c, argv, lens);
    ck_assert_msg(r != NULL, "EVAL: %s", ctx->errstr);
    ck_assert_msg(r->type != REDIS_REPLY_ERROR, "script: %s", r->str);
    return r;
}

/* Plain-layout charges go to the lean path (lua/lean.lua, check.lua's
 * mode "l": what src/redis/redis_script.c sends a lone one-rule check as):
 * 1 always, 2 every other charge at random, so the lean and the general
 * path read the state the other wrote. */
static int lean_mode;

/* One charge through the lean path: the answer is one string, the op's
 * three doubles and the time. */
/* The lean argument of one op, "algo:limit:burst:window:p:q:cost", in
 * buf (LEAN_ARG bytes). */
#define LEAN_ARG 160
static const char *lean_arg(char *buf, const algo_params *ap, int64_t cost)
{
    snprintf(buf, LEAN_ARG, "%d:%lld:%lld:%lld:%lld:%lld:%lld", ap->algo,
             (long long)ap->limit, (long long)ap->burst,
             (long long)ap->window_ms, (long long)ap->p, (long long)ap->q,
             (long long)cost);
    return buf;
}

/* Batches of plain one-rule checks go as the lean batch (check.lua's
 * mode "L": one key and one argument an op, what src/redis/redis_script.c
 * sends for a batch of lone one-rule requests). */
static int lean_batch_mode;

/* `now` "0": the lean path reads Redis's clock (PEXPIRETIME - PTTL of a
 * live key, else TIME) instead of a test's time. */
static void lean_apply(const algo_params *ap, const char *key, int64_t now,
                       int64_t cost, algo_decision *d)
{
    char t[24], arg[LEAN_ARG];
    const char *argv[] = {"EVAL", rl_lua_check_test, "1", key, t, "l", arg};
    size_t lens[7];
    redisReply *r;

    snprintf(t, sizeof t, "%lld", (long long)now);
    lean_arg(arg, ap, cost);
    for (int i = 0; i < 7; i++)
        lens[i] = i == 1 ? rl_lua_check_test_len : strlen(argv[i]);
    r = redisCommandArgv(ctx, 7, argv, lens);
    ck_assert_msg(r != NULL, "EVAL: %s", ctx->errstr);
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
static void lua_apply(const algo_params *ap, const char *key,
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
static void lua_refund(const algo_params *ap, const char *key,
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

static redisReply *cmd(const char *fmt, ...)
{
    va_list ap;
    redisReply *r;

    va_start(ap, fmt);
    r = redisvCommand(ctx, fmt, ap);
    va_end(ap);
    ck_assert_ptr_nonnull(r);
    return r;
}

static long long cmd_int(const char *fmt, ...)
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

static int is_bucket(int algo)
{
    return algo == RL_ALGO_TOKEN_BUCKET || algo == RL_ALGO_GCRA;
}

/* The compact layout's epoch length (lua/compact.lua): W for the windows,
 * L = ceil(burst*p/q) + 2 ms for the buckets. */
static int64_t epoch_ms(const algo_params *ap)
{
    if (!is_bucket(ap->algo))
        return ap->window_ms;
    return (ap->burst * ap->p + ap->q - 1) / ap->q + 2;
}

/* The base time of the differential tests: RL_TEST_BASE_MS when set, to
 * replay a failing run (its failure message prints the base; the RNG's
 * seed is a constant, so the base is all that varies), else the real clock
 * an hour ahead, on a whole second.  A replayed base must still be ahead
 * of the real clock by ten minutes or more: Redis expires keys by its own
 * clock, and a key written with an expiry already past would vanish. */
static int64_t test_base(void)
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
static int64_t next_time(const algo_params *ap, int64_t t, int64_t base)
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
 * newest epoch seen, and for the token bucket after its last refill: the
 * compact layout decides the same only there (see lua/compact.lua). */
static void differential(int algo, int rules, int steps, int compact)
{
    int64_t base = test_base();

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
            if (algo == RL_ALGO_TOKEN_BUCKET)
                for (int i = 0; i < 2; i++)
                    lo = st[i].b > lo ? st[i].b : lo;
            t = rnd(10) == 0 ? tmax + (int64_t)rnd((uint64_t)(3 * e_ms))
                             : next_time(&ap, t, lo);
            t = t < lo ? lo : t; /* next_time's step back may pass lo */
            tmax = t > tmax ? t : tmax;
        }
    }
}

/* The cluster batch mode, both layouts, every algorithm: the same
 * decisions as the C maths (and so as mode "c"). */
START_TEST(cross_slot_mode_same_decisions)
{
    cross_mode = 1;
    for (int algo = 0; algo < 4; algo++) {
        differential(algo, 10, 100, 0);
        differential(algo, 10, 100, 1);
    }
    cross_mode = 0;
}
END_TEST

static void conversion(int compact, int pairs, int steps);
static void refund_restores(int algo, int compact);

/* Short requests (plain layout, hard checks), every algorithm, and a
 * rule change's conversion through them: the same decisions as the C
 * maths. */
START_TEST(short_requests_same_decisions)
{
    short_mode = 1;
    for (int algo = 0; algo < 4; algo++)
        differential(algo, 10, 100, 0);
    conversion(0, 40, 20);
    short_mode = 0;
}
END_TEST

/* The lean path (lua/lean.lua), every algorithm but the log: the same
 * decisions as the C maths, alone and taking turns at random with the
 * general path on the same keys (each reads the state the other wrote:
 * the state is the plain layout's, byte for byte); a refund by the
 * general path gives back what a lean charge took. */
START_TEST(lean_path_same_decisions)
{
    for (int mode = 1; mode <= 2; mode++) {
        lean_mode = mode;
        for (int algo = 0; algo < 4; algo++)
            differential(algo, 10, 100, 0);
    }
    lean_mode = 1;
    for (int algo = 0; algo <= RL_ALGO_GCRA; algo++)
        refund_restores(algo, 0);
    lean_mode = 0;
}
END_TEST

/* The state as every earlier script wrote it (the plain layout: a
 * decimal value whose expiry carries the time, lua/<algorithm>.lua's
 * head), set by hand and read by the lean path: the C maths on the same
 * state decide the same, and the C maths and the general path go on
 * from what the lean path wrote.  Among them a sliding window whose
 * previous count makes its integer pass 2^53 (Lua's doubles) and one
 * past int64 (INCRBY refuses it): the lean path's general steps. */
START_TEST(lean_path_reads_written_state)
{
    int64_t base = test_base(), w = 60000;
    int64_t idx = base / w + 10, t = idx * w + 1234;
    struct {
        int algo;
        int64_t limit, burst, a, b, c, cost;
        const char *value;
        int64_t exp;
    } v[] = {
        /* sliding: this window's 3 and the previous one's 7 */
        {RL_ALGO_SLIDING_WINDOW, 100, 0, idx, 3, 7, 1, "70000000003",
         (idx + 2) * w},
        /* the state written in the previous window: prev moves up */
        {RL_ALGO_SLIDING_WINDOW, 100, 0, idx - 1, 40, 0, 2, "40",
         (idx + 1) * w},
        /* denied: 90 + 20 * (1 - 1234/60000) is past 100 */
        {RL_ALGO_SLIDING_WINDOW, 100, 0, idx, 90, 20, 5, "200000000090",
         (idx + 2) * w},
        {RL_ALGO_SLIDING_WINDOW, 1000000000, 0, idx, 5, 950000000, 1,
         "9500000000000000005", (idx + 2) * w},
        {RL_ALGO_SLIDING_WINDOW, 1000000000, 0, idx, 5, 910000000, 1,
         "9100000000000000005", (idx + 2) * w},
        {RL_ALGO_FIXED_WINDOW, 10, 0, idx, 9, 0, 1, "9", (idx + 1) * w},
        {RL_ALGO_FIXED_WINDOW, 10, 0, idx, 10, 0, 1, "10", (idx + 1) * w},
        /* a clock gone back a window: the state's own window decides */
        {RL_ALGO_FIXED_WINDOW, 10, 0, idx + 1, 4, 0, 1, "4", (idx + 2) * w},
        /* the buckets: q = 1 (10 per minute) and q = 7 (7 per minute) */
        {RL_ALGO_TOKEN_BUCKET, 10, 20, 0, 0, 0, 1, NULL, 0},
        {RL_ALGO_TOKEN_BUCKET, 7, 20, 0, 0, 0, 2, NULL, 0},
        {RL_ALGO_GCRA, 10, 20, 0, 0, 0, 3, NULL, 0},
        {RL_ALGO_GCRA, 7, 20, 0, 0, 0, 3, NULL, 0},
    };

    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        algo_params ap;
        algo_state st = {.a = v[i].a, .b = v[i].b, .c = (uint32_t)v[i].c};
        algo_decision c, l;
        char err[200], key[64], val[32];
        const char *value = v[i].value;
        int64_t exp = v[i].exp, now = t;

        ck_assert_int_eq(algo_params_init(&ap, v[i].algo, v[i].limit,
                                          v[i].burst, w / 1000, err,
                                          sizeof err), 0);
        if (!value) { /* a bucket: 5 tokens left, last refilled 100 ms ago */
            int64_t cap = ap.burst * ap.p;
            if (v[i].algo == RL_ALGO_TOKEN_BUCKET) {
                st.a = 5 * ap.p, st.b = t - 100;
                exp = st.b + (cap - st.a + ap.q - 1) / ap.q;
                snprintf(val, sizeof val, "%lld", (long long)st.a);
            } else { /* a TAT 1.5 s ahead, fraction 1 (q = 1: none) */
                st.a = t + 1500, st.b = ap.q > 1;
                exp = st.a + (st.b > 0);
                snprintf(val, sizeof val, "%lld", (long long)st.b);
            }
            value = val;
        }
        snprintf(key, sizeof key, "rl:{old}:%zu", i);
        freeReplyObject(cmd("SET %s %s PXAT %lld", key, value,
                            (long long)exp));
        for (int s = 0; s < 6; s++, now += 700) {
            algo_apply(&ap, &st, now, v[i].cost, &c);
            lean_mode = s == 0 ? 1 : 2;
            lua_apply(&ap, key, "", now, v[i].cost, &l);
            same_decision(&c, &l, "C vs lean, written state", &ap, s, base,
                          now, v[i].cost);
        }
    }
    lean_mode = 0;
}
END_TEST

/* Redis's time in ms (TIME). */
static int64_t redis_ms(void)
{
    redisReply *r = cmd("TIME");
    int64_t ms;

    ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
    ms = atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000;
    freeReplyObject(r);
    return ms;
}

/* The lean path on Redis's own clock (no test time): the time it used,
 * read off the key's expiry (PEXPIRETIME - PTTL) once a state lives,
 * lies between TIME before and after the call, and the C maths at that
 * time decide the same, every algorithm, q = 1 and q > 1. */
START_TEST(lean_path_reads_redis_clock)
{
    static const int64_t limits[] = {10, 7};

    for (int algo = 0; algo <= RL_ALGO_GCRA; algo++)
        for (int k = 0; k < 2; k++) {
            algo_params ap;
            algo_state st = {0};
            char err[200], key[64];

            ck_assert_int_eq(algo_params_init(&ap, algo, limits[k],
                                              is_bucket(algo) ? 20 : 0, 60,
                                              err, sizeof err), 0);
            snprintf(key, sizeof key, "rl:{clock}:%d-%d", algo, k);
            for (int s = 0; s < 6; s++) {
                algo_decision c, l;
                int64_t before = redis_ms(), after;

                lean_apply(&ap, key, 0, 1 + s % 2, &l);
                after = redis_ms();
                ck_assert_msg(l.expires_ms >= before && l.expires_ms <= after,
                              "%s step %d: time %lld not in [%lld, %lld]",
                              algo_name(algo), s, (long long)l.expires_ms,
                              (long long)before, (long long)after);
                algo_apply(&ap, &st, l.expires_ms, 1 + s % 2, &c);
                same_decision(&c, &l, "C vs lean, Redis clock", &ap, s, 0,
                              l.expires_ms, 1 + s % 2);
            }
        }
}
END_TEST

/* A token bucket (q = 1) charged again in the ms of its last charge (a
 * hot client; a key twice in one batch) or at a clock gone back: at its
 * own time the state's level is the expiry's reading, so the lean path's
 * one SET ... GET serves (no GET: the put-back and the general steps ran
 * there before); ahead of now the value decides (the general steps, GET).
 * The C maths decide the same at every step. */
START_TEST(lean_bucket_same_ms_one_write)
{
    static const struct {
        int64_t dt, sets, gets; /* the step's time from base; its calls */
    } steps[] = {{0, 1, 0}, {0, 1, 0}, {0, 1, 0}, {-1, 3, 1}, {5, 1, 0}};
    int64_t base = test_base();
    algo_params ap;
    algo_state st = {0};
    char err[200];

    ck_assert_int_eq(algo_params_init(&ap, RL_ALGO_TOKEN_BUCKET, 10, 20, 60,
                                      err, sizeof err), 0);
    ck_assert_int_eq(ap.q, 1);
    for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
        algo_decision c, l;
        int64_t sets, gets;

        freeReplyObject(cmd("CONFIG RESETSTAT"));
        algo_apply(&ap, &st, base + steps[s].dt, 1, &c);
        lean_apply(&ap, "rl:{hot}:bucket", base + steps[s].dt, 1, &l);
        same_decision(&c, &l, "C vs lean, one ms", &ap, (int)s, base,
                      base + steps[s].dt, 1);
        sets = rh_cmdstat_calls(&srv, "set");
        gets = rh_cmdstat_calls(&srv, "get");
        ck_assert_msg(sets == steps[s].sets && gets == steps[s].gets,
                      "step %zu: %lld SET, %lld GET; want %lld, %lld", s,
                      (long long)sets, (long long)gets,
                      (long long)steps[s].sets, (long long)steps[s].gets);
    }
}
END_TEST

START_TEST(sliding_window_same_decisions)
{
    differential(RL_ALGO_SLIDING_WINDOW, 40, 150, 0);
}
END_TEST

START_TEST(token_bucket_same_decisions)
{
    differential(RL_ALGO_TOKEN_BUCKET, 40, 150, 0);
}
END_TEST

START_TEST(fixed_window_same_decisions)
{
    differential(RL_ALGO_FIXED_WINDOW, 40, 150, 0);
}
END_TEST

START_TEST(gcra_same_decisions)
{
    differential(RL_ALGO_GCRA, 40, 150, 0);
}
END_TEST

START_TEST(sliding_window_same_decisions_compact)
{
    differential(RL_ALGO_SLIDING_WINDOW, 40, 150, 1);
}
END_TEST

START_TEST(token_bucket_same_decisions_compact)
{
    differential(RL_ALGO_TOKEN_BUCKET, 40, 150, 1);
}
END_TEST

START_TEST(fixed_window_same_decisions_compact)
{
    differential(RL_ALGO_FIXED_WINDOW, 40, 150, 1);
}
END_TEST

START_TEST(gcra_same_decisions_compact)
{
    differential(RL_ALGO_GCRA, 40, 150, 1);
}
END_TEST

/* A refund gives back exactly what its charge took: client A is charged
 * and refunded (at once, or later, in another window or epoch), client B,
 * its twin, is not, and after every step both decide alike.  The clock
 * never goes back here. */
static void refund_restores(int algo, int compact)
{
    int64_t base = test_base();

    for (int r = 0; r < 30; r++) {
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

START_TEST(refund_restores_charge_plain)
{
    for (int algo = 0; algo <= RL_ALGO_GCRA; algo++)
        refund_restores(algo, 0);
}
END_TEST

START_TEST(refund_restores_charge_compact)
{
    for (int algo = 0; algo <= RL_ALGO_GCRA; algo++)
        refund_restores(algo, 1);
}
END_TEST

/* 100 clients of one rule, one epoch: one hash of 100 fields, a listpack,
 * expiring when lua/compact.lua says; the next epoch, a second hash. */
START_TEST(compact_many_clients_one_hash)
{
    for (int algo = 0; algo <= RL_ALGO_GCRA; algo++) {
        algo_params ap;
        algo_decision d;
        char err[100], base[64], hash[96], field[16];
        int64_t e_ms, t, e;
        redisReply *r;

        ck_assert_int_eq(algo_params_init(&ap, algo, 10, 0, 60, err,
                                          sizeof err), 0);
        e_ms = epoch_ms(&ap);
        e = (real_ms() + 3600 * 1000) / e_ms;
        t = e * e_ms + e_ms / 2;
        snprintf(base, sizeof base, "rlc:{42}:many-%s:s60", algo_name(algo));
        for (int round = 0; round < 3; round++) {
            /* rounds 0 and 1 in epoch e, round 2 in epoch e + 1 */
            int64_t now = t + (round == 2 ? e_ms : round);
            int64_t ep = e + (round == 2);
            int64_t exp = (ep + (algo == RL_ALGO_FIXED_WINDOW ? 1 : 2)) * e_ms;

            for (int i = 0; i < 100; i++) {
                snprintf(field, sizeof field, "%d", 2147483647 - i * 7919);
                lua_apply(&ap, base, field, now, 1, &d);
                ck_assert(d.allowed);
            }
            snprintf(hash, sizeof hash, "%s:%lld", base, (long long)ep);
            r = cmd("KEYS %s:*", base);
            ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
            ck_assert_int_eq(r->elements, round == 2 ? 2 : 1);
            freeReplyObject(r);
            ck_assert_int_eq(cmd_int("HLEN %s", hash), 100);
            r = cmd("OBJECT ENCODING %s", hash);
            ck_assert_str_eq(r->str, "listpack");
            freeReplyObject(r);
            ck_assert_int_eq(cmd_int("PEXPIRETIME %s", hash), exp);
            if (!is_bucket(algo)) { /* the window's count */
                r = cmd("HGET %s %s", hash, field);
                ck_assert_str_eq(r->str, round == 1 ? "2" : "1");
                freeReplyObject(r);
            }
        }
    }
}
END_TEST

/* A request's rules are all-or-nothing in the compact layout too, mixed
 * with plain ones; one refund call takes back every part. */
START_TEST(compact_all_or_nothing)
{
    algo_params tb, fw;
    algo_decision d;
    char err[100];
    int64_t t = real_ms() + 3600 * 1000;
    redisReply *r;

    ck_assert_int_eq(algo_params_init(&tb, RL_ALGO_TOKEN_BUCKET, 5, 0, 60,
                                      err, sizeof err), 0);
    ck_assert_int_eq(algo_params_init(&fw, RL_ALGO_FIXED_WINDOW, 2, 0, 3600,
                                      err, sizeof err), 0);
    t = t / 3600000 * 3600000 + 1000;
    for (int plain = 0; plain < 2; plain++) {
        const char *fwkey = plain ? "rl:{aon}:fw" : "rlc:{aon}:fw:h1";
        part pt[2] = {{.key = "rlc:{aon}:tb:m1", .field = "99", .ap = &tb,
                       .cost = 1},
                      {.key = fwkey, .field = plain ? "" : "99", .ap = &fw,
                       .cost = 1}};

        for (int i = 0; i < 4; i++) {
            r = lua_eval('c', t, pt, 2);
            lua_answer_shape(r, 2);
            ck_assert_int_eq(lua_answer_value(r, 0, 0), 1); /* tb passes */
            ck_assert_int_eq(lua_answer_value(r, 1, 0) == 1, i < 2); /* fw: 2 */
            freeReplyObject(r);
        }
        lua_apply(&tb, pt[0].key, pt[0].field, t, 0, &d);
        ck_assert_int_eq(d.remaining, 3); /* charged for the 2 that passed */
        pt[0].last = pt[1].last = t;
        r = lua_eval('r', t + 10, pt, 2);
        ck_assert_int_eq(r->integer, 2);
        freeReplyObject(r);
        lua_apply(&tb, pt[0].key, pt[0].field, t + 10, 0, &d);
        ck_assert_int_eq(d.remaining, 4);
        lua_apply(&fw, pt[1].key, pt[1].field, t + 10, 0, &d);
        ck_assert_int_eq(d.remaining, 1);
        /* the next layout starts afresh */
        cmd_int("DEL rlc:{aon}:tb:m1:%lld",
                (long long)(t / epoch_ms(&tb)));
    }
}
END_TEST

/* ---- rule changes: the conversion (src/base/algo.c, lua/convert.lua) ---- */

/* The next time, never earlier: the compact layout decides as the plain
 * one only for a clock that does not go back (see lua/compact.lua). */
static int64_t forward(const algo_params *ap, int64_t t)
{
    int64_t next = next_time(ap, t, t);
    return next > t ? next : t;
}

/* One charge under the new rule `to`, whose key ends in its shape and
 * whose old shape `os` may hold the client's state: Lua's decision. */
static void lua_apply_changed(const algo_params *to, const char *shape,
                              const oldshape *os, const char *key,
                              const char *field, int64_t now, int64_t cost,
                              algo_decision *d)
{
    part pt = {.key = key, .field = field, .ap = to, .cost = cost,
               .shape = shape, .old = os, .nold = 1};
    redisReply *r = lua_eval('c', now, &pt, 1);

    lua_answer_shape(r, 1);
    lua_answer(r, 0, d);
    freeReplyObject(r);
}

/* Random pairs of rules (any algorithms, limits, bursts, windows): a
 * client's state is built under the old rule by random charges on both
 * sides, then the rule changes.  Under the new one, C converts (while no
 * new state has been written: a denial writes nothing, so the next step
 * converts again) and decides; Lua reads the old shape's state, converts
 * it and decides.  They decide alike at every step, and (plain) the old
 * key is gone exactly once C has written the new state. */
static void conversion(int compact, int pairs, int steps)
{
    int64_t base = test_base();

    for (int r = 0; r < pairs; r++) {
        algo_params from = random_params((int)rnd(4));
        algo_params to = random_params((int)rnd(4));
        algo_state so = {0}, sn = {0};
        algo_decision c, l;
        rule_shape sf, sto;
        oldshape os;
        char stem[64], kf[128], kt[128], field[16] = "";
        int64_t t = base + (int64_t)rnd(100000);
        int have_new = 0, old_there, n1 = (int)rnd((uint64_t)steps);
        int same; /* the "new" rule's shape is the old one's: no change */

        rule_shape_init(&sf, "conv", &from);
        rule_shape_init(&sto, "conv", &to);
        if (compact) {
            snprintf(stem, sizeof stem, "rlc:{%u}:conv-%d:",
                     (unsigned)rnd(65536), r);
            snprintf(field, sizeof field, "%u", (unsigned)rnd(1u << 31));
        } else {
            snprintf(stem, sizeof stem, "rl:{conv}:conv-%d:", r);
        }
        same = strcmp(sf.name, sto.name) == 0;
        snprintf(kf, sizeof kf, "%s%s", stem, sf.name);
        snprintf(kt, sizeof kt, "%s%s", stem, sto.name);
        for (int s = 0; s < n1; s++, t = forward(&from, t)) {
            int64_t cost = next_cost(&from);
            algo_apply(&from, &so, t, cost, &c);
            lua_apply(&from, kf, field, t, cost, &l);
            same_decision(&c, &l, "before the change", &from, s, base, t,
                          cost);
        }
        old_there = (int)cmd_int("EXISTS %s", kf);
        /* the change: some time around the next request */
        os = (oldshape){&from, sf.name,
                        t - (int64_t)rnd(3000) + (int64_t)rnd(1000)};
        for (int s = 0; s < steps; s++, t = forward(&to, t)) {
            int64_t cost = next_cost(&to);
            if (same) {
                /* A set whose rule keeps its shape hands down no replaced
                 * shape (ruleset_inherit): both sides go on with the state
                 * as it is, no conversion. */
                algo_apply(&to, &so, t, cost, &c);
                lua_apply(&to, kt, field, t, cost, &l);
            } else if (!have_new) {
                algo_state tmp;
                algo_convert(&from, &so, &to, os.since, t, &tmp);
                algo_apply(&to, &tmp, t, cost, &c);
                if (c.changed) {
                    sn = tmp;
                    have_new = 1;
                }
            } else {
                algo_apply(&to, &sn, t, cost, &c);
            }
            if (!same)
                lua_apply_changed(&to, sto.name, &os, kt, field, t, cost,
                                  &l);
            ck_assert_msg(c.allowed == l.allowed &&
                          c.remaining == l.remaining &&
                          c.reset_ms == l.reset_ms &&
                          c.retry_ms == l.retry_ms,
                          "%s -> %s (%s), step %d at t=%lld cost %lld "
                          "(change at %lld, RL_TEST_BASE_MS=%lld): C {%d "
                          "%lld %lld %lld} vs Lua {%d %lld %lld %lld}",
                          sf.name, sto.name, compact ? "compact" : "plain", s,
                          (long long)(t - base), (long long)cost,
                          (long long)(os.since - base), (long long)base,
                          c.allowed,
                          (long long)c.remaining, (long long)c.reset_ms,
                          (long long)c.retry_ms, l.allowed,
                          (long long)l.remaining, (long long)l.reset_ms,
                          (long long)l.retry_ms);
            if (!compact && strcmp(kf, kt) != 0)
                ck_assert_int_eq(cmd_int("EXISTS %s", kf),
                                 old_there && !have_new);
        }
    }
}

START_TEST(conversion_same_in_c_and_lua_plain)
{
    conversion(0, 150, 30);
}
END_TEST

START_TEST(conversion_same_in_c_and_lua_compact)
{
    conversion(1, 150, 30);
}
END_TEST

START_TEST(conversion_same_in_cluster_batch_mode)
{
    cross_mode = 1;
    conversion(0, 40, 20);
    conversion(1, 40, 20);
    cross_mode = 0;
}
END_TEST

/* A sliding window's state last written in the window before now's: its
 * previous count no longer counts, and the compact layout no longer has
 * it (its hash expired when now's window began), so the conversion takes
 * the level at the change without it, in C and in both layouts alike.
 * 6 charged in window a - 1, 2 in window a, the change 1 s before a's
 * end, the request in a + 1: used = 2 (not ceil(6 / 60 + 2) = 3). */
START_TEST(conversion_sliding_previous_count_gone)
{
    algo_params sw, fw;
    algo_decision c, l;
    algo_state st = {0}, out;
    rule_shape ssw, sfw;
    char err[100], kf[64], kt[64];
    int64_t a = (test_base() + 3600 * 1000) / 3600000 * 60 + 7;

    ck_assert_int_eq(algo_params_init(&sw, RL_ALGO_SLIDING_WINDOW, 10, 0, 60,
                                      err, sizeof err), 0);
    ck_assert_int_eq(algo_params_init(&fw, RL_ALGO_FIXED_WINDOW, 10, 0, 3600,
                                      err, sizeof err), 0);
    rule_shape_init(&ssw, "prev", &sw);
    rule_shape_init(&sfw, "prev", &fw);
    for (int compact = 0; compact < 2; compact++) {
        const char *f = compact ? "31" : "";
        const char *stem = compact ? "rlc:{5}:prev:" : "rl:{prev}:prev:";
        oldshape os = {&sw, ssw.name, (a + 1) * 60000 - 1000};
        int64_t now = (a + 1) * 60000 + 500;

        snprintf(kf, sizeof kf, "%s%s", stem, ssw.name);
        snprintf(kt, sizeof kt, "%s%s", stem, sfw.name);
        memset(&st, 0, sizeof st);
        for (int i = 0; i < 8; i++) {
            int64_t t = i < 6 ? (a - 1) * 60000 + 100 : a * 60000 + 100;
            algo_apply(&sw, &st, t, 1, &c);
            lua_apply(&sw, kf, f, t, 1, &l);
            ck_assert(c.allowed && l.allowed);
        }
        algo_convert(&sw, &st, &fw, os.since, now, &out);
        algo_apply(&fw, &out, now, 0, &c);
        lua_apply_changed(&fw, sfw.name, &os, kt, f, now, 0, &l);
        ck_assert_int_eq(c.remaining, 8);
        ck_assert_int_eq(l.remaining, 8);
    }
}
END_TEST

/* A converted state is written, and its old state deleted, only when the
 * whole request passes: another rule's denial leaves both as they were. */
START_TEST(conversion_all_or_nothing)
{
    algo_params from, to, fw;
    algo_decision d;
    rule_shape sf, sto;
    char err[100], kf[64], kt[64];
    int64_t t = (real_ms() + 3600 * 1000) / 3600000 * 3600000 + 1000;

    ck_assert_int_eq(algo_params_init(&from, RL_ALGO_TOKEN_BUCKET, 1, 10, 1,
                                      err, sizeof err), 0);
    ck_assert_int_eq(algo_params_init(&to, RL_ALGO_TOKEN_BUCKET, 10, 10, 1,
                                      err, sizeof err), 0);
    ck_assert_int_eq(algo_params_init(&fw, RL_ALGO_FIXED_WINDOW, 1, 0, 3600,
                                      err, sizeof err), 0);
    rule_shape_init(&sf, "aon", &from);
    rule_shape_init(&sto, "aon", &to);
    for (int compact = 0; compact < 2; compact++) {
        const char *f = compact ? "77" : "";
        const char *stem = compact ? "rlc:{9}:aon:" : "rl:{aon}:aon:";
        const char *fwkey = compact ? "rlc:{9}:fw:f3600" : "rl:{aon}:fw:f3600";
        oldshape os = {&from, sf.name, t};
        part pt[2] = {{.field = f, .ap = &to, .cost = 1, .shape = sto.name,
                       .old = &os, .nold = 1},
                      {.key = fwkey, .field = f, .ap = &fw, .cost = 1}};
        redisReply *r;

        snprintf(kf, sizeof kf, "%s%s", stem, sf.name);
        snprintf(kt, sizeof kt, "%s%s", stem, sto.name);
        pt[0].key = kt;
        for (int i = 0; i < 8; i++) /* 2 tokens left of 10, at 1/s */
            lua_apply(&from, kf, f, t - 1000, 1, &d);
        lua_apply(&fw, fwkey, f, t, 1, &d); /* the window is spent */
        r = lua_eval('c', t, pt, 2);
        lua_answer_shape(r, 2);
        ck_assert_int_eq(lua_answer_value(r, 0, 0), 1); /* converted: passes */
        ck_assert_int_eq(lua_answer_value(r, 0, 1), 2); /* 3 at t, less 1 */
        ck_assert_int_lt(lua_answer_value(r, 1, 0), 0); /* the window denies */
        freeReplyObject(r);
        /* nothing written, nothing deleted: the old state still says 2
         * left at t - 1000, 3 now */
        lua_apply(&from, kf, f, t, 0, &d);
        ck_assert_int_eq(d.remaining, 3);
        lua_apply_changed(&to, sto.name, &os, kt, f, t, 0, &d);
        ck_assert_int_eq(d.remaining, 3);
        /* alone, it passes: the new state is written, the old one goes */
        lua_apply_changed(&to, sto.name, &os, kt, f, t, 1, &d);
        ck_assert(d.allowed);
        ck_assert_int_eq(d.remaining, 2);
        lua_apply(&from, kf, f, t, 0, &d);
        ck_assert_int_eq(d.remaining, 10); /* fresh: gone */
        lua_apply_changed(&to, sto.name, &os, kt, f, t + 100, 0, &d);
        ck_assert_int_eq(d.remaining, 3); /* 10/s from the new state */
    }
}
END_TEST

/* The design note's worked numbers, through Lua alone, in both layouts. */
START_TEST(lua_design_note_numbers)
{
    algo_params ap;
    algo_decision d;
    char err[100];
    int64_t t = (real_ms() / 1000 + 7200) / 60 * 60 * 1000;

    for (int compact = 0; compact < 2; compact++) {
        const char *f = compact ? "5" : "";
        const char *tbkey = compact ? "rlc:{note}:tb:m1" : "rl:{note}:tb";
        const char *swkey = compact ? "rlc:{note}:sw:s60" : "rl:{note}:sw";

        ck_assert_int_eq(algo_params_init(&ap, RL_ALGO_TOKEN_BUCKET, 100, 20,
                                          60, err, sizeof err), 0);
        for (int i = 0; i < 20; i++) {
            lua_apply(&ap, tbkey, f, t, 1, &d);
            ck_assert(d.allowed);
        }
        lua_apply(&ap, tbkey, f, t, 1, &d);
        ck_assert(!d.allowed);
        ck_assert_int_eq(d.retry_ms, 600); /* 1.67 tokens/s */

        ck_assert_int_eq(algo_params_init(&ap, RL_ALGO_SLIDING_WINDOW, 100, 0,
                                          60, err, sizeof err), 0);
        for (int i = 0; i < 80; i++)
            lua_apply(&ap, swkey, f, t + 30000, 1, &d);
        for (int i = 0; i < 10; i++)
            lua_apply(&ap, swkey, f, t + 75000, 1, &d);
        ck_assert_int_eq(d.remaining, 30); /* 80 x 0.75 + 10 = 70 */
    }
}
END_TEST

/* One script call of nreq one-key requests of rule ap, request i on key
 * keys[i] (names repeat), all at `now`, costs cost[i]: the script reads
 * every key up front (one MGET) and must still see, for a name charged by
 * an earlier request of the same call, that charge.  fields: the compact
 * layout's (NULL: the plain layout).  Decisions into d. */
static void lua_batch(const algo_params *ap, const char *const *keys,
                      const char *const *fields, const int64_t *cost,
                      int nreq, int64_t now, algo_decision *d)
{
    enum { MAXR = 24, MAXARG = 16 + 6 * MAXR };
    char num[MAXARG][24], packed[MAXR][LEAN_ARG];
    const char *argv[MAXARG];
    size_t lens[MAXARG];
    int c = 0;
    redisReply *r;

    char sha[41];

    ck_assert_int_le(nreq, MAXR);
    /* by its SHA1: the 35 KB script in every call would grow and shrink
     * the connection's buffers, which used_memory counts */
    r = redisCommand(ctx, "SCRIPT LOAD %b", rl_lua_check_test,
                     rl_lua_check_test_len);
    ck_assert_msg(r && r->type == REDIS_REPLY_STRING && r->len == 40,
                  "SCRIPT LOAD");
    memcpy(sha, r->str, 41);
    freeReplyObject(r);
#define NUM(v) (snprintf(num[c], sizeof num[c], "%lld", (long long)(v)), \
                argv[c] = num[c], c++)
    argv[c++] = "EVALSHA";
    argv[c++] = sha;
    NUM(nreq);
    for (int i = 0; i < nreq; i++)
        argv[c++] = keys[i];
    NUM(now);
    if (lean_batch_mode && !fields) { /* mode "L": an argument per op */
        argv[c++] = "L";
        for (int i = 0; i < nreq; i++)
            argv[c++] = lean_arg(packed[i], ap, cost[i]);
        goto send;
    }
    argv[c++] = "c";
    NUM(11); /* the requests' part, after the one rule at ARGV[4..10] */
    NUM(ap->algo), NUM(ap->limit), NUM(ap->burst), NUM(ap->window_ms);
    NUM(ap->p), NUM(ap->q), NUM(0);
    NUM(nreq);
    for (int i = 0; i < nreq; i++) {
        NUM(1), NUM(4), NUM(cost[i]), NUM(0);
        argv[c++] = fields ? fields[i] : "";
    }
#undef NUM
send:
    for (int i = 0; i < c; i++)
        lens[i] = strlen(argv[i]);
    r = redisCommandArgv(ctx, c, argv, lens);
    ck_assert_msg(r != NULL, "EVAL: %s", ctx->errstr);
    ck_assert_msg(r->type != REDIS_REPLY_ERROR, "script: %s", r->str);
    lua_answer_shape(r, (size_t)nreq);
    for (int i = 0; i < nreq; i++)
        lua_answer(r, (size_t)i, &d[i]);
    freeReplyObject(r);
}

/* A batch naming the same clients again and again, every algorithm: each
 * request decided as the C maths decide the same requests one by one;
 * through the general path, then the lean batch (lua/lean.lua). */
START_TEST(batch_repeated_keys_same_decisions)
{
    int64_t base = test_base();

    for (int m = 0; m < 8; m++) {
        int algo = m % 4;
        lean_batch_mode = m >= 4; /* then the lean batch, mode "L" */
        for (int round = 0; round < 20; round++) {
            algo_params ap = random_params(algo);
            algo_state st[3] = {{0}, {0}, {0}};
            char names[3][64];
            const char *keys[24];
            int64_t cost[24], t = base + (int64_t)rnd(100000);
            algo_decision c, l[24];
            int who[24], n = 2 + (int)rnd(23);

            for (int k = 0; k < 3; k++)
                snprintf(names[k], sizeof names[k], "rl:{batch}:%s-%d-%d-%d",
                         algo_name(algo), lean_batch_mode, round, k);
            for (int s = 0; s < 3; s++) { /* three calls, time moving */
                for (int i = 0; i < n; i++) {
                    who[i] = (int)rnd(3);
                    keys[i] = names[who[i]];
                    cost[i] = next_cost(&ap);
                }
                lua_batch(&ap, keys, NULL, cost, n, t, l);
                for (int i = 0; i < n; i++) {
                    algo_apply(&ap, &st[who[i]], t, cost[i], &c);
                    same_decision(&c, &l[i], lean_batch_mode
                                  ? "C vs Lua lean batch" : "C vs Lua batch",
                                  &ap, i, base, t, cost[i]);
                }
                t = next_time(&ap, t, base);
            }
        }
    }
    lean_batch_mode = 0;
}
END_TEST

/* MEMORY USAGE summed over the keys matching pattern. */
static long long memory_usage(const char *pattern)
{
    long long sum = 0;
    redisReply *r = cmd("KEYS %s", pattern);

    ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
    for (size_t i = 0; i < r->elements; i++)
        sum += cmd_int("MEMORY USAGE %s SAMPLES 0", r->element[i]->str);
    freeReplyObject(r);
    return sum;
}

/* What the state of one (client, rule) costs in Redis memory, used_memory
 * grown over `clients` new clients of one rule charged once, in batches
 * of 24 (compact: MEMORY USAGE of its hashes, over the clients; the
 * server's own allocations move used_memory more than a few hashes do): the bound docs/BENCHMARKS.md states (plain layout <= 144 bytes, compact <= 48),
 * with 24-byte key names, as the figure in docs/BENCHMARKS.md has them.  The
 * state's format is what bounds it: a value Redis keeps as an integer (no
 * string of its own), the rest of the state in the key's expiry. */
static double bytes_per_client(int algo, int compact, int clients)
{
    algo_params ap;
    char err[200], names[24][96], fields[24][16];
    const char *keys[24], *fp[24];
    int64_t cost[24], now = test_base();
    algo_decision d[24];
    long long before;

    ck_assert_int_eq(algo_params_init(&ap, algo, 1000, 0, 60000, err,
                                      sizeof err), 0);
    freeReplyObject(cmd("FLUSHALL"));
    keys[0] = "warm-up"; /* the script cached, its buffers grown */
    cost[0] = 1;
    lua_batch(&ap, keys, NULL, cost, 1, now, d);
    before = rh_info_int(&srv, "memory", "used_memory");
    for (int i = 0; i < clients; i += 24) {
        for (int j = 0; j < 24; j++) {
            if (compact) {
                uint64_t h = rnd(UINT64_MAX);
                snprintf(names[j], sizeof names[j], "rlc:{%u}:r1:%c60000",
                         (unsigned)(h & 15), algo_name(algo)[0]);
                snprintf(fields[j], sizeof fields[j], "%u",
                         (unsigned)((h >> 16) % 2147483647u));
            } else {
                snprintf(names[j], sizeof names[j], "rl:{u%011d}:r1:%c60",
                         i + j, algo_name(algo)[0]); /* 24 bytes */
            }
            keys[j] = names[j];
            fp[j] = fields[j];
            cost[j] = 1;
        }
        lua_batch(&ap, keys, compact ? fp : NULL, cost, 24, now, d);
        for (int j = 0; j < 24; j++)
            ck_assert(d[j].allowed);
    }
    if (!compact)
        return (double)(rh_info_int(&srv, "memory", "used_memory") -
                        before) / clients;
    return (double)memory_usage("rlc:*") / clients;
}

START_TEST(state_size_bound)
{
    for (int algo = 0; algo < 4; algo++) {
        /* 170 x 24 = 4080 keys: the key space's tables (4096 slots) are
         * as full as at the million docs/BENCHMARKS.md measures */
        double plain = bytes_per_client(algo, 0, 24 * 170);
        double compact = bytes_per_client(algo, 1, 24 * 80);
        fprintf(stderr, "state_size_bound: %s: plain %.1f B, compact %.1f B "
                "per (client, rule)\n", algo_name(algo), plain, compact);
        ck_assert_msg(plain <= 144, "%s plain: %.1f B per client",
                      algo_name(algo), plain);
        ck_assert_msg(compact <= 48, "%s compact: %.1f B per client",
                      algo_name(algo), compact);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("lua");
    TCase *tc = tcase_create("lua");

    if (!rh_available()) {
        fprintf(stderr, "check_lua: redis-server not available, skipping\n");
        return 77;
    }
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, sliding_window_same_decisions);
    tcase_add_test(tc, cross_slot_mode_same_decisions);
    tcase_add_test(tc, short_requests_same_decisions);
    tcase_add_test(tc, lean_path_same_decisions);
    tcase_add_test(tc, lean_path_reads_written_state);
    tcase_add_test(tc, lean_path_reads_redis_clock);
    tcase_add_test(tc, lean_bucket_same_ms_one_write);
    tcase_add_test(tc, batch_repeated_keys_same_decisions);
    tcase_add_test(tc, state_size_bound);
    tcase_add_test(tc, token_bucket_same_decisions);
    tcase_add_test(tc, fixed_window_same_decisions);
    tcase_add_test(tc, gcra_same_decisions);
    tcase_add_test(tc, sliding_window_same_decisions_compact);
    tcase_add_test(tc, token_bucket_same_decisions_compact);
    tcase_add_test(tc, fixed_window_same_decisions_compact);
    tcase_add_test(tc, gcra_same_decisions_compact);
    tcase_add_test(tc, refund_restores_charge_plain);
    tcase_add_test(tc, refund_restores_charge_compact);
    tcase_add_test(tc, compact_many_clients_one_hash);
    tcase_add_test(tc, compact_all_or_nothing);
    tcase_add_test(tc, lua_design_note_numbers);
    tcase_add_test(tc, conversion_same_in_c_and_lua_plain);
    tcase_add_test(tc, conversion_same_in_c_and_lua_compact);
    tcase_add_test(tc, conversion_same_in_cluster_batch_mode);
    tcase_add_test(tc, conversion_sliding_previous_count_gone);
    tcase_add_test(tc, conversion_all_or_nothing);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
