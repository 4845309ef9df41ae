/*
 * check_ruleset_delta.c -- the incremental parse (src/rules/ruleset_delta.c) is
 * indistinguishable from the full one: over hand-written edge cases and
 * random mutations of a set, each text parsed both ways against the same
 * set in force gives the same decision, the same rules field by field and
 * the same message (tests/ruleset_compare.h); and the cases meant to reuse
 * rules do (delta_info), so the comparisons are not all of the fallback.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "limiter.h"
#include "ratelimit.h"
#include "ruleset_compare.h"
#include "testutil.h"

/* Five rules between them giving every field, both spellings, escapes in
 * strings (R3's tier is p"r\o, R4's id is "r4" spelt in \u escapes). */
#define R0 "{\"rule_id\":\"r0\",\"dimension\":\"user\",\"limit\":10," \
           "\"window_seconds\":60}"
#define R0B "{\"rule_id\":\"r0\",\"dimension\":\"user\",\"limit\":11," \
            "\"window_seconds\":60}"
#define R1 "{\"rule_id\":\"r1\",\"dimension\":\"ip\",\"match\":{\"endpoint\":" \
           "\"/api/**\",\"tier\":\"free\"},\"limit\":5,\"window_seconds\":1," \
           "\"burst\":20,\"algorithm\":\"token_bucket\",\"mode\":\"log\","   \
           "\"failure_mode\":\"open\",\"version\":4,\"updated_at\":"         \
           "\"2026-11-29T10:00:00Z\"}"
#define R2 "{\"ruleId\":\"r2\",\"dimension\":\"api_key\",\"limit\":100,"     \
           "\"windowSeconds\":3600,\"algorithm\":\"gcra\",\"failureMode\":"  \
           "\"closed\",\"updatedAt\":\"2026-01-02T03:04:05.5+01:00\"}"
#define R3 "{\"rule_id\":\"r3\",\"dimension\":\"global\",\"match\":{\"tier\":" \
           "\"p\\\"r\\\\o\"},\"limit\":1000,\"window_seconds\":60,"            \
           "\"algorithm\":\"fixed_window\"}"
#define R4 "{\"rule_id\":\"\\u0072\\u0034\",\"dimension\":\"custom\","        \
           "\"match\":{\"endpoint\":\"/v1/*/items\"},\"limit\":7,"            \
           "\"window_seconds\":10}"
#define R5 "{\"rule_id\":\"r5\",\"dimension\":\"user\",\"limit\":3,"         \
           "\"window_seconds\":5,\"mode\":\"log\"}"
#define BAD_LIMIT "{\"rule_id\":\"bad\",\"dimension\":\"user\",\"limit\":0," \
                  "\"window_seconds\":60}"
#define BASE "{\"version\":7,\"rules\":[" R0 "," R1 "," R2 "," R3 "," R4 "]}"

static char why[CMP_MSG];

/* The set in force: `text` through the incremental parse, with nothing
 * to reuse from; it keeps its text. */
static rl_ruleset *in_force(const char *text)
{
    rl_ruleset *rs = NULL;
    char err[256];
    delta_info info;

    ck_assert_msg(ruleset_parse_delta(text, strlen(text), 1, NULL, &rs, &info,
                                      err, sizeof err) == RL_OK,
                  "%s: %s", text, err);
    ck_assert_int_eq(info.whole, 0);
    ck_assert_ptr_nonnull(rs->text);
    return rs;
}

/* text[0..len) parsed both ways against prev must be indistinguishable;
 * what the incremental parse did. */
static delta_info same_len(const char *text, size_t len,
                           const rl_ruleset *prev)
{
    delta_info info;

    ck_assert_msg(delta_compare(text, len, prev, &info, NULL, why) == 0,
                  "%.300s: %s", text, why);
    return info;
}

static delta_info same(const char *text, const rl_ruleset *prev)
{
    return same_len(text, strlen(text), prev);
}

