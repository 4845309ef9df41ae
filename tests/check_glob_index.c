/*
 * check_glob_index.c -- the glob rules' trie (src/rules/glob_index.c,
 * issue 24 section 4) against the plain walk: rule_matches() on every rule
 * in order, as the request path did before any index.  Random rule sets
 * heavy in globs built from path segments that meet (literals, STAR,
 * STARSTAR whole or inside a segment, '?' and partial segments, trailing
 * slashes, tiers), random endpoints from the same segments: the same rules
 * in the same order, for each of several `max`.  Seeded, so every run
 * draws the same cases.  Beside it, the cases the trie hands back to the
 * walk (an endpoint holding more nodes than it keeps) and the ones it
 * reports twice (a STARSTAR node meeting a tail at two places).
 * (STAR is the asterisk, which a C comment cannot hold beside a slash.)
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "glob_index.h"
#include "pattern.h"
#include "rule.h"
#include "rule_index.h"
#include "rule_walk.h"
#include "store.h"
#include "testutil.h"

#define SETS 400         /* random sets; GLOB_SETS=N sets another number
                            (tests/valgrind.sh: a tenth, the same paths) */
#define REQUESTS 250
#define NDIMS 3

static uint64_t rng = 0x2545f4914f6cdd1dULL;

static unsigned rnd(unsigned n)
{
    return (unsigned)(xorshift64(&rng) % n);
}

static const char *pick_of(const char *const *v, size_t n)
{
    return v[rnd((unsigned)n)];
}
#define PICK(v) pick_of(v, sizeof v / sizeof *v)

/* Segments an endpoint is made of: they meet the patterns' below. */
static const char *const words[] = {"", "api", "v1", "v2", "users", "u",
                                    "a", "ab", "x.json", "v12", "b",
                                    "users.json", "*", "?"};

/* Pattern segments: literals, wildcards, second-stage and tails. */
static const char *const pats[] = {
    "api", "v1", "users", "a", "b", "", "x.json", "*", "*", "**", "**",
    "v?", "?", "*.json", "a*", "*b", "u*s*", "??", "a**", "**.json",
    "v**1", "*?"};

static void join(char *buf, size_t room, const char *const *pool,
                 size_t npool, unsigned segs, int lead)
{
    size_t n = 0;

    buf[0] = '\0';
    for (unsigned i = 0; i < segs; i++) {
        const char *w = pick_of(pool, npool);
        if (n + strlen(w) + 2 > room)
            break;
        if (i || lead)
            buf[n++] = '/';
        memcpy(buf + n, w, strlen(w) + 1);
        n += strlen(w);
    }
}

static void rand_endpoint(char *buf, size_t room)
{
    join(buf, room, words, sizeof words / sizeof *words, 1 + rnd(6),
         rnd(12) != 0);
    if (!buf[0])
        strcpy(buf, "/");
}

/* A valid pattern with at least one wildcard, or NULL for none. */
static char *rand_pattern(void)
{
    char p[RL_PATTERN_MAX + 1], why[128];

    for (;;) {
        join(p, 80, pats, sizeof pats / sizeof *pats, 1 + rnd(6),
             rnd(10) != 0);
        if (strpbrk(p, "*?") && pattern_check(p, why, sizeof why) == 0)
            return strdup(p);
    }
}

static void rand_set(set *s, size_t n)
{
    static const char *const tiers[] = {NULL, NULL, NULL, "free", "pro"};
    char ep[96];

    s->rules = calloc(n, sizeof *s->rules);
    s->n = n;
    for (size_t i = 0; i < n; i++) {
        rl_rule *r = &s->rules[i];
        const char *t = PICK(tiers);
        unsigned kind = rnd(10);
        snprintf(r->id, sizeof r->id, "r%zu", i);
        r->dim_id = (int)rnd(NDIMS + 1) - 1; /* -1: RULE_DIM_GLOBAL */
        r->tier = t ? strdup(t) : NULL;
        if (kind == 0) { /* an exact endpoint */
            rand_endpoint(ep, sizeof ep);
            r->endpoint = strdup(ep);
        } else if (kind == 1) { /* a prefix */
            rand_endpoint(ep, sizeof ep - 4);
            strcat(ep, ep[strlen(ep) - 1] == '/' ? "**" : "/**");
            r->endpoint = strdup(ep);
        } else { /* a glob */
            r->endpoint = rand_pattern();
        }
    }
}

