/*
 * check_rules.c -- the rule model and rule sets: strict validation with
 * messages that name the field, both document shapes, defaults, versions
 * and lookup by id.  Matching a request to rules and the endpoint patterns
 * are check_rules_match.c's.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "ratelimit.h"
#include "rule.h"
#include "ruleset.h"
#include "rules_test.h"
#include "testutil.h"

/* ---- required fields ---------------------------------------------------- */

START_TEST(missing_rule_id)
{
    fails("[{\"dimension\":\"user\",\"limit\":10,\"window_seconds\":60}]",
          RL_ERULE, "rule_id: required");
}
END_TEST

START_TEST(missing_dimension)
{
    fails("[{\"rule_id\":\"r1\",\"limit\":10,\"window_seconds\":60}]",
          RL_ERULE, "dimension: required");
}
END_TEST

START_TEST(missing_limit)
{
    fails("[{\"rule_id\":\"r1\",\"dimension\":\"ip\",\"window_seconds\":60}]",
          RL_ERULE, "limit: required");
}
END_TEST

START_TEST(missing_window_seconds)
{
    fails("[{\"rule_id\":\"r1\",\"dimension\":\"ip\",\"limit\":10}]",
          RL_ERULE, "window_seconds: required");
}
END_TEST

START_TEST(error_names_the_failing_rule)
{
    fails("[{" BASE "},{\"rule_id\":\"second\",\"dimension\":\"ip\","
          "\"limit\":0,\"window_seconds\":60}]",
          RL_ERULE, "rules[1] (\"second\"): limit");
}
END_TEST

/* ---- wrong types ---------------------------------------------------------- */

START_TEST(limit_as_string)
{
    fails("[{\"rule_id\":\"r1\",\"dimension\":\"user\",\"limit\":\"100\","
          "\"window_seconds\":60}]", RL_ERULE, "limit: must be an integer");
}
END_TEST

START_TEST(limit_as_real)
{
    fails("[{\"rule_id\":\"r1\",\"dimension\":\"user\",\"limit\":1.5,"
          "\"window_seconds\":60}]", RL_ERULE, "limit: must be an integer");
}
END_TEST

START_TEST(match_not_an_object)
{
    fails(with("\"match\":\"/search\""), RL_ERULE, "match: must be an object");
}
END_TEST

START_TEST(mode_as_number)
{
    fails(with("\"mode\":3"), RL_ERULE, "mode: must be a string");
}
END_TEST

START_TEST(rule_not_an_object)
{
    fails("[42]", RL_ERULE, "rule: must be an object");
}
END_TEST

START_TEST(top_level_scalar_does_not_parse)
{
    fails("42", RL_EPARSE, "line 1");
}
END_TEST

/* ---- ranges --------------------------------------------------------------- */

START_TEST(limit_zero)
{
    fails("[{\"rule_id\":\"r1\",\"dimension\":\"user\",\"limit\":0,"
          "\"window_seconds\":60}]", RL_ERULE, "limit: must be 1..1000000000");
}
END_TEST

START_TEST(limit_above_max)
{
    fails("[{\"rule_id\":\"r1\",\"dimension\":\"user\",\"limit\":1000000001,"
          "\"window_seconds\":60}]", RL_ERULE, "limit: must be 1..1000000000");
}
END_TEST

START_TEST(limit_at_max_ok)
{
    rl_ruleset *rs = ok("[{\"rule_id\":\"r1\",\"dimension\":\"user\","
                        "\"limit\":1000000000,\"window_seconds\":1}]");

    ck_assert_int_eq(rs->rules[0].ap.limit, RL_LIMIT_MAX);
    ruleset_free(rs);
}
END_TEST

START_TEST(window_negative)
{
    fails("[{\"rule_id\":\"r1\",\"dimension\":\"user\",\"limit\":10,"
          "\"window_seconds\":-1}]", RL_ERULE, "window_seconds: must be 1..");
}
END_TEST

START_TEST(window_zero)
{
    fails("[{\"rule_id\":\"r1\",\"dimension\":\"user\",\"limit\":10,"
          "\"window_seconds\":0}]", RL_ERULE, "window_seconds: must be 1..");
}
END_TEST

