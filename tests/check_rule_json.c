/*
 * check_rule_json.c -- the two spellings the parser reads and the one form
 * the writer gives: the design note's camelCase aliases (each accepted,
 * both spellings of one field refused, errors by the snake_case name), the
 * canonical text of rules and sets member by member, and round trips
 * (parse(to_json(r)) == r) over hand-picked and generated rules.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "ratelimit.h"
#include "rule.h"
#include "rule_json.h"
#include "ruleset.h"
#include "testutil.h"

static char err[512];

/* One rule from JSON text; 0 or -1 with the reason in err. */
static int parse_rule(const char *text, rl_rule *r)
{
    json_error_t jerr;
    json_t *doc = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    int rc;

    ck_assert_msg(doc != NULL, "%s: %s", text, jerr.text);
    err[0] = '\0';
    rc = rule_from_json(doc, r, err, sizeof err);
    json_decref(doc);
    return rc;
}

static void rule_fails(const char *text, const char *needle)
{
    rl_rule r;

    ck_assert_int_eq(parse_rule(text, &r), -1);
    ck_assert_msg(strstr(err, needle) != NULL, "\"%s\" not in \"%s\"",
                  needle, err);
}

/* The canonical text of a rule; the caller frees it. */
static char *canon(const rl_rule *r)
{
    json_t *j = rule_to_json(r);
    char *s;

    ck_assert_ptr_nonnull(j);
    s = json_dumps(j, RULE_JSON_DUMP_FLAGS);
    json_decref(j);
    ck_assert_ptr_nonnull(s);
    return s;
}

static int str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* Field by field: what the request path and the store read. */
static void assert_same_rule(const rl_rule *a, const rl_rule *b)
{
    ck_assert_str_eq(a->id, b->id);
    ck_assert_str_eq(a->dimension, b->dimension);
    ck_assert(str_eq(a->endpoint, b->endpoint));
    ck_assert(str_eq(a->tier, b->tier));
    ck_assert_int_eq(a->ap.algo, b->ap.algo);
    ck_assert_int_eq(a->ap.limit, b->ap.limit);
    ck_assert_int_eq(a->ap.burst, b->ap.burst);
    ck_assert_int_eq(a->ap.window_ms, b->ap.window_ms);
    ck_assert_int_eq(a->ap.p, b->ap.p);
    ck_assert_int_eq(a->ap.q, b->ap.q);
    ck_assert_int_eq(a->window_s, b->window_s);
    ck_assert_int_eq(a->mode, b->mode);
    ck_assert_int_eq(a->failure, b->failure);
    ck_assert_int_eq(a->version, b->version);
    ck_assert_str_eq(a->updated_at, b->updated_at);
    ck_assert_uint_eq(a->shape.state_seed, b->shape.state_seed);
}

/* Parse `text`, write it, parse the writing: the same rule, and writing
 * that again gives the same bytes.  Returns the canonical text. */
static char *round_trip(const char *text)
{
    rl_rule a, b;
    char *first, *second;

    ck_assert_msg(parse_rule(text, &a) == 0, "%s: %s", text, err);
    first = canon(&a);
    ck_assert_msg(parse_rule(first, &b) == 0, "%s: %s", first, err);
    assert_same_rule(&a, &b);
    second = canon(&b);
    ck_assert_str_eq(first, second);
    free(second);
    rule_clear(&a);
    rule_clear(&b);
    return first;
}

/* ---- aliases ---------------------------------------------------------------- */

START_TEST(camel_case_aliases_read_as_snake_case)
{
    rl_rule snake, camel;

    ck_assert_int_eq(parse_rule(
        "{\"rule_id\":\"r1\",\"dimension\":\"ip\",\"limit\":5,"
        "\"window_seconds\":30,\"failure_mode\":\"closed\","
        "\"updated_at\":\"2026-12-01T13:20:00Z\"}", &snake), 0);
    ck_assert_int_eq(parse_rule(
        "{\"ruleId\":\"r1\",\"dimension\":\"ip\",\"limit\":5,"
        "\"windowSeconds\":30,\"failureMode\":\"closed\","
        "\"updatedAt\":\"2026-12-01T13:20:00Z\"}", &camel), 0);
    assert_same_rule(&snake, &camel);
    ck_assert_int_eq(camel.failure, RL_FAIL_CLOSED);
    ck_assert_int_eq(camel.window_s, 30);
    rule_clear(&snake);
    rule_clear(&camel);
}
END_TEST

