/*
 * module_fixture.h -- the frame the suites of ratelimit.so (redis-module/)
 * share (check_module.c, check_module_change.c, check_module_lib.c,
 * check_module_cluster.c): a test case on lua_fixture.h's per-test fixture
 * (a fresh redis-server, `srv`, and one connection to it, `ctx`; the
 * cluster suite starts a cluster of its own instead), and main(), which
 * skips (77) where no redis-server can run, or where the suite's builder
 * returns NULL (check_module_cluster.c without redis-cli), and otherwise
 * has every server a test starts load the built module (RL_MODULE_PATH,
 * from Makefile.am), with the arguments a suite names (`testclock`: a
 * trailing NOW ms sets the module's time).  Each suite's main() is one
 * call of module_main().
 */
#ifndef RL_TESTS_MODULE_FIXTURE_H
#define RL_TESTS_MODULE_FIXTURE_H

#include <check.h>

#include "lua_fixture.h"
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

/* What main() does: run the suite make() builds, its servers loading
 * loadmodule (RL_MODULE_PATH and its arguments); 77 (skipped) without
 * redis-server, or when make() returns NULL (the suite cannot run here:
 * check_module_cluster.c without redis-cli). */
static inline int module_main(Suite *(*make)(void), const char *loadmodule)
{
    SRunner *sr;
    Suite *s;
    int failed;

    if (!rh_available())
        return 77;
    rh_loadmodule = loadmodule;
    if (!(s = make()))
        return 77;
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}

#endif
