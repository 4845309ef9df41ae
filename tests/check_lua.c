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
 *
 * Here the general path (lua/check.lua's mode "c", its cluster batch mode
 * "C" and short requests): every algorithm in both layouts, refunds, the
 * compact layout's hashes, all or nothing, and rule changes (the
 * conversion).  The lean path and batches of requests in one call are
 * check_lua_lean.c's; the script call and the twin runs both suites drive
 * are tests/lua_twin_fixture.h.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "algo.h"
#include "algo_vectors.h"
#include "lua_fixture.h"
#include "lua_twin_fixture.h"
#include "testutil.h"
#include "timeutil.h"

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

/* refund_restores, every algorithm, in one layout. */
static void refund_restores_every_algorithm(int compact)
{
    for (int algo = 0; algo <= RL_ALGO_GCRA; algo++)
        refund_restores(algo, compact);
}

START_TEST(refund_restores_charge_plain)
{
    refund_restores_every_algorithm(0);
}
END_TEST

START_TEST(refund_restores_charge_compact)
{
    refund_restores_every_algorithm(1);
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

/* Does the store still hold a state of rule `ap` under key (and field)
 * at now: what Lua's read of it looks at (plain: the key; compact: the
 * hashes lua/compact.lua reads, the epoch of now and, but for a fixed
 * window, the one before). */
static int store_holds(const algo_params *ap, const char *key,
                       const char *field, int64_t now)
{
    long long e = (long long)(now / epoch_ms(ap));

    if (!field[0])
        return cmd_int("EXISTS %s", key) == 1;
    return cmd_int("HEXISTS %s:%lld %s", key, e, field) == 1 ||
           (ap->algo != RL_ALGO_FIXED_WINDOW &&
            cmd_int("HEXISTS %s:%lld %s", key, e - 1, field) == 1);
}

/* The steps under the new rule `to` of a client whose state under the old
 * rule `from` is *so in C (and in Redis under kf, field), the rule having
 * changed at os->since: at ts[s], cost cs[s].  C converts (while no new
 * state has been written: a denial writes nothing, so the next step
 * converts again) and decides; Lua reads the old shape's state, converts
 * it and decides.  They decide alike at every step, and (plain) the old
 * key is gone exactly once C has written the new state.
 *
 * A store may drop a state once it is fresh (algo_state_fresh: a bucket
 * full again, windows passed); the compact layout does when its epochs
 * pass, and Redis's own expiry would in the plain one but for the test's
 * clock being ahead.  The client then has no state under any shape, and
 * the library takes the least it may have held (algo_convert_unknown, at
 * the change): fresh too for a state written at or after the change, but
 * not for one written before it (a request whose clock was behind the
 * change's stamp, which the random pairs make on purpose).  So C drops its
 * new state where the store did, and converts as the library then does. */
static void conversion_steps(int compact, const algo_params *from,
                             const algo_params *to, algo_state *so,
                             const oldshape *os, const char *kf,
                             const char *kt, const char *field, int old_there,
                             const int64_t *ts, const int64_t *cs, int steps,
                             int64_t base)
{
    rule_shape sf, sto;
    algo_state sn = {0};
    algo_decision c, l;
    int have_new = 0, moved = 0, same;

    rule_shape_init(&sf, "conv", from);
    rule_shape_init(&sto, "conv", to);
    same = strcmp(sf.name, sto.name) == 0;
    for (int s = 0; s < steps; s++) {
        int64_t t = ts[s], cost = cs[s];
        if (same) {
            /* A set whose rule keeps its shape hands down no replaced
             * shape (ruleset_inherit): both sides go on with the state
             * as it is, no conversion. */
            algo_apply(to, so, t, cost, &c);
            lua_apply(to, kt, field, t, cost, &l);
        } else {
            if (have_new && algo_state_fresh(to, &sn, t) &&
                !store_holds(to, kt, field, t))
                have_new = 0; /* dropped: no state under any shape */
            if (!have_new) {
                algo_state tmp;
                if (moved)
                    algo_convert_unknown(from, to, os->since, t, &tmp);
                else
                    algo_convert(from, so, to, os->since, t, &tmp);
                algo_apply(to, &tmp, t, cost, &c);
                if (c.changed) {
                    sn = tmp;
                    have_new = moved = 1;
                }
            } else {
                algo_apply(to, &sn, t, cost, &c);
            }
            lua_apply_changed(to, sto.name, os, kt, field, t, cost, &l);
        }
        ck_assert_msg(c.allowed == l.allowed &&
                      c.remaining == l.remaining &&
                      c.reset_ms == l.reset_ms &&
                      c.retry_ms == l.retry_ms,
                      "%s -> %s (%s), step %d at t=%lld cost %lld "
                      "(change at %lld, RL_TEST_BASE_MS=%lld): C {%d "
                      "%lld %lld %lld} vs Lua {%d %lld %lld %lld}",
                      sf.name, sto.name, compact ? "compact" : "plain", s,
                      (long long)(t - base), (long long)cost,
                      (long long)(os->since - base), (long long)base,
                      c.allowed,
                      (long long)c.remaining, (long long)c.reset_ms,
                      (long long)c.retry_ms, l.allowed,
                      (long long)l.remaining, (long long)l.reset_ms,
                      (long long)l.retry_ms);
        if (!compact && strcmp(kf, kt) != 0)
            ck_assert_int_eq(cmd_int("EXISTS %s", kf), old_there && !moved);
    }
}

/* Random pairs of rules (any algorithms, limits, bursts, windows): a
 * client's state is built under the old rule by random charges on both
 * sides, then the rule changes (some time around the next request, before
 * or after it), and conversion_steps() goes on under the new rule. */
static void conversion(int compact, int pairs, int steps)
{
    int64_t base = test_base();
    int64_t ts[64], cs[64];

    ck_assert_int_le(steps, 64);
    pairs = twin_walks(pairs);
    for (int r = 0; r < pairs; r++) {
        algo_params from = random_params((int)rnd(4));
        algo_params to = random_params((int)rnd(4));
        algo_state so = {0};
        algo_decision c, l;
        rule_shape sf, sto;
        oldshape os;
        char stem[64], kf[128], kt[128], field[16] = "";
        int64_t t = base + (int64_t)rnd(100000);
        int old_there, n1 = (int)rnd((uint64_t)steps);

        rule_shape_init(&sf, "conv", &from);
        rule_shape_init(&sto, "conv", &to);
        if (compact) {
            snprintf(stem, sizeof stem, "rlc:{%u}:conv-%d:",
                     (unsigned)rnd(65536), r);
            snprintf(field, sizeof field, "%u", (unsigned)rnd(1u << 31));
        } else {
            snprintf(stem, sizeof stem, "rl:{conv}:conv-%d:", r);
        }
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
        /* the steps under the new rule, drawn in the order they always
         * were (a cost, then the next time) */
        for (int s = 0; s < steps; s++, t = forward(&to, t)) {
            ts[s] = t;
            cs[s] = next_cost(&to);
        }
        conversion_steps(compact, &from, &to, &so, &os, kf, kt, field,
                         old_there, ts, cs, steps, base);
    }
}

START_TEST(conversion_same_in_c_and_lua_plain)
{
    conversion(0, 150, 30);
}
END_TEST

/* The old rule's state written by the lean path too, with and without
 * the ":1" of option redis_oldest_limiter (a q = 1 token bucket's level
 * then under a new expiry, its value as an earlier writer left it), at
 * random: converted alike (convert.lua reads the level from the expiry
 * alone, as the C maths hold it). */
START_TEST(conversion_of_lean_writes_plain)
{
    lean_mode = lean_oldest = 2;
    conversion(0, 80, 30);
    lean_mode = lean_oldest = 0;
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

/* The flake of conversion_same_in_c_and_lua_compact under sanitize.sh
 * (g1:7:7 -> g1:999983:337189): the first request under the new rule
 * comes 500 ms before the change's stamp (a clock behind it), is converted
 * at its own time and charged; 800 ms later the new state is fresh and the
 * compact layout has dropped it (its epochs of 340 ms passed), so the
 * client has no state under any shape and the library takes the least it
 * may have held at the change (algo_convert_unknown: 4 of 7 tokens 300 ms
 * after it, 305998 of the new burst), where C, keeping its state, said
 * full.  C drops it too now (conversion_steps). */
START_TEST(conversion_state_dropped_before_the_change)
{
    algo_params from, to;
    algo_decision c, l;
    char err[100];
    int64_t t = test_base() + 20000;

    ck_assert_int_eq(algo_params_init(&from, RL_ALGO_GCRA, 7, 7, 1, err,
                                      sizeof err), 0);
    ck_assert_int_eq(algo_params_init(&to, RL_ALGO_GCRA, 999983, 337189, 1,
                                      err, sizeof err), 0);
    for (int compact = 0; compact < 2; compact++) {
        const char *field = compact ? "4242" : "";
        const char *kf = compact ? "rlc:{3}:drop:g1:7:7" : "rl:{drop}:g1:7:7";
        const char *kt = compact ? "rlc:{3}:drop:g1:999983:337189"
                                 : "rl:{drop}:g1:999983:337189";
        rule_shape sf;
        algo_state so = {0};
        int64_t ts[2] = {t, t + 800}, cs[2] = {1, 0};
        oldshape os;

        rule_shape_init(&sf, "conv", &from);
        os = (oldshape){&from, sf.name, t + 500};
        algo_apply(&from, &so, t - 100, 3, &c);
        lua_apply(&from, kf, field, t - 100, 3, &l);
        ck_assert(c.allowed && l.allowed);
        conversion_steps(compact, &from, &to, &so, &os, kf, kt, field, 1, ts,
                         cs, 2, test_base());
        t += 10000;
    }
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

/* GCRA's rule for the token bucket (algo_vectors.h's vector), through
 * the general path, in both layouts. */
static const char *vec_key, *vec_field;

static void vec_apply(const algo_params *ap, int64_t now, int64_t cost,
                      algo_decision *d)
{
    lua_apply(ap, vec_key, vec_field, now, cost, d);
}

START_TEST(token_bucket_clock_back_vector)
{
    bucket_clock_back_layouts(vec_apply, &vec_key, &vec_field, test_base,
                              "Lua");
}
END_TEST

/* check.lua's "r" (a lease's give-back, a cluster batch's undo), charged
 * at now. */
static void vec_refund(const algo_params *ap, int64_t now, int64_t cost)
{
    part pt = {.key = vec_key, .field = vec_field, .ap = ap, .cost = cost,
               .last = now};
    redisReply *r = lua_eval('r', now, &pt, 1);

    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
}

/* A refund taken at now (algo_vectors.h's refund vector), both layouts. */
START_TEST(token_bucket_refund_at_now_vector)
{
    bucket_refund_layouts(vec_apply, vec_refund, &vec_key, &vec_field,
                          test_base, "Lua");
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
    tcase_add_checked_fixture(tc, twin_setup, teardown);
    tcase_add_test(tc, sliding_window_same_decisions);
    tcase_add_test(tc, cross_slot_mode_same_decisions);
    tcase_add_test(tc, short_requests_same_decisions);
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
    tcase_add_test(tc, token_bucket_clock_back_vector);
    tcase_add_test(tc, token_bucket_refund_at_now_vector);
    tcase_add_test(tc, conversion_same_in_c_and_lua_plain);
    tcase_add_test(tc, conversion_of_lean_writes_plain);
    tcase_add_test(tc, conversion_same_in_c_and_lua_compact);
    tcase_add_test(tc, conversion_same_in_cluster_batch_mode);
    tcase_add_test(tc, conversion_state_dropped_before_the_change);
    tcase_add_test(tc, conversion_sliding_previous_count_gone);
    tcase_add_test(tc, conversion_all_or_nothing);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