START_TEST(the_design_note_body_parses)
{
    rl_rule r;

    ck_assert_int_eq(parse_rule(
        "{\"ruleId\":\"search\",\"dimension\":\"api_key\","
        "\"match\":{\"endpoint\":\"/search\",\"tier\":\"free\"},"
        "\"limit\":100,\"windowSeconds\":60,\"burst\":20,"
        "\"algorithm\":\"token_bucket\"}", &r), 0);
    ck_assert_int_eq(r.ap.burst, 20);
    ck_assert_str_eq(r.endpoint, "/search");
    rule_clear(&r);
}
END_TEST

START_TEST(both_spellings_refused_by_snake_case_name)
{
    rule_fails("{\"rule_id\":\"r1\",\"ruleId\":\"r1\",\"dimension\":\"ip\","
               "\"limit\":5,\"window_seconds\":30}",
               "rule_id: given twice, as rule_id and as ruleId");
    rule_fails("{\"rule_id\":\"r1\",\"dimension\":\"ip\",\"limit\":5,"
               "\"windowSeconds\":30,\"window_seconds\":30}",
               "window_seconds: given twice");
    rule_fails("{\"rule_id\":\"r1\",\"dimension\":\"ip\",\"limit\":5,"
               "\"window_seconds\":30,\"failureMode\":\"open\","
               "\"failure_mode\":\"open\"}", "failure_mode: given twice");
    rule_fails("{\"rule_id\":\"r1\",\"dimension\":\"ip\",\"limit\":5,"
               "\"window_seconds\":30,\"updated_at\":\"2026-12-01T13:20:00Z\","
               "\"updatedAt\":\"2026-12-01T13:20:00Z\"}",
               "updated_at: given twice");
}
END_TEST

START_TEST(alias_errors_name_the_snake_case_field)
{
    rule_fails("{\"rule_id\":\"r1\",\"dimension\":\"ip\",\"limit\":5,"
               "\"windowSeconds\":\"30\"}", "window_seconds: must be an integer");
    rule_fails("{\"rule_id\":\"r1\",\"dimension\":\"ip\",\"limit\":5,"
               "\"windowSeconds\":0}", "window_seconds: must be 1..");
    rule_fails("{\"ruleId\":\"a/b\",\"dimension\":\"ip\",\"limit\":5,"
               "\"window_seconds\":30}", "rule_id: must be 1..63");
    rule_fails("{\"rule_id\":\"r1\",\"dimension\":\"ip\",\"limit\":5,"
               "\"window_seconds\":30,\"failureMode\":\"maybe\"}",
               "failure_mode: unknown value \"maybe\"");
    rule_fails("{\"rule_id\":\"r1\",\"dimension\":\"ip\",\"limit\":5,"
               "\"window_seconds\":30,\"updatedAt\":\"yesterday\"}",
               "updated_at: must be RFC 3339");
    rule_fails("{\"dimension\":\"ip\",\"limit\":5,\"window_seconds\":30}",
               "rule_id: required");
}
END_TEST

START_TEST(other_camel_case_names_are_unknown)
{
    rule_fails("{\"rule_id\":\"r1\",\"dimension\":\"ip\",\"limit\":5,"
               "\"window_seconds\":30,\"windowSecond\":30}",
               "windowSecond: unknown field");
    rule_fails("{\"rule_id\":\"r1\",\"dimension\":\"ip\",\"limit\":5,"
               "\"window_seconds\":30,\"match\":{\"Endpoint\":\"/a\"}}",
               "match.Endpoint: unknown field");
    rule_fails("{\"rule_id\":\"r1\",\"dimension\":\"ip\",\"limit\":5,"
               "\"window_seconds\":30,\"failure\":\"open\"}",
               "failure: unknown field");
}
END_TEST

START_TEST(set_error_names_a_camel_case_rule)
{
    rl_ruleset *rs = NULL;
    const char *json = "[{\"ruleId\":\"second\",\"dimension\":\"ip\","
                       "\"limit\":0,\"windowSeconds\":60}]";

    ck_assert_int_eq(ruleset_parse(json, strlen(json), 1, &rs, err,
                                   sizeof err), RL_ERULE);
    ck_assert_ptr_null(rs);
    ck_assert_msg(strstr(err, "rules[0] (\"second\"): limit") != NULL, "%s",
                  err);
}
END_TEST

/* ---- the canonical form ------------------------------------------------------- */

START_TEST(canonical_order_and_defaults)
{
    char *s = round_trip("{\"updatedAt\":\"2026-12-01T13:20:00Z\","
                         "\"version\":4,\"algorithm\":\"gcra\",\"limit\":10,"
                         "\"match\":{\"tier\":\"pro\",\"endpoint\":\"/a/*\"},"
                         "\"windowSeconds\":1,\"dimension\":\"user\","
                         "\"ruleId\":\"g\"}");

    ck_assert_str_eq(s, "{\"rule_id\":\"g\",\"dimension\":\"user\","
                     "\"match\":{\"endpoint\":\"/a/*\",\"tier\":\"pro\"},"
                     "\"limit\":10,\"window_seconds\":1,\"burst\":10,"
                     "\"algorithm\":\"gcra\",\"mode\":\"enforce\","
                     "\"failure_mode\":\"fallback\",\"version\":4,"
                     "\"updated_at\":\"2026-12-01T13:20:00Z\"}");
    free(s);
}
END_TEST

