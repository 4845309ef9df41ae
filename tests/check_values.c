/*
 * check_values.c -- per-value rules, "replaces" and "unlimited" (issue 25
 * section 3, src/rules/rule_values.c).  What the parser refuses and with
 * which message; what the canonical writer gives back; the precedence
 * through rl_check() and rl_allow() on the memory store (a partner's key
 * at 10x, an allow-list with no limit, an explicit replacement, dry-run
 * overrides, slots); the value index beside a plain walk over every rule
 * on random sets and requests; 5000 per-customer overrides each found.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rule_index.h"
#include "rule_json.h"
#include "rule_values.h"
#include "ruleset.h"
#include "store.h"
#include "testutil.h"

#define GEN "{\"rule_id\":\"gen\",\"dimension\":\"api_key\",\"limit\":2," \
            "\"window_seconds\":60}"

/* ---- parse and validation errors --------------------------------------- */

static void refused(const char *json, const char *needle)
{
    rl_ruleset *rs = NULL;
    char err[256] = "";
    int rc = ruleset_parse(json, strlen(json), 1, &rs, err, sizeof err);

    ck_assert_msg(rc == RL_ERULE, "%s: rc %d (%s)", json, rc, err);
    ck_assert_msg(strstr(err, needle), "\"%s\" not in \"%s\"", needle, err);
    assert_clean_text(err, NULL);
}

START_TEST(contradictions_are_refused_with_a_reason)
{
    static const char *const cases[][2] = {
        {"[{\"rule_id\":\"a\",\"dimension\":\"global\",\"match\":{\"value\":"
         "\"x\"},\"limit\":1,\"window_seconds\":1}]",
         "match.value: not with dimension \"global\""},
        {"[{\"rule_id\":\"a\",\"dimension\":\"user\",\"match\":{\"value\":"
         "\"**\"},\"limit\":1,\"window_seconds\":1}]",
         "match.value[0]: \"**\" matches every value"},
        {"[{\"rule_id\":\"a\",\"dimension\":\"user\",\"match\":{\"value\":"
         "[]},\"limit\":1,\"window_seconds\":1}]",
         "match.value: must list 1..100000 strings, lists 0"},
        {"[{\"rule_id\":\"a\",\"dimension\":\"user\",\"match\":{\"value\":"
         "7},\"limit\":1,\"window_seconds\":1}]",
         "match.value: must be a string or an array of strings"},
        {"[{\"rule_id\":\"a\",\"dimension\":\"user\",\"match\":{\"value\":"
         "[\"ok\",\"a\\u0001\"]},\"limit\":1,\"window_seconds\":1}]",
         "match.value[1]: control byte at 1"},
        {"[" GEN ",{\"rule_id\":\"a\",\"dimension\":\"api_key\",\"replaces\":"
         "\"nope\",\"limit\":1,\"window_seconds\":1}]",
         "rules[1]: replaces: rule \"a\" replaces \"nope\", which is not in the set"},
        {"[{\"rule_id\":\"a\",\"dimension\":\"user\",\"replaces\":\"b\","
         "\"limit\":1,\"window_seconds\":1},{\"rule_id\":\"b\",\"dimension\":"
         "\"user\",\"replaces\":[\"c\"],\"limit\":1,\"window_seconds\":1},"
         "{\"rule_id\":\"c\",\"dimension\":\"user\",\"replaces\":\"a\","
         "\"limit\":1,\"window_seconds\":1}]",
         "\"a\" leads back to \"c\" (a cycle)"},
        {"[{\"rule_id\":\"a\",\"dimension\":\"user\",\"replaces\":\"a\","
         "\"limit\":1,\"window_seconds\":1}]",
         "replaces: \"a\" is the rule itself"},
        {"[{\"rule_id\":\"a\",\"dimension\":\"user\",\"replaces\":\"b c\","
         "\"limit\":1,\"window_seconds\":1}]", "replaces[0]: must be a rule_id"},
        {"[{\"rule_id\":\"a\",\"dimension\":\"user\",\"match\":{\"value\":"
         "\"k\"},\"unlimited\":true,\"limit\":5}]",
         "unlimited: not with limit (an unlimited rule charges nothing)"},
        {"[{\"rule_id\":\"a\",\"dimension\":\"user\",\"match\":{\"value\":"
         "\"k\"},\"unlimited\":true,\"algorithm\":\"gcra\"}]",
         "unlimited: not with algorithm"},
        {"[{\"rule_id\":\"a\",\"dimension\":\"user\",\"match\":{\"value\":"
         "\"k\"},\"unlimited\":true,\"mode\":\"log\"}]",
         "unlimited: not with mode \"log\""},
        {"[{\"rule_id\":\"a\",\"dimension\":\"user\",\"unlimited\":true}]",
         "unlimited: needs match.value or replaces"},
        {"[{\"rule_id\":\"a\",\"dimension\":\"user\",\"replaces\":[],"
         "\"unlimited\":true}]", "unlimited: replaces lists no rule"},
        {"[{\"rule_id\":\"a\",\"dimension\":\"user\",\"match\":{\"value\":"
         "\"k\"},\"replaces\":[],\"unlimited\":true}]",
         "unlimited: replaces lists no rule"},
        {"[{\"rule_id\":\"a\",\"dimension\":\"user\",\"match\":{\"value\":"
         "\"k\"},\"unlimited\":1}]", "unlimited: must be true or false"},
        {"[{\"rule_id\":\"a\",\"dimension\":\"user\",\"match\":{\"value\":"
         "\"k\"},\"unlimited\":false}]", "limit: required"},
        {"[" GEN ",{\"rule_id\":\"a\",\"dimension\":\"api_key\",\"replaces\":"
         "\"gen\",\"mode\":\"log\",\"limit\":1,\"window_seconds\":1}]",
         "replaces: not with mode \"log\""},
    };

    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        refused(cases[i][0], cases[i][1]);
}
END_TEST

