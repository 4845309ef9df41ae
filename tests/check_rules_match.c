/*
 * check_rules_match.c -- which rules a request meets: matching by tier and
 * endpoint (rule_matches), the endpoint patterns themselves (pattern_match:
 * one segment, a prefix, one byte; pattern_check: what a pattern may hold),
 * and the dimension names' grammar.  Split from check_rules.c, which keeps
 * the rule model's validation, document shapes and defaults.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "pattern.h"
#include "ratelimit.h"
#include "rule.h"
#include "ruleset.h"
#include "rules_test.h"
#include "testutil.h"

/* ---- rule_matches ------------------------------------------------------------ */

START_TEST(matches_by_tier)
{
    rl_ruleset *rs = ok(with("\"match\":{\"tier\":\"free\"}"));
    const rl_rule *r = &rs->rules[0];

    ck_assert_int_eq(rule_matches(r, "/x", "free"), 1);
    ck_assert_int_eq(rule_matches(r, NULL, "free"), 1);
    ck_assert_int_eq(rule_matches(r, "/x", "pro"), 0);
    ck_assert_int_eq(rule_matches(r, "/x", "Free"), 0);
    ck_assert_int_eq(rule_matches(r, "/x", "free2"), 0);
    ck_assert_int_eq(rule_matches(r, "/x", NULL), 0);
    ruleset_free(rs);
}
END_TEST

START_TEST(matches_by_endpoint)
{
    rl_ruleset *rs = ok(with("\"match\":{\"endpoint\":\"/users/*/posts\"}"));
    const rl_rule *r = &rs->rules[0];

    ck_assert_int_eq(rule_matches(r, "/users/42/posts", NULL), 1);
    ck_assert_int_eq(rule_matches(r, "/users/42/posts", "pro"), 1);
    ck_assert_int_eq(rule_matches(r, "/users/4/2/posts", NULL), 0);
    ck_assert_int_eq(rule_matches(r, NULL, NULL), 0);
    ruleset_free(rs);
}
END_TEST

START_TEST(matches_by_endpoint_and_tier)
{
    rl_ruleset *rs = ok(with("\"match\":{\"endpoint\":\"/search\","
                             "\"tier\":\"pro\"}"));
    const rl_rule *r = &rs->rules[0];

    ck_assert_int_eq(rule_matches(r, "/search", "pro"), 1);
    ck_assert_int_eq(rule_matches(r, "/search", "free"), 0);
    ck_assert_int_eq(rule_matches(r, "/searches", "pro"), 0);
    ruleset_free(rs);
}
END_TEST

START_TEST(rule_without_match_matches_all)
{
    rl_ruleset *rs = ok(with(""));

    ck_assert_int_eq(rule_matches(&rs->rules[0], NULL, NULL), 1);
    ck_assert_int_eq(rule_matches(&rs->rules[0], "/any", "tier"), 1);
    ruleset_free(rs);
}
END_TEST

START_TEST(bad_tier_rejected)
{
    fails(with("\"match\":{\"tier\":\"\"}"), RL_ERULE, "match.tier");
    fails(with("\"match\":{\"tier\":7}"), RL_ERULE,
          "match.tier: must be a string");
    /* control bytes, as match.endpoint refuses them */
    fails(with("\"match\":{\"tier\":\"free\\u001b[31m\"}"), RL_ERULE,
          "match.tier: control byte at 4");
    fails(with("\"match\":{\"tier\":\"a\\nb\"}"), RL_ERULE,
          "match.tier: control byte at 1");
    fails(with("\"match\":{\"tier\":\"a\\u007f\"}"), RL_ERULE,
          "match.tier: control byte at 1");
}
END_TEST

START_TEST(bad_endpoint_pattern_rejected)
{
    fails(with("\"match\":{\"endpoint\":\"/a/***\"}"), RL_ERULE,
          "match.endpoint");
    /* no leading '/': it could never match an endpoint */
    fails(with("\"match\":{\"endpoint\":\"search\"}"), RL_ERULE,
          "match.endpoint: must start with '/'");
    fails(with("\"match\":{\"endpoint\":\"?search\"}"), RL_ERULE,
          "match.endpoint: must start with '/'");
    ruleset_free(ok(with("\"match\":{\"endpoint\":\"**/search\"}")));
}
END_TEST