/* The same, and the incremental parse reused `reused` rules and parsed
 * `parsed` itself (the full parse did not decide). */
static void reuses(const char *text, const rl_ruleset *prev, size_t reused,
                   size_t parsed)
{
    delta_info info = same(text, prev);

    ck_assert_msg(!info.whole, "%s: left to the full parse", text);
    ck_assert_uint_eq(info.reused, reused);
    ck_assert_uint_eq(info.parsed, parsed);
}

/* The same, refused, with `needle` in the message (both gave it). */
static void refused(const char *text, size_t len, const rl_ruleset *prev,
                    const char *needle)
{
    rl_ruleset *rs = NULL;
    char err[512];
    delta_info info = same_len(text, len, prev);

    ck_assert_int_eq(info.whole, 1);
    ck_assert_int_ne(ruleset_parse_delta(text, len, 7, prev, &rs, NULL, err,
                                         sizeof err), RL_OK);
    ck_assert_msg(strstr(err, needle), "\"%s\" not in \"%s\"", needle, err);
}

START_TEST(identical_text_reuses_every_rule)
{
    rl_ruleset *prev = in_force(BASE);

    reuses(BASE, prev, 5, 0);
    ruleset_free(prev);
}
END_TEST

START_TEST(one_rule_changed_is_the_one_parsed)
{
    rl_ruleset *prev = in_force(BASE);

    reuses("{\"version\":8,\"rules\":[" R0B "," R1 "," R2 "," R3 "," R4 "]}",
           prev, 4, 1);
    reuses("{\"version\":8,\"rules\":[" R0 "," R1 "," R2 "," R3 "," R5 "]}",
           prev, 4, 1);
    ruleset_free(prev);
}
END_TEST

START_TEST(rule_added_or_removed)
{
    rl_ruleset *prev = in_force(BASE);

    reuses("{\"version\":8,\"rules\":[" R0 "," R1 "," R5 "," R2 "," R3 ","
           R4 "]}", prev, 5, 1);
    reuses("{\"version\":8,\"rules\":[" R5 "," R0 "," R1 "," R2 "," R3 ","
           R4 "]}", prev, 5, 1);
    reuses("{\"version\":8,\"rules\":[" R0 "," R2 "," R3 "," R4 "]}", prev, 4,
           0);
    reuses("{\"version\":8,\"rules\":[" R1 "," R2 "," R3 "," R4 "," R5 "]}",
           prev, 4, 1);
    reuses("{\"version\":8,\"rules\":[]}", prev, 0, 0);
    ruleset_free(prev);
}
END_TEST

START_TEST(rules_reordered_or_moved)
{
    rl_ruleset *prev = in_force(BASE);

    reuses("[" R4 "," R3 "," R2 "," R1 "," R0 "]", prev, 5, 0);
    /* identical text at another index */
    reuses("[" R1 "," R2 "," R3 "," R4 "," R0 "]", prev, 5, 0);
    reuses("[" R2 "," R0 "," R1 "," R4 "," R3 "]", prev, 5, 0);
    ruleset_free(prev);
}
END_TEST

/* 60 rules shuffled, their ids first (found by id) or not (found through
 * the table of the old texts' hashes): every one reused. */
static void shuffled(const char *fmt)
{
    char *a = malloc(80 * 60), *b = malloc(80 * 60);
    size_t la = 0, lb = 0;
    int order[60];
    rl_ruleset *prev;

    for (int i = 0; i < 60; i++)
        order[i] = (i * 37) % 60; /* 37 is prime to 60: a permutation */
    a[la++] = b[lb++] = '[';
    for (int i = 0; i < 60; i++) {
        la += (size_t)sprintf(a + la, fmt, i ? "," : "", i, i + 1);
        lb += (size_t)sprintf(b + lb, fmt, i ? "," : "", order[i],
                              order[i] + 1);
    }
    strcpy(a + la, "]");
    strcpy(b + lb, "]");
    prev = in_force(a);
    reuses(b, prev, 60, 0);
    ruleset_free(prev);
    free(a);
    free(b);
}