/* The set's canonical JSON (rule_json.c) is what was given, in its order. */
START_TEST(new_members_round_trip)
{
    static const char *const rules[] = {
        "{\"rule_id\":\"p\",\"dimension\":\"api_key\",\"match\":{\"endpoint\":"
        "\"/v1/**\",\"value\":\"partner-*\"},\"replaces\":\"gen\",\"limit\":"
        "20,\"window_seconds\":60,\"algorithm\":\"sliding_window\",\"mode\":"
        "\"enforce\",\"failure_mode\":\"fallback\",\"version\":1}",
        "{\"rule_id\":\"v\",\"dimension\":\"api_key\",\"match\":{\"value\":"
        "[\"vip-1\",\"vip-2\"]},\"replaces\":[],\"limit\":3,"
        "\"window_seconds\":1,\"burst\":3,\"algorithm\":\"gcra\","
        "\"mode\":\"enforce\",\"failure_mode\":\"open\",\"version\":3}",
        "{\"rule_id\":\"w\",\"dimension\":\"api_key\",\"match\":{\"value\":"
        "[\"vip-1\",\"vip-2\"]},\"unlimited\":true,\"version\":1}",
        "{\"rule_id\":\"u\",\"dimension\":\"api_key\",\"replaces\":[\"gen\","
        "\"gen2\"],\"unlimited\":true,\"version\":1}",
    };
    char text[2048];

    for (size_t i = 0; i < sizeof rules / sizeof *rules; i++) {
        rl_ruleset *rs = NULL;
        char err[256], *out;
        json_t *j;
        snprintf(text, sizeof text, "[" GEN ",%s,%s]", rules[i],
                 "{\"rule_id\":\"gen2\",\"dimension\":\"api_key\","
                 "\"limit\":1,\"window_seconds\":1}");
        ck_assert_msg(ruleset_parse(text, strlen(text), 1, &rs, err,
                                    sizeof err) == RL_OK, "%s", err);
        j = rule_to_json(&rs->rules[1]);
        out = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
        ck_assert_str_eq(out, rules[i]);
        free(out);
        json_decref(j);
        ruleset_free(rs);
    }
}
END_TEST

