/*
 * check_limiter.c -- the public API through a limiter, all but its
 * decisions: argument checks and their messages, keys, rule ids and
 * costs, options, stores, rule loading (all-or-nothing, files, versions),
 * per-handle and per-thread messages.  What rl_check and rl_check_many
 * decide is check_limiter_check.c; limiter_fixture.h is what both share.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "limiter_fixture.h"
#include "ratelimit.h"
#include "testutil.h"

/* ---- NULL arguments ------------------------------------------------------ */

START_TEST(allow_rejects_null_arguments)
{
    rl_limiter *lim = limiter_with(ONE_RULE);
    rl_result res = RL_RESULT_INIT;

    ck_assert_int_eq(rl_allow(NULL, "k", "r", 1, &res), RL_EINVAL);
    msg_has(NULL, "rl_allow: NULL");
    ck_assert_int_eq(rl_allow(lim, NULL, "r", 1, &res), RL_EINVAL);
    msg_has(lim, "rl_allow: NULL");
    ck_assert_int_eq(rl_allow(lim, "k", NULL, 1, &res), RL_EINVAL);
    msg_has(lim, "rl_allow: NULL");
    ck_assert_int_eq(rl_allow(lim, "k", "r", 1, NULL), RL_EINVAL);
    msg_has(lim, "rl_allow: NULL");
    rl_limiter_free(lim);
}
END_TEST

START_TEST(check_rejects_null_arguments)
{
    rl_limiter *lim = limiter_with(ONE_RULE);
    rl_request req = req_user("u");
    rl_result res = RL_RESULT_INIT;

    ck_assert_int_eq(rl_check(NULL, &req, &res), RL_EINVAL);
    msg_has(NULL, "rl_check: NULL");
    ck_assert_int_eq(rl_check(lim, NULL, &res), RL_EINVAL);
    msg_has(lim, "rl_check: NULL");
    ck_assert_int_eq(rl_check(lim, &req, NULL), RL_EINVAL);
    msg_has(lim, "rl_check: NULL");
    rl_limiter_free(lim);
}
END_TEST

START_TEST(rule_loads_reject_null_arguments)
{
    rl_limiter *lim = limiter_with(ONE_RULE);

    ck_assert_int_eq(rl_rules_load_string(NULL, "[]"), RL_EINVAL);
    msg_has(NULL, "rl_rules_load_string: NULL");
    ck_assert_int_eq(rl_rules_load_string(lim, NULL), RL_EINVAL);
    msg_has(lim, "rl_rules_load_string: NULL");
    ck_assert_int_eq(rl_rules_load_file(NULL, "/tmp/x"), RL_EINVAL);
    msg_has(NULL, "rl_rules_load_file: NULL");
    ck_assert_int_eq(rl_rules_load_file(lim, NULL), RL_EINVAL);
    msg_has(lim, "rl_rules_load_file: NULL");
    ck_assert_int_eq(rl_rules_version(lim), 1); /* nothing changed */
    rl_limiter_free(lim);
}
END_TEST

START_TEST(rules_version_rejects_null)
{
    ck_assert_int_eq(rl_rules_version(NULL), RL_EINVAL);
    msg_has(NULL, "rl_rules_version");
}
END_TEST

START_TEST(config_and_new_reject_null_arguments)
{
    rl_config *cfg = rl_config_new();

    ck_assert_int_eq(rl_limiter_new(NULL, cfg), RL_EINVAL);
    msg_has(NULL, "out is NULL");
    ck_assert_int_eq(rl_config_set(NULL, "store", "memory://"), RL_EINVAL);
    msg_has(NULL, "rl_config_set: NULL");
    ck_assert_int_eq(rl_config_set(cfg, NULL, "memory://"), RL_EINVAL);
    ck_assert_int_eq(rl_config_set(cfg, "store", NULL), RL_EINVAL);
    msg_has(NULL, "rl_config_set: NULL");
    rl_config_free(cfg);
}
END_TEST

START_TEST(free_null_is_a_noop)
{
    rl_limiter_free(NULL);
    rl_config_free(NULL);
}
END_TEST

/* ---- keys, rule ids, costs ---------------------------------------------------- */

START_TEST(empty_key_rejected)
{
    rl_limiter *lim = limiter_with(ONE_RULE);
    rl_result res = RL_RESULT_INIT;

    ck_assert_int_eq(rl_allow(lim, "", "r", 1, &res), RL_EINVAL);
    msg_has(lim, "key: must be 1..256 bytes, is empty");
    rl_limiter_free(lim);
}
END_TEST

