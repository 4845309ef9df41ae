/*
 * rules_test.h -- what the rule suites (check_rules.c, check_rules_match.c)
 * share: a valid rule to build on (BASE, with()), and ruleset_parse()
 * wrapped to assert that a document parses (ok()) or fails with a code and
 * a message naming the field (fails()).  Static: each suite its own copy.
 */
#ifndef RL_TESTS_RULES_TEST_H
#define RL_TESTS_RULES_TEST_H

#include <check.h>
#include <stdio.h>
#include <string.h>

#include "ratelimit.h"
#include "ruleset.h"

/* A valid rule, with room to add or replace fields. */
#define BASE "\"rule_id\":\"r1\",\"dimension\":\"user\",\"limit\":10," \
             "\"window_seconds\":60"

static char err[512];

static inline int parse(const char *json, rl_ruleset **rs)
{
    err[0] = '\0';
    return ruleset_parse(json, strlen(json), 7, rs, err, sizeof err);
}

/* Parse must fail with `code` and a message holding `needle`. */
static inline void fails(const char *json, int code, const char *needle)
{
    rl_ruleset *rs = (rl_ruleset *)&rs;
    int rc = parse(json, &rs), leaked = rs != NULL;

    if (rc == RL_OK)
        ruleset_free(rs); /* unexpected success: fail without a leak */
    ck_assert_int_eq(rc, code);
    ck_assert_int_eq(leaked, 0);
    ck_assert_msg(strstr(err, needle) != NULL, "\"%s\" not in \"%s\"",
                  needle, err);
}

/* Parse one rule that must be valid; the caller frees the set. */
static inline rl_ruleset *ok(const char *json)
{
    rl_ruleset *rs = NULL;

    ck_assert_msg(parse(json, &rs) == RL_OK, "%s: %s", json, err);
    ck_assert_ptr_nonnull(rs);
    return rs;
}

/* Fill a one-rule document "[{BASE, extra}]". */
static inline const char *with(const char *extra)
{
    static char buf[1024];

    snprintf(buf, sizeof buf, "[{" BASE "%s%s}]", *extra ? "," : "", extra);
    return buf;
}

#endif