/* The index's answer is the walk's, rule for rule. */
static size_t same_as_walk(const set *s, const rule_index *ix,
                           const char *ep, const char *tier,
                           uint64_t present, size_t max)
{
    uint32_t want[RULE_INDEX_MAX], got[RULE_INDEX_MAX];
    size_t nw = walk(s, ep, tier, present, want, max);
    size_t ng = rule_index_match(ix, s->rules, ep, strlen(ep), tier,
                                 tier ? strlen(tier) : 0, present, got, max);

    ck_assert_msg(nw == ng, "\"%s\" tier %s max %zu: walk %zu, index %zu",
                  ep, tier ? tier : "(none)", max, nw, ng);
    for (size_t i = 0; i < nw; i++)
        ck_assert_msg(got[i] == want[i], "\"%s\": #%zu is %u, not %u (%s)",
                      ep, i, got[i], want[i], s->rules[want[i]].endpoint);
    return nw;
}

START_TEST(glob_index_matches_as_the_walk_does)
{
    static const char *const tiers[] = {NULL, "free", "pro", "gold"};
    static const size_t maxes[] = {1, 2, RL_OPS_MAX + 1, RULE_INDEX_MAX};
    long hits = 0, requests = 0;
    int sets = getenv("GLOB_SETS") ? atoi(getenv("GLOB_SETS")) : SETS;

    for (int k = 0; k < sets; k++) {
        set s;
        char ep[96];
        rand_set(&s, 1 + rnd(k % 4 == 3 ? 2000 : 60));
        rule_index *ix = rule_index_build(s.rules, s.n);
        ck_assert_ptr_nonnull(ix);
        for (int q = 0; q < REQUESTS; q++, requests++) {
            rand_endpoint(ep, sizeof ep);
            const char *tier = tiers[rnd(4)];
            size_t max = maxes[rnd(4)];
            hits += (long)same_as_walk(&s, ix, ep, tier, rnd(1u << NDIMS),
                                       max);
        }
        rule_index_free(ix);
        set_free(&s);
    }
    /* the generator must make the answers various enough to test */
    ck_assert_msg(hits > requests && hits < 50 * requests,
                  "%ld matches in %ld requests", hits, requests);
}
END_TEST

/* A hand-made set of every segment kind, each endpoint's answer known. */
START_TEST(glob_index_segment_kinds)
{
    static const char *const eps[] = {
        "/api/*/users/*", "/api/**/users", "/v?/x", "/files/*.json",
        "/a/b**c", "*/x", "**/x", "/api/**/", "/t/*"};
    static const struct {
        const char *ep;
        unsigned mask; /* bit i: eps[i] matches */
    } cases[] = {
        {"/api/v1/users/7", 1u << 0},
        {"/api/v1/users/", 1u << 0 | 1u << 7},
        {"/api/v1/users", 1u << 1},
        {"/api/users", 0},
        {"/api//users", 1u << 1},
        {"/api/a/b/c/users", 1u << 1},
        {"/v1/x", 1u << 2 | 1u << 6},
        {"/v12/x", 1u << 6},
        {"/files/a.json", 1u << 3},
        {"/files/a/b.json", 0},
        {"/a/bc", 1u << 4},
        {"/a/b/q/c", 1u << 4},
        {"/x", 1u << 5 | 1u << 6},
        {"/api/q/", 1u << 7},
        {"/t/", 1u << 8},
        {"/t", 0},
    };
    set s = {.rules = calloc(9, sizeof(rl_rule)), .n = 9};

    for (size_t i = 0; i < s.n; i++) {
        s.rules[i].dim_id = RULE_DIM_GLOBAL;
        s.rules[i].endpoint = strdup(eps[i]);
    }
    rule_index *ix = rule_index_build(s.rules, s.n);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        uint32_t got[RULE_INDEX_MAX];
        size_t n = rule_index_match(ix, s.rules, cases[c].ep,
                                    strlen(cases[c].ep), NULL, 0, 0, got,
                                    RULE_INDEX_MAX);
        unsigned mask = 0;
        for (size_t i = 0; i < n; i++)
            mask |= 1u << got[i];
        ck_assert_msg(mask == cases[c].mask, "\"%s\": %#x, want %#x",
                      cases[c].ep, mask, cases[c].mask);
        same_as_walk(&s, ix, cases[c].ep, NULL, 0, RULE_INDEX_MAX);
    }
    rule_index_free(ix);
    set_free(&s);
}
END_TEST

