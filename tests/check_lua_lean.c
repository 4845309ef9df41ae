/*
 * check_lua_lean.c -- the lean path (lua/lean.lua: check.lua's mode "l",
 * what src/redis/redis_script.c sends a lone one-rule check as) and
 * batches of requests in one script call, twin-tested against the C maths
 * (src/base/algo.c) on a real redis-server as check_lua.c tests the
 * general path: the lean path alone and taking turns with the general
 * path on the same keys, on states earlier scripts wrote, on Redis's own
 * clock, and its one write a charge (with option redis_oldest_limiter's
 * ":1" too: writers of both settings and the general path on one key);
 * batches naming keys again and again,
 * through the general path and the lean batch (mode "L"), and what the
 * state so written costs in Redis memory.  Split from check_lua.c (past
 * 900 lines); the script call, one charge and the twin runs both suites
 * drive are tests/lua_twin_fixture.h.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo.h"
#include "algo_vectors.h"
#include "lua_fixture.h"
#include "lua_twin_fixture.h"
#include "redis_harness.h"
#include "testutil.h"

/* Batches of plain one-rule checks go as the lean batch (check.lua's
 * mode "L": one key and one argument an op, what src/redis/redis_script.c
 * sends for a batch of lone one-rule requests). */
static int lean_batch_mode;

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
 * hot client; a key twice in one batch) or at a clock gone back: the
 * level is the expiry's reading at any now (GCRA's rule), so every step
 * is one SET ... PXAT and no GET (before GCRA's rule a clock gone back
 * made the general steps run: GET, and the value put back).  The C maths
 * decide the same at every step. */
START_TEST(lean_bucket_same_ms_one_write)
{
    static const struct {
        int64_t dt, sets, gets; /* the step's time from base; its calls */
    } steps[] = {{0, 1, 0}, {0, 1, 0}, {0, 1, 0}, {-1, 1, 0}, {5, 1, 0}};
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

    ck_assert_int_le(nreq, MAXR);
#define NUM(v) (snprintf(num[c], sizeof num[c], "%lld", (long long)(v)), \
                argv[c] = num[c], c++)
    c = 2; /* by its SHA-1 (lua_test_eval): the script in every call
            * would grow and shrink the connection's buffers, which
            * used_memory counts */
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
    r = lua_test_eval(c, argv, lens);
    ck_assert_msg(r->type != REDIS_REPLY_ERROR, "script: %s", r->str);
    lua_answer_shape(r, (size_t)nreq);
    for (int i = 0; i < nreq; i++)
        lua_answer(r, (size_t)i, &d[i]);
    freeReplyObject(r);
}

/* A batch naming the same clients again and again, every algorithm: each
 * request decided as the C maths decide the same requests one by one;
 * through the general path, then the lean batch (lua/lean.lua). */
/* GCRA's rule for the token bucket (algo_vectors.h's vector) through the
 * lean path, and what it stores: "0" with the expiry at the time the
 * bucket is full again, which an earlier version's script reads as level
 * 0 at that time less a bucket's refill: exactly this path's level from
 * then on, and 0 (no token) before. */
static void vec_apply(const algo_params *ap, int64_t now, int64_t cost,
                      algo_decision *d)
{
    lean_apply(ap, "rl:{vec}:lean", now, cost, d);
    if (d->allowed && cost > 0) { /* cost 0 writes nothing */
        redisReply *r = cmd("GET rl:{vec}:lean");

        ck_assert_str_eq(r->str, "0");
        freeReplyObject(r);
        ck_assert_int_eq(cmd_int("PEXPIRETIME rl:{vec}:lean"), d->reset_ms);
    }
}

START_TEST(lean_bucket_clock_back_vector)
{
    bucket_clock_back_run(vec_apply, test_base(), 0, "Lua lean");
}
END_TEST

/* A refund (check.lua's "r") of the "0" the lean path wrote, taken at
 * now as of a level: algo_vectors.h's refund vector, charged lean. */
static void vec_refund(const algo_params *ap, int64_t now, int64_t cost)
{
    part pt = {.key = "rl:{vec}:lean", .field = "", .ap = ap, .cost = cost,
               .last = now};
    redisReply *r = lua_eval('r', now, &pt, 1);

    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
}

START_TEST(lean_bucket_refund_at_now_vector)
{
    cmd_int("DEL rl:{vec}:lean");
    bucket_refund_run(vec_apply, vec_refund, test_base(), "Lua lean");
}
END_TEST

/* Option redis_oldest_limiter 1.1 (the lean argument's ":1"): a live
 * q = 1 token bucket's charge is PEXPIREAT alone, the value left as the
 * key's last writer put it.  The same vectors, the writers taking turns
 * on the one key: the general path (check.lua: a level and its expiry),
 * the lean path with ":1", the general path reading that stale level,
 * ":1" again, the lean path by default ("0" PXAT): every reader (each of
 * them and the refunds, settle.lua) takes the level from the expiry
 * alone, so the decisions are the vector's, the C maths'.  Each ":1"
 * charge of a live key is one PEXPIREAT and no SET, the value untouched;
 * one of a new key SETs "0" (a value every reader parses). */
