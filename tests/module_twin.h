/*
 * module_twin.h -- what the suites twin-testing ratelimit.so against the
 * Lua library and the C maths share (check_module.c, check_module_change.c):
 * a request's keys, the same request as RL.CHECK and through the script's
 * test build (on lua_fixture.h's connection, included before), the C
 * side's state (the log's too), and the base time of a sequence.
 */
#ifndef RL_TESTS_MODULE_TWIN_H
#define RL_TESTS_MODULE_TWIN_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo.h"
#include "lua_fixture.h"
#include "timeutil.h"

/* One key of a request: its name (a compact base name when field is not
 * ""), rule, cost and mode ("0" hard, "1" soft, "-m" a lease). */
typedef struct mpart {
    const char *key, *field;
    const algo_params *ap;
    int64_t cost;
    const char *mode;
} mpart;

enum { MAXP = 4 };

/* The burst as sent: 0 for "the limit" (what a rule without one says). */
static inline int64_t sent_burst(const algo_params *ap)
{
    return ap->burst == ap->limit ? 0 : ap->burst;
}

/* The answer's integers into v[0..1 + 3n): an array of them (the long
 * form), or the packed form's one string of them, ':' between. */
static inline void mod_answer(const redisReply *r, int n, int packed,
                              long long *v)
{
    const char *p = r->str;
    char *end;

    ck_assert_msg(r->type == (packed ? REDIS_REPLY_STRING
                                     : REDIS_REPLY_ARRAY),
                  "RL.CHECK: %s", r->type == REDIS_REPLY_ERROR ? r->str
                                                               : "its type");
    for (int k = 0; k < 1 + 3 * n; k++) {
        if (!packed) {
            ck_assert_int_eq(r->elements, 1 + 3 * (size_t)n);
            v[k] = r->element[k]->integer;
            continue;
        }
        v[k] = strtoll(p, &end, 10);
        ck_assert_msg(end > p && *end == (k < 3 * n ? ':' : 0), "%s", r->str);
        p = end + 1;
    }
}

/* RL.CHECK of n parts at now; d[i] each part's decision (verdict too).
 * Every other call in the packed form (one argument a key, one string
 * answered), the others in the long form: both decide alike. */
static inline void mod_check(int64_t now, const mpart *pt, int n,
                             algo_decision *d, int64_t *verdict)
{
    static int calls;
    char num[MAXP * 7 + 4][96]; /* a packed argument: 7 numbers */
    const char *argv[64];
    long long v[1 + 3 * MAXP];
    int c = 0, u = 0, packed = calls++ % 2;
    redisReply *r;

#define NUM(v) (snprintf(num[u], sizeof num[u], "%lld", (long long)(v)), \
                argv[c++] = num[u++])
    argv[c++] = "RL.CHECK";
    NUM(n);
    for (int i = 0; i < n; i++)
        argv[c++] = pt[i].key;
    for (int i = 0; i < n; i++) {
        const algo_params *ap = pt[i].ap;
        if (packed) {
            int len = snprintf(num[u], sizeof num[u],
                               "%d:%lld:%lld:%lld:%lld:%s:%s", ap->algo,
                               (long long)ap->limit,
                               (long long)sent_burst(ap),
                               (long long)ap->window_ms,
                               (long long)pt[i].cost, pt[i].mode,
                               pt[i].field);
            ck_assert_int_lt(len, (int)sizeof num[u]); /* never cut */
            argv[c++] = num[u++];
            continue;
        }
        NUM(ap->algo);
        NUM(ap->limit);
        NUM(sent_burst(ap));
        NUM(ap->window_ms);
        NUM(pt[i].cost);
        argv[c++] = pt[i].mode;
        argv[c++] = pt[i].field;
    }
    argv[c++] = "NOW";
    NUM(now);
#undef NUM
    r = redisCommandArgv(ctx, c, argv, NULL);
    ck_assert_msg(r != NULL, "RL.CHECK: %s", ctx->errstr);
    mod_answer(r, n, packed, v);
    ck_assert_int_eq(v[0], now);
    for (int i = 0; i < n; i++) {
        verdict[i] = v[1 + 3 * i];
        d[i] = (algo_decision){.allowed = v[1 + 3 * i] > 0,
                               .retry_ms = v[1 + 3 * i] < 0 ? -v[1 + 3 * i]
                                                            : 0,
                               .remaining = v[2 + 3 * i],
                               .reset_ms = v[3 + 3 * i]};
    }
    freeReplyObject(r);
}

/* The same request through the Lua library's test build (lua/check.lua's
 * long form: a rule table of one rule per part, then one request). */
static inline void lua_check(int64_t now, const mpart *pt, int n,
                             algo_decision *d, int64_t *verdict)
{
    char num[MAXP * 11 + 8][24];
    const char *argv[96];
    size_t lens[96];
    int c = 0, u = 0, reqs;
    redisReply *r;

#define NUM(v) (snprintf(num[u], sizeof num[u], "%lld", (long long)(v)), \
                argv[c++] = num[u++])
    c = 2; /* EVALSHA and the script's SHA-1: lua_test_eval() */
    NUM(n);
    for (int i = 0; i < n; i++)
        argv[c++] = pt[i].key;
    NUM(now);
    argv[c++] = "c";
    reqs = c++;
    for (int i = 0; i < n; i++) {
        NUM(pt[i].ap->algo);
        NUM(pt[i].ap->limit);
        NUM(pt[i].ap->burst);
        NUM(pt[i].ap->window_ms);
        NUM(pt[i].ap->p);
        NUM(pt[i].ap->q);
        NUM(0);
    }
    snprintf(num[u], sizeof num[u], "%d", c - (2 + n));
    argv[reqs] = num[u++];
    NUM(1);
    NUM(n);
    for (int i = 0; i < n; i++) {
        NUM(4 + 7 * i);
        NUM(pt[i].cost);
        argv[c++] = pt[i].mode;
        argv[c++] = pt[i].field;
    }
#undef NUM
    r = lua_test_eval(c, argv, lens);
    ck_assert_msg(r->type != REDIS_REPLY_ERROR, "script: %s", r->str);
    lua_answer_shape(r, (size_t)n);
    for (int i = 0; i < n; i++) {
        lua_answer(r, (size_t)i, &d[i]);
        verdict[i] = lua_answer_value(r, (size_t)i, 0);
    }
    freeReplyObject(r);
}

/* The base time: the real clock an hour ahead, so Redis expires nothing
 * a sequence still uses; RL_TEST_BASE_MS replays a failure's (its message
 * prints the base), within the hour. */
static inline int64_t test_base(void)
{
    const char *fixed = getenv("RL_TEST_BASE_MS");

    return fixed ? atoll(fixed) : real_ms() / 1000 * 1000 + 3600 * 1000;
}

/* One charge on the C side: algo_apply, or the log's apply and commit. */
typedef struct cside {
    algo_state st;
    int64_t log[64];
    size_t n;
} cside;

static inline void c_apply(const algo_params *ap, cside *s, int64_t now,
                           int64_t cost, algo_decision *d)
{
    size_t drop;
    int64_t at;

    memset(d, 0, sizeof *d);
    if (ap->algo != RL_ALGO_SLIDING_LOG) {
        algo_apply(ap, &s->st, now, cost, d);
        return;
    }
    algo_log_apply(ap, s->log, s->n, now, cost, d, &drop, &at);
    if (d->changed)
        s->n = algo_log_commit(s->log, s->n, drop, at, cost);
}

#endif