START_TEST(window_above_31_days)
{
    fails("[{\"rule_id\":\"r1\",\"dimension\":\"user\",\"limit\":10,"
          "\"window_seconds\":2678401}]", RL_ERULE,
          "window_seconds: must be 1..2678400");
}
END_TEST

START_TEST(window_31_days_ok)
{
    rl_ruleset *rs = ok("[{\"rule_id\":\"r1\",\"dimension\":\"user\","
                        "\"limit\":10,\"window_seconds\":2678400}]");

    ck_assert_int_eq(rs->rules[0].window_s, 2678400);
    ruleset_free(rs);
}
END_TEST

START_TEST(burst_zero)
{
    fails(with("\"algorithm\":\"token_bucket\",\"burst\":0"), RL_ERULE,
          "burst: must be 1..");
}
END_TEST

START_TEST(burst_on_sliding_window)
{
    fails(with("\"burst\":5"), RL_ERULE,
          "burst: applies to token_bucket and gcra only");
}
END_TEST

START_TEST(burst_on_fixed_window)
{
    fails(with("\"algorithm\":\"fixed_window\",\"burst\":5"), RL_ERULE,
          "burst: applies to token_bucket and gcra only, not fixed_window");
}
END_TEST

/* ---- enumerations ------------------------------------------------------- */

START_TEST(unknown_algorithm_lists_allowed)
{
    fails(with("\"algorithm\":\"leaky\""), RL_ERULE,
          "algorithm: unknown value \"leaky\" (one of sliding_window "
          "token_bucket fixed_window gcra sliding_log)");
}
END_TEST

/* A dimension is any name of the grammar (rl_dim in ratelimit.h). */
START_TEST(dimension_not_a_name)
{
    static const char *const bad[] = {"Email", "", "9lives", "a b", "tenant!",
                                      "\\u00e9t\\u00e9", "-x", "x\\ty"};
    char doc[256];

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(doc, sizeof doc, "[{\"rule_id\":\"r1\",\"dimension\":"
                 "\"%s\",\"limit\":10,\"window_seconds\":60}]", bad[i]);
        fails(doc, RL_ERULE, "dimension: \"");
        ck_assert_msg(strstr(err, "is not a name: 1..64 bytes of a-z 0-9 _ . "
                             ": -, starting with a letter"), "%s", err);
    }
}
END_TEST

START_TEST(dimension_any_name_of_the_grammar)
{
    static const char *const good[] = {"tenant", "org", "header:x-api-version",
                                       "custom", "a", "route.v2", "x_y-z"};
    char doc[256], name[RL_DIM_NAME_MAX + 2];

    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        snprintf(doc, sizeof doc, "[{\"rule_id\":\"r1\",\"dimension\":"
                 "\"%s\",\"limit\":10,\"window_seconds\":60}]", good[i]);
        rl_ruleset *rs = ok(doc);
        ck_assert_str_eq(rs->rules[0].dimension, good[i]);
        ck_assert_uint_eq(rs->rules[0].dim_len, strlen(good[i]));
        ruleset_free(rs);
    }
    memset(name, 'n', sizeof name);
    name[RL_DIM_NAME_MAX] = '\0'; /* the longest name */
    snprintf(doc, sizeof doc, "[{\"rule_id\":\"r1\",\"dimension\":\"%s\","
             "\"limit\":10,\"window_seconds\":60}]", name);
    ruleset_free(ok(doc));
    name[RL_DIM_NAME_MAX] = 'n';
    name[RL_DIM_NAME_MAX + 1] = '\0'; /* one byte more */
    snprintf(doc, sizeof doc, "[{\"rule_id\":\"r1\",\"dimension\":\"%s\","
             "\"limit\":10,\"window_seconds\":60}]", name);
    fails(doc, RL_ERULE, "is not a name");
}
END_TEST

/* Named dimensions get small ids at load, one per distinct name; user,
 * api_key and ip have fixed ones, global none. */
