/*
 * check_module_change.c -- ratelimit.so (redis-module/) after a check:
 * refunds and rl_settle's refunds and debts (RL.SETTLE r, s, d), and the
 * conversion of a client's state when its rule changed shape (RL.CHECK's
 * SHAPES), each against the Lua library's test build (check.lua's "r",
 * settle.lua, convert.lua) and the C maths (settle_state,
 * algo_log_refund, algo_convert) on the same random vectors, on twin keys
 * of a real redis-server started with `loadmodule ratelimit.so testclock`.
 */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "algo.h"
#include "algo_vectors.h"
#include "lua_fixture.h"
#include "module_fixture.h"
#include "module_twin.h"
#include "redis_harness.h"
#include "rule.h"
#include "settle.h"
#include "testutil.h"

static uint64_t rng = 3141592653ULL;

static uint64_t rnd(uint64_t n)
{
    return xorshift64(&rng) % n;
}

/* argv's command: the module's as it stands (mod), else the test script's
 * (argv[0] and argv[1] its EVALSHA and SHA-1: lua_fixture.h).  Non-NULL. */
static redisReply *mod_or_script(int mod, int argc, const char **argv,
                                 size_t *lens)
{
    redisReply *r;

    if (!mod)
        return lua_test_eval(argc, argv, lens);
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    r = redisCommandArgv(ctx, argc, argv, lens);
    ck_assert_msg(r != NULL, "%s", ctx->errstr);
    return r;
}

/* ---- refunds and settles (RL.SETTLE; lua/check.lua "r", settle.lua) ---- */

/* A refund (mode 'r') or settle ('s', 'd') of n parts, each pt[i].cost
 * units charged at at[i], through RL.SETTLE (mod 1) or the script (mod
 * 0); markers mk[i] for 's' and 'd'.  The answer's integer. */
static long long settle_call(int mod, char mode, int64_t now,
                             const mpart *pt, int n, const int64_t *at,
                             char (*mk)[64])
{
    char num[MAXP * 8 + 8][24], m[2] = {mode, 0};
    const char *argv[96];
    size_t lens[96];
    int c = 0, u = 0, nk = mode == 'r' ? n : 2 * n, reqs = 0;
    redisReply *r;
    long long v;

#define NUM(x) (snprintf(num[u], sizeof num[u], "%lld", (long long)(x)), \
                argv[c++] = num[u++])
    argv[c++] = "RL.SETTLE"; /* or the script: mod_or_script */
    argv[c++] = mod ? m : NULL;
    NUM(nk);
    for (int i = 0; i < nk; i++)
        argv[c++] = i < n ? pt[i].key : mk[i - n];
    if (!mod) {
        NUM(now);
        argv[c++] = m;
        reqs = c++;
    }
    for (int i = 0; i < n; i++) {
        NUM(pt[i].ap->algo);
        NUM(pt[i].ap->limit);
        NUM(mod ? sent_burst(pt[i].ap) : pt[i].ap->burst);
        NUM(pt[i].ap->window_ms);
        if (mod) {
            NUM(pt[i].cost);
            NUM(at[i]);
            argv[c++] = pt[i].field;
        } else {
            NUM(pt[i].ap->p);
            NUM(pt[i].ap->q);
            NUM(0);
        }
    }
    if (mod) {
        argv[c++] = "NOW";
        NUM(now);
    } else {
        snprintf(num[u], sizeof num[u], "%d", c - (2 + nk));
        argv[reqs] = num[u++];
        NUM(1);
        NUM(n);
        for (int i = 0; i < n; i++) {
            NUM(4 + 7 * i);
            NUM(pt[i].cost);
            NUM(at[i]);
            argv[c++] = pt[i].field;
        }
    }
#undef NUM
    r = mod_or_script(mod, c, argv, lens);
    ck_assert_msg(r->type == REDIS_REPLY_INTEGER, "%s %c: %s",
                  mod ? "RL.SETTLE" : "script", mode,
                  r->type == REDIS_REPLY_ERROR ? r->str : "no integer");
    v = r->integer;
    freeReplyObject(r);
    return v;
}

