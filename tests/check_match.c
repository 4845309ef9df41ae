/*
 * check_match.c -- which rules a request matches, and at what cost
 * (issue 11).  The rule index (src/rules/rule_index.c) beside a walk over every
 * rule in order, as the request path did before it, on random rule sets
 * (exact, prefix, glob and no endpoints; tiers and no tier; dimensions a
 * request carries or not) and random requests: the same rules in the same
 * order.  The bit-parallel glob matcher (src/rules/pattern.c) beside the
 * dynamic programme it replaced (tests/pattern_dp.h) on random patterns
 * and endpoints.  An endpoint over RL_ENDPOINT_MAX is refused.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pattern.h"
#include "pattern_dp.h"
#include "rule.h"
#include "rule_index.h"
#include "rule_walk.h"
#include "ruleset.h"
#include "store.h"
#include "testutil.h"

#define SETS 300
#define REQUESTS 200
#define NDIMS 4 /* dimension ids rules count by: 0..3, or global */

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static unsigned rnd(unsigned n)
{
    return (unsigned)(xorshift64(&rng) % n);
}

/* Endpoint-like bytes from a few pieces, so patterns and endpoints meet. */
static void rand_path(char *buf, size_t room, unsigned pieces)
{
    static const char *const piece[] = {"/", "a", "b", "ab", "/v1", "/a",
                                        ".json", "x", "/b/"};
    size_t n = 0;

    buf[0] = '\0';
    for (unsigned i = 0; i < pieces; i++) {
        const char *p = piece[rnd(sizeof piece / sizeof *piece)];
        if (n + strlen(p) + 1 > room)
            break;
        memcpy(buf + n, p, strlen(p) + 1);
        n += strlen(p);
    }
}

/* A random valid glob: path pieces, '?', '*' and "**" (never three stars
 * in a row). */
static void rand_glob(char *buf, size_t room, unsigned tokens)
{
    size_t n = 0;

    for (unsigned i = 0; i < tokens && n + 8 < room; i++) {
        unsigned k = rnd(6);
        int after_star = n && buf[n - 1] == '*';
        if (k == 0 && !after_star) {
            buf[n++] = '*';
        } else if (k == 1 && !after_star) {
            buf[n++] = '*';
            buf[n++] = '*';
        } else if (k == 2) {
            buf[n++] = '?';
        } else {
            char piece[8];
            rand_path(piece, sizeof piece, 1);
            memcpy(buf + n, piece, strlen(piece));
            n += strlen(piece);
        }
    }
    buf[n] = '\0';
    if (n == 0)
        strcpy(buf, "*");
}

/* ---- the glob matcher against the old one -------------------------------- */

START_TEST(glob_matches_as_the_dynamic_programme_did)
{
    char pat[RL_PATTERN_MAX + 1], ep[200], why[100];
    long matched = 0;

    for (int i = 0; i < 200000; i++) {
        rand_glob(pat, 40, 1 + rnd(8));
        /* valid but for a leading '?', which a rule refuses (an endpoint
         * starts with '/'); the matcher is held to the reference anyway */
        ck_assert_int_eq(pattern_check(pat, why, sizeof why),
                         pat[0] == '/' || pat[0] == '*' ? 0 : -1);
        rand_path(ep, sizeof ep, rnd(10));
        int want = pattern_match_dp(pat, ep);
        ck_assert_msg(pattern_match(pat, ep) == want,
                      "\"%s\" on \"%s\": want %d", pat, ep, want);
        matched += want;
    }
    /* The generator must give both answers often enough to test. */
    ck_assert_msg(matched > 5000 && matched < 195000, "%ld matched",
                  matched);
}
END_TEST