START_TEST(large_shuffle_found_by_id_or_by_hash)
{
    shuffled("%s{\"rule_id\":\"q%d\",\"dimension\":\"user\",\"limit\":%d,"
             "\"window_seconds\":60}");
    shuffled("%s{\"dimension\":\"user\",\"rule_id\":\"q%d\",\"limit\":%d,"
             "\"window_seconds\":60}");
}
END_TEST

START_TEST(duplicate_ids_refused_as_the_full_parse_does)
{
    rl_ruleset *prev = in_force(BASE);
    const char *twice = "[" R0 "," R1 "," R2 "," R3 "," R4 "," R0 "]";
    const char *same_id = "[" R0 "," R1 "," R0B "]";

    refused(twice, strlen(twice), prev, "rules[5]: rule_id \"r0\" appears "
            "twice");
    refused(same_id, strlen(same_id), prev, "rules[2]: rule_id \"r0\" "
            "appears twice");
    ruleset_free(prev);
}
END_TEST

START_TEST(whitespace_between_and_inside_rules)
{
    rl_ruleset *prev = in_force(BASE);

    reuses(" \n{ \"version\" :\t7 ,\r\n \"rules\" : [\n  " R0 " ,\n\t" R1
           "\r\n," R2 "," R3 "  ,  " R4 "\n ]\n}\n\t ", prev, 5, 0);
    /* whitespace inside a rule changes its text: parsed, same rule */
    reuses("[{ \"rule_id\" : \"r0\", \"dimension\":\"user\",\"limit\":10,"
           "\"window_seconds\":60 }," R1 "," R2 "," R3 "," R4 "]", prev, 4,
           1);
    ruleset_free(prev);
}
END_TEST

START_TEST(versions)
{
    rl_ruleset *prev = in_force(BASE);
    const char *tail = "\"rules\":[" R0 "," R1 "]";
    static const char *const good[] = {"0", "8", "123456789",
                                       "9223372036854775807"};
    static const char *const odd[] = {
        "08", "-1", "-0", "1.0", "1e2", "\"3\"", "null", "9223372036854775808",
        "99999999999999999999", "+1", ""};
    char text[1024];

    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        snprintf(text, sizeof text, "{\"version\":%s,%s}", good[i], tail);
        reuses(text, prev, 2, 0);
        snprintf(text, sizeof text, "{%s,\"version\":%s}", tail, good[i]);
        reuses(text, prev, 2, 0);
    }
    for (size_t i = 0; i < sizeof odd / sizeof *odd; i++) {
        snprintf(text, sizeof text, "{\"version\":%s,%s}", odd[i], tail);
        ck_assert_int_eq(same(text, prev).whole, 1);
        snprintf(text, sizeof text, "{%s,\"version\":%s}", tail, odd[i]);
        ck_assert_int_eq(same(text, prev).whole, 1);
    }
    /* none: next_version; given twice; rules twice */
    reuses("{\"rules\":[" R0 "]}", prev, 1, 0);
    snprintf(text, sizeof text, "{\"version\":1,\"version\":2,%s}", tail);
    refused(text, strlen(text), prev, "duplicate object key");
    snprintf(text, sizeof text, "{%s,%s}", tail, tail);
    refused(text, strlen(text), prev, "duplicate object key");
    ruleset_free(prev);
}
END_TEST

/* "generation": any order, taken by both parses alike; a bad one left to
 * the full parse, which refuses it. */
