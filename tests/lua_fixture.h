/*
 * lua_fixture.h -- the fixture of the suites that run the test build of the
 * check script (tests/lua_test_script.c) straight on Redis to twin-test it
 * against the C maths (check_lua.c, check_lua_lean.c,
 * check_sliding_log.c): a fresh
 * redis-server per test (a checked fixture, so the server dies with the
 * test's process) and one connection to it, `ctx`; the module suites'
 * fixture too (module_fixture.h: check_module_lib.c reads no script
 * answer, hence the inline helpers).
 */
#ifndef RL_LUA_FIXTURE_H
#define RL_LUA_FIXTURE_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "algo.h"
#include "redis_harness.h"

extern const char rl_lua_check_test[];
extern const size_t rl_lua_check_test_len;

static rh_server srv;
static redisContext *ctx;

/* The command timeout of `ctx`: rh_connect's 1 s is too short for a
 * script's reply on a loaded machine (check_lua failed twice in one
 * make check at load 20: a NULL reply, the context timed out); a server
 * that hangs is still caught, by this and by the test's own timeout. */
#define LUA_FIXTURE_TIMEOUT_S 30

static void setup(void)
{
    ck_assert_int_eq(rh_start(&srv, NULL), 0);
    ck_assert_ptr_nonnull(ctx = rh_connect(&srv));
    ck_assert_int_eq(redisSetTimeout(ctx, (struct timeval){
                                              LUA_FIXTURE_TIMEOUT_S, 0}),
                     REDIS_OK);
}

static void teardown(void)
{
    redisFree(ctx);
    rh_stop(&srv);
}

/* The test script's SHA-1 on the current server ("" until loaded). */
static char lua_test_sha[41];

/* A call of the test script: argv[2..argc) its key count, keys and
 * arguments (argv[0] and argv[1] are set here), the lengths strlen's.
 * Sent as EVALSHA, the script loaded on the first call and again after a
 * NOSCRIPT (each test has a fresh server): not EVAL with the script's
 * ~74 KB formatted into every call, which was most of a twin suite's
 * client time, under the sanitizers above all.  The reply is non-NULL. */
static inline redisReply *lua_test_eval(int argc, const char **argv,
                                        size_t *lens)
{
    redisReply *r;

    argv[0] = "EVALSHA", argv[1] = lua_test_sha; /* 40 hex digits */
    for (int i = 0; i < argc; i++)
        lens[i] = i == 1 ? 40 : strlen(argv[i]);
    if (lua_test_sha[0]) {
        r = redisCommandArgv(ctx, argc, argv, lens);
        ck_assert_msg(r != NULL, "EVALSHA: %s", ctx->errstr);
        if (r->type != REDIS_REPLY_ERROR ||
            strncmp(r->str, "NOSCRIPT", 8) != 0)
            return r;
        freeReplyObject(r);
    }
    r = redisCommand(ctx, "SCRIPT LOAD %b", rl_lua_check_test,
                     rl_lua_check_test_len);
    ck_assert_msg(r && r->type == REDIS_REPLY_STRING && r->len == 40,
                  "SCRIPT LOAD: %s", r ? r->str : ctx->errstr);
    memcpy(lua_test_sha, r->str, 41);
    freeReplyObject(r);
    r = redisCommandArgv(ctx, argc, argv, lens);
    ck_assert_msg(r != NULL, "EVALSHA: %s", ctx->errstr);
    return r;
}

/* The answer of a "c"/"C" call (lua/check.lua): {one string of 24 bytes
 * an op, now}; asserts that shape for nops ops. */
static inline void lua_answer_shape(const redisReply *r, size_t nops)
{
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 2,
                  "script reply type %d", r->type);
    ck_assert_int_eq(r->element[0]->type, REDIS_REPLY_STRING);
    ck_assert_int_eq(r->element[0]->len, 24 * nops);
    ck_assert_int_eq(r->element[1]->type, REDIS_REPLY_INTEGER);
}

/* Value v (0 verdict, 1 remaining, 2 reset) of op i's answer: a
 * little-endian double, an integer. */
static inline int64_t lua_answer_value(const redisReply *r, size_t i, int v)
{
    const unsigned char *p =
        (const unsigned char *)r->element[0]->str + 24 * i + 8 * v;
    uint64_t u = 0;
    double x;

    for (int b = 7; b >= 0; b--)
        u = u << 8 | p[b];
    memcpy(&x, &u, sizeof x);
    ck_assert(x == (double)(int64_t)x);
    return (int64_t)x;
}

/* Op i's decision (allowed: verdict 1). */
static inline void lua_answer(const redisReply *r, size_t i, algo_decision *d)
{
    int64_t verdict = lua_answer_value(r, i, 0);

    d->allowed = verdict == 1;
    d->remaining = lua_answer_value(r, i, 1);
    d->reset_ms = lua_answer_value(r, i, 2);
    d->retry_ms = verdict < 0 ? -verdict : 0;
}

#endif