/* Patterns that span all four state words. */
START_TEST(glob_matches_long_patterns)
{
    char pat[RL_PATTERN_MAX + 1], ep[1200];

    for (int i = 0; i < 20000; i++) {
        rand_glob(pat, sizeof pat, 40 + rnd(120));
        rand_path(ep, sizeof ep, rnd(300));
        if (rnd(2)) { /* an endpoint made from the pattern: it may match */
            size_t n = 0;
            for (const char *p = pat; *p; p++)
                ep[n++] = *p == '*' ? 'z' : *p == '?' ? 'q' : *p;
            ep[n] = '\0';
        }
        ck_assert_msg(pattern_match(pat, ep) == pattern_match_dp(pat, ep),
                      "\"%s\" on \"%s\"", pat, ep);
    }
}
END_TEST

/* ---- the index against the walk ----------------------------------------- */

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static void rand_set(set *s, size_t n)
{
    static const char *const tiers[] = {NULL, NULL, "free", "pro", ""};
    char ep[RL_PATTERN_MAX + 1];

    s->rules = calloc(n, sizeof *s->rules);
    s->n = n;
    for (size_t i = 0; i < n; i++) {
        rl_rule *r = &s->rules[i];
        unsigned kind = rnd(4);
        snprintf(r->id, sizeof r->id, "r%zu", i);
        r->dim_id = (int)rnd(NDIMS + 1) - 1; /* -1: RULE_DIM_GLOBAL */
        r->tier = dup_or_null(tiers[rnd(5)]);
        if (kind == 1) { /* exact */
            rand_path(ep, 24, 1 + rnd(4));
        } else if (kind == 2) { /* prefix */
            rand_path(ep, 20, rnd(4));
            strcat(ep, "**");
        } else if (kind == 3) {
            rand_glob(ep, 24, 1 + rnd(5));
        }
        r->endpoint = kind ? strdup(ep) : NULL;
        ck_assert(!kind || r->endpoint);
    }
}

START_TEST(index_matches_as_the_walk_did)
{
    static const char *const tiers[] = {NULL, "", "free", "pro", "gold"};
    static const size_t maxes[] = {1, 3, RL_OPS_MAX + 1, RULE_INDEX_MAX};
    uint32_t want[RULE_INDEX_MAX], got[RULE_INDEX_MAX];
    char ep[64];
    long hits = 0;

    for (int k = 0; k < SETS; k++) {
        set s;
        rand_set(&s, 1 + rnd(k < SETS / 2 ? 40 : 600));
        rule_index *ix = rule_index_build(s.rules, s.n);
        ck_assert_ptr_nonnull(ix);
        for (int q = 0; q < REQUESTS; q++) {
            const char *tier = tiers[rnd(5)];
            uint64_t present = rnd(1u << NDIMS);
            size_t max = maxes[rnd(4)], nw, ng;
            rand_path(ep, sizeof ep, rnd(6));
            const char *e = rnd(10) ? ep : NULL;
            nw = walk(&s, e, tier, present, want, max);
            ng = rule_index_match(ix, s.rules, e, e ? strlen(e) : 0, tier,
                                  tier ? strlen(tier) : 0, present, got, max);
            ck_assert_msg(nw == ng, "set %d request %d (\"%s\", %s): %zu "
                          "rules, index %zu", k, q, e ? e : "(null)",
                          tier ? tier : "(null)", nw, ng);
            for (size_t i = 0; i < nw; i++)
                ck_assert_uint_eq(got[i], want[i]);
            hits += (long)nw;
        }
        rule_index_free(ix);
        set_free(&s);
    }
    ck_assert_msg(hits > SETS * REQUESTS, "%ld matches in all", hits);
}
END_TEST