START_TEST(dimension_ids_interned_per_set)
{
    rl_ruleset *rs = ok(
        "[{\"rule_id\":\"a\",\"dimension\":\"user\",\"limit\":1,"
        "\"window_seconds\":1},{\"rule_id\":\"b\",\"dimension\":"
        "\"tenant\",\"limit\":1,\"window_seconds\":1},{\"rule_id\":\"c\","
        "\"dimension\":\"org\",\"limit\":1,\"window_seconds\":1},"
        "{\"rule_id\":\"d\",\"dimension\":\"tenant\",\"limit\":2,"
        "\"window_seconds\":1},{\"rule_id\":\"e\",\"dimension\":"
        "\"global\",\"limit\":1,\"window_seconds\":1},{\"rule_id\":\"f\","
        "\"dimension\":\"ip\",\"limit\":1,\"window_seconds\":1}]");

    ck_assert_int_eq(rs->rules[0].dim_id, RULE_DIM_USER);
    ck_assert_int_eq(rs->rules[1].dim_id, RULE_DIM_NAMED);
    ck_assert_int_eq(rs->rules[2].dim_id, RULE_DIM_NAMED + 1);
    ck_assert_int_eq(rs->rules[3].dim_id, RULE_DIM_NAMED);
    ck_assert_int_eq(rs->rules[4].dim_id, RULE_DIM_GLOBAL);
    ck_assert_int_eq(rs->rules[5].dim_id, RULE_DIM_IP);
    ck_assert_uint_eq(rs->dims.n, 2);
    ck_assert_int_eq(ruleset_dim_id(rs, "org", 3, ruleset_dim_hash("org", 3)),
                     RULE_DIM_NAMED + 1);
    ck_assert_int_eq(ruleset_dim_id(rs, "route", 5,
                                    ruleset_dim_hash("route", 5)), -1);
    ruleset_free(rs);
}
END_TEST

/* A set may count by RULESET_DIMS_MAX - 3 named dimensions, no more. */
static const char *many_dims(int n)
{
    static char buf[16384];
    int len = snprintf(buf, sizeof buf, "[");

    for (int i = 0; i < n; i++)
        len += snprintf(buf + len, sizeof buf - (size_t)len,
                        "%s{\"rule_id\":\"r%d\",\"dimension\":\"d%d\","
                        "\"limit\":1,\"window_seconds\":1}", i ? "," : "",
                        i, i);
    snprintf(buf + len, sizeof buf - (size_t)len, "]");
    return buf;
}

START_TEST(dimension_names_bounded_per_set)
{
    int most = RULESET_DIMS_MAX - RULE_DIM_NAMED;

    ruleset_free(ok(many_dims(most)));
    fails(many_dims(most + 1), RL_ERULE, "dimension: a set counts by at "
          "most 61 named dimensions besides user, api_key and ip");
}
END_TEST

START_TEST(unknown_mode_lists_allowed)
{
    fails(with("\"mode\":\"shadow\""), RL_ERULE,
          "mode: unknown value \"shadow\" (one of enforce log)");
}
END_TEST

START_TEST(unknown_failure_mode_lists_allowed)
{
    fails(with("\"failure_mode\":\"ignore\""), RL_ERULE,
          "failure_mode: unknown value \"ignore\" (one of fallback open "
          "closed)");
}
END_TEST

/* ---- unknown fields ------------------------------------------------------- */

START_TEST(unknown_rule_field)
{
    fails(with("\"windowSecond\":60"), RL_ERULE, "windowSecond: unknown field");
}
END_TEST

START_TEST(unknown_match_field)
{
    fails(with("\"match\":{\"endpoint\":\"/a\",\"method\":\"GET\"}"),
          RL_ERULE, "match.method: unknown field");
}
END_TEST

START_TEST(unknown_top_level_field)
{
    fails("{\"version\":1,\"rules\":[],\"comment\":\"x\"}", RL_ERULE,
          "comment: unknown field");
}
END_TEST

START_TEST(object_without_rules)
{
    fails("{\"version\":1}", RL_ERULE, "rules: required");
}
END_TEST

/* ---- rule ids ------------------------------------------------------------- */

START_TEST(rule_id_with_space)
{
    fails("[{\"rule_id\":\"a b\",\"dimension\":\"user\",\"limit\":10,"
          "\"window_seconds\":60}]", RL_ERULE, "rule_id: must be 1..63");
}
END_TEST

