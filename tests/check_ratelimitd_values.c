/*
 * check_ratelimitd_values.c -- per-value rules end to end (issue 25
 * section 3): the real ratelimitd on a real SQLite file publishing to a
 * real redis-server, and a limiter following that set (rules_source
 * "store") and counting in the same Redis.  An override set PUT over
 * HTTP (a general rule, a partner glob at 10x, an allow-list, an exact
 * value naming what it replaces) comes back from GET in canonical form,
 * with its history; changes that would leave the set contradictory (a
 * replaced rule missing, a cycle, the replaced rule deleted) are refused
 * with 400 and change nothing; the limiter applies what was accepted.
 */
#include <check.h>
#include <curl/curl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "redis_harness.h"
#include "rld_check.h"
#include "testutil.h"

static rh_server redis;

static const char gen_body[] =
    "{\"dimension\":\"api_key\",\"limit\":2,\"window_seconds\":60}";
static const char partner_body[] =
    "{\"dimension\":\"api_key\",\"match\":{\"value\":\"partner-*\"},"
    "\"limit\":20,\"window_seconds\":60}";
static const char vip_body[] =
    "{\"dimension\":\"api_key\",\"match\":{\"value\":[\"vip-1\",\"vip-2\"]},"
    "\"unlimited\":true}";
static const char acme_body[] =
    "{\"dimension\":\"api_key\",\"match\":{\"value\":\"partner-acme\"},"
    "\"replaces\":\"gen\",\"limit\":5,\"window_seconds\":60}";

static void put_ok(const rld *d, const char *id, const char *body)
{
    rld_resp r;
    long st = put(d, id, body, ALICE, NULL, &r);

    ck_assert_msg(st == 200 || st == 201, "PUT %s: %ld %s", id, st, r.body);
    rld_resp_free(&r);
}

/* A change refused as a whole-set contradiction, its message naming
 * `needle`; the set's version unchanged. */
static void refused(const rld *d, const char *method, const char *id,
                    const char *body, const char *needle)
{
    char path[128];
    rld_resp r;
    rl_ruleset *before = list(d), *after;

    snprintf(path, sizeof path, "/v1/rules/%s", id);
    rld_http(d, method, path, ALICE, NULL, body, body ? strlen(body) : 0,
             &r);
    assert_error(&r, 400, "invalid_rule_set", NULL);
    ck_assert_msg(strstr(r.body, needle), "\"%s\" not in %s", needle, r.body);
    rld_resp_free(&r);
    after = list(d);
    ck_assert_int_eq(after->version, before->version);
    ck_assert_uint_eq(after->n, before->n);
    ruleset_free(before);
    ruleset_free(after);
}

/* rlctl (the binary) with these arguments against d as alice: its exit
 * status, its output into out. */
static int rlctl(const rld *d, char *out, size_t len, const char *args)
{
    char cmd[1024], tokens[320];
    size_t n;
    FILE *p;
    int st;

    snprintf(tokens, sizeof tokens, "%s/rlctl-token", d->dir);
    ck_assert_ptr_nonnull(p = fopen(tokens, "w"));
    fprintf(p, "%s\n", ALICE);
    fclose(p);
    snprintf(cmd, sizeof cmd, "RLCTL_TOKEN_FILE=%s '%s' --server %s %s 2>&1",
             tokens, getenv("RLCTL") ? getenv("RLCTL") : "tools/rlctl/rlctl",
             d->url, args);
    ck_assert_ptr_nonnull(p = popen(cmd, "r"));
    n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    st = pclose(p);
    ck_assert_msg(WIFEXITED(st), "rlctl %s: did not exit", args);
    return WEXITSTATUS(st);
}

/* The database's match column of rule id (its own connection). */
static void db_match(const rld *d, const char *id, char *out, size_t len)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;

    out[0] = '\0';
    ck_assert_int_eq(sqlite3_open_v2(d->db, &db, SQLITE_OPEN_READONLY, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT match FROM rules WHERE "
                                        "rule_id = ?1", -1, &q, NULL),
                     SQLITE_OK);
    sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
    if (sqlite3_step(q) == SQLITE_ROW && sqlite3_column_text(q, 0))
        snprintf(out, len, "%s", (const char *)sqlite3_column_text(q, 0));
    sqlite3_finalize(q);
    sqlite3_close(db);
}

static rl_limiter *follower(void)
{
    char uri[128];
    const char *opts[] = {"store", uri, "rules_source", "store",
                          "fleet_size", "1", NULL};

    ck_assert_ptr_nonnull(rh_uri(&redis, uri, sizeof uri));
    return limiter_from(opts);
}

static void wait_rules_version(rl_limiter *lim, int64_t want)
{
    int64_t end = now_ms() + WAIT_MS;

    while (rl_rules_version(lim) < want && now_ms() < end)
        sleep_ms(10);
    ck_assert_int_ge(rl_rules_version(lim), want);
}

/* Checks of key allowed before the first denial (at most cap); the
 * denying rule's id into who. */