START_TEST(generations)
{
    rl_ruleset *prev = in_force(BASE), *rs = NULL;
    const char *tail = "\"rules\":[" R0 "," R1 "]";
    static const char *const bad[] = {"\"\"", "\"a b\"", "\"a\\u0041\"", "7",
                                      "null", "\"a/b\"",
                                      "\"0123456789012345678901234567890123456"
                                      "789012345678901234567890123456789\""};
    char text[1024], err[256];

    snprintf(text, sizeof text, "{\"version\":8,\"generation\":"
             "\"0a1b.2c-3_D\",%s}", tail);
    reuses(text, prev, 2, 0);
    ck_assert_int_eq(ruleset_parse_delta(text, strlen(text), 7, prev, &rs,
                                         NULL, err, sizeof err), RL_OK);
    ck_assert_str_eq(rs->generation, "0a1b.2c-3_D");
    ruleset_free(rs);
    snprintf(text, sizeof text, "{%s,\"generation\":\"g\",\"version\":8}",
             tail);
    reuses(text, prev, 2, 0);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(text, sizeof text, "{\"generation\":%s,%s}", bad[i], tail);
        if (i == 2) /* an escape: the full parse decides, and takes "aA" */
            ck_assert_int_eq(same(text, prev).whole, 1);
        else
            refused(text, strlen(text), prev, "generation");
    }
    snprintf(text, sizeof text, "{\"generation\":\"a\",\"generation\":\"b\","
             "%s}", tail);
    refused(text, strlen(text), prev, "duplicate object key");
    ruleset_free(prev);
}
END_TEST

START_TEST(bare_array_and_object)
{
    rl_ruleset *prev = in_force(BASE), *arr;

    reuses("[" R0 "," R1 "," R2 "," R3 "," R4 "]", prev, 5, 0);
    reuses("[]", prev, 0, 0);
    arr = in_force("[" R0 "," R1 "]");
    reuses("{\"version\":9,\"rules\":[" R1 "," R0 "]}", arr, 2, 0);
    ruleset_free(arr);
    ruleset_free(prev);
}
END_TEST

START_TEST(malformed_slice_after_reusable_ones)
{
    rl_ruleset *prev = in_force(BASE);
    const char *bad_rule = "[" R0 "," R1 "," R2 "," BAD_LIMIT "]";
    const char *syntax = "[" R0 "," R1 ",\n{\"rule_id\":\"x\" \"limit\":1}]";
    const char *cut = "[" R0 "," R1 "," R2;
    const char *no_comma = "[" R0 R1 "]";
    const char *trailing_comma = "[" R0 "," R1 ",]";
    const char *not_object = "[" R0 ",5]";
    const char *bad_utf8 = "[" R0 ",{\"rule_id\":\"\xff\"}]";
    const char *nul_escape = "[" R0 ",{\"rule_id\":\"a\\u0000\"}]";
    const char *dup_key = "[" R0 ",{\"rule_id\":\"a\",\"rule_id\":\"b\"}]";

    refused(bad_rule, strlen(bad_rule), prev,
            "rules[3] (\"bad\"): limit: must be");
    refused(syntax, strlen(syntax), prev, "line 2, column");
    refused(cut, strlen(cut), prev, "line 1");
    refused(no_comma, strlen(no_comma), prev, "line 1");
    refused(trailing_comma, strlen(trailing_comma), prev, "line 1");
    refused(not_object, strlen(not_object), prev,
            "rules[1]: rule: must be an object");
    refused(bad_utf8, strlen(bad_utf8), prev, "line 1");
    refused(nul_escape, strlen(nul_escape), prev, "line 1");
    refused(dup_key, strlen(dup_key), prev, "duplicate object key");
    ruleset_free(prev);
}
END_TEST

