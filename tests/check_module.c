/*
 * check_module.c -- ratelimit.so (redis-module/) decides as the C maths
 * (src/base/algo.c) and the Lua library (lua/) do, on the same random
 * (time, cost) sequences, in a real redis-server started with
 * `loadmodule ratelimit.so testclock` (the test clock: a trailing NOW ms,
 * as the Lua test build's ARGV[1]).  Each sequence runs on two keys: one
 * only the module decides on, and one a mixed fleet shares, where each
 * step goes at random to the module or to the script: both read what the
 * other wrote, so their state formats are the same.  Then a request of
 * several keys (all or nothing, soft rules), leases, errors, what a
 * replica receives (the writes, not the command), and a Redis Cluster's
 * routing of the command by its declared keys.  Refunds, settles and
 * conversions: check_module_change.c; the library's side (detection,
 * routing): check_module_lib.c.
 */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algo.h"
#include "algo_vectors.h"
#include "lua_fixture.h"
#include "module_fixture.h"
#include "module_twin.h"
#include "ratelimit.h"
#include "redis_harness.h"
#include "testutil.h"
#include "timeutil.h"

/* Its own sequence (twin_rng.h), drawn on from test to test. */
#define TWIN_RNG_SEED 2463534242ULL
#include "twin_rng.h"

/* Mostly small moves, some jumps, some steps back (not before lo). */
static int64_t next_time(const algo_params *ap, int64_t t, int64_t lo)
{
    int64_t back = t - (int64_t)rnd(2000);

    switch (rnd(8)) {
    case 0: return t;
    case 1: return t + 1 + (int64_t)rnd(5);
    case 2: return t + (int64_t)rnd((uint64_t)ap->window_ms / 4 + 1);
    case 3: return t + ap->window_ms + (int64_t)rnd(1000);
    case 4: return back < lo ? lo : back;
    default: return t + (int64_t)rnd(2000);
    }
}

static int64_t epoch_ms(const algo_params *ap)
{
    if (ap->algo != RL_ALGO_TOKEN_BUCKET && ap->algo != RL_ALGO_GCRA)
        return ap->window_ms;
    return (ap->burst * ap->p + ap->q - 1) / ap->q + 2;
}

/* The module alone on one key, and module and script mixed on another,
 * against the C maths: `rules` random rules of `algo`, `steps` each.
 * Compact: steps back stay in the newest epoch seen, where the compact
 * layout decides as C does (lua/compact.lua; a token bucket also before
 * its last charge's time: both take GCRA's rule). */
static void twin(int algo, int rules, int steps, int compact)
{
    int64_t base = test_base();

    for (int r = 0; r < rules; r++) {
        algo_params ap = random_params(algo);
        cside cs[2];
        int64_t t = base + (int64_t)rnd(100000), tmax = t;
        char key[2][64], field[16] = "";

        memset(cs, 0, sizeof cs);
        for (int k = 0; k < 2; k++)
            snprintf(key[k], sizeof key[k], compact ? "rlc:{%d}:m%d-%s-%d:x"
                                                    : "rl:{%d}:m%d-%s-%d",
                     (int)rnd(65536), k, algo_name(algo), r);
        if (compact)
            snprintf(field, sizeof field, "%u", (unsigned)rnd(1u << 31));
        for (int s = 0; s < steps; s++) {
            int64_t cost = next_cost(&ap), v;
            mpart pt[2] = {
                {.key = key[0], .field = field, .ap = &ap, .cost = cost,
                 .mode = "0"},
                {.key = key[1], .field = field, .ap = &ap, .cost = cost,
                 .mode = "0"}};
            algo_decision c, x;
            int by_lua = (int)rnd(2);

            for (int k = 0; k < 2; k++) {
                c_apply(&ap, &cs[k], t, cost, &c);
                if (k == 1 && by_lua)
                    lua_check(t, &pt[k], 1, &x, &v);
                else
                    mod_check(t, &pt[k], 1, &x, &v);
                same_decision(&c, &x, k == 0 ? "C vs module"
                              : by_lua ? "C vs mixed fleet (script)"
                                       : "C vs mixed fleet (module)",
                              &ap, s, base, t, cost);
            }
            int64_t lo = base;
            if (compact)
                lo = tmax - tmax % epoch_ms(&ap);
            t = compact && rnd(10) == 0
                    ? tmax + (int64_t)rnd((uint64_t)(3 * epoch_ms(&ap)))
                    : next_time(&ap, t, lo);
            t = t < lo ? lo : t;
            tmax = t > tmax ? t : tmax;
        }
    }
}