/* Thousands of rules matching one request: the first max, in order. */
START_TEST(index_keeps_the_first_matches_in_rule_order)
{
    set s;
    uint32_t got[RULE_INDEX_MAX];

    s.n = 5000;
    s.rules = calloc(s.n, sizeof *s.rules);
    for (size_t i = 0; i < s.n; i++) {
        static const char *const eps[] = {NULL, "/a", "/**", "/*"};
        s.rules[i].dim_id = RULE_DIM_GLOBAL;
        /* the earliest rules come last in the order buckets are read */
        s.rules[i].endpoint = dup_or_null(eps[(s.n - i) % 4]);
    }
    rule_index *ix = rule_index_build(s.rules, s.n);
    size_t n = rule_index_match(ix, s.rules, "/a", 2, NULL, 0, 0, got,
                                RL_OPS_MAX + 1);
    ck_assert_uint_eq(n, RL_OPS_MAX + 1);
    for (size_t i = 0; i < n; i++)
        ck_assert_uint_eq(got[i], i);
    /* asked for more than RULE_INDEX_MAX: that many */
    uint32_t *many = calloc(1000, sizeof *many);
    n = rule_index_match(ix, s.rules, "/a", 2, NULL, 0, 0, many, 1000);
    ck_assert_uint_eq(n, RULE_INDEX_MAX);
    for (size_t i = 0; i < n; i++)
        ck_assert_uint_eq(many[i], i);
    free(many);
    rule_index_free(ix);
    set_free(&s);
}
END_TEST

/* ---- the endpoint's bound ------------------------------------------------ */

START_TEST(endpoint_over_the_bound_is_refused)
{
    rl_limiter *lim = limiter_with(
        "[{\"rule_id\":\"g\",\"dimension\":\"user\",\"limit\":10,"
        "\"window_seconds\":60,\"match\":{\"endpoint\":\"/a/**/z\"}}]");
    char *ep = malloc(RL_ENDPOINT_MAX + 2);
    rl_request req = {.size = sizeof req, .user = "u", .endpoint = ep,
                      .cost = 1};
    rl_result res = RL_RESULT_INIT, many[2];
    rl_request reqs[2];
    int codes[2];

    memset(ep, 'x', RL_ENDPOINT_MAX + 1);
    memcpy(ep, "/a/", 3);
    memcpy(ep + RL_ENDPOINT_MAX - 2, "/z", 2);
    ep[RL_ENDPOINT_MAX] = '\0'; /* exactly the bound: matched */
    ck_assert_int_eq(rl_check(lim, &req, &res), RL_OK);
    ck_assert_str_eq(res.rule_id, "g");
    ep[RL_ENDPOINT_MAX] = 'z';
    ep[RL_ENDPOINT_MAX + 1] = '\0'; /* one byte over */
    ck_assert_int_eq(rl_check(lim, &req, &res), RL_EINVAL);
    ck_assert_msg(strstr(rl_errmsg(lim), "endpoint: longer than 2048"),
                  "%s", rl_errmsg(lim));
    reqs[0] = reqs[1] = req;
    reqs[0].endpoint = "/a/b/z";
    results_init(many, 2);
    ck_assert_int_eq(rl_check_many(lim, reqs, many, codes, 2), RL_EINVAL);
    ck_assert_int_eq(codes[0], RL_OK);
    ck_assert_int_eq(codes[1], RL_EINVAL);
    free(ep);
    rl_limiter_free(lim);
}
END_TEST

static Suite *match_suite(void)
{
    Suite *s = suite_create("match");
    TCase *tc = tcase_create("match");
    /* The random comparisons with the reference implementations, CPU-bound
     * (minutes under memcheck): a case of their own, which
     * tests/valgrind.sh leaves out (CK_RUN_CASE=match); the matcher and
     * the index run under memcheck through fuzz_run and check_rules. */
    TCase *random = tcase_create("random");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, index_keeps_the_first_matches_in_rule_order);
    tcase_add_test(tc, endpoint_over_the_bound_is_refused);
    suite_add_tcase(s, tc);
    tcase_set_timeout(random, 120);
    tcase_add_test(random, glob_matches_as_the_dynamic_programme_did);
    tcase_add_test(random, glob_matches_long_patterns);
    tcase_add_test(random, index_matches_as_the_walk_did);
    suite_add_tcase(s, random);
    return s;
}

int main(void)
{
    return run_suite(match_suite());
}