/* What the scanner leaves to the full parse: decided there, the same. */
START_TEST(top_level_oddities_fall_back)
{
    rl_ruleset *prev = in_force(BASE);
    static const char *const texts[] = {
        "{\"rules\":[" R0 "],\"x\":1}",  "{\"\\u0072ules\":[" R0 "]}",
        "[" R0 "] x",                    "[" R0 "]]",
        "{\"rules\":[" R0 "]} {}",       "{}",
        "",                              "   ",
        "[1]",                           "[[" R0 "]]",
        "{\"rules\":{}}",                "{\"version\":3}",
        "\xef\xbb\xbf[" R0 "]",          "[" R0 "]\f",
        "{\"rules\":[" R0 "],}",         "{,\"rules\":[]}",
        "null",                          "\"rules\""};
    const char nul[] = "[" R0 "]\0";
    const char nul_inside[] = "[" R0 ",\0" R1 "]";
    delta_info info;

    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        info = same(texts[i], prev);
        ck_assert_msg(info.whole, "%s: not left to the full parse", texts[i]);
    }
    ck_assert_int_eq(same_len(nul, sizeof nul - 1, prev).whole, 1);
    ck_assert_int_eq(same_len(nul_inside, sizeof nul_inside - 1, prev).whole,
                     1);
    ruleset_free(prev);
}
END_TEST

/* Nesting past the scanner's depth, or past jansson's, inside a rule. */
START_TEST(deep_nesting_falls_back)
{
    rl_ruleset *prev = in_force(BASE);
    size_t n = 5000, at = 0;
    char *t = malloc(2 * n + 128);

    at += (size_t)sprintf(t, "[" R0 ",{\"rule_id\":\"d\",\"match\":");
    for (size_t i = 0; i < n; i++)
        t[at++] = '[';
    for (size_t i = 0; i < n; i++)
        t[at++] = ']';
    strcpy(t + at, "}]");
    ck_assert_int_eq(same(t, prev).whole, 1);
    /* 17 levels: the scanner declines, jansson parses, the rule fails */
    strcpy(t, "[{\"rule_id\":\"d\",\"match\":"
              "[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]}]");
    ck_assert_int_eq(same(t, prev).whole, 1);
    free(t);
    ruleset_free(prev);
}
END_TEST

START_TEST(prev_without_kept_text_parses_every_rule)
{
    rl_ruleset *prev = NULL;
    char err[256];

    ck_assert_int_eq(ruleset_parse(BASE, strlen(BASE), 1, &prev, err,
                                   sizeof err), RL_OK);
    ck_assert_ptr_null(prev->text);
    reuses(BASE, prev, 0, 5);
    reuses(BASE, NULL, 0, 5);
    ruleset_free(prev);
}
END_TEST

/* ---- random mutations --------------------------------------------------- */

static uint64_t rng = 0x243f6a8885a308d3ULL;

static unsigned rnd(unsigned n)
{
    return (unsigned)(xorshift64(&rng) % n);
}

#define MAXR 24
#define RULE_CAP 256

typedef struct set {
    char rule[MAXR][RULE_CAP];
    int n, next_id;
    long long version; /* -1: none */
    int bare;
} set;

/* Rule `id`, its content drawn from k; `bad`: refused by the parser. */
static void make_rule(char *out, int id, unsigned k, int bad)
{
    static const char *const extra[] = {
        "", ",\"mode\":\"log\"", ",\"algorithm\":\"gcra\",\"burst\":9",
        ",\"match\":{\"tier\":\"t\\\"x\\\\\"}", ",\"failureMode\":\"open\"",
        ",\"match\":{\"endpoint\":\"/a/*\"}",
        ",\"updated_at\":\"2026-02-28T00:00:00Z\"",
        ",\"match\":{\"value\":[\"k1\",\"p-*\"]}"};
    static const char *const wrong[] = {
        ",\"limit2\":1", ",\"updated_at\":\"2026-02-30T00:00:00Z\"",
        ",\"burst\":0", ",\"mode\":\"Log\"", ",\"match\":[]",
        ",\"unlimited\":true"};

    snprintf(out, RULE_CAP, "{\"rule_id\":\"m%d\",\"dimension\":\"user\","
             "\"limit\":%u,\"window_seconds\":%u%s}", id, 1 + k % 999,
             1 + k % 90, bad ? wrong[k % 6] : extra[k % 8]);
}