/* twin, every algorithm of a layout (the compact one has no sliding
 * log). */
static void twin_every_algorithm(int compact)
{
    int last = compact ? RL_ALGO_SLIDING_LOG - 1 : RL_ALGO_SLIDING_LOG;

    for (int algo = 0; algo <= last; algo++)
        twin(algo, 12, 120, compact);
}

START_TEST(every_algorithm_plain)
{
    twin_every_algorithm(0);
}
END_TEST

START_TEST(every_algorithm_compact)
{
    twin_every_algorithm(1);
}
END_TEST

/* GCRA's rule for the token bucket (algo_vectors.h's vector) through
 * RL.CHECK, both layouts; and (vec_lean) every other step the script's
 * lean path with ":1" (option redis_oldest_limiter 1.1: a live q = 1
 * bucket's charge is PEXPIREAT alone, lua/lean.lua), so RL.CHECK and
 * RL.SETTLE read a level RL.CHECK wrote under the expiry the lean path
 * moved: the level from the expiry alone, as the vector says. */
static const char *vec_key, *vec_field;
static int vec_lean;

static void lean_expiry_only(const algo_params *ap, int64_t now,
                             int64_t cost, algo_decision *d)
{
    char t[24], arg[160];
    const char *argv[] = {NULL, NULL, "1", vec_key, t, "l", arg};
    size_t lens[7];
    redisReply *r, *elp;

    snprintf(t, sizeof t, "%lld", (long long)now);
    snprintf(arg, sizeof arg, "%d:%lld:%lld:%lld:%lld:%lld:%lld:1", ap->algo,
             (long long)ap->limit, (long long)ap->burst,
             (long long)ap->window_ms, (long long)ap->p, (long long)ap->q,
             (long long)cost);
    r = lua_test_eval(7, argv, lens);
    ck_assert_msg(r->type == REDIS_REPLY_STRING && r->len == 32,
                  "lean: %s", r->type == REDIS_REPLY_ERROR ? r->str : "?");
    elp = r; /* lua_answer() reads an array's first element */
    lua_answer(&(redisReply){.type = REDIS_REPLY_ARRAY, .elements = 1,
                             .element = &elp}, 0, d);
    freeReplyObject(r);
}

static void vec_apply(const algo_params *ap, int64_t now, int64_t cost,
                      algo_decision *d)
{
    mpart pt = {.key = vec_key, .field = vec_field, .ap = ap, .cost = cost,
                .mode = "0"};
    int64_t v;

    if (vec_lean && vec_lean++ % 2 == 0)
        lean_expiry_only(ap, now, cost, d);
    else
        mod_check(now, &pt, 1, d, &v);
}

START_TEST(token_bucket_clock_back_vector)
{
    bucket_clock_back_layouts(vec_apply, &vec_key, &vec_field, test_base,
                              "module");
    vec_key = "rl:{vec}:tbl", vec_field = "", vec_lean = 1;
    bucket_clock_back_run(vec_apply, test_base(), 0, "module and lean :1");
    vec_lean = 0;
}
END_TEST

/* RL.SETTLE r (the module's refund: a lease's give-back, a cluster
 * batch's undo), charged at now. */