START_TEST(canonical_leaves_out_what_is_absent)
{
    /* No match, no burst for a window algorithm, no updated_at; version
     * defaults to 1. */
    char *s = round_trip("{\"rule_id\":\"w\",\"dimension\":\"global\","
                         "\"limit\":7,\"window_seconds\":60,"
                         "\"mode\":\"log\",\"failure_mode\":\"open\"}");

    ck_assert_str_eq(s, "{\"rule_id\":\"w\",\"dimension\":\"global\","
                     "\"limit\":7,\"window_seconds\":60,"
                     "\"algorithm\":\"sliding_window\",\"mode\":\"log\","
                     "\"failure_mode\":\"open\",\"version\":1}");
    free(s);
    s = round_trip("{\"rule_id\":\"t\",\"dimension\":\"ip\",\"limit\":7,"
                   "\"window_seconds\":60,\"match\":{},"
                   "\"algorithm\":\"fixed_window\"}");
    ck_assert_ptr_null(strstr(s, "match"));
    ck_assert_ptr_null(strstr(s, "burst"));
    free(s);
}
END_TEST

START_TEST(canonical_burst_is_the_effective_bucket)
{
    char *s = round_trip("{\"rule_id\":\"b\",\"dimension\":\"custom\","
                         "\"limit\":100,\"window_seconds\":60,"
                         "\"algorithm\":\"token_bucket\"}");

    ck_assert_ptr_nonnull(strstr(s, "\"burst\":100,"));
    free(s);
    s = round_trip("{\"rule_id\":\"b\",\"dimension\":\"api_key\","
                   "\"limit\":100,\"window_seconds\":60,\"burst\":3,"
                   "\"algorithm\":\"token_bucket\"}");
    ck_assert_ptr_nonnull(strstr(s, "\"burst\":3,"));
    free(s);
}
END_TEST

START_TEST(round_trip_keeps_odd_but_valid_values)
{
    static const char *const rules[] = {
        "{\"rule_id\":\"Z9._:-\",\"dimension\":\"api_key\",\"limit\":1000000,"
        "\"window_seconds\":2678400,\"algorithm\":\"fixed_window\"}",
        "{\"rule_id\":\"...\",\"dimension\":\"ip\",\"limit\":1000000000,"
        "\"window_seconds\":1,\"burst\":1000000000,"
        "\"algorithm\":\"token_bucket\"}",
        "{\"rule_id\":\"u\",\"dimension\":\"user\",\"limit\":3,"
        "\"window_seconds\":7,\"burst\":1,\"algorithm\":\"gcra\","
        "\"updated_at\":\"2026-02-28T23:59:60.125+05:30\",\"version\":0}",
        "{\"rule_id\":\"e\",\"dimension\":\"ip\",\"limit\":1,"
        "\"window_seconds\":1,\"match\":{\"endpoint\":\"/a/**\"},"
        "\"updated_at\":\"2026-12-01t13:20:00z\"}",
        "{\"rule_id\":\"t\",\"dimension\":\"ip\",\"limit\":1,"
        "\"window_seconds\":1,\"match\":{\"tier\":\"caf\\u00e9 \\\"x\\\"\"}}",
    };

    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        free(round_trip(rules[i]));
}
END_TEST

/* Every combination of dimension x algorithm x mode x failure mode x match
 * x burst x updated_at, with limits and windows from a fixed sequence. */