/* A set without the new members writes back what it wrote before. */
START_TEST(old_rules_write_back_unchanged)
{
    const char *rule = "{\"rule_id\":\"gen\",\"dimension\":\"api_key\","
        "\"match\":{\"endpoint\":\"/a\",\"tier\":\"free\"},\"limit\":2,"
        "\"window_seconds\":60,\"algorithm\":\"sliding_window\",\"mode\":"
        "\"enforce\",\"failure_mode\":\"fallback\",\"version\":1}";
    char text[1024], err[256], *out;
    rl_ruleset *rs = NULL;
    json_t *j;

    snprintf(text, sizeof text, "[%s]", rule);
    ck_assert_int_eq(ruleset_parse(text, strlen(text), 1, &rs, err,
                                   sizeof err), RL_OK);
    ck_assert_ptr_null(rs->values); /* the request path pays nothing */
    j = rule_to_json(&rs->rules[0]);
    out = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    ck_assert_str_eq(out, rule);
    free(out);
    json_decref(j);
    ruleset_free(rs);
}
END_TEST

/* ---- precedence through the public API --------------------------------- */

static rl_result check_key(rl_limiter *lim, const char *key, const char *ep)
{
    rl_request req = {.size = sizeof req, .api_key = key, .endpoint = ep,
                      .cost = 1};
    rl_result res = RL_RESULT_INIT;

    ck_assert_msg(rl_check(lim, &req, &res) == RL_OK, "%s", rl_errmsg(lim));
    return res;
}

/* Allowed checks of key before the first denial (at most cap). */
static int admitted(rl_limiter *lim, const char *key, const char *ep,
                    int cap, char *decider)
{
    int n = 0;

    for (; n < cap; n++) {
        rl_result res = check_key(lim, key, ep);
        if (!res.allowed) {
            strcpy(decider, res.rule_id);
            break;
        }
    }
    return n;
}

/* The limiter's Prometheus text (a static buffer). */
static const char *metrics_text(rl_limiter *lim)
{
    static char buf[1 << 16];
    size_t len = 0;

    ck_assert_int_eq(rl_metrics_write(lim, buf, sizeof buf - 1, &len), RL_OK);
    buf[len] = '\0';
    return buf;
}

#define V(id, val, rest)                                                    \
    "{\"rule_id\":\"" id "\",\"dimension\":\"api_key\",\"match\":"          \
    "{\"value\":" val "}," rest "}"

START_TEST(most_specific_replaces_and_unlimited)
{
    rl_limiter *lim = limiter_with(
        "[" GEN ","
        V("partner", "\"partner-*\"", "\"limit\":20,\"window_seconds\":60") ","
        V("big", "\"partner-big-*\"", "\"limit\":30,\"window_seconds\":60") ","
        V("acme", "\"partner-acme\"",
          "\"replaces\":\"gen\",\"limit\":5,\"window_seconds\":60") ","
        V("vip", "[\"vip-1\",\"vip-2\"]", "\"unlimited\":true") "]");
    char who[RL_RULE_ID_MAX + 1] = "";
    rl_result res;

    ck_assert_int_eq(admitted(lim, "someone", NULL, 100, who), 2);
    ck_assert_str_eq(who, "gen");
    /* partner-* stands in for gen (its slot, less specific). */
    ck_assert_int_eq(admitted(lim, "partner-x", NULL, 100, who), 20);
    ck_assert_str_eq(who, "partner");
    /* The longer glob is the more specific: it replaces partner-* too. */
    ck_assert_int_eq(admitted(lim, "partner-big-1", NULL, 100, who), 30);
    ck_assert_str_eq(who, "big");
    /* acme names what it replaces (gen); partner-* still applies (it is
     * less specific than acme, and acme's replaces does not name it), so
     * the tighter of 5 and 20 decides. */
    ck_assert_int_eq(admitted(lim, "partner-acme", NULL, 100, who), 5);
    ck_assert_str_eq(who, "acme");
    /* The allow-list: no limit, nothing charged, no rule reported. */
    for (int i = 0; i < 50; i++) {
        res = check_key(lim, "vip-2", NULL);
        ck_assert(res.allowed);
        ck_assert_uint_eq(res.flags & RL_FLAG_NO_RULE, RL_FLAG_NO_RULE);
    }
    ck_assert_int_eq(rl_allow(lim, "api_key:vip-1", "vip", 1, &res), RL_OK);
    ck_assert(res.allowed);
    /* Its gauges say no limit, not a limit of 0. */
    ck_assert_ptr_nonnull(strstr(metrics_text(lim),
                                 "ratelimit_rule_limit{rule=\"vip\"} +Inf\n"));
    /* A value the allow-list does not hold is the general rule's. */
    ck_assert_int_eq(admitted(lim, "vip-3", NULL, 100, who), 2);
    rl_limiter_free(lim);
}
END_TEST