/* 100 partial segments that all match one endpoint segment: more nodes
 * at once than the trie's walk keeps, so the index walks the globs. */
START_TEST(glob_index_hands_a_crowd_to_the_walk)
{
    set s = {.rules = calloc(100, sizeof(rl_rule)), .n = 100};
    char ep[400] = "/", pat[32];
    uint32_t got[RULE_INDEX_MAX];

    for (size_t i = 0; i < s.n; i++) {
        snprintf(pat, sizeof pat, "/*%zu*/z", i);
        s.rules[i].dim_id = RULE_DIM_GLOBAL;
        s.rules[i].endpoint = strdup(pat);
        snprintf(ep + strlen(ep), sizeof ep - strlen(ep), "%zu", i);
    }
    strcat(ep, "/z");
    rule_index *ix = rule_index_build(s.rules, s.n);
    ck_assert_int_eq(
        glob_index_match(NULL, s.rules, ep, strlen(ep), 0, NULL, NULL), 0);
    ck_assert_uint_eq(rule_index_match(ix, s.rules, ep, strlen(ep), NULL, 0, 0,
                                       got, RULE_INDEX_MAX), 100);
    for (uint32_t i = 0; i < 100; i++)
        ck_assert_uint_eq(got[i], i);
    same_as_walk(&s, ix, "/1/z", NULL, 0, RULE_INDEX_MAX);
    rule_index_free(ix);
    set_free(&s);
}
END_TEST

/* "/STARSTAR/a**" is met at every segment: the rule comes out once. */
START_TEST(glob_index_reports_a_rule_once)
{
    set s = {.rules = calloc(2, sizeof(rl_rule)), .n = 2};
    uint32_t got[RULE_INDEX_MAX];

    s.rules[0].endpoint = strdup("/**/a**");
    s.rules[1].endpoint = strdup("/**/a*");
    s.rules[0].dim_id = s.rules[1].dim_id = RULE_DIM_GLOBAL;
    rule_index *ix = rule_index_build(s.rules, s.n);
    ck_assert_uint_eq(rule_index_match(ix, s.rules, "/a/a/a/a", 8, NULL, 0, 0,
                                       got, RULE_INDEX_MAX), 2);
    ck_assert_uint_eq(got[0], 0);
    ck_assert_uint_eq(got[1], 1);
    rule_index_free(ix);
    set_free(&s);
}
END_TEST

static Suite *glob_index_suite(void)
{
    Suite *s = suite_create("glob_index");
    TCase *tc = tcase_create("glob_index");

    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, glob_index_segment_kinds);
    tcase_add_test(tc, glob_index_hands_a_crowd_to_the_walk);
    tcase_add_test(tc, glob_index_reports_a_rule_once);
    tcase_add_test(tc, glob_index_matches_as_the_walk_does);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(glob_index_suite());
}