static size_t render(const set *s, char *buf, size_t cap)
{
    size_t at = 0;

    if (!s->bare)
        at += (size_t)(s->version >= 0
                           ? snprintf(buf, cap, "{\"version\":%lld,\"rules\":",
                                      s->version)
                           : snprintf(buf, cap, "{\"rules\":"));
    buf[at++] = '[';
    for (int i = 0; i < s->n; i++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%s%s", i ? "," : "",
                               rnd(8) ? "" : "\n  ", s->rule[i]);
    at += (size_t)snprintf(buf + at, cap - at, "]%s", s->bare ? "" : "}");
    return at;
}

/* A change operators make: a valid set stays valid. */
static void change_set(set *s)
{
    int i = s->n ? (int)rnd((unsigned)s->n) : 0;
    unsigned j;
    char t[RULE_CAP];

    switch (rnd(8)) {
    case 0: case 1: /* a rule changed, same id */
        if (s->n && sscanf(s->rule[i], "{\"rule_id\":\"m%u\"", &j) == 1)
            make_rule(s->rule[i], (int)j, rnd(100000), 0);
        break;
    case 2: /* added */
        if (s->n < MAXR) {
            memmove(s->rule[i + 1], s->rule[i],
                    (size_t)(s->n - i) * RULE_CAP);
            make_rule(s->rule[i], s->next_id++, rnd(100000), 0);
            s->n++;
        }
        break;
    case 3: /* removed */
        if (s->n) {
            memmove(s->rule[i], s->rule[i + 1],
                    (size_t)(s->n - i - 1) * RULE_CAP);
            s->n--;
        }
        break;
    case 4: /* two swapped */
        j = s->n ? rnd((unsigned)s->n) : 0;
        memcpy(t, s->rule[i], RULE_CAP);
        memcpy(s->rule[i], s->rule[j], RULE_CAP);
        memcpy(s->rule[j], t, RULE_CAP);
        break;
    case 5:
        s->version = rnd(4) ? (long long)rnd(100) : -1;
        break;
    case 6:
        s->bare = !s->bare;
        break;
    default:
        break; /* the same set again */
    }
}

/* A mistake, on a copy: a rule duplicated, a rule the parser refuses. */
static void spoil_set(set *s)
{
    int i = s->n ? (int)rnd((unsigned)s->n) : 0;

    if (!s->n)
        return;
    if (rnd(2) && s->n < MAXR)
        memcpy(s->rule[s->n++], s->rule[i], RULE_CAP);
    else
        make_rule(s->rule[i], 900 + i, rnd(100000), 1);
}

/* A byte-level accident in the text. */
static void spoil_bytes(char *buf, size_t *len, size_t cap)
{
    static const char tokens[] = "{}[]\":,\\ \n0a-";
    size_t at = *len ? rnd((unsigned)*len) : 0;

    switch (rnd(4)) {
    case 0:
        buf[at] ^= (char)(1u << rnd(8));
        break;
    case 1:
        if (*len < cap) {
            memmove(buf + at + 1, buf + at, *len - at);
            buf[at] = tokens[rnd(sizeof tokens - 1)];
            (*len)++;
        }
        break;
    case 2:
        if (*len) {
            memmove(buf + at, buf + at + 1, *len - at - 1);
            (*len)--;
        }
        break;
    default:
        *len = at;
        break;
    }
}

/* A stream of sets as a limiter sees them: each round one change of the
 * set, sometimes spoilt (a mistake in the set, or in its bytes); each
 * text compared both ways against the set last taken. */