START_TEST(slots_chains_and_dry_runs)
{
    rl_limiter *lim = limiter_with(
        "[" GEN ","
        "{\"rule_id\":\"gen-a\",\"dimension\":\"api_key\",\"match\":"
        "{\"endpoint\":\"/a\"},\"limit\":3,\"window_seconds\":60},"
        V("p", "\"p-*\"", "\"limit\":10,\"window_seconds\":60") ","
        V("dry", "\"d-2\"", "\"mode\":\"log\",\"limit\":50,"
          "\"window_seconds\":60") ","
        V("same1", "\"s-*\"", "\"limit\":7,\"window_seconds\":60") ","
        V("same2", "\"*-1\"", "\"limit\":4,\"window_seconds\":60") ","
        "{\"rule_id\":\"c1\",\"dimension\":\"user\",\"limit\":1,"
        "\"window_seconds\":60},"
        "{\"rule_id\":\"c2\",\"dimension\":\"user\",\"replaces\":\"c1\","
        "\"limit\":2,\"window_seconds\":60},"
        "{\"rule_id\":\"c3\",\"dimension\":\"user\",\"replaces\":\"c2\","
        "\"limit\":3,\"window_seconds\":60}]");
    char who[RL_RULE_ID_MAX + 1] = "";
    rl_request req = {.size = sizeof req, .user = "u", .cost = 1};
    rl_result res = RL_RESULT_INIT;
    int n = 0;

    /* On /a, gen-a is of another slot (its endpoint): p does not replace
     * it, so 3 decides there. */
    ck_assert_int_eq(admitted(lim, "p-1", "/a", 100, who), 3);
    ck_assert_str_eq(who, "gen-a");
    /* A dry-run override replaces nothing: gen keeps deciding. */
    ck_assert_int_eq(admitted(lim, "d-2", NULL, 100, who), 2);
    ck_assert_str_eq(who, "gen");
    /* Two globs of equal specificity (2 fixed bytes each) both apply. */
    ck_assert_int_eq(admitted(lim, "s-1", NULL, 100, who), 4);
    ck_assert_str_eq(who, "same2");
    /* c3 replaces c2, which replaces c1: only c3 charges. */
    while (n < 10 && rl_check(lim, &req, &res) == RL_OK && res.allowed)
        n++;
    ck_assert_int_eq(n, 3);
    ck_assert_str_eq(res.rule_id, "c3");
    rl_limiter_free(lim);
}
END_TEST

/* rl_check_many() takes the same path; a request that per-value rules
 * make match more than RL_OPS_MAX rules is refused as any other. */