START_TEST(rule_id_with_crlf)
{
    fails("[{\"rule_id\":\"x\\r\\n\",\"dimension\":\"user\",\"limit\":10,"
          "\"window_seconds\":60}]", RL_ERULE, "rule_id: must be 1..63");
}
END_TEST

START_TEST(rule_id_empty)
{
    fails("[{\"rule_id\":\"\",\"dimension\":\"user\",\"limit\":10,"
          "\"window_seconds\":60}]", RL_ERULE, "rule_id: must be 1..63");
}
END_TEST

START_TEST(rule_id_64_bytes_rejected)
{
    char json[256], id[65];

    memset(id, 'a', 64);
    id[64] = '\0';
    snprintf(json, sizeof json, "[{\"rule_id\":\"%s\",\"dimension\":\"user\","
             "\"limit\":10,\"window_seconds\":60}]", id);
    fails(json, RL_ERULE, "rule_id: must be 1..63");
}
END_TEST

START_TEST(rule_id_63_bytes_accepted)
{
    char json[256], id[64];
    rl_ruleset *rs;

    memset(id, 'a', 63);
    id[63] = '\0';
    id[0] = 'Z', id[1] = '9', id[2] = '.', id[3] = '_', id[4] = ':',
    id[5] = '-';
    snprintf(json, sizeof json, "[{\"rule_id\":\"%s\",\"dimension\":\"user\","
             "\"limit\":10,\"window_seconds\":60}]", id);
    rs = ok(json);
    ck_assert_str_eq(rs->rules[0].id, id);
    ck_assert_ptr_eq(ruleset_find(rs, id), &rs->rules[0]);
    ruleset_free(rs);
}
END_TEST

START_TEST(rule_id_check_direct)
{
    ck_assert_int_eq(rule_id_check("ok.id_1:x-y"), 0);
    ck_assert_int_eq(rule_id_check(""), -1);
    ck_assert_int_eq(rule_id_check("a/b"), -1);
    ck_assert_int_eq(rule_id_check("caf\xc3\xa9"), -1);
    /* URL dot-segments: not addressable as /v1/rules/{id}. */
    ck_assert_int_eq(rule_id_check("."), -1);
    ck_assert_int_eq(rule_id_check(".."), -1);
    ck_assert_int_eq(rule_id_check("..."), 0);
    ck_assert_int_eq(rule_id_check(".a"), 0);
}
END_TEST

START_TEST(duplicate_ids_in_one_set)
{
    fails("[{" BASE "},{\"rule_id\":\"r2\",\"dimension\":\"ip\",\"limit\":1,"
          "\"window_seconds\":1},{" BASE "}]", RL_ERULE,
          "rules[2]: rule_id \"r1\" appears twice");
}
END_TEST

/* ---- JSON that does not parse -------------------------------------------- */

START_TEST(bad_json_gives_line_and_column)
{
    fails("[{\"rule_id\":\"r1\",\n  oops}]", RL_EPARSE, "line 2, column 6");
}
END_TEST

START_TEST(empty_input_does_not_parse)
{
    fails("", RL_EPARSE, "line");
}
END_TEST

START_TEST(duplicate_json_key_does_not_parse)
{
    fails("[{" BASE ",\"limit\":20}]", RL_EPARSE, "duplicate");
}
END_TEST

START_TEST(escaped_nul_in_string_rejected)
{
    fails("[{\"rule_id\":\"a\\u0000b\",\"dimension\":\"user\",\"limit\":10,"
          "\"window_seconds\":60}]", RL_EPARSE, "line 1");
}
END_TEST

START_TEST(raw_nul_in_string_rejected)
{
    static const char doc[] = "[{\"rule_id\":\"a\0b\",\"dimension\":\"user\","
                              "\"limit\":10,\"window_seconds\":60}]";
    rl_ruleset *rs = (rl_ruleset *)&rs;

    ck_assert_int_eq(ruleset_parse(doc, sizeof doc - 1, 1, &rs, err,
                                   sizeof err), RL_EPARSE);
    ck_assert_ptr_null(rs);
    ck_assert_ptr_nonnull(strstr(err, "column"));
}
END_TEST

