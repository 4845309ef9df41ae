/*
 * lua_fixture.h -- the fixture of the suites that run the test build of the
 * check script (tests/lua_test_script.c) straight on Redis to twin-test it
 * against the C maths (check_lua.c, check_sliding_log.c): a fresh
 * redis-server per test (a checked fixture, so the server dies with the
 * test's process) and one connection to it, `ctx`.
 */
#ifndef RL_LUA_FIXTURE_H
#define RL_LUA_FIXTURE_H

#include <check.h>
#include <stddef.h>

#include "redis_harness.h"

extern const char rl_lua_check_test[];
extern const size_t rl_lua_check_test_len;

static rh_server srv;
static redisContext *ctx;

static void setup(void)
{
    ck_assert_int_eq(rh_start(&srv, NULL), 0);
    ck_assert_ptr_nonnull(ctx = rh_connect(&srv));
}

static void teardown(void)
{
    redisFree(ctx);
    rh_stop(&srv);
}

#endif