/* Charges, and now and then a refund ('r') or a settle ('s', 'd', each
 * with a new marker or, once in a while, the last one again) of the last
 * charge, on a key only the module settles and one only the script does:
 * the answers and every later check the same, and (plain layout) as the
 * C maths: settle_state(), algo_log_refund().  Time only moves on (a
 * bucket's refund on a clock gone back: algo_vectors.h's refund vector). */
static void settle_twin(int algo, int compact, char kind, int rules,
                        int steps)
{
    int64_t base = test_base();

    for (int r = 0; r < rules; r++) {
        algo_params ap = random_params(algo);
        cside cs = {0};
        int64_t t = base + (int64_t)rnd(100000), at = 0, charged = 0;
        int written = 0, rid = 0, made = 0;
        char key[2][40], field[16] = "", mk[2][1][64];

        for (int k = 0; k < 2; k++)
            snprintf(key[k], sizeof key[k], "%s:{%d}:s%d-%s-%d",
                     compact ? "rlc" : "rl", (int)rnd(65536), k,
                     algo_name(algo), r);
        if (compact)
            snprintf(field, sizeof field, "%u", (unsigned)rnd(1u << 31));
        for (int s = 0; s < steps; s++) {
            mpart pt[2] = {{.key = key[0], .field = field, .ap = &ap,
                            .mode = "0"},
                           {.key = key[1], .field = field, .ap = &ap,
                            .mode = "0"}};
            char mode = kind == 'r' ? 'r' : rnd(2) ? 's' : 'd';
            if ((charged > 0 || mode == 'd') && rnd(3) == 0) {
                int64_t u = mode == 'd' ? 1 + (int64_t)rnd(5)
                                        : 1 + (int64_t)rnd((uint64_t)charged);
                int again = rid > 0 && rnd(4) == 0, expect = 1;
                long long am, al;
                rid += !again;
                for (int k = 0; k < 2; k++) {
                    pt[k].cost = u;
                    snprintf(mk[k][0], sizeof mk[k][0], "%.40s:~r:%d", key[k],
                             rid);
                }
                am = settle_call(1, mode, t, &pt[0], 1, &at, mk[0]);
                al = settle_call(0, mode, t, &pt[1], 1, &at, mk[1]);
                ck_assert_msg(am == al, "%s %c: module %lld, script %lld",
                              algo_name(algo), mode, am, al);
                if (mode != 'r') { /* a marker is made when settled */
                    expect = (!again || !made) && t <= settle_until(&ap, at);
                    made = (again && made) || expect;
                }
                if (!compact)
                    ck_assert_int_eq(am, expect);
                if (!compact && expect && algo == RL_ALGO_SLIDING_LOG)
                    cs.n = algo_log_refund(cs.log, cs.n, at, u);
                else if (!compact && expect) {
                    int64_t exp;
                    settle_state(&ap, mode == 'd', u, at, t, &cs.st,
                                 written, &exp);
                    written |= mode == 'd';
                }
                charged = 0;
            } else {
                int64_t cost = next_cost(&ap), v;
                algo_decision c, x, y;
                pt[0].cost = pt[1].cost = cost;
                c_apply(&ap, &cs, t, cost, &c);
                mod_check(t, &pt[0], 1, &x, &v);
                lua_check(t, &pt[1], 1, &y, &v);
                same_decision(&y, &x, "after settles: script vs module",
                              &ap, s, base, t, cost);
                if (!compact)
                    same_decision(&c, &x, "after settles: C vs module", &ap,
                                  s, base, t, cost);
                if (x.allowed && cost > 0) {
                    at = t;
                    charged = cost;
                    written = 1;
                }
            }
            switch (rnd(6)) {
            case 0: t += ap.window_ms + (int64_t)rnd(1000); break;
            case 1: t += (int64_t)rnd((uint64_t)ap.window_ms / 4 + 1); break;
            default: t += (int64_t)rnd(50);
            }
        }
    }
}

