/*
 * rld_check.h -- what the ratelimitd suites (check_ratelimitd.c,
 * check_ratelimitd_durable.c) share on top of tests/rld_harness.h: starting
 * and stopping a server under Check's asserts, requests, and the checks
 * that an answer is the library's canonical JSON.  Header-only (static
 * inline), for the Check suites only.
 */
#ifndef RL_RLD_CHECK_H
#define RL_RLD_CHECK_H

#include <check.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rld_harness.h"
#include "rule.h"
#include "rule_json.h"
#include "ruleset.h"
#include "timeutil.h"

#define ALICE RLD_ALICE_TOKEN
#define BOB RLD_BOB_TOKEN
#define WAIT_MS 15000 /* the longest any wait for a condition may take */
#define OKBODY "{\"dimension\":\"ip\",\"limit\":5,\"window_seconds\":1}"

static const char rule_body[] =
    "{\"dimension\":\"user\",\"match\":{\"endpoint\":\"/search\"},"
    "\"limit\":100,\"windowSeconds\":60,\"algorithm\":\"token_bucket\","
    "\"burst\":20,\"mode\":\"log\",\"failureMode\":\"open\"}";

/* ---- helpers ------------------------------------------------------------------ */

static inline void start(rld *d, const char *const *args)
{
    char tail[2048];

    ck_assert_msg(rld_available(), "ratelimitd not built");
    if (rld_start(d, args) != 0) {
        rld_log_tail(d, tail, sizeof tail);
        ck_abort_msg("ratelimitd did not start: %s", tail);
    }
}

/* Stop cleanly (exit 0: no leak under ASan, no race under TSan) and
 * remove the dir. */
static inline void finish(rld *d)
{
    char tail[2048];
    int rc = rld_stop(d);

    rld_log_tail(d, tail, sizeof tail);
    ck_assert_msg(rc == 0, "ratelimitd exit %d:\n%s", rc, tail);
    rld_cleanup(d);
}

static inline long put(const rld *d, const char *id, const char *body,
                const char *token, const char *const *hdrs, rld_resp *r)
{
    char path[256];

    snprintf(path, sizeof path, "/v1/rules/%s", id);
    return rld_http(d, "PUT", path, token, hdrs, body, strlen(body), r);
}

static inline long get(const rld *d, const char *path, const char *token,
                const char *const *hdrs, rld_resp *r)
{
    return rld_http(d, "GET", path, token, hdrs, NULL, 0, r);
}

static inline json_t *parse(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);

    ck_assert_msg(j != NULL, "not JSON (%s): %s", e.text, text);
    return j;
}

static inline long long int_of(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);

    ck_assert_msg(json_is_integer(v), "no integer %s", key);
    return json_integer_value(v);
}

static inline const char *str_of(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);

    ck_assert_msg(json_is_string(v), "no string %s", key);
    return json_string_value(v);
}

/* The body is one rule in the library's canonical form, newline-ended:
 * parsing it and writing it again gives the same bytes. */
static inline void assert_canonical_rule(const char *body, rl_rule *out)
{
    json_t *j = parse(body), *again;
    char err[256], *text;
    rl_rule r;

    ck_assert_msg(rule_from_json(j, &r, err, sizeof err) == 0, "%s", err);
    json_decref(j);
    again = rule_to_json(&r);
    text = json_dumps(again, RULE_JSON_DUMP_FLAGS);
    json_decref(again);
    ck_assert_uint_eq(strlen(body), strlen(text) + 1);
    ck_assert_int_eq(strncmp(body, text, strlen(text)), 0);
    ck_assert_int_eq(body[strlen(text)], '\n');
    free(text);
    if (out)
        *out = r;
    else
        rule_clear(&r);
}

/* The same for a whole set; returns it parsed (the caller frees it). */
static inline rl_ruleset *assert_canonical_set(const char *body, size_t len)
{
    rl_ruleset *rs = NULL;
    char err[256], *text;
    json_t *j;

    ck_assert_msg(ruleset_parse(body, len, 0, &rs, err, sizeof err) == RL_OK,
                  "%s", err);
    j = ruleset_to_json(rs);
    text = json_dumps(j, RULE_JSON_DUMP_FLAGS);
    json_decref(j);
    ck_assert_uint_eq(len, strlen(text) + 1);
    ck_assert_int_eq(strncmp(body, text, strlen(text)), 0);
    free(text);
    return rs;
}

/* The set as GET /v1/rules gives it. */
static inline rl_ruleset *list(const rld *d)
{
    rld_resp r;
    rl_ruleset *rs;

    ck_assert_int_eq(get(d, "/v1/rules", NULL, NULL, &r), 200);
    rs = assert_canonical_set(r.body, r.len);
    rld_resp_free(&r);
    return rs;
}

/* An error answer: status, JSON {"error": code, "message", "field"?}. */
static inline void assert_error(const rld_resp *r, long status, const char *code,
                         const char *field)
{
    json_t *j;

    ck_assert_msg(r->status == status, "status %ld, wanted %ld: %s",
                  r->status, status, r->body);
    j = parse(r->body);
    ck_assert_str_eq(str_of(j, "error"), code);
    ck_assert(strlen(str_of(j, "message")) > 0);
    if (field)
        ck_assert_str_eq(str_of(j, "field"), field);
    else
        ck_assert_ptr_null(json_object_get(j, "field"));
    json_decref(j);
}

#endif