START_TEST(dimension_name_grammar_and_builtins)
{
    ck_assert_uint_eq(rule_dim_name_len("tenant"), 6);
    ck_assert_uint_eq(rule_dim_name_len("header:x-api-version"), 20);
    ck_assert_uint_eq(rule_dim_name_len(NULL), 0);
    ck_assert_uint_eq(rule_dim_name_len(""), 0);
    ck_assert_uint_eq(rule_dim_name_len("Tenant"), 0);
    ck_assert_uint_eq(rule_dim_name_len("_x"), 0);
    ck_assert_uint_eq(rule_dim_name_len("x\x7f"), 0);
    ck_assert_int_eq(rule_dim_builtin("user", 4), RULE_DIM_USER);
    ck_assert_int_eq(rule_dim_builtin("api_key", 7), RULE_DIM_API_KEY);
    ck_assert_int_eq(rule_dim_builtin("ip", 2), RULE_DIM_IP);
    ck_assert_int_eq(rule_dim_builtin("global", 6), RULE_DIM_GLOBAL);
    ck_assert_int_eq(rule_dim_builtin("custom", 6), RULE_DIM_NAMED);
    ck_assert_int_eq(rule_dim_builtin("users", 5), RULE_DIM_NAMED);
    ck_assert_int_eq(rule_dim_builtin("iq", 2), RULE_DIM_NAMED);
}
END_TEST

/* ---- pattern_match ----------------------------------------------------------- */

START_TEST(pattern_exact)
{
    ck_assert_int_eq(pattern_match("/search", "/search"), 1);
    ck_assert_int_eq(pattern_match("/search", "/search/"), 0);
    ck_assert_int_eq(pattern_match("/search", "/searc"), 0);
    ck_assert_int_eq(pattern_match("/search", ""), 0);
    ck_assert_int_eq(pattern_is_exact("/search"), 1);
    ck_assert_int_eq(pattern_is_exact("/s*"), 0);
    ck_assert_int_eq(pattern_is_exact("/s?"), 0);
}
END_TEST

START_TEST(pattern_star_is_one_segment)
{
    ck_assert_int_eq(pattern_match("/users/*/posts", "/users/42/posts"), 1);
    ck_assert_int_eq(pattern_match("/users/*/posts", "/users/4/2/posts"), 0);
    ck_assert_int_eq(pattern_match("/users/*/posts", "/users/42/posts/"), 0);
    ck_assert_int_eq(pattern_match("/users/*", "/users/42"), 1);
    ck_assert_int_eq(pattern_match("/users/*", "/users/42/x"), 0);
    ck_assert_int_eq(pattern_match("/v1/*.json", "/v1/users.json"), 1);
    ck_assert_int_eq(pattern_match("/v1/*.json", "/v1/a/b.json"), 0);
    ck_assert_int_eq(pattern_match("*", "abc"), 1);
    ck_assert_int_eq(pattern_match("*", "a/c"), 0);
}
END_TEST

START_TEST(pattern_double_star_is_a_prefix)
{
    ck_assert_int_eq(pattern_match("/api/**", "/api/x/y"), 1);
    ck_assert_int_eq(pattern_match("/api/**", "/api/"), 1);
    ck_assert_int_eq(pattern_match("/api/**", "/api/x"), 1);
    ck_assert_int_eq(pattern_match("/api/**", "/api"), 0);
    ck_assert_int_eq(pattern_match("/api/**", "/apix/y"), 0);
    ck_assert_int_eq(pattern_match("**", "/any/thing/at/all"), 1);
    ck_assert_int_eq(pattern_match("/**/edit", "/a/b/c/edit"), 1);
    ck_assert_int_eq(pattern_match("/**/edit", "/a/b/c/edit/x"), 0);
}
END_TEST

START_TEST(pattern_question_mark)
{
    ck_assert_int_eq(pattern_match("/v?/x", "/v1/x"), 1);
    ck_assert_int_eq(pattern_match("/v?/x", "/v12/x"), 0);
    ck_assert_int_eq(pattern_match("/v?/x", "/v/x"), 0);
    ck_assert_int_eq(pattern_match("/a?b", "/a/b"), 0);
    ck_assert_int_eq(pattern_match("???", "abc"), 1);
}
END_TEST