START_TEST(refunds_as_the_script)
{
    for (int algo = 0; algo <= RL_ALGO_SLIDING_LOG; algo++) {
        settle_twin(algo, 0, 'r', 10, 80);
        if (algo != RL_ALGO_SLIDING_LOG)
            settle_twin(algo, 1, 'r', 10, 80);
    }
}
END_TEST

START_TEST(settles_as_the_script)
{
    for (int algo = 0; algo < RL_ALGO_SLIDING_LOG; algo++) {
        settle_twin(algo, 0, 's', 10, 80);
        settle_twin(algo, 1, 's', 10, 80);
    }
}
END_TEST

/* ---- rule changes: conversions (module_convert.c, lua/convert.lua) ---- */

/* One check of key (its name ends in the shape `name` of rule `to`) whose
 * rule replaced the shape `oname` (rule `from`) at `since`: through
 * RL.CHECK's SHAPES (mod 1) or the script's table (mod 0). */
static void moved_check(int mod, const char *key, const char *field,
                        const algo_params *to, const char *name,
                        const algo_params *from, const char *oname,
                        int64_t since, int64_t now, int64_t cost,
                        algo_decision *d)
{
    const algo_params *ap[2] = {to, from};
    char num[32][24];
    const char *argv[48];
    size_t lens[48];
    int c = 0, u = 0;
    redisReply *r;

#define NUM(x) (snprintf(num[u], sizeof num[u], "%lld", (long long)(x)), \
                argv[c++] = num[u++])
    argv[c++] = "RL.CHECK"; /* or the script: mod_or_script */
    if (!mod)
        argv[c++] = NULL;
    argv[c++] = "1";
    argv[c++] = key;
    if (!mod) {
        NUM(now);
        argv[c++] = "c";
        argv[c++] = "-20"; /* the requests after a table of 16 values */
    }
    for (int i = 0; i < 2; i++) {
        if (mod && i == 1) {
            NUM(cost);
            argv[c++] = "0";
            argv[c++] = field;
            argv[c++] = "SHAPES";
            argv[c++] = "0";
            argv[c++] = name;
            argv[c++] = "1";
        }
        NUM(ap[i]->algo);
        NUM(ap[i]->limit);
        NUM(mod ? sent_burst(ap[i]) : ap[i]->burst);
        NUM(ap[i]->window_ms);
        if (!mod) {
            NUM(ap[i]->p);
            NUM(ap[i]->q);
        }
        if (!mod && i == 0) {
            argv[c++] = "1";
            argv[c++] = name;
        }
        if (i == 1) {
            argv[c++] = oname;
            NUM(since);
        }
    }
    if (mod) {
        argv[c++] = "NOW";
        NUM(now);
    } else {
        argv[c++] = "1";
        argv[c++] = "1";
        argv[c++] = "4";
        NUM(cost);
        argv[c++] = "0";
        argv[c++] = field;
    }
#undef NUM
    r = mod_or_script(mod, c, argv, lens);
    ck_assert_msg(r->type != REDIS_REPLY_ERROR, "%s", r->str);
    if (mod) {
        ck_assert_int_eq(r->elements, 4);
        *d = (algo_decision){.allowed = r->element[1]->integer > 0,
                             .retry_ms = r->element[1]->integer < 0
                                             ? -r->element[1]->integer
                                             : 0,
                             .remaining = r->element[2]->integer,
                             .reset_ms = r->element[3]->integer};
    } else {
        lua_answer_shape(r, 1);
        lua_answer(r, 0, d);
    }
    freeReplyObject(r);
}

/* Random pairs of rules: a client's state built under the old one (C,
 * module and script), then the rule changes; under the new one C converts
 * (algo_convert, until a charge is kept), the module and the script each
 * read their old shape's state, convert and decide: alike at every step;
 * and (plain) the old key goes at the same step on both. */