START_TEST(batches_and_the_bound)
{
    rl_limiter *lim = limiter_with(
        "[" GEN ","
        V("partner", "\"partner-*\"", "\"limit\":20,\"window_seconds\":60") ","
        V("vip", "\"vip-1\"", "\"unlimited\":true") "]");
    rl_request reqs[3] = {
        {.size = sizeof(rl_request), .api_key = "someone", .cost = 1},
        {.size = sizeof(rl_request), .api_key = "partner-x", .cost = 1},
        {.size = sizeof(rl_request), .api_key = "vip-1", .cost = 1}};
    rl_result res[3];
    int codes[3];
    size_t room = 64 * 160, len;
    char *text = malloc(room);
    rl_request k = {.size = sizeof k, .api_key = "k", .cost = 1};

    results_init(res, 3);
    ck_assert_int_eq(rl_check_many(lim, reqs, res, codes, 3), RL_OK);
    ck_assert_str_eq(res[0].rule_id, "gen");
    ck_assert_int_eq(res[0].limit, 2);
    ck_assert_str_eq(res[1].rule_id, "partner");
    ck_assert_int_eq(res[1].limit, 20);
    ck_assert(res[2].allowed && (res[2].flags & RL_FLAG_NO_RULE));
    rl_limiter_free(lim);

    /* 33 additive overrides of one value: one too many for a request. */
    len = (size_t)snprintf(text, room, "[" GEN);
    for (int i = 0; i < RL_OPS_MAX + 1; i++)
        len += (size_t)snprintf(text + len, room - len,
                                ",{\"rule_id\":\"o%d\",\"dimension\":"
                                "\"api_key\",\"match\":{\"value\":\"k\"},"
                                "\"replaces\":[],\"limit\":9,"
                                "\"window_seconds\":60}", i);
    snprintf(text + len, room - len, "]");
    lim = limiter_with(text);
    ck_assert_int_eq(rl_check(lim, &k, &res[0]), RL_ERULE);
    ck_assert_ptr_nonnull(strstr(rl_errmsg(lim), "more than 32 rules"));
    k.api_key = "other"; /* gen alone */
    ck_assert_int_eq(rl_check(lim, &k, &res[0]), RL_OK);
    rl_limiter_free(lim);
    free(text);
}
END_TEST

/* Thousands of per-customer contracts: each customer finds its own. */
START_TEST(thousands_of_overrides_each_found)
{
    enum { N = 5000 };
    size_t room = 128 + (size_t)N * 110, len;
    char *text = malloc(room), key[32], want[32], who[RL_RULE_ID_MAX + 1];
    rl_limiter *lim;

    len = (size_t)snprintf(text, room, "[" GEN);
    for (int i = 0; i < N; i++)
        len += (size_t)snprintf(text + len, room - len,
                                ",{\"rule_id\":\"c%d\",\"dimension\":"
                                "\"api_key\",\"match\":{\"value\":\"cust-%d\"}"
                                ",\"limit\":%d,\"window_seconds\":60}", i, i,
                                3 + i % 5);
    snprintf(text + len, room - len, "]");
    lim = limiter_with(text);
    for (int i = 0; i < N; i += 97) {
        snprintf(key, sizeof key, "cust-%d", i);
        snprintf(want, sizeof want, "c%d", i);
        ck_assert_int_eq(admitted(lim, key, NULL, 100, who), 3 + i % 5);
        ck_assert_str_eq(who, want);
    }
    rl_limiter_free(lim);
    free(text);
}
END_TEST

/* ---- the index beside a plain walk ------------------------------------- */

static uint64_t rng = 0x2545f4914f6cdd1dULL;

static unsigned rnd(unsigned n)
{
    return (unsigned)(xorshift64(&rng) % n);
}

static const char *const pool[] = {"a", "ab", "abc", "b", "ba", "abd", "cab"};
static const char *const pats[] = {"a", "ab", "abc", "b", "a*", "ab*", "*b",
                                   "a*c", "*a*", "ba", "c*", "*"};
static const char *const dims[] = {"user", "api_key", "tenant"};
static const char *const eps[] = {NULL, "/x", "/x/**", "/y"};

/* A random set: general rules and overrides, replaces only forward in
 * the set's order (so never a cycle), some unlimited, some dry runs. */