static void vec_refund(const algo_params *ap, int64_t now, int64_t cost)
{
    redisReply *r = redisCommand(
        ctx, "RL.SETTLE r 1 %s %d %lld %lld %lld %lld %lld %s NOW %lld",
        vec_key, ap->algo, (long long)ap->limit, (long long)sent_burst(ap),
        (long long)ap->window_ms, (long long)cost, (long long)now, vec_field,
        (long long)now);

    ck_assert_ptr_nonnull(r);
    ck_assert_msg(r->type == REDIS_REPLY_INTEGER && r->integer == 1,
                  "RL.SETTLE r: %s", r->type == REDIS_REPLY_ERROR ? r->str
                                                                : "?");
    freeReplyObject(r);
}

/* A refund taken at now (algo_vectors.h's refund vector), both layouts. */
START_TEST(token_bucket_refund_at_now_vector)
{
    bucket_refund_layouts(vec_apply, vec_refund, &vec_key, &vec_field,
                          test_base, "module");
    vec_key = "rl:{vec}:tbrl", vec_field = "", vec_lean = 1;
    bucket_refund_run(vec_apply, vec_refund, test_base(),
                      "module and lean :1, RL.SETTLE");
    vec_lean = 0;
}
END_TEST

/* Requests of 2..4 keys (every algorithm, both layouts, hard and soft
 * rules): all or nothing as lua/check.lua, on twin keys, against the C
 * maths deciding every key and keeping the charges only when every hard
 * key passed. */
START_TEST(requests_all_or_nothing)
{
    int64_t base = test_base();

    for (int r = 0; r < 40; r++) {
        int n = 2 + (int)rnd(3);
        algo_params ap[MAXP];
        cside cs[MAXP];
        char key[2][MAXP][64], field[MAXP][16];
        int64_t t = base + (int64_t)rnd(100000);

        int compact = (int)rnd(2); /* the script's is its first key's */

        memset(cs, 0, sizeof cs);
        for (int i = 0; i < n; i++) {
            ap[i] = random_params((int)rnd(compact ? 4 : 5));
            field[i][0] = 0;
            if (compact)
                snprintf(field[i], sizeof field[i], "%u",
                         (unsigned)rnd(1u << 31));
            for (int k = 0; k < 2; k++)
                snprintf(key[k][i], sizeof key[k][i], "%s:{r%d}:%d-%d",
                         field[i][0] ? "rlc" : "rl", r, k, i);
        }
        for (int s = 0; s < 60; s++) {
            mpart pt[2][MAXP];
            algo_decision c[MAXP], m[MAXP], l[MAXP];
            cside next[MAXP];
            int64_t vm[MAXP], vl[MAXP];
            int all = 1;

            for (int i = 0; i < n; i++) {
                int64_t cost = next_cost(&ap[i]);
                const char *mode = rnd(4) == 0 ? "1" : "0";
                for (int k = 0; k < 2; k++)
                    pt[k][i] = (mpart){.key = key[k][i], .field = field[i],
                                       .ap = &ap[i], .cost = cost,
                                       .mode = mode};
                next[i] = cs[i];
                c_apply(&ap[i], &next[i], t, cost, &c[i]);
                all &= c[i].allowed || mode[0] == '1';
            }
            mod_check(t, pt[0], n, m, vm);
            lua_check(t, pt[1], n, l, vl);
            for (int i = 0; i < n; i++) {
                same_decision(&c[i], &m[i], "request: C vs module", &ap[i],
                              s, base, t, pt[0][i].cost);
                same_decision(&c[i], &l[i], "request: C vs script", &ap[i],
                              s, base, t, pt[0][i].cost);
                if (all)
                    cs[i] = next[i];
            }
            t += (int64_t)rnd(4) == 0 ? (int64_t)rnd(3000) : (int64_t)rnd(30);
        }
    }
}
END_TEST

/* A batch as one RL.CHECK (REQS: each request all or nothing on its
 * own, in turn) decides as the same requests sent one by one to the
 * script: 2..6 requests of 1..3 keys drawn from 4 (so requests share
 * keys, a later one reading what an earlier wrote), every algorithm. */
