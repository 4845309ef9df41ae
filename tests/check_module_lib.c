/*
 * check_module_lib.c -- the library calling ratelimit.so
 * (src/redis/redis_module_cmd.c): a limiter finds RL.CHECK at connect and
 * checks through it (option redis_command=auto), or never (lua), a mixed
 * fleet sharing one client's state; without the module auto checks
 * through Lua and module refuses to start; a lease's units go back
 * through RL.SETTLE.  (Settles through it: check_reserve.c's module
 * kinds.)  A real redis-server started with `loadmodule ratelimit.so`.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "module_fixture.h"
#include "ratelimit.h"
#include "redis_harness.h"
#include "testutil.h"
#include "timeutil.h"

static const char lib_rules[] =
    "[{\"rule_id\":\"tb\",\"dimension\":\"user\",\"limit\":50,"
    "\"window_seconds\":3600,\"algorithm\":\"token_bucket\","
    "\"match\":{\"endpoint\":\"/tb\"}},"
    "{\"rule_id\":\"fw\",\"dimension\":\"user\",\"limit\":1000,"
    "\"window_seconds\":3600,\"algorithm\":\"fixed_window\","
    "\"lease\":100,\"match\":{\"endpoint\":\"/fw\"}}]";

/* A limiter on s with redis_command `command` (NULL: the default); NULL
 * when rl_limiter_new fails (its message in msg). */
static rl_limiter *lib_open(const rh_server *s, const char *command,
                            char *msg, size_t len)
{
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;
    char uri[512];

    ck_assert_ptr_nonnull(rh_uri(s, uri, sizeof uri));
    ck_assert_int_eq(rl_config_set(cfg, "store", uri), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "rules", lib_rules), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "timeout_ms", "2000"), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "deny_cache", "0"), RL_OK);
    /* one limiter alone: no fleet heartbeat (a script of its own) */
    ck_assert_int_eq(rl_config_set(cfg, "fleet_size", "1"), RL_OK);
    if (command)
        ck_assert_int_eq(rl_config_set(cfg, "redis_command", command), RL_OK);
    if (rl_limiter_new(&lim, cfg) != RL_OK) {
        snprintf(msg, len, "%s", rl_errmsg(NULL));
        lim = NULL;
    }
    rl_config_free(cfg);
    return lim;
}

/* auto finds RL.CHECK and uses it; lua never does; both on one client's
 * state (a mixed fleet): 50 tokens in all, whoever asks. */
START_TEST(library_uses_the_module_where_found)
{
    char msg[256] = "";
    rl_limiter *mod = lib_open(&srv, NULL, msg, sizeof msg);
    rl_limiter *lua = lib_open(&srv, "lua", msg, sizeof msg);
    long long m0, f0;
    int ok = 0;

    ck_assert_msg(mod && lua, "%s", msg);
    m0 = rh_cmdstat_calls(&srv, "rl.check");
    f0 = rh_cmdstat_calls(&srv, "fcall");
    for (int i = 0; i < 30; i++)
        ok += allow_decided(mod, "user:mixed", "tb");
    ck_assert_int_ge(rh_cmdstat_calls(&srv, "rl.check") - m0, 30);
    ck_assert_int_eq(rh_cmdstat_calls(&srv, "fcall") - f0, 0);
    m0 = rh_cmdstat_calls(&srv, "rl.check");
    for (int i = 0; i < 30; i++)
        ok += allow_decided(lua, "user:mixed", "tb");
    ck_assert_int_eq(rh_cmdstat_calls(&srv, "rl.check") - m0, 0);
    ck_assert_int_ge(rh_cmdstat_calls(&srv, "fcall") - f0, 30);
    ck_assert_int_eq(ok, 50);
    ck_assert_int_eq(allow_decided(mod, "user:mixed", "tb"), 0);
    rl_limiter_free(mod);
    rl_limiter_free(lua);
}
END_TEST

/* A lease's units go back through RL.SETTLE r: a limiter holding a lease
 * of 100 (5 spent) gives 95 back at rl_limiter_free(); the window's count
 * is then what was admitted, and the script ran for none of it. */