static char *rand_set(size_t n)
{
    size_t room = 512 * n + 16, len = 1;
    char *t = malloc(room);

    t[0] = '[';
    for (size_t i = 0; i < n; i++) {
        const char *ep = eps[rnd(4)];
        int unlimited = 0, nval = rnd(3) ? 1 + (int)rnd(3) : 0;
        size_t start = len;
        len += (size_t)snprintf(t + len, room - len,
                                "%s{\"rule_id\":\"r%zu\",\"dimension\":\"%s\","
                                "\"match\":{", i ? "," : "", i, dims[rnd(3)]);
        if (ep)
            len += (size_t)snprintf(t + len, room - len,
                                    "\"endpoint\":\"%s\"%s", ep,
                                    nval ? "," : "");
        for (int k = 0; k < nval; k++) {
            const char *p = pats[rnd(11)]; /* never "*" alone */
            len += (size_t)snprintf(t + len, room - len, "%s\"%s\"",
                                    k ? "," : "\"value\":[", p);
        }
        len += (size_t)snprintf(t + len, room - len, "%s}",
                                nval ? "]" : "");
        if (i && rnd(4) == 0) {
            len += (size_t)snprintf(t + len, room - len,
                                    ",\"replaces\":[\"r%u\"]",
                                    rnd((unsigned)i));
            unlimited = rnd(3) == 0;
        } else if (nval) {
            unlimited = rnd(5) == 0;
        }
        if (unlimited)
            len += (size_t)snprintf(t + len, room - len,
                                    ",\"unlimited\":true}");
        else
            len += (size_t)snprintf(t + len, room - len,
                                    ",\"limit\":5,\"window_seconds\":60%s}",
                                    !strstr(t + start, "replaces") &&
                                    rnd(6) == 0 ? ",\"mode\":\"log\"" : "");
    }
    snprintf(t + len, room - len, "]");
    return t;
}

/* The specificity rule r matches value v at (0 without match.value),
 * or -1 if none of its patterns matches, by the definition in
 * rule_values.h. */
static long walk_spec(const rl_rule *r, const char *v)
{
    long best = -1;
    const char *p = r->values;

    if (!r->values)
        return 0;
    for (uint32_t i = 0; i < r->nvalues; i++, p += strlen(p) + 1) {
        long stars = 0, s;
        for (const char *q = p; *q; q++)
            stars += *q == '*';
        if (!rule_value_match(p, v, strlen(v)))
            continue;
        s = stars ? 1 + (long)strlen(p) - stars : 100000 + (long)strlen(p);
        if (s > best)
            best = s;
    }
    return best;
}