START_TEST(pattern_mixing_star_and_double_star)
{
    ck_assert_int_eq(pattern_match("/a/*/b/**", "/a/x/b/y/z"), 1);
    ck_assert_int_eq(pattern_match("/a/*/b/**", "/a/x/b/"), 1);
    ck_assert_int_eq(pattern_match("/a/*/b/**", "/a/x/y/b/z"), 0);
    ck_assert_int_eq(pattern_match("/a/*/b/**", "/a/x/c/z"), 0);
    ck_assert_int_eq(pattern_match("/**/*.png", "/img/2026/cat.png"), 1);
    ck_assert_int_eq(pattern_match("/**/*.png", "/img/cat.png/x"), 0);
    ck_assert_int_eq(pattern_match("*/**", "a/b/c"), 1);
    ck_assert_int_eq(pattern_match("?*", ""), 0);
}
END_TEST

START_TEST(pattern_pathological_is_fast)
{
    char s[251];
    struct timespec a, b;
    int64_t ms;

    memset(s, 'a', 250);
    s[250] = '\0';
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < 100; i++) {
        ck_assert_int_eq(pattern_match("*a*a*a*a*a*a*a*b", s), 0);
        ck_assert_int_eq(pattern_match("**a**a**a**a**a**a**a**b", s), 0);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
    ck_assert_int_lt(ms, 1000); /* 200 matches: a backtracker takes years */
    s[249] = 'b';
    ck_assert_int_eq(pattern_match("*a*a*a*a*a*a*a*b", s), 1);
}
END_TEST

/* ---- pattern_check ------------------------------------------------------------ */

START_TEST(pattern_check_rejects_empty)
{
    ck_assert_int_eq(pattern_check("", err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "match.endpoint: empty"));
}
END_TEST

START_TEST(pattern_check_length_bound)
{
    char p[RL_PATTERN_MAX + 2];

    memset(p, 'a', RL_PATTERN_MAX);
    p[0] = '/';
    p[RL_PATTERN_MAX] = '\0';
    ck_assert_int_eq(pattern_check(p, err, sizeof err), 0);
    ck_assert_int_eq(pattern_match(p, p), 1);
    p[RL_PATTERN_MAX] = 'a';
    p[RL_PATTERN_MAX + 1] = '\0';
    ck_assert_int_eq(pattern_check(p, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "longer than 255"));
}
END_TEST

START_TEST(pattern_check_rejects_space_and_control)
{
    ck_assert_int_eq(pattern_check("/a b", err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "at 2"));
    ck_assert_int_eq(pattern_check("/a\tb", err, sizeof err), -1);
    ck_assert_int_eq(pattern_check("/a\r\n", err, sizeof err), -1);
    ck_assert_int_eq(pattern_check("/a\x7f", err, sizeof err), -1);
    ck_assert_int_eq(pattern_check("/a\x01", err, sizeof err), -1);
}
END_TEST

START_TEST(pattern_check_rejects_triple_star)
{
    ck_assert_int_eq(pattern_check("/a/***", err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "'***'"));
    ck_assert_int_eq(pattern_check("****", err, sizeof err), -1);
}
END_TEST

START_TEST(pattern_check_accepts_valid)
{
    ck_assert_int_eq(pattern_check("/search", err, sizeof err), 0);
    ck_assert_int_eq(pattern_check("/users/*/posts", err, sizeof err), 0);
    ck_assert_int_eq(pattern_check("/api/**", err, sizeof err), 0);
    ck_assert_int_eq(pattern_check("/a/*/b/**", err, sizeof err), 0);
    ck_assert_int_eq(pattern_check("/v?/x", err, sizeof err), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rules_match");
    TCase *tc = tcase_create("rules_match");

    tcase_add_test(tc, matches_by_tier);
    tcase_add_test(tc, matches_by_endpoint);
    tcase_add_test(tc, matches_by_endpoint_and_tier);
    tcase_add_test(tc, rule_without_match_matches_all);
    tcase_add_test(tc, bad_tier_rejected);
    tcase_add_test(tc, bad_endpoint_pattern_rejected);
    tcase_add_test(tc, dimension_name_grammar_and_builtins);
    tcase_add_test(tc, pattern_exact);
    tcase_add_test(tc, pattern_star_is_one_segment);
    tcase_add_test(tc, pattern_double_star_is_a_prefix);
    tcase_add_test(tc, pattern_question_mark);
    tcase_add_test(tc, pattern_mixing_star_and_double_star);
    tcase_add_test(tc, pattern_pathological_is_fast);
    tcase_add_test(tc, pattern_check_rejects_empty);
    tcase_add_test(tc, pattern_check_length_bound);
    tcase_add_test(tc, pattern_check_rejects_space_and_control);
    tcase_add_test(tc, pattern_check_rejects_triple_star);
    tcase_add_test(tc, pattern_check_accepts_valid);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