START_TEST(lease_given_back_through_the_module)
{
    char msg[256] = "";
    rl_limiter *lim;
    redisReply *r;
    int64_t left = 3600000 - real_ms() % 3600000;

    if (left < 20000) /* one window for all of it */
        usleep((useconds_t)(left + 100) * 1000);
    ck_assert_msg((lim = lib_open(&srv, "module", msg, sizeof msg)), "%s",
                  msg);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(allow_decided(lim, "user:lz", "fw"), 1);
    r = redisCommand(ctx, "GET rl:{user:lz}:fw:f3600");
    ck_assert_str_eq(r->str, "100");
    freeReplyObject(r);
    rl_limiter_free(lim);
    r = redisCommand(ctx, "GET rl:{user:lz}:fw:f3600");
    ck_assert_str_eq(r->str, "5");
    freeReplyObject(r);
    ck_assert_int_ge(rh_cmdstat_calls(&srv, "rl.settle"), 1);
    ck_assert_int_eq(rh_cmdstat_calls(&srv, "fcall") +
                         rh_cmdstat_calls(&srv, "evalsha") +
                         rh_cmdstat_calls(&srv, "eval"), 0);
}
END_TEST

/* Without the module: auto checks through Lua; module refuses to start,
 * saying why. */
START_TEST(library_without_the_module)
{
    rh_server plain;
    char msg[256] = "";
    const char *was = rh_loadmodule;
    rl_limiter *lim;

    rh_loadmodule = NULL;
    ck_assert_int_eq(rh_start(&plain, NULL), 0);
    rh_loadmodule = was;
    lim = lib_open(&plain, NULL, msg, sizeof msg);
    ck_assert_msg(lim != NULL, "%s", msg);
    ck_assert_int_eq(allow_decided(lim, "user:a", "tb"), 1);
    ck_assert_int_ge(rh_cmdstat_calls(&plain, "fcall"), 1);
    rl_limiter_free(lim);
    ck_assert_ptr_null(lib_open(&plain, "module", msg, sizeof msg));
    ck_assert_msg(strstr(msg, "RL.CHECK") != NULL, "%s", msg);
    rh_stop(&plain);
}
END_TEST

/* A rule whose shape changed goes on through RL.CHECK, its replaced
 * shape sent along: the module converts the client's state as the script
 * does (a client of each, the same charges, the same answer after). */
START_TEST(changed_rule_through_the_module)
{
    static const char changed[] =
        "[{\"rule_id\":\"tb\",\"dimension\":\"user\",\"limit\":80,"
        "\"window_seconds\":3600,\"algorithm\":\"token_bucket\","
        "\"match\":{\"endpoint\":\"/tb\"}}]";
    char msg[256] = "";
    rl_limiter *mod = lib_open(&srv, "module", msg, sizeof msg);
    rl_limiter *lua = lib_open(&srv, "lua", msg, sizeof msg);
    rl_result rm = RL_RESULT_INIT, rlua = RL_RESULT_INIT;
    long long f0, m0;

    ck_assert_msg(mod && lua, "%s", msg);
    for (int i = 0; i < 30; i++) {
        ck_assert_int_eq(allow_decided(mod, "user:cm", "tb"), 1);
        ck_assert_int_eq(allow_decided(lua, "user:cl", "tb"), 1);
    }
    ck_assert_int_eq(rl_rules_load_string(mod, changed), RL_OK);
    ck_assert_int_eq(rl_rules_load_string(lua, changed), RL_OK);
    f0 = rh_cmdstat_calls(&srv, "fcall");
    m0 = rh_cmdstat_calls(&srv, "rl.check");
    ck_assert_int_eq(rl_allow(mod, "user:cm", "tb", 1, &rm), RL_OK);
    ck_assert_int_eq(rh_cmdstat_calls(&srv, "fcall"), f0);
    ck_assert_int_eq(rh_cmdstat_calls(&srv, "rl.check"), m0 + 1);
    ck_assert_int_eq(rl_allow(lua, "user:cl", "tb", 1, &rlua), RL_OK);
    ck_assert(rm.allowed && rlua.allowed);
    ck_assert_int_eq(rm.remaining, rlua.remaining);
    ck_assert_int_lt(rm.remaining, 79); /* converted: 20 of 50 left, not
                                           a fresh bucket of 80 */
    rl_limiter_free(mod);
    rl_limiter_free(lua);
}
END_TEST

static Suite *module_lib_suite(void)
{
    Suite *s = suite_create("module_lib");
    TCase *tc = module_tcase(s, "library", 120);

    tcase_add_test(tc, library_uses_the_module_where_found);
    tcase_add_test(tc, library_without_the_module);
    tcase_add_test(tc, lease_given_back_through_the_module);
    tcase_add_test(tc, changed_rule_through_the_module);
    return s;
}

int main(void)
{
    return module_main(module_lib_suite, RL_MODULE_PATH);
}