START_TEST(key_length_bound)
{
    rl_limiter *lim = limiter_with(ONE_RULE);
    char key[RL_KEY_MAX + 2];
    rl_result res = RL_RESULT_INIT;

    memset(key, 'k', RL_KEY_MAX);
    key[RL_KEY_MAX] = '\0';
    ck_assert_int_eq(rl_allow(lim, key, "r", 1, &res), RL_OK);
    ck_assert_int_eq(res.allowed, 1);
    ck_assert_int_eq(res.remaining, 4);
    key[RL_KEY_MAX] = 'k';
    key[RL_KEY_MAX + 1] = '\0';
    ck_assert_int_eq(rl_allow(lim, key, "r", 1, &res), RL_EINVAL);
    msg_has(lim, "key: must be 1..256 bytes, is longer");
    rl_limiter_free(lim);
}
END_TEST

START_TEST(request_dimension_too_long_rejected)
{
    rl_limiter *lim = limiter_with(ONE_RULE);
    char user[RL_KEY_MAX + 1];
    rl_request req = req_user(user);
    rl_result res = RL_RESULT_INIT;

    memset(user, 'u', RL_KEY_MAX);
    user[RL_KEY_MAX] = '\0';
    ck_assert_int_eq(rl_check(lim, &req, &res), RL_EINVAL);
    msg_has(lim, "user: longer than 251 bytes");
    rl_limiter_free(lim);
}
END_TEST

START_TEST(unknown_rule_id_is_enorule)
{
    rl_limiter *lim = limiter_with(ONE_RULE);
    rl_result res = RL_RESULT_INIT;

    ck_assert_int_eq(rl_allow(lim, "k", "no-such-rule", 1, &res), RL_ENORULE);
    msg_has(lim, "no rule \"no-such-rule\" in rule set version 1");
    ck_assert_int_eq(res.allowed, 0);
    rl_limiter_free(lim);
}
END_TEST

START_TEST(cost_bounds)
{
    rl_limiter *lim = limiter_with(ONE_RULE);
    rl_request req = req_user("u");
    rl_result res = RL_RESULT_INIT;

    ck_assert_int_eq(rl_allow(lim, "k", "r", -1, &res), RL_EINVAL);
    msg_has(lim, "cost: must be 0..1000000000, got -1");
    ck_assert_int_eq(rl_allow(lim, "k", "r", RL_COST_MAX + 1, &res),
                     RL_EINVAL);
    msg_has(lim, "got 1000000001");
    req.cost = -1;
    ck_assert_int_eq(rl_check(lim, &req, &res), RL_EINVAL);
    msg_has(lim, "cost");
    /* The largest cost is valid input, denied as a result. */
    ck_assert_int_eq(rl_allow(lim, "k", "r", RL_COST_MAX, &res), RL_OK);
    ck_assert_int_eq(res.allowed, 0);
    ck_assert_int_ge(res.retry_after, 1);
    ck_assert_int_eq(res.remaining, 5); /* nothing was charged */
    rl_limiter_free(lim);
}
END_TEST

/* ---- loading rules ------------------------------------------------------------- */

START_TEST(failed_load_keeps_previous_set)
{
    rl_limiter *lim = limiter_with(ONE_RULE);
    rl_result res = RL_RESULT_INIT;

    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(rl_allow(lim, "k", "r", 1, &res), RL_OK);
    ck_assert_int_eq(rl_rules_load_string(lim, "[{oops"), RL_EPARSE);
    msg_has(lim, "line 1");
    ck_assert_int_eq(rl_rules_load_string(lim, "[" RULE("r", "user", 0, "")
                                          "]"), RL_ERULE);
    msg_has(lim, "limit");
    ck_assert_int_eq(rl_rules_load_string(lim, "[" RULE("x", "user", 5, "")
                                          "," RULE("x", "ip", 5, "") "]"),
                     RL_ERULE);
    msg_has(lim, "appears twice");
    ck_assert_int_eq(rl_rules_version(lim), 1);
    ck_assert_int_eq(rl_allow(lim, "k", "r", 1, &res), RL_OK);
    ck_assert_int_eq(res.remaining, 1); /* 5 - 4: the counter survived */
    ck_assert_int_eq(rl_allow(lim, "k", "x", 1, &res), RL_ENORULE);
    rl_limiter_free(lim);
}
END_TEST