static int eq(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

/* Every rule in order, then the replacements, as rule_values.h says. */
static size_t walk(const rl_ruleset *rs, const char *ep, uint64_t present,
                   const char *const *val, uint32_t *out)
{
    long spec[64];
    uint32_t m[64];
    int gone[64] = {0};
    size_t nm = 0, n = 0;

    for (size_t i = 0; i < rs->n; i++) {
        const rl_rule *r = &rs->rules[i];
        if (!(present >> r->dim_id & 1) || !rule_matches(r, ep, NULL) ||
            (spec[nm] = walk_spec(r, val[r->dim_id])) < 0)
            continue;
        m[nm++] = (uint32_t)i;
    }
    for (size_t y = 0; y < nm; y++) {
        const rl_rule *ry = &rs->rules[m[y]];
        if (ry->mode != RL_MODE_ENFORCE)
            continue;
        for (size_t x = 0; x < nm; x++) {
            const rl_rule *rx = &rs->rules[m[x]];
            const char *id = ry->replaces;
            for (uint32_t k = 0; k < ry->nreplaces; k++, id += strlen(id) + 1)
                gone[x] |= strcmp(id, rx->id) == 0;
            if (!ry->has_replaces && ry->values && spec[x] < spec[y] &&
                rx->dim_id == ry->dim_id && eq(rx->endpoint, ry->endpoint) &&
                eq(rx->tier, ry->tier))
                gone[x] = 1;
        }
    }
    for (size_t x = 0; x < nm; x++)
        if (!gone[x] && !rs->rules[m[x]].unlimited)
            out[n++] = m[x];
    return n;
}

START_TEST(index_applies_as_the_walk_does)
{
    static const char *const reqeps[] = {NULL, "/x", "/x/1", "/y", "/z"};

    for (int set = 0; set < 300; set++) {
        char *text = rand_set(1 + rnd(40)), err[256];
        rl_ruleset *rs = NULL;
        int rc = ruleset_parse(text, strlen(text), 1, &rs, err, sizeof err);

        ck_assert_msg(rc == RL_OK, "%s: %s", text, err);
        for (int q = 0; q < 200; q++) {
            const char *val[RULESET_DIMS_MAX] = {NULL}, *cv[3] = {NULL};
            const char *ep = reqeps[rnd(5)], *cep = ep;
            size_t vlen[RULESET_DIMS_MAX] = {0};
            char buf[3][64], ebuf[64];
            uint32_t got[RULE_INDEX_MAX], want[64];
            uint64_t present = 0;
            size_t ng, nw;
            for (size_t d = 0; d < 3; d++) {
                int id = d < 2 ? (int)d
                               : ruleset_dim_id(rs, "tenant", 6,
                                                ruleset_dim_hash("tenant", 6));
                if (id < 0 || rnd(4) == 0)
                    continue;
                present |= (uint64_t)1 << id;
                val[id] = pool[rnd(7)];
                /* Half of them counted, bytes after them that must not
                 * be read (rl_request's lengths). */
                if (rnd(2)) {
                    vlen[id] = strlen(val[id]);
                    snprintf(buf[d], sizeof buf[d], "%s%s", val[id],
                             rnd(2) ? "-1" : "*x");
                    cv[d] = buf[d];
                }
            }
            if (ep && rnd(2)) {
                snprintf(ebuf, sizeof ebuf, "%s%s", ep, rnd(2) ? "/1" : "x");
                cep = ebuf;
            }
            nw = walk(rs, ep, present, val, want);
            for (size_t d = 0; d < 3; d++) {
                int id = d < 2 ? (int)d
                               : ruleset_dim_id(rs, "tenant", 6,
                                                ruleset_dim_hash("tenant", 6));
                if (cv[d])
                    val[id] = cv[d];
            }
            ng = rule_index_match(rs->match, rs->rules, cep,
                                  ep ? strlen(ep) : 0, NULL, 0, present, got,
                                  RULE_INDEX_MAX);
            ng = rule_values_apply(rs->values, rs->rules, cep,
                                   ep ? strlen(ep) : 0, NULL, 0, present, val,
                                   vlen, got, ng);
            ck_assert_msg(ng == nw, "set %d req %d: %zu rules, walk %zu (%s)",
                          set, q, ng, nw, text);
            for (size_t i = 0; i < nw; i++)
                ck_assert_uint_eq(got[i], want[i]);
        }
        ruleset_free(rs);
        free(text);
    }
}
END_TEST

/* rule_value_match beside a plain recursive matcher. */
static int glob_ref(const char *p, const char *v)
{
    if (!*p)
        return !*v;
    if (*p == '*')
        return glob_ref(p + 1, v) || (*v && glob_ref(p, v + 1));
    return *v == *p && glob_ref(p + 1, v + 1);
}

START_TEST(value_glob_matches_as_the_recursion)
{
    static const char alpha[] = "ab*";
    char p[12], v[12];

    for (int i = 0; i < 200000; i++) {
        size_t np = rnd(8), nv = rnd(9);
        for (size_t k = 0; k < np; k++)
            p[k] = alpha[rnd(3)];
        for (size_t k = 0; k < nv; k++)
            v[k] = alpha[rnd(2)];
        p[np] = v[nv] = '\0';
        ck_assert_msg(rule_value_match(p, v, nv) == glob_ref(p, v),
                      "\"%s\" on \"%s\"", p, v);
    }
}
END_TEST

static Suite *values_suite(void)
{
    Suite *s = suite_create("values");
    TCase *tc = tcase_create("values");
    TCase *random = tcase_create("random");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, contradictions_are_refused_with_a_reason);
    tcase_add_test(tc, new_members_round_trip);
    tcase_add_test(tc, old_rules_write_back_unchanged);
    tcase_add_test(tc, most_specific_replaces_and_unlimited);
    tcase_add_test(tc, slots_chains_and_dry_runs);
    tcase_add_test(tc, thousands_of_overrides_each_found);
    tcase_add_test(tc, batches_and_the_bound);
    suite_add_tcase(s, tc);
    tcase_set_timeout(random, 300);
    tcase_add_test(random, index_applies_as_the_walk_does);
    tcase_add_test(random, value_glob_matches_as_the_recursion);
    suite_add_tcase(s, random);
    return s;
}

int main(void)
{
    return run_suite(values_suite());
}