START_TEST(random_mutations_are_indistinguishable)
{
    static set s, copy;
    static char buf[MAXR * RULE_CAP + 128];
    rl_ruleset *prev = NULL, *next;
    int took_delta = 0, reused_some = 0, refusals = 0;
    const int rounds = 4000;

    s = (set){.n = 12, .next_id = 12, .version = 1};
    for (int i = 0; i < s.n; i++)
        make_rule(s.rule[i], i, (unsigned)(13 * i + 1), 0);
    for (int r = 0; r < rounds; r++) {
        delta_info info;
        size_t len;
        unsigned what = rnd(8);
        change_set(&s);
        copy = s;
        if (what == 0)
            spoil_set(&copy);
        len = render(&copy, buf, sizeof buf - 1);
        if (what == 1)
            spoil_bytes(buf, &len, sizeof buf - 1);
        buf[len] = '\0';
        ck_assert_msg(delta_compare(buf, len, prev, &info, &next, why) == 0,
                      "round %d, %.400s: %s", r, buf, why);
        took_delta += !info.whole;
        reused_some += !info.whole && info.reused > 0;
        if (next) { /* the new set is in force, as after a swap */
            ruleset_free(prev);
            prev = next;
        } else {
            refusals++;
        }
        if (rnd(50) == 0) { /* now and then, nothing kept to reuse */
            ruleset_free(prev);
            prev = NULL;
        }
    }
    ruleset_free(prev);
    /* Not all of it the fallback: the incremental path ran and reused. */
    ck_assert_msg(took_delta > rounds / 2 && reused_some > rounds / 2 &&
                  refusals > rounds / 10,
                  "incremental %d, reusing %d, refused %d of %d", took_delta,
                  reused_some, refusals, rounds);
}
END_TEST

/* ---- through a limiter -------------------------------------------------- */

/* rl_rules_load_string() reuses the set in force's rules, takes the
 * change and refuses with the full parse's message. */
START_TEST(limiter_takes_a_change_through_the_incremental_parse)
{
    rl_limiter *lim = limiter_with(BASE);
    const rl_ruleset *rs;
    rl_result res = RL_RESULT_INIT;

    rs = rcu_peek(&lim->rules);
    ck_assert_ptr_nonnull(rs->text); /* kept: the next load reuses */
    ck_assert_int_eq(rl_rules_load_string(lim, "{\"version\":8,\"rules\":["
                                          R0B "," R1 "," R2 "," R3 "," R4
                                          "]}"), RL_OK);
    ck_assert_int_eq(rl_rules_version(lim), 8);
    ck_assert_int_eq(rl_allow(lim, "u", "r0", 0, &res), RL_OK);
    ck_assert_int_eq(res.limit, 11);
    ck_assert_int_eq(rl_allow(lim, "u", "r4", 0, &res), RL_OK);
    ck_assert_int_eq(res.limit, 7);
    ck_assert_int_eq(rl_rules_load_string(lim, "{\"version\":9,\"rules\":["
                                          R0 "," BAD_LIMIT "]}"), RL_ERULE);
    ck_assert_str_eq(rl_errmsg(lim),
                     "invalid rule: rules: rules[1] (\"bad\"): limit: must be "
                     "1..1000000000, got 0");
    ck_assert_int_eq(rl_rules_version(lim), 8);
    rl_limiter_free(lim);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ruleset_delta");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, identical_text_reuses_every_rule);
    tcase_add_test(tc, one_rule_changed_is_the_one_parsed);
    tcase_add_test(tc, rule_added_or_removed);
    tcase_add_test(tc, rules_reordered_or_moved);
    tcase_add_test(tc, large_shuffle_found_by_id_or_by_hash);
    tcase_add_test(tc, duplicate_ids_refused_as_the_full_parse_does);
    tcase_add_test(tc, whitespace_between_and_inside_rules);
    tcase_add_test(tc, versions);
    tcase_add_test(tc, generations);
    tcase_add_test(tc, bare_array_and_object);
    tcase_add_test(tc, malformed_slice_after_reusable_ones);
    tcase_add_test(tc, top_level_oddities_fall_back);
    tcase_add_test(tc, deep_nesting_falls_back);
    tcase_add_test(tc, prev_without_kept_text_parses_every_rule);
    tcase_add_test(tc, random_mutations_are_indistinguishable);
    tcase_add_test(tc, limiter_takes_a_change_through_the_incremental_parse);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