/* ---- document shapes and versions ----------------------------------------- */

START_TEST(bare_array_uses_next_version)
{
    rl_ruleset *rs = ok(with(""));

    ck_assert_int_eq(rs->version, 7);
    ck_assert_uint_eq(rs->n, 1);
    ruleset_free(rs);
}
END_TEST

START_TEST(object_with_version_uses_it)
{
    rl_ruleset *rs = ok("{\"version\":42,\"rules\":[{" BASE "}]}");

    ck_assert_int_eq(rs->version, 42);
    ck_assert_uint_eq(rs->n, 1);
    ck_assert_str_eq(rs->rules[0].id, "r1");
    ruleset_free(rs);
}
END_TEST

START_TEST(object_without_version_uses_next_version)
{
    rl_ruleset *rs = ok("{\"rules\":[{" BASE "}]}");

    ck_assert_int_eq(rs->version, 7);
    ruleset_free(rs);
}
END_TEST

START_TEST(negative_set_version_rejected)
{
    fails("{\"version\":-1,\"rules\":[]}", RL_ERULE, "version: must be");
}
END_TEST

START_TEST(empty_sets_are_valid)
{
    rl_ruleset *a = ok("[]"), *b = ok("{\"rules\":[]}");

    ck_assert_uint_eq(a->n, 0);
    ck_assert_uint_eq(b->n, 0);
    ck_assert_ptr_null(ruleset_find(a, "r1"));
    ruleset_free(a);
    ruleset_free(b);
}
END_TEST

/* ---- defaults ------------------------------------------------------------- */

START_TEST(defaults_for_a_minimal_rule)
{
    rl_ruleset *rs = ok(with(""));
    const rl_rule *r = &rs->rules[0];

    ck_assert_int_eq(r->ap.algo, RL_ALGO_SLIDING_WINDOW);
    ck_assert_int_eq(r->mode, RL_MODE_ENFORCE);
    ck_assert_int_eq(r->failure, RL_FAIL_FALLBACK);
    ck_assert_int_eq(r->version, 1);
    ck_assert_int_eq(r->ap.burst, 0);
    ck_assert_str_eq(r->dimension, "user");
    ck_assert_int_eq(r->dim_id, RULE_DIM_USER);
    ck_assert_ptr_null(r->endpoint);
    ck_assert_ptr_null(r->tier);
    ck_assert_str_eq(r->updated_at, "");
    ruleset_free(rs);
}
END_TEST

START_TEST(token_bucket_burst_defaults_to_limit)
{
    rl_ruleset *rs = ok(with("\"algorithm\":\"token_bucket\""));

    ck_assert_int_eq(rs->rules[0].ap.algo, RL_ALGO_TOKEN_BUCKET);
    ck_assert_int_eq(rs->rules[0].ap.burst, 10);
    ruleset_free(rs);
}
END_TEST

START_TEST(gcra_burst_defaults_to_limit)
{
    rl_ruleset *rs = ok(with("\"algorithm\":\"gcra\""));

    ck_assert_int_eq(rs->rules[0].ap.algo, RL_ALGO_GCRA);
    ck_assert_int_eq(rs->rules[0].ap.burst, 10);
    ruleset_free(rs);
}
END_TEST

START_TEST(explicit_fields_are_kept)
{
    rl_ruleset *rs = ok(with("\"algorithm\":\"gcra\",\"burst\":3,"
                             "\"mode\":\"log\",\"failure_mode\":\"closed\","
                             "\"version\":9,\"match\":{\"endpoint\":"
                             "\"/a/*\",\"tier\":\"pro\"}"));
    const rl_rule *r = &rs->rules[0];

    ck_assert_int_eq(r->ap.burst, 3);
    ck_assert_int_eq(r->mode, RL_MODE_LOG);
    ck_assert_int_eq(r->failure, RL_FAIL_CLOSED);
    ck_assert_int_eq(r->version, 9);
    ck_assert_str_eq(r->endpoint, "/a/*");
    ck_assert_str_eq(r->tier, "pro");
    ruleset_free(rs);
}
END_TEST

