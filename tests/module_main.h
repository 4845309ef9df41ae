/*
 * module_main.h -- the main() of the suites of ratelimit.so (redis-module/):
 * check_module.c, check_module_change.c, check_module_lib.c (through
 * module_fixture.h, with its single-server test case) and
 * check_module_cluster.c (alone: its tests start a cluster of their own).
 * It skips (77) where no redis-server can run, or where the suite's builder
 * returns NULL (check_module_cluster.c without redis-cli), and otherwise
 * has every server a test starts load the built module (RL_MODULE_PATH,
 * from Makefile.am), with the arguments a suite names (`testclock`: a
 * trailing NOW ms sets the module's time).  Each suite's main() is one
 * call of module_main().
 */
#ifndef RL_TESTS_MODULE_MAIN_H
#define RL_TESTS_MODULE_MAIN_H

#include <check.h>

#include "redis_harness.h"

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
