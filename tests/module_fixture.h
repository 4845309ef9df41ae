/*
 * module_fixture.h -- the frame the suites of ratelimit.so (redis-module/)
 * share (check_module.c, check_module_change.c, check_module_lib.c): a
 * test case on lua_fixture.h's per-test fixture (a
 * fresh redis-server, `srv`, and one connection to it, `ctx`), and main()
 * (module_main.h, which check_module_cluster.c, whose tests start a
 * cluster of their own, includes alone).
 */
#ifndef RL_TESTS_MODULE_FIXTURE_H
#define RL_TESTS_MODULE_FIXTURE_H

#include <check.h>

#include "lua_fixture.h"
#include "module_main.h"
#include "redis_harness.h"

/* A test case of s named name, each test on a fresh server (setup,
 * teardown) and within timeout_s. */
static inline TCase *module_tcase(Suite *s, const char *name, int timeout_s)
{
    TCase *tc = tcase_create(name);

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, timeout_s);
    suite_add_tcase(s, tc);
    return tc;
}

#endif