/* ---- updated_at ------------------------------------------------------------ */

static void updated_at_ok(const char *ts)
{
    char extra[128];
    rl_ruleset *rs;

    snprintf(extra, sizeof extra, "\"updated_at\":\"%s\"", ts);
    rs = ok(with(extra));
    ck_assert_str_eq(rs->rules[0].updated_at, ts);
    ruleset_free(rs);
}

static void updated_at_bad(const char *ts)
{
    char extra[128];

    rl_ruleset *rs = NULL;

    snprintf(extra, sizeof extra, "\"updated_at\":\"%s\"", ts);
    if (parse(with(extra), &rs) == RL_OK) {
        ruleset_free(rs);
        ck_abort_msg("updated_at \"%s\" was accepted", ts);
    }
    fails(with(extra), RL_ERULE, "updated_at: must be RFC 3339");
}

START_TEST(updated_at_valid_forms)
{
    updated_at_ok("2026-11-29T10:00:00Z");
    updated_at_ok("2026-11-29T10:00:00+02:00");
    updated_at_ok("2026-11-29T10:00:00-05:30");
    updated_at_ok("2026-11-29T10:00:00.5Z");
    updated_at_ok("2026-11-29T10:00:00.123456789+02:00");
}
END_TEST

START_TEST(updated_at_invalid_forms)
{
    updated_at_bad("");
    updated_at_bad("2026-11-29");
    updated_at_bad("2026-11-29T10:00:00");        /* no offset          */
    updated_at_bad("2026-11-29 10:00:00Z");       /* space for T        */
    updated_at_bad("2026-11-29T10:00:00.Z");      /* empty fraction     */
    updated_at_bad("2026-11-29T10:00:00+0200");   /* offset without :   */
    updated_at_bad("2026-11-29T10:00:00+02:00x"); /* trailing text      */
    updated_at_bad("2026-11-29T10:00:00ZZ");
    updated_at_bad("26-11-29T10:00:00Z");
    updated_at_bad("2026-11-29T10:00:00.12345678901234567890123Z"); /* long */
}
END_TEST

START_TEST(updated_at_not_a_string)
{
    fails(with("\"updated_at\":20261129"), RL_ERULE,
          "updated_at: must be a string");
}
END_TEST

/* RFC 3339 section 5.7: month 01-12, mday by month, hour 00-23, minute
 * 00-59, second 00-60, offset hour 00-23.  The shape alone is not enough. */
START_TEST(updated_at_impossible_dates_rejected)
{
    updated_at_bad("2026-13-01T10:00:00Z");
    updated_at_bad("2026-00-10T10:00:00Z");
    updated_at_bad("2026-02-30T10:00:00Z");
    updated_at_bad("2026-11-29T24:00:00Z");
    updated_at_bad("2026-11-29T10:60:00Z");
    updated_at_bad("2026-11-29T10:00:61Z");
    updated_at_bad("2026-11-29T10:00:00+25:00");
}
END_TEST

/* ---- lookup ------------------------------------------------------------------ */

START_TEST(find_hit_and_miss_over_1000_rules)
{
    size_t cap = 1000 * 100 + 16, len = 0;
    char *json = malloc(cap), id[32];
    rl_ruleset *rs;

    len += (size_t)snprintf(json + len, cap - len, "[");
    for (int i = 0; i < 1000; i++)
        len += (size_t)snprintf(json + len, cap - len,
                                "%s{\"rule_id\":\"rule-%d\",\"dimension\":"
                                "\"ip\",\"limit\":%d,\"window_seconds\":60}",
                                i ? "," : "", i, i + 1);
    snprintf(json + len, cap - len, "]");
    rs = ok(json);
    free(json);
    ck_assert_uint_eq(rs->n, 1000);
    for (int i = 0; i < 1000; i++) {
        const rl_rule *r;
        snprintf(id, sizeof id, "rule-%d", i);
        r = ruleset_find(rs, id);
        ck_assert_ptr_eq(r, &rs->rules[i]);
        ck_assert_int_eq(r->ap.limit, i + 1);
    }
    ck_assert_ptr_null(ruleset_find(rs, "rule-1000"));
    ck_assert_ptr_null(ruleset_find(rs, "rule-"));
    ck_assert_ptr_null(ruleset_find(rs, "Rule-1"));
    ck_assert_ptr_null(ruleset_find(rs, ""));
    ruleset_free(rs);
}
END_TEST