static int admitted(rl_limiter *lim, const char *key, int cap, char *who)
{
    rl_request req = {.size = sizeof req, .api_key = key, .cost = 1};
    int n = 0;

    who[0] = '\0';
    for (; n < cap; n++) {
        rl_result res = RL_RESULT_INIT;
        ck_assert_msg(rl_check(lim, &req, &res) == RL_OK, "%s",
                      rl_errmsg(lim));
        ck_assert_msg(!(res.flags & DECIDED_ELSEWHERE), "flags %#x",
                      res.flags);
        if (!res.allowed) {
            strcpy(who, res.rule_id);
            break;
        }
    }
    return n;
}

START_TEST(override_set_over_http_reaches_a_limiter)
{
    char uri[128], who[RL_RULE_ID_MAX + 1], out[4096];
    const char *args[] = {"--redis", uri, NULL};
    rl_ruleset *rs;
    rl_limiter *lim;
    rld d = {0};
    rld_resp r;

    ck_assert_int_eq(rh_start(&redis, NULL), 0);
    ck_assert_ptr_nonnull(rh_uri(&redis, uri, sizeof uri));
    start(&d, args);
    /* Before gen exists, a rule replacing it is refused. */
    refused(&d, "PUT", "acme", acme_body,
            "rule \\\"acme\\\" replaces \\\"gen\\\", which is not in the set");
    put_ok(&d, "gen", gen_body);
    put_ok(&d, "partner", partner_body);
    put_ok(&d, "vip", vip_body);
    put_ok(&d, "acme", acme_body);
    /* gen replacing acme back would be a cycle; deleting gen would leave
     * acme replacing nothing that exists. */
    refused(&d, "PUT", "gen",
            "{\"dimension\":\"api_key\",\"replaces\":\"acme\",\"limit\":2,"
            "\"window_seconds\":60}", "(a cycle)");
    refused(&d, "DELETE", "gen", NULL, "which is not in the set");

    /* GET gives the canonical rule back; the history has its version. */
    ck_assert_int_eq(get(&d, "/v1/rules/acme", NULL, NULL, &r), 200);
    ck_assert_ptr_nonnull(strstr(r.body, "\"replaces\":\"gen\""));
    rld_resp_free(&r);
    ck_assert_int_eq(get(&d, "/v1/rules/vip", NULL, NULL, &r), 200);
    ck_assert_ptr_nonnull(strstr(r.body, "\"unlimited\":true"));
    ck_assert_ptr_nonnull(strstr(r.body, "\"value\":[\"vip-1\",\"vip-2\"]"));
    rld_resp_free(&r);
    ck_assert_int_eq(get(&d, "/v1/rules/acme/history", NULL, NULL, &r), 200);
    ck_assert_ptr_nonnull(strstr(r.body, "partner-acme"));
    rld_resp_free(&r);
    /* rlctl makes an allow-list from flags, turns a limited rule
     * unlimited and back, and lists it. */
    ck_assert_int_eq(rlctl(&d, out, sizeof out, "put ops --dimension "
                           "api_key --value ops-1 --value ops-2 --unlimited"),
                     0);
    ck_assert_int_eq(rlctl(&d, out, sizeof out, "put ops --limit 3 --window "
                           "60"), 0);
    ck_assert_ptr_nonnull(strstr(out, "\"limit\":3"));
    ck_assert_int_eq(rlctl(&d, out, sizeof out, "put ops --unlimited"), 0);
    ck_assert_ptr_null(strstr(out, "\"limit\""));
    ck_assert_ptr_nonnull(strstr(out, "\"value\":[\"ops-1\",\"ops-2\"]"));
    ck_assert_int_eq(rlctl(&d, out, sizeof out, "list"), 0);
    ck_assert_ptr_nonnull(strstr(out, "unlimited"));
    ck_assert_int_eq(rlctl(&d, out, sizeof out, "put bad --dimension "
                           "api_key --replaces nope --limit 1 --window 1"), 1);
    ck_assert_ptr_nonnull(strstr(out, "which is not in the set"));
    rs = list(&d);
    ck_assert_uint_eq(rs->n, 5);
    /* The SQLite file's match column says which values, as JSON. */
    db_match(&d, "vip", out, sizeof out);
    ck_assert_str_eq(out, "{\"value\":[\"vip-1\",\"vip-2\"]}");

    /* A limiter following the published set applies it, in Redis. */
    lim = follower();
    wait_rules_version(lim, rs->version);
    ck_assert_int_eq(admitted(lim, "someone", 50, who), 2);
    ck_assert_str_eq(who, "gen");
    ck_assert_int_eq(admitted(lim, "partner-x", 50, who), 20);
    ck_assert_str_eq(who, "partner");
    ck_assert_int_eq(admitted(lim, "partner-acme", 50, who), 5);
    ck_assert_str_eq(who, "acme");
    ck_assert_int_eq(admitted(lim, "vip-1", 50, who), 50);
    ck_assert_int_eq(admitted(lim, "ops-2", 50, who), 50);
    ruleset_free(rs);
    rl_limiter_free(lim);
    finish(&d);
    rh_stop(&redis);
}
END_TEST

static Suite *rld_values_suite(void)
{
    Suite *s = suite_create("ratelimitd_values");
    TCase *tc = tcase_create("values");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, override_set_over_http_reaches_a_limiter);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    int rc;

    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = run_suite(rld_values_suite());
    curl_global_cleanup();
    return rc;
}