START_TEST(round_trip_over_generated_rules)
{
    static const char *const dims[] = {"user", "api_key", "ip", "custom",
                                       "global"};
    static const char *const algos[] = {"sliding_window", "token_bucket",
                                        "fixed_window", "gcra"};
    static const char *const modes[] = {"enforce", "log"};
    static const char *const fails[] = {"fallback", "open", "closed"};
    static const char *const matches[] = {
        "", ",\"match\":{\"endpoint\":\"/search\"}",
        ",\"match\":{\"tier\":\"free\"}",
        ",\"match\":{\"endpoint\":\"/api/**\",\"tier\":\"pro\"}"};
    char text[512];
    int n = 0;

    for (size_t d = 0; d < 5; d++)
        for (size_t a = 0; a < 4; a++)
            for (size_t m = 0; m < 2; m++)
                for (size_t f = 0; f < 3; f++)
                    for (size_t k = 0; k < 4; k++, n++) {
                        int bucket = a == 1 || a == 3;
                        long long limit = 1 + (n * 7919) % 100000;
                        long long window = 1 + (n * 104729) % 86400;
                        char burst[32] = "";
                        if (bucket && n % 2)
                            snprintf(burst, sizeof burst, ",\"burst\":%d",
                                     1 + n % 50);
                        snprintf(text, sizeof text,
                                 "{\"ruleId\":\"r%d\",\"dimension\":\"%s\","
                                 "\"limit\":%lld,\"windowSeconds\":%lld%s,"
                                 "\"algorithm\":\"%s\",\"mode\":\"%s\","
                                 "\"failureMode\":\"%s\"%s,\"version\":%d%s}",
                                 n, dims[d], limit, window, burst, algos[a],
                                 modes[m], fails[f], matches[k], n,
                                 n % 3 ? ",\"updatedAt\":\"2026-12-01T13:20:00Z\""
                                       : "");
                        free(round_trip(text));
                    }
    ck_assert_int_eq(n, 480);
}
END_TEST

START_TEST(ruleset_round_trip)
{
    const char *json =
        "{\"rules\":[{\"ruleId\":\"b\",\"dimension\":\"ip\",\"limit\":2,"
        "\"windowSeconds\":9},{\"rule_id\":\"a\",\"dimension\":\"user\","
        "\"limit\":5,\"window_seconds\":60,\"algorithm\":\"token_bucket\"}],"
        "\"version\":42}";
    rl_ruleset *rs = NULL, *again = NULL;
    json_t *j;
    char *text, *text2;

    ck_assert_int_eq(ruleset_parse(json, strlen(json), 1, &rs, err,
                                   sizeof err), RL_OK);
    ck_assert_ptr_nonnull(j = ruleset_to_json(rs));
    text = json_dumps(j, RULE_JSON_DUMP_FLAGS);
    json_decref(j);
    ck_assert_str_eq(text,
        "{\"version\":42,\"rules\":[{\"rule_id\":\"b\",\"dimension\":\"ip\","
        "\"limit\":2,\"window_seconds\":9,\"algorithm\":\"sliding_window\","
        "\"mode\":\"enforce\",\"failure_mode\":\"fallback\",\"version\":1},"
        "{\"rule_id\":\"a\",\"dimension\":\"user\",\"limit\":5,"
        "\"window_seconds\":60,\"burst\":5,\"algorithm\":\"token_bucket\","
        "\"mode\":\"enforce\",\"failure_mode\":\"fallback\",\"version\":1}]}");
    ck_assert_int_eq(ruleset_parse(text, strlen(text), 1, &again, err,
                                   sizeof err), RL_OK);
    ck_assert_int_eq(again->version, 42);
    ck_assert_uint_eq(again->n, rs->n);
    for (size_t i = 0; i < rs->n; i++)
        assert_same_rule(&rs->rules[i], &again->rules[i]);
    ck_assert_ptr_nonnull(j = ruleset_to_json(again));
    text2 = json_dumps(j, RULE_JSON_DUMP_FLAGS);
    json_decref(j);
    ck_assert_str_eq(text, text2);
    free(text);
    free(text2);
    ruleset_free(rs);
    ruleset_free(again);
}
END_TEST

START_TEST(empty_set_canonical)
{
    rl_ruleset *rs = ruleset_empty();
    json_t *j = ruleset_to_json(rs);
    char *text = json_dumps(j, RULE_JSON_DUMP_FLAGS);

    ck_assert_str_eq(text, "{\"version\":0,\"rules\":[]}");
    free(text);
    json_decref(j);
    ruleset_free(rs);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rule_json");
    TCase *tc = tcase_create("rule_json");

    tcase_add_test(tc, camel_case_aliases_read_as_snake_case);
    tcase_add_test(tc, the_design_note_body_parses);
    tcase_add_test(tc, both_spellings_refused_by_snake_case_name);
    tcase_add_test(tc, alias_errors_name_the_snake_case_field);
    tcase_add_test(tc, other_camel_case_names_are_unknown);
    tcase_add_test(tc, set_error_names_a_camel_case_rule);
    tcase_add_test(tc, canonical_order_and_defaults);
    tcase_add_test(tc, canonical_leaves_out_what_is_absent);
    tcase_add_test(tc, canonical_burst_is_the_effective_bucket);
    tcase_add_test(tc, round_trip_keeps_odd_but_valid_values);
    tcase_add_test(tc, round_trip_over_generated_rules);
    tcase_add_test(tc, ruleset_round_trip);
    tcase_add_test(tc, empty_set_canonical);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