START_TEST(batch_as_requests_in_turn)
{
    int64_t base = test_base();

    for (int r = 0; r < 60; r++) {
        algo_params ap[4];
        char key[2][4][48], num[64][96];
        const char *argv[96];
        int nreq = 2 + (int)rnd(5), nk[6], pick[6][3], c = 0, u = 0, n = 0;
        int64_t t = base + (int64_t)rnd(100000), v[3];
        mpart pt[6][3];
        algo_decision l[6][3];
        long long got[1 + 3 * 18];
        redisReply *rep;

        for (int i = 0; i < 4; i++) {
            ap[i] = random_params((int)rnd(5));
            for (int k = 0; k < 2; k++)
                snprintf(key[k][i], sizeof key[k][i], "rl:{b%d}:%d-%d", r, k,
                         i);
        }
        for (int q = 0; q < nreq; q++) {
            nk[q] = 1 + (int)rnd(3);
            for (int i = 0; i < nk[q]; i++) {
                pick[q][i] = (int)rnd(4);
                pt[q][i] = (mpart){.key = key[1][pick[q][i]], .field = "",
                                   .ap = &ap[pick[q][i]],
                                   .cost = next_cost(&ap[pick[q][i]]),
                                   .mode = rnd(4) ? "0" : "1"};
            }
            lua_check(t, pt[q], nk[q], l[q], v);
            n += nk[q];
        }
#define NUM(x) (snprintf(num[u], sizeof num[u], "%lld", (long long)(x)), \
                argv[c++] = num[u++])
        argv[c++] = "RL.CHECK";
        NUM(n);
        for (int q = 0; q < nreq; q++)
            for (int i = 0; i < nk[q]; i++)
                argv[c++] = key[0][pick[q][i]];
        for (int q = 0; q < nreq; q++)
            for (int i = 0; i < nk[q]; i++) {
                const algo_params *a = pt[q][i].ap;
                snprintf(num[u], sizeof num[u], "%d:%lld:%lld:%lld:%lld:%s:",
                         a->algo, (long long)a->limit,
                         (long long)sent_burst(a), (long long)a->window_ms,
                         (long long)pt[q][i].cost, pt[q][i].mode);
                argv[c++] = num[u++];
            }
        argv[c++] = "REQS";
        NUM(nreq);
        for (int q = 0; q < nreq; q++)
            NUM(nk[q]);
        argv[c++] = "NOW";
        NUM(t);
#undef NUM
        rep = redisCommandArgv(ctx, c, argv, NULL);
        ck_assert_ptr_nonnull(rep);
        mod_answer(rep, n, 1, got);
        freeReplyObject(rep);
        for (int q = 0, k = 0; q < nreq; q++)
            for (int i = 0; i < nk[q]; i++, k++) {
                algo_decision m = {.allowed = got[1 + 3 * k] > 0,
                                   .retry_ms = got[1 + 3 * k] < 0
                                                   ? -got[1 + 3 * k]
                                                   : 0,
                                   .remaining = got[2 + 3 * k],
                                   .reset_ms = got[3 + 3 * k]};
                same_decision(&l[q][i], &m, "batch: script vs module",
                              pt[q][i].ap, r, base, t, pt[q][i].cost);
            }
    }
}
END_TEST

/* Leases (mode -m: cost units, or as many as are left but at least m):
 * the module charges what the script charges, on twin keys. */
START_TEST(leases_as_the_script)
{
    int64_t base = test_base();

    for (int r = 0; r < 40; r++) {
        algo_params ap = random_params((int)rnd(5));
        char key[2][64], field[16] = "", mode[24];
        int64_t t = base + (int64_t)rnd(100000);

        if (ap.algo != RL_ALGO_SLIDING_LOG && rnd(2))
            snprintf(field, sizeof field, "%u", (unsigned)rnd(1u << 31));
        for (int k = 0; k < 2; k++)
            snprintf(key[k], sizeof key[k], "%s:{l%d}:%d",
                     field[0] ? "rlc" : "rl", r, k);
        for (int s = 0; s < 60; s++) {
            int64_t cost = 1 + next_cost(&ap), vm, vl;
            algo_decision m, l;

            snprintf(mode, sizeof mode, "-%lld",
                     (long long)(1 + (int64_t)rnd((uint64_t)cost)));
            mpart pm = {.key = key[0], .field = field, .ap = &ap,
                        .cost = cost, .mode = mode};
            mpart pl = pm;
            pl.key = key[1];
            mod_check(t, &pm, 1, &m, &vm);
            lua_check(t, &pl, 1, &l, &vl);
            l.allowed = vl > 0; /* lua_answer reads only a verdict of 1 */
            same_decision(&l, &m, "lease: script vs module", &ap, s, base,
                          t, cost);
            ck_assert_int_eq(vm, vl);
            t += (int64_t)rnd(3) == 0 ? (int64_t)rnd(3000) : (int64_t)rnd(30);
        }
    }
}
END_TEST