START_TEST(reload_of_same_rule_keeps_counters)
{
    rl_limiter *lim = limiter_with(ONE_RULE);
    rl_result res = RL_RESULT_INIT;

    ck_assert_int_eq(rl_allow(lim, "k", "r", 2, &res), RL_OK);
    ck_assert_int_eq(rl_rules_load_string(lim, ONE_RULE), RL_OK);
    ck_assert_int_eq(rl_allow(lim, "k", "r", 1, &res), RL_OK);
    ck_assert_int_eq(res.remaining, 2);
    rl_limiter_free(lim);
}
END_TEST

START_TEST(load_file_missing_is_eio)
{
    rl_limiter *lim = limiter_with(ONE_RULE);

    ck_assert_int_eq(rl_rules_load_file(lim, "/nonexistent/rules.json"),
                     RL_EIO);
    msg_has(lim, "/nonexistent/rules.json: cannot open");
    ck_assert_int_eq(rl_rules_load_file(lim, "/tmp"), RL_EIO); /* a dir */
    msg_has(lim, "/tmp: not a regular file");
    ck_assert_int_eq(rl_rules_version(lim), 1);
    rl_limiter_free(lim);
}
END_TEST

/* Write `text` to a fresh temp file; the caller unlinks `path`. */
static void temp_file(char *path, const char *text)
{
    int fd;

    strcpy(path, "/tmp/rl_rules_XXXXXX");
    fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

START_TEST(load_file_valid)
{
    rl_limiter *lim = limiter_with(ONE_RULE);
    char path[64];
    rl_result res = RL_RESULT_INIT;
    int rc;

    temp_file(path, "{\"version\": 12, \"rules\": ["
                    RULE("from-file", "ip", 2, "") "]}\n");
    rc = rl_rules_load_file(lim, path);
    unlink(path);
    ck_assert_msg(rc == RL_OK, "%s", rl_errmsg(lim));
    ck_assert_int_eq(rl_rules_version(lim), 12);
    ck_assert_int_eq(rl_allow(lim, "1.2.3.4", "from-file", 1, &res), RL_OK);
    ck_assert_int_eq(res.limit, 2);
    ck_assert_int_eq(rl_allow(lim, "k", "r", 1, &res), RL_ENORULE);
    rl_limiter_free(lim);
}
END_TEST

/* rl_limiter_new with a config that must fail: rc, *out NULL. */
static int new_fails(rl_config *cfg, int code)
{
    rl_limiter *lim = (rl_limiter *)&lim; /* not NULL: must be reset */
    int rc = rl_limiter_new(&lim, cfg);

    ck_assert_int_eq(rc, code);
    ck_assert_ptr_null(lim);
    return rc;
}

START_TEST(new_with_unparsable_rules_fails)
{
    rl_config *cfg = rl_config_new();

    ck_assert_int_eq(rl_config_set(cfg, "rules", "[{\"rule_id\":"), RL_OK);
    new_fails(cfg, RL_EPARSE);
    msg_has(NULL, "line 1");
    rl_config_free(cfg);
}
END_TEST

START_TEST(new_with_invalid_rules_fails)
{
    rl_config *cfg = rl_config_new();

    ck_assert_int_eq(rl_config_set(cfg, "rules", "[" RULE("r", "user", 0, "")
                                   "]"), RL_OK);
    new_fails(cfg, RL_ERULE);
    msg_has(NULL, "limit: must be 1..1000000000, got 0");
    rl_config_free(cfg);
}
END_TEST

START_TEST(new_with_missing_rules_file_fails)
{
    rl_config *cfg = rl_config_new();

    ck_assert_int_eq(rl_config_set(cfg, "rules_file", "/nonexistent/r.json"),
                     RL_OK);
    new_fails(cfg, RL_EIO);
    msg_has(NULL, "/nonexistent/r.json: cannot open");
    rl_config_free(cfg);
}
END_TEST

START_TEST(new_with_rules_file_and_rules)
{
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;
    char path[64];
    rl_result res = RL_RESULT_INIT;

    temp_file(path, ONE_RULE);
    ck_assert_int_eq(rl_config_set(cfg, "rules_file", path), RL_OK);
    ck_assert_int_eq(rl_limiter_new(&lim, cfg), RL_OK);
    unlink(path);
    ck_assert_int_eq(rl_allow(lim, "k", "r", 1, &res), RL_OK);
    ck_assert_int_eq(res.limit, 5);
    rl_limiter_free(lim);
    ck_assert_int_eq(rl_config_set(cfg, "rules", "[" RULE("s", "ip", 7, "")
                                   "]"), RL_OK);
    temp_file(path, ONE_RULE);
    ck_assert_int_eq(rl_config_set(cfg, "rules_file", path), RL_OK);
    ck_assert_int_eq(rl_limiter_new(&lim, cfg), RL_OK); /* file, then rules */
    unlink(path);
    ck_assert_int_eq(rl_rules_version(lim), 2);
    ck_assert_int_eq(rl_allow(lim, "k", "s", 1, &res), RL_OK);
    ck_assert_int_eq(rl_allow(lim, "k", "r", 1, &res), RL_ENORULE);
    rl_limiter_free(lim);
    rl_config_free(cfg);
}
END_TEST

/* ---- options and stores ------------------------------------------------------ */

START_TEST(config_unknown_option)
{
    rl_config *cfg = rl_config_new();

    ck_assert_int_eq(rl_config_set(cfg, "colour", "blue"), RL_EOPTION);
    msg_has(NULL, "unknown option \"colour\"");
    msg_has(NULL, "timeout_ms");
    rl_config_free(cfg);
}
END_TEST

START_TEST(config_timeout_values)
{
    rl_config *cfg = rl_config_new();

    ck_assert_int_eq(rl_config_set(cfg, "timeout_ms", "abc"), RL_EOPTION);
    msg_has(NULL, "timeout_ms: \"abc\" is not a number");
    ck_assert_int_eq(rl_config_set(cfg, "timeout_ms", "0"), RL_EOPTION);
    msg_has(NULL, "timeout_ms: must be 1..60000");
    ck_assert_int_eq(rl_config_set(cfg, "timeout_ms", "5x"), RL_EOPTION);
    msg_has(NULL, "timeout_ms: \"5x\" has trailing text");
    ck_assert_int_eq(rl_config_set(cfg, "timeout_ms", ""), RL_EOPTION);
    ck_assert_int_eq(rl_config_set(cfg, "timeout_ms", "-5"), RL_EOPTION);
    ck_assert_int_eq(rl_config_set(cfg, "timeout_ms", "60001"), RL_EOPTION);
    ck_assert_int_eq(rl_config_set(cfg, "timeout_ms", "5K"), RL_EOPTION);
    ck_assert_int_eq(rl_config_set(cfg, "timeout_ms", "60000"), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "timeout_ms", "1"), RL_OK);
    rl_config_free(cfg);
}
END_TEST