static int vec_turn, vec_stale;

static void vec_mixed(const algo_params *ap, int64_t now, int64_t cost,
                      algo_decision *d)
{
    static const int writer[] = {2, 1, 2, 1, 0}; /* 2: general, 1: ":1" */
    const char *key = "rl:{vec}:lean";
    int w = writer[vec_turn++ % 5];
    redisReply *was = cmd("GET %s", key), *now_v;
    long long sets = rh_cmdstat_calls(&srv, "set");
    long long pexp = rh_cmdstat_calls(&srv, "pexpireat");

    if (w == 2) {
        lua_apply(ap, key, "", now, cost, d);
    } else {
        lean_oldest = w;
        lean_apply(ap, key, now, cost, d);
        lean_oldest = 0;
    }
    now_v = cmd("GET %s", key);
    if (d->allowed && cost > 0) {
        ck_assert_int_eq(cmd_int("PEXPIRETIME %s", key), d->reset_ms);
        if (w == 1 && was->type == REDIS_REPLY_STRING) {
            ck_assert_str_eq(now_v->str, was->str);
            vec_stale += strcmp(was->str, "0") != 0;
            ck_assert_int_eq(rh_cmdstat_calls(&srv, "set"), sets);
            ck_assert_int_eq(rh_cmdstat_calls(&srv, "pexpireat"), pexp + 1);
        } else if (w != 2) {
            ck_assert_str_eq(now_v->str, "0");
        }
    }
    freeReplyObject(was);
    freeReplyObject(now_v);
}

START_TEST(lean_bucket_oldest_mixed_writers_vectors)
{
    cmd_int("DEL rl:{vec}:lean");
    vec_turn = vec_stale = 0;
    bucket_clock_back_run(vec_mixed, test_base(), 0, "mixed writers");
    cmd_int("DEL rl:{vec}:lean");
    vec_turn = 0;
    bucket_refund_run(vec_mixed, vec_refund, test_base(),
                      "mixed writers, refunds");
    ck_assert_int_gt(vec_stale, 0); /* a level left under a new expiry */
}
END_TEST

/* And at random: the lean path with ":1" or without, call by call, alone
 * and taking turns with the general path, and refunds, on token buckets
 * of random numbers (q = 1 and not), against the C maths; then the lean
 * batch with ":1" on keys named again and again. */
START_TEST(lean_bucket_oldest_mixed_writers_random)
{
    lean_oldest = 2;
    for (int mode = 1; mode <= 2; mode++) {
        lean_mode = mode;
        differential(RL_ALGO_TOKEN_BUCKET, 20, 100, 0);
        refund_restores(RL_ALGO_TOKEN_BUCKET, 0);
        freeReplyObject(cmd("FLUSHALL")); /* the refunds' keys: new rules */
    }
    lean_mode = 0;
    lean_oldest = 0;
}
END_TEST

START_TEST(batch_repeated_keys_same_decisions)
{
    int64_t base = test_base();

    for (int m = 0; m < 10; m++) {
        int algo = m < 8 ? m % 4 : RL_ALGO_TOKEN_BUCKET;
        lean_batch_mode = m >= 4; /* then the lean batch, mode "L" */
        /* then token buckets, the lean batch's ops with ":1" or without
         * at random (option redis_oldest_limiter), the second call the
         * general path's */
        lean_oldest = m >= 8 ? 2 : 0;
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
                         algo_name(algo), m, round, k);
            for (int s = 0; s < 3; s++) { /* three calls, time moving */
                if (m >= 8)
                    lean_batch_mode = s != 1;
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
    lean_batch_mode = lean_oldest = 0;
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
    Suite *s = suite_create("lua_lean");
    TCase *tc = tcase_create("lean");

    if (!rh_available()) {
        fprintf(stderr, "check_lua_lean: redis-server not available, "
                "skipping\n");
        return 77;
    }
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, twin_setup, teardown);
    tcase_add_test(tc, lean_path_same_decisions);
    tcase_add_test(tc, lean_path_reads_written_state);
    tcase_add_test(tc, lean_path_reads_redis_clock);
    tcase_add_test(tc, lean_bucket_same_ms_one_write);
    tcase_add_test(tc, lean_bucket_clock_back_vector);
    tcase_add_test(tc, lean_bucket_refund_at_now_vector);
    tcase_add_test(tc, lean_bucket_oldest_mixed_writers_vectors);
    tcase_add_test(tc, lean_bucket_oldest_mixed_writers_random);
    tcase_add_test(tc, batch_repeated_keys_same_decisions);
    tcase_add_test(tc, state_size_bound);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