START_TEST(find_on_empty_set)
{
    rl_ruleset *rs = ruleset_empty();

    ck_assert_int_eq(rs->version, 0);
    ck_assert_ptr_null(ruleset_find(rs, "r1"));
    ruleset_free(rs);
    ruleset_free(NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rules");
    TCase *tc = tcase_create("rules");

    tcase_add_test(tc, missing_rule_id);
    tcase_add_test(tc, missing_dimension);
    tcase_add_test(tc, missing_limit);
    tcase_add_test(tc, missing_window_seconds);
    tcase_add_test(tc, error_names_the_failing_rule);
    tcase_add_test(tc, limit_as_string);
    tcase_add_test(tc, limit_as_real);
    tcase_add_test(tc, match_not_an_object);
    tcase_add_test(tc, mode_as_number);
    tcase_add_test(tc, rule_not_an_object);
    tcase_add_test(tc, top_level_scalar_does_not_parse);
    tcase_add_test(tc, limit_zero);
    tcase_add_test(tc, limit_above_max);
    tcase_add_test(tc, limit_at_max_ok);
    tcase_add_test(tc, window_negative);
    tcase_add_test(tc, window_zero);
    tcase_add_test(tc, window_above_31_days);
    tcase_add_test(tc, window_31_days_ok);
    tcase_add_test(tc, burst_zero);
    tcase_add_test(tc, burst_on_sliding_window);
    tcase_add_test(tc, burst_on_fixed_window);
    tcase_add_test(tc, unknown_algorithm_lists_allowed);
    tcase_add_test(tc, dimension_not_a_name);
    tcase_add_test(tc, dimension_any_name_of_the_grammar);
    tcase_add_test(tc, dimension_ids_interned_per_set);
    tcase_add_test(tc, dimension_names_bounded_per_set);
    tcase_add_test(tc, unknown_mode_lists_allowed);
    tcase_add_test(tc, unknown_failure_mode_lists_allowed);
    tcase_add_test(tc, unknown_rule_field);
    tcase_add_test(tc, unknown_match_field);
    tcase_add_test(tc, unknown_top_level_field);
    tcase_add_test(tc, object_without_rules);
    tcase_add_test(tc, rule_id_with_space);
    tcase_add_test(tc, rule_id_with_crlf);
    tcase_add_test(tc, rule_id_empty);
    tcase_add_test(tc, rule_id_64_bytes_rejected);
    tcase_add_test(tc, rule_id_63_bytes_accepted);
    tcase_add_test(tc, rule_id_check_direct);
    tcase_add_test(tc, duplicate_ids_in_one_set);
    tcase_add_test(tc, bad_json_gives_line_and_column);
    tcase_add_test(tc, empty_input_does_not_parse);
    tcase_add_test(tc, duplicate_json_key_does_not_parse);
    tcase_add_test(tc, escaped_nul_in_string_rejected);
    tcase_add_test(tc, raw_nul_in_string_rejected);
    tcase_add_test(tc, bare_array_uses_next_version);
    tcase_add_test(tc, object_with_version_uses_it);
    tcase_add_test(tc, object_without_version_uses_next_version);
    tcase_add_test(tc, negative_set_version_rejected);
    tcase_add_test(tc, empty_sets_are_valid);
    tcase_add_test(tc, defaults_for_a_minimal_rule);
    tcase_add_test(tc, token_bucket_burst_defaults_to_limit);
    tcase_add_test(tc, gcra_burst_defaults_to_limit);
    tcase_add_test(tc, explicit_fields_are_kept);
    tcase_add_test(tc, updated_at_valid_forms);
    tcase_add_test(tc, updated_at_invalid_forms);
    tcase_add_test(tc, updated_at_not_a_string);
    tcase_add_test(tc, updated_at_impossible_dates_rejected);
    tcase_add_test(tc, find_hit_and_miss_over_1000_rules);
    tcase_add_test(tc, find_on_empty_set);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