START_TEST(config_memory_max_bytes_values)
{
    rl_config *cfg = rl_config_new();
    rl_limiter *lim = NULL;

    ck_assert_int_eq(rl_config_set(cfg, "memory_max_bytes", "1K"), RL_EOPTION);
    msg_has(NULL, "memory_max_bytes: must be 1048576..");
    ck_assert_int_eq(rl_config_set(cfg, "memory_max_bytes", "2X"),
                     RL_EOPTION);
    ck_assert_int_eq(rl_config_set(cfg, "memory_max_bytes", "1M"), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "memory_max_bytes", "8G"), RL_OK);
    ck_assert_int_eq(rl_limiter_new(&lim, cfg), RL_OK);
    ck_assert_ptr_nonnull(lim);
    rl_limiter_free(lim);
    rl_config_free(cfg);
}
END_TEST

/* Seed lists that cannot work: each a clear error naming what is wrong
 * (port 1 refuses at once on loopback; nothing leaves the machine). */
START_TEST(store_cluster_bad_seeds)
{
    static const char *bad[][2] = {
        {"redis-cluster://127.0.0.1:1", "no seed answered"},
        {"redis-cluster://127.0.0.1:1,127.0.0.1:2", "127.0.0.1:2"},
        {"redis-cluster://", "no seed"},
        {"redis-cluster://127.0.0.1:1,,127.0.0.1:2", "empty seed"},
        {"redis-cluster://127.0.0.1:1/3", "database 0 only"},
        {"redis-cluster://127.0.0.1:99999", "seed 1"},
    };

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rl_config *cfg = rl_config_new();
        ck_assert_int_eq(rl_config_set(cfg, "store", bad[i][0]), RL_OK);
        new_fails(cfg, RL_ESTORE);
        msg_has(NULL, bad[i][1]);
        rl_config_free(cfg);
    }
}
END_TEST

/* Unreachable seeds with degraded_start: the limiter opens and its checks
 * follow the failure modes at once. */