static void conversion(int compact, int pairs, int steps)
{
    int64_t base = test_base();

    for (int r = 0; r < pairs; r++) {
        algo_params from = random_params((int)rnd(4));
        algo_params to = random_params((int)rnd(4));
        cside so = {0};
        algo_state sn = {0};
        rule_shape sf, st;
        char kf[2][96], kt[2][96], field[16] = "";
        int64_t t = base + (int64_t)rnd(100000), since, v;
        int have_new = 0;

        rule_shape_init(&sf, "conv", &from);
        rule_shape_init(&st, "conv", &to);
        if (strcmp(sf.name, st.name) == 0)
            continue; /* no change of shape: nothing replaced */
        if (compact)
            snprintf(field, sizeof field, "%u", (unsigned)rnd(1u << 31));
        for (int k = 0; k < 2; k++) {
            int tag = (int)rnd(65536);
            snprintf(kf[k], sizeof kf[k], "%s:{%d}:cv%d-%d:%s",
                     compact ? "rlc" : "rl", tag, k, r, sf.name);
            snprintf(kt[k], sizeof kt[k], "%s:{%d}:cv%d-%d:%s",
                     compact ? "rlc" : "rl", tag, k, r, st.name);
        }
        for (int s = (int)rnd((uint64_t)steps); s > 0; s--) {
            int64_t cost = next_cost(&from);
            mpart pm = {.key = kf[0], .field = field, .ap = &from,
                        .cost = cost, .mode = "0"};
            mpart pl = pm;
            algo_decision c, m, l;
            pl.key = kf[1];
            c_apply(&from, &so, t, cost, &c);
            mod_check(t, &pm, 1, &m, &v);
            lua_check(t, &pl, 1, &l, &v);
            same_decision(&c, &m, "before the change: C vs module", &from,
                          s, base, t, cost);
            same_decision(&c, &l, "before the change: C vs script", &from,
                          s, base, t, cost);
            t += (int64_t)rnd(4) == 0 ? (int64_t)rnd(5000) : (int64_t)rnd(40);
        }
        since = t - (int64_t)rnd(3000) + (int64_t)rnd(1000);
        for (int s = 0; s < steps; s++) {
            int64_t cost = next_cost(&to);
            algo_decision c, m, l;
            algo_state tmp = sn;
            if (!have_new)
                algo_convert(&from, &so.st, &to, since, t, &tmp);
            algo_apply(&to, &tmp, t, cost, &c);
            if (c.changed) {
                sn = tmp;
                have_new = 1;
            }
            moved_check(1, kt[0], field, &to, st.name, &from, sf.name, since,
                        t, cost, &m);
            moved_check(0, kt[1], field, &to, st.name, &from, sf.name, since,
                        t, cost, &l);
            same_decision(&c, &m, "after the change: C vs module", &to, s,
                          base, t, cost);
            same_decision(&c, &l, "after the change: C vs script", &to, s,
                          base, t, cost);
            if (!compact) {
                redisReply *a = redisCommand(ctx, "EXISTS %s", kf[0]);
                redisReply *b = redisCommand(ctx, "EXISTS %s", kf[1]);
                ck_assert_int_eq(a->integer, b->integer);
                freeReplyObject(a);
                freeReplyObject(b);
            }
            t += (int64_t)rnd(4) == 0 ? (int64_t)rnd(5000) : (int64_t)rnd(40);
        }
    }
}

START_TEST(conversions_as_the_script)
{
    conversion(0, 80, 25);
    conversion(1, 80, 25);
}
END_TEST

static Suite *module_change_suite(void)
{
    Suite *s = suite_create("module_change");
    TCase *tc = module_tcase(s, "twin", 600);

    tcase_add_test(tc, refunds_as_the_script);
    tcase_add_test(tc, settles_as_the_script);
    tcase_add_test(tc, conversions_as_the_script);
    return s;
}

int main(void)
{
    return module_main(module_change_suite, RL_MODULE_PATH " testclock");
}