static redisReply *cmd(redisContext *c, const char *fmt, ...)
{
    va_list va;
    redisReply *r;

    va_start(va, fmt);
    r = redisvCommand(c, fmt, va);
    va_end(va);
    ck_assert_msg(r != NULL, "%s", c->errstr);
    return r;
}

/* A key of another type is an error and writes nothing, not even the
 * request's other keys; bad numbers are refused. */
START_TEST(errors_write_nothing)
{
    redisReply *r;

    freeReplyObject(cmd(ctx, "HSET rl:{e}:b f 1"));
    r = cmd(ctx, "RL.CHECK 2 rl:{e}:a rl:{e}:b 0 10 0 60000 1 0 %s "
                 "0 10 0 60000 1 0 %s", "", "");
    ck_assert_int_eq(r->type, REDIS_REPLY_ERROR);
    ck_assert_msg(strncmp(r->str, "WRONGTYPE", 9) == 0, "%s", r->str);
    freeReplyObject(r);
    r = cmd(ctx, "EXISTS rl:{e}:a");
    ck_assert_int_eq(r->integer, 0);
    freeReplyObject(r);
    r = cmd(ctx, "RL.CHECK 1 rl:{e}:a 9 10 0 60000 1 0 %s", "");
    ck_assert_int_eq(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
    r = cmd(ctx, "RL.CHECK 1 rl:{e}:a 0 10 0 60000");
    ck_assert_int_eq(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
    r = cmd(ctx, "RL.CHECK 1 rl:{e}:a 4 10 0 60000 1 0 7");
    ck_assert_int_eq(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
    /* the packed form: seven values, the last the field */
    r = cmd(ctx, "RL.CHECK 1 rl:{e}:a 0:10:0:60000:1:0");
    ck_assert_int_eq(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
    r = cmd(ctx, "RL.CHECK 1 rl:{e}:a 0:10:0:60000:x:0:");
    ck_assert_int_eq(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
}
END_TEST

/* A replica gets the writes (SET ... PXAT, HSET, PEXPIREAT, DEL), never
 * the command: its keys, values and expiry times are the master's (after
 * checks, a refund, a settled debt and its marker, a conversion), and it
 * has run no RL.CHECK nor RL.SETTLE. */
START_TEST(replica_gets_the_writes)
{
    rh_server rep;
    redisContext *rc;
    int64_t base = test_base(), deadline = real_ms() + 20000;
    static const char *keys[] = {"rl:{p}:sw", "rl:{p}:tb", "rl:{p}:fw",
                                 "rl:{p}:gc", "rl:{p}:log",
                                 "rlc:{p}:tb:x"};

    ck_assert_int_eq(rh_start_replica(&rep, NULL, &srv), 0);
    while (rh_info_int(&srv, "replication", "connected_slaves") < 1)
        ck_assert_msg(real_ms() < deadline, "the replica never connected");
    for (int s = 0; s < 30; s++) {
        int64_t t = base + s * 997;
        for (int a = 0; a <= RL_ALGO_SLIDING_LOG; a++) {
            algo_params ap = random_params(a);
            mpart pt = {.key = keys[a], .field = "", .ap = &ap, .cost = 1,
                        .mode = "0"};
            algo_decision d;
            int64_t v;
            mod_check(t, &pt, 1, &d, &v);
            if (a == RL_ALGO_TOKEN_BUCKET) { /* and its compact twin */
                pt.key = keys[5];
                pt.field = "12345";
                mod_check(t, &pt, 1, &d, &v);
            }
        }
    }
    /* RL.SETTLE (a refund, a debt with its marker), a conversion, and a
     * window charged twice in one window (the second as INCRBY) */
    for (int k = 0; k < 5; k++) {
        static const char *const more[] = {
            "RL.SETTLE r 1 rl:{p}:tb 1 10 0 60000 1 %lld %s NOW %lld",
            "RL.SETTLE d 2 rl:{p}:fw rl:{p}:~r:1 2 10 0 60000 3 %lld %s "
            "NOW %lld",
            "RL.CHECK 1 rl:{p}:g2 3 10 0 2000 1 0 %s SHAPES 0 g2 1 "
            "1 10 0 60000 tb %lld NOW %lld",
            "RL.CHECK 1 rl:{p}:f2 0:10:0:3600000:2:0:%s NOW %lld",
            "RL.CHECK 1 rl:{p}:f2 0:10:0:3600000:3:0:%s NOW %lld"};
        int64_t t = base + 29 * 997;
        redisReply *x = k < 2 ? cmd(ctx, more[k], (long long)t, "",
                                    (long long)t)
                        : k == 2 ? cmd(ctx, more[k], "", (long long)t,
                                       (long long)t)
                                 : cmd(ctx, more[k], "", (long long)t);
        ck_assert_msg(x->type != REDIS_REPLY_ERROR, "%s", x->str);
        freeReplyObject(x);
    }
    redisReply *w = cmd(ctx, "WAIT 1 10000");
    ck_assert_int_eq(w->integer, 1);
    freeReplyObject(w);
    /* a GCRA of q = 1 (10 a 10 s) charged twice: its value "0" stays and
     * only its expiry moves, replicated as one PEXPIREAT (no SET) */
    long long pe = rh_cmdstat_calls(&rep, "pexpireat");
    long long sets = rh_cmdstat_calls(&rep, "set");
    for (int k = 0; k < 2; k++) {
        redisReply *x = cmd(ctx, "RL.CHECK 1 rl:{p}:g1 3:10:0:10000:1:0: "
                            "NOW %lld", (long long)(base + 29 * 997 +
                                                    k * 1500));
        ck_assert_msg(x->type == REDIS_REPLY_STRING, "%s", x->str);
        freeReplyObject(x);
    }
    w = cmd(ctx, "WAIT 1 10000");
    ck_assert_int_eq(w->integer, 1);
    freeReplyObject(w);
    ck_assert_int_eq(rh_cmdstat_calls(&rep, "pexpireat"), pe + 1);
    ck_assert_int_eq(rh_cmdstat_calls(&rep, "set"), sets + 1);
    ck_assert_ptr_nonnull(rc = rh_connect(&rep));
    redisReply *all = cmd(ctx, "KEYS *");
    ck_assert_int_ge(all->elements, 6);
    for (size_t i = 0; i < all->elements; i++) {
        const char *k = all->element[i]->str;
        redisReply *a = cmd(ctx, "DUMP %s", k), *b = cmd(rc, "DUMP %s", k);
        redisReply *ea = cmd(ctx, "PEXPIRETIME %s", k);
        redisReply *eb = cmd(rc, "PEXPIRETIME %s", k);
        ck_assert_msg(a->type == REDIS_REPLY_STRING &&
                      b->type == REDIS_REPLY_STRING && a->len == b->len &&
                      memcmp(a->str, b->str, a->len) == 0,
                      "%s differs on the replica", k);
        ck_assert_int_eq(ea->integer, eb->integer);
        ck_assert_int_gt(ea->integer, 0);
        freeReplyObject(a);
        freeReplyObject(b);
        freeReplyObject(ea);
        freeReplyObject(eb);
    }
    freeReplyObject(all);
    ck_assert_int_eq(rh_cmdstat_calls(&rep, "rl.check") +
                         rh_cmdstat_calls(&rep, "rl.settle"), 0);
    ck_assert_int_gt(rh_cmdstat_calls(&rep, "set"), 0);
    ck_assert_int_gt(rh_cmdstat_calls(&rep, "hset"), 0);
    ck_assert_int_gt(rh_cmdstat_calls(&rep, "incrby"), 0);
    /* a charge of 1 in its own window: INCR (cost 1 above) */
    ck_assert_int_gt(rh_cmdstat_calls(&rep, "incr"), 0);
    redisFree(rc);
    rh_stop(&rep);
}
END_TEST

/* In a Redis Cluster the command goes where its declared keys live: the
 * owner decides, another master answers MOVED, keys of two slots are
 * CROSSSLOT; COMMAND GETKEYS names the keys. */
START_TEST(cluster_routes_by_declared_keys)
{
    rh_cluster cl;
    redisContext *c;
    redisReply *r;
    int slot, owner, other;

    if (!rh_cluster_available())
        return;
    ck_assert_int_eq(rh_cluster_start(&cl, 3, 0, 2000), 0);
    ck_assert_ptr_nonnull(c = rh_connect(&cl.node[0]));
    r = cmd(c, "CLUSTER KEYSLOT rl:{u1}:r");
    slot = (int)r->integer;
    freeReplyObject(r);
    owner = rh_cluster_master_of(&cl, slot);
    ck_assert_int_ge(owner, 0);
    other = (owner + 1) % cl.n;
    redisFree(c);
    ck_assert_ptr_nonnull(c = rh_connect(&cl.node[other]));
    r = cmd(c, "RL.CHECK 1 rl:{u1}:r 0 10 0 60000 1 0 %s", "");
    ck_assert_int_eq(r->type, REDIS_REPLY_ERROR);
    ck_assert_msg(strncmp(r->str, "MOVED", 5) == 0, "%s", r->str);
    freeReplyObject(r);
    r = cmd(c, "COMMAND GETKEYS RL.CHECK 2 a b 0 1 0 1000 1 0 %s "
               "0 1 0 1000 1 0 %s", "", "");
    ck_assert_int_eq(r->elements, 2);
    ck_assert_str_eq(r->element[1]->str, "b");
    freeReplyObject(r);
    redisFree(c);
    ck_assert_ptr_nonnull(c = rh_connect(&cl.node[owner]));
    r = cmd(c, "RL.CHECK 1 rl:{u1}:r 0 10 0 60000 1 0 %s", "");
    ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
    ck_assert_int_eq(r->element[1]->integer, 1);
    ck_assert_int_eq(r->element[2]->integer, 9);
    freeReplyObject(r);
    r = cmd(c, "RL.CHECK 2 rl:{u1}:r rl:{u2}:r 0 10 0 60000 1 0 %s "
               "0 10 0 60000 1 0 %s", "", "");
    ck_assert_int_eq(r->type, REDIS_REPLY_ERROR);
    ck_assert_msg(strncmp(r->str, "CROSSSLOT", 9) == 0, "%s", r->str);
    freeReplyObject(r);
    redisFree(c);
    rh_cluster_stop(&cl);
}
END_TEST

static Suite *module_suite(void)
{
    Suite *s = suite_create("module");
    TCase *tc = module_tcase(s, "twin", 600);

    tcase_add_test(tc, every_algorithm_plain);
    tcase_add_test(tc, every_algorithm_compact);
    tcase_add_test(tc, token_bucket_clock_back_vector);
    tcase_add_test(tc, token_bucket_refund_at_now_vector);
    tcase_add_test(tc, requests_all_or_nothing);
    tcase_add_test(tc, leases_as_the_script);
    tcase_add_test(tc, batch_as_requests_in_turn);
    tcase_add_test(tc, errors_write_nothing);
    tcase_add_test(tc, replica_gets_the_writes);
    tc = tcase_create("cluster");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, cluster_routes_by_declared_keys);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return module_main(module_suite, RL_MODULE_PATH " testclock");
}