START_TEST(store_cluster_degraded_start)
{
    rl_config *cfg = rl_config_new();
    rl_limiter *lim;
    rl_result res = RL_RESULT_INIT;

    ck_assert_int_eq(rl_config_set(cfg, "store",
                                   "redis-cluster://127.0.0.1:1"), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "degraded_start", "1"), RL_OK);
    ck_assert_int_eq(rl_config_set(cfg, "rules",
                                   "[" RULE("r", "user", 5,
                                            ",\"failure_mode\":\"closed\"")
                                   "]"), RL_OK);
    ck_assert_int_eq(rl_limiter_new(&lim, cfg), RL_OK);
    ck_assert_int_eq(rl_allow(lim, "user:1", "r", 1, &res), RL_OK);
    ck_assert(!res.allowed);
    ck_assert(res.flags & RL_FLAG_FAIL_CLOSED);
    rl_limiter_free(lim);
    rl_config_free(cfg);
}
END_TEST

START_TEST(store_unknown_scheme)
{
    rl_config *cfg = rl_config_new();

    ck_assert_int_eq(rl_config_set(cfg, "store", "nope://"), RL_OK);
    new_fails(cfg, RL_ESTORE);
    msg_has(NULL, "\"nope://\": unknown scheme");
    ck_assert_int_eq(rl_config_set(cfg, "store", ""), RL_EOPTION);
    rl_config_free(cfg);
}
END_TEST

/* ---- error messages --------------------------------------------------------------- */

START_TEST(errmsg_is_per_handle)
{
    rl_limiter *a = limiter_with(ONE_RULE), *b = limiter_with(ONE_RULE);
    rl_result res = RL_RESULT_INIT;

    ck_assert_int_eq(rl_allow(a, "k", "missing-on-a", 1, &res), RL_ENORULE);
    msg_has(a, "missing-on-a");
    ck_assert_str_eq(rl_errmsg(b), "");
    ck_assert_str_eq(rl_errmsg(NULL), "");
    rl_limiter_free(a);
    rl_limiter_free(b);
}
END_TEST

struct fail_arg {
    rl_limiter *lim;
    char seen[256];
};

static void *fail_in_thread(void *p)
{
    struct fail_arg *fa = p;
    rl_result res = RL_RESULT_INIT;

    rl_allow(fa->lim, "k", "missing-in-thread", 1, &res);
    snprintf(fa->seen, sizeof fa->seen, "%s", rl_errmsg(fa->lim));
    return NULL;
}

START_TEST(errmsg_is_per_thread)
{
    struct fail_arg fa = {limiter_with(ONE_RULE), ""};
    pthread_t t;
    rl_result res = RL_RESULT_INIT;

    ck_assert_int_eq(rl_allow(fa.lim, "k", "missing-in-main", 1, &res),
                     RL_ENORULE);
    ck_assert_int_eq(pthread_create(&t, NULL, fail_in_thread, &fa), 0);
    pthread_join(t, NULL);
    ck_assert_ptr_nonnull(strstr(fa.seen, "missing-in-thread"));
    msg_has(fa.lim, "missing-in-main");
    ck_assert_ptr_null(strstr(rl_errmsg(fa.lim), "missing-in-thread"));
    rl_limiter_free(fa.lim);
}
END_TEST

START_TEST(errmsg_starts_with_strerror)
{
    rl_limiter *lim = limiter_with(ONE_RULE);
    rl_result res = RL_RESULT_INIT;

    rl_allow(lim, "k", "zz", 1, &res);
    ck_assert_ptr_eq(strstr(rl_errmsg(lim), rl_strerror(RL_ENORULE)),
                     rl_errmsg(lim));
    rl_limiter_free(lim);
}
END_TEST

START_TEST(strerror_names_every_code)
{
    static const struct { int code; const char *text; } codes[] = {
        {RL_OK, "success"},
        {RL_EINVAL, "invalid argument"},
        {RL_ENOMEM, "out of memory"},
        {RL_ENORULE, "no such rule"},
        {RL_ERULE, "invalid rule"},
        {RL_EPARSE, "rule JSON does not parse"},
        {RL_EIO, "cannot read file"},
        {RL_EOPTION, "bad configuration option"},
        {RL_ESTORE, "store error"},
        {RL_ERANGE, "buffer too small"},
        {RL_EBUSY, "too many checks in flight"},
        {RL_ESETTLED, "reservation already settled or expired"},
    };

    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        ck_assert_str_eq(rl_strerror(codes[i].code), codes[i].text);
    ck_assert_str_eq(rl_strerror(-12), "unknown error");
    ck_assert_str_eq(rl_strerror(1), "unknown error");
    ck_assert_str_eq(rl_strerror(-2147483647 - 1), "unknown error");
}
END_TEST

/* ---- versions -------------------------------------------------------------------- */

START_TEST(library_version)
{
    char want[32];

    snprintf(want, sizeof want, "%d.%d.%d", RL_VERSION_MAJOR,
             RL_VERSION_MINOR, RL_VERSION_PATCH);
    ck_assert_int_eq(rl_version(), RL_VERSION_NUMBER);
    ck_assert_str_eq(rl_version_string(), want);
}
END_TEST

START_TEST(rules_version_counts_loads)
{
    rl_limiter *lim = NULL;

    ck_assert_int_eq(rl_limiter_new(&lim, NULL), RL_OK);
    ck_assert_int_eq(rl_rules_version(lim), 0);
    ck_assert_int_eq(rl_rules_load_string(lim, ONE_RULE), RL_OK);
    ck_assert_int_eq(rl_rules_version(lim), 1);
    ck_assert_int_eq(rl_rules_load_string(lim, "{\"rules\":" ONE_RULE "}"),
                     RL_OK);
    ck_assert_int_eq(rl_rules_version(lim), 2);
    ck_assert_int_eq(rl_rules_load_string(lim, "{\"version\":42,\"rules\":"
                                          ONE_RULE "}"), RL_OK);
    ck_assert_int_eq(rl_rules_version(lim), 42);
    ck_assert_int_eq(rl_rules_load_string(lim, "[]"), RL_OK);
    ck_assert_int_eq(rl_rules_version(lim), 43);
    ck_assert_int_eq(rl_rules_load_string(lim, "[1]"), RL_ERULE);
    ck_assert_int_eq(rl_rules_version(lim), 43);
    rl_limiter_free(lim);
}
END_TEST

START_TEST(unknown_rule_message_has_current_version)
{
    rl_limiter *lim = limiter_with("{\"version\":77,\"rules\":" ONE_RULE "}");
    rl_result res = RL_RESULT_INIT;

    ck_assert_int_eq(rl_allow(lim, "k", "gone", 1, &res), RL_ENORULE);
    msg_has(lim, "version 77");
    rl_limiter_free(lim);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("limiter");
    TCase *tc = tcase_create("limiter");

    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, allow_rejects_null_arguments);
    tcase_add_test(tc, check_rejects_null_arguments);
    tcase_add_test(tc, rule_loads_reject_null_arguments);
    tcase_add_test(tc, rules_version_rejects_null);
    tcase_add_test(tc, config_and_new_reject_null_arguments);
    tcase_add_test(tc, free_null_is_a_noop);
    tcase_add_test(tc, empty_key_rejected);
    tcase_add_test(tc, key_length_bound);
    tcase_add_test(tc, request_dimension_too_long_rejected);
    tcase_add_test(tc, unknown_rule_id_is_enorule);
    tcase_add_test(tc, cost_bounds);
    tcase_add_test(tc, failed_load_keeps_previous_set);
    tcase_add_test(tc, reload_of_same_rule_keeps_counters);
    tcase_add_test(tc, load_file_missing_is_eio);
    tcase_add_test(tc, load_file_valid);
    tcase_add_test(tc, new_with_unparsable_rules_fails);
    tcase_add_test(tc, new_with_invalid_rules_fails);
    tcase_add_test(tc, new_with_missing_rules_file_fails);
    tcase_add_test(tc, new_with_rules_file_and_rules);
    tcase_add_test(tc, config_unknown_option);
    tcase_add_test(tc, config_timeout_values);
    tcase_add_test(tc, config_memory_max_bytes_values);
    tcase_add_test(tc, store_cluster_bad_seeds);
    tcase_add_test(tc, store_cluster_degraded_start);
    tcase_add_test(tc, store_unknown_scheme);
    tcase_add_test(tc, errmsg_is_per_handle);
    tcase_add_test(tc, errmsg_is_per_thread);
    tcase_add_test(tc, errmsg_starts_with_strerror);
    tcase_add_test(tc, strerror_names_every_code);
    tcase_add_test(tc, library_version);
    tcase_add_test(tc, rules_version_counts_loads);
    tcase_add_test(tc, unknown_rule_message_has_current_version);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
