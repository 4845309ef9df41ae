/*
 * ruleset_delta.c -- taking a new rule set at the cost of what changed.
 *
 * A live set changes one rule at a time, yet each change reaches a limiter
 * as the whole text (ratelimitd publishes the set on every write): parsing
 * it all again through jansson's DOM costs milliseconds per thousand rules
 * for the one that changed.  Here a small strict scanner splits the text
 * into one byte slice per rule; a slice byte-identical to one the set in
 * force was parsed from (compared byte for byte; found where it was, by
 * its id, or by its hash) gives a copy of that set's validated rule
 * (rule_copy()), and only the other slices go through jansson and
 * rule_from_json().  The result keeps a copy of its text and its slices,
 * for the next set to reuse from.
 *
 * Why the outcome is exactly ruleset_parse()'s:
 *  - The scanner accepts only the plain shape of a set: a bare array, or
 *    {"version": N, "rules": [...]} in either member order ("version"
 *    optional), JSON whitespace (space, tab, CR, LF) between tokens, each
 *    element an object, N a plain non-negative integer that fits int64
 *    (no sign, no leading zero, no fraction or exponent).  Anything else
 *    (another member, one given twice, a member name with an escape, a
 *    NUL byte anywhere, bytes after the set, nesting deeper than
 *    DEPTH_MAX inside a rule, more than RL_RULES_MAX rules) is left to
 *    ruleset_parse() whole.  So when the scanner accepts the text and
 *    each slice is a JSON value, the text is the JSON document the full
 *    parse reads, with the same top level and the same elements in order.
 *  - A JSON value means the same wherever it stands, so a slice parsed on
 *    its own (with jansson's same flags) is the element the full parse
 *    sees; the only difference, jansson's nesting limit, is far beyond
 *    DEPTH_MAX.  A rule depends on its own text alone (rule_from_json()
 *    reads nothing else), so a reused slice, accepted before by jansson
 *    and rule_from_json(), gives the rule parsing it again would give.
 *  - Every failure (a slice jansson or rule_from_json() refuses, two
 *    rules with one id, no memory) hands the text to ruleset_parse(),
 *    which then decides and words the outcome: refusals and their
 *    messages are the full parse's own ("rules[i] ("id"): field: reason",
 *    a JSON error's line and column in the whole text).  A refused set
 *    costs one full parse more; a taken set never does.
 * tests/check_ruleset_delta.c and the ruleset_delta fuzz target compare
 * the two parsers on hand-written cases and on mutations.
 */
#include "ruleset_delta.h"
#include "hash.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Nesting the scanner follows inside one rule (a valid rule nests 2:
 * the rule, its match); jansson's own limit is JSON_PARSER_MAX_DEPTH. */
#define DEPTH_MAX 16

/* ---- finding a rule's text in the set in force -------------------------- */

/* Rules mostly keep their place, or move by the rules added or removed
 * before them: a rule's text is first compared with the old rule at its
 * place, shifted as the last rule found was.  Elsewhere, a text that
 * starts with its id ({"rule_id":"x" or {"ruleId":"x", as every set
 * ratelimitd writes) can only be the old text of rule x, if any: ids are
 * unique in a set, and a text's id is its first member's value.  Any
 * other text is looked up by hash in a table of the old texts, made on
 * the first such text.  So every rule whose text is an old rule's is
 * found, and a set whose rules open with their ids never pays for the
 * table. */

typedef struct reuse {
    const rl_ruleset *prev; /* with its text kept, or NULL             */
    ptrdiff_t shift;        /* old index - new index of the last found */
    uint64_t *hash;         /* of each old slice, for the table        */
    uint32_t *table;        /* old slices by hash: index + 1           */
    size_t mask;
    int no_table;           /* it could not be made: parse the rest    */
} reuse;

/* Is old rule j's text the `len` bytes at s? */
static int same(const rl_ruleset *p, ptrdiff_t j, const char *s, size_t len)
{
    return j >= 0 && (size_t)j < p->n && p->slices[j].len == len &&
           memcmp(p->text + p->slices[j].off, s, len) == 0;
}

static int make_table(reuse *ru)
{
    const rl_ruleset *p = ru->prev;
    size_t size = 4;

    while (size < p->n * 2)
        size <<= 1;
    if (!(ru->table = calloc(size, sizeof *ru->table)) ||
        !(ru->hash = malloc((p->n ? p->n : 1) * sizeof *ru->hash)))
        return -1;
    ru->mask = size - 1;
    for (size_t j = 0; j < p->n; j++) {
        size_t k;
        ru->hash[j] = hash_bytes(p->text + p->slices[j].off,
                                 p->slices[j].len, 0);
        for (k = ru->hash[j] & ru->mask; ru->table[k];
             k = (k + 1) & ru->mask)
            ;
        ru->table[k] = (uint32_t)(j + 1);
    }
    return 0;
}

/* The old rule whose text is the len bytes at s, by the table, or -1. */
static ptrdiff_t by_hash(reuse *ru, const char *s, size_t len)
{
    uint64_t h;

    if (!ru->table && (ru->no_table || (ru->no_table = make_table(ru))))
        return -1;
    h = hash_bytes(s, len, 0);
    for (size_t k = h & ru->mask; ru->table[k]; k = (k + 1) & ru->mask) {
        ptrdiff_t j = ru->table[k] - 1;
        if (ru->hash[j] == h && same(ru->prev, j, s, len))
            return j;
    }
    return -1;
}

/* The id a rule's text opens with, into id; 0, or -1 if it opens
 * otherwise (or the id is escaped, or too long to be one). */
static int leading_id(const char *s, size_t len, char *id)
{
    static const char *const opening[] = {"{\"rule_id\":\"", "{\"ruleId\":\""};
    size_t at = 0, n = 0;

    for (int k = 0; k < 2 && !at; k++) {
        size_t w = strlen(opening[k]);
        if (len > w && memcmp(s, opening[k], w) == 0)
            at = w;
    }
    if (!at)
        return -1;
    while (at + n < len && n <= RL_RULE_ID_MAX && s[at + n] != '"' &&
           s[at + n] != '\\')
        n++;
    if (at + n >= len || n > RL_RULE_ID_MAX || s[at + n] != '"')
        return -1;
    memcpy(id, s + at, n);
    id[n] = '\0';
    return 0;
}

/* The old rule at new rule i's place, if the text at s (avail bytes to
 * the end) starts with its text; else -1.  Those bytes then are new rule
 * i's whole text: the scanner, which reads an object up to its closing
 * brace and no further, found that brace at their end before. */
static ptrdiff_t in_place(const reuse *ru, size_t i, const char *s,
                          size_t avail)
{
    ptrdiff_t j = (ptrdiff_t)i + ru->shift;
    const rl_ruleset *p = ru->prev;

    if (!p || j < 0 || (size_t)j >= p->n || p->slices[j].len > avail ||
        memcmp(p->text + p->slices[j].off, s, p->slices[j].len) != 0)
        return -1;
    return j;
}

/* The old rule whose text is new rule i's, the len bytes at s, when it
 * is not the one in place; or -1. */
static ptrdiff_t elsewhere(reuse *ru, size_t i, const char *s, size_t len)
{
    char id[RL_RULE_ID_MAX + 1];
    const rl_rule *r;
    ptrdiff_t j;

    if (!ru->prev)
        return -1;
    if (leading_id(s, len, id) == 0)
        j = (r = ruleset_find(ru->prev, id)) ? r - ru->prev->rules : -1;
    else
        j = by_hash(ru, s, len);
    if (!same(ru->prev, j, s, len))
        return -1;
    ru->shift = j - (ptrdiff_t)i;
    return j;
}

/* ---- the scanner -------------------------------------------------------- */

typedef struct scanner {
    const char *s;
    size_t at, len;
    reuse *ru;
    rule_slice *sl;   /* the rules' slices, in order            */
    ptrdiff_t *from;  /* each one's old rule, or -1: parse it   */
    size_t n, cap;
    int64_t version;  /* -1: not given                          */
    char generation[RULESET_GEN_MAX + 1]; /* "": not given      */
} scanner;

static void skip_ws(scanner *sc)
{
    while (sc->at < sc->len && (sc->s[sc->at] == ' ' || sc->s[sc->at] == '\n' ||
                                sc->s[sc->at] == '\r' || sc->s[sc->at] == '\t'))
        sc->at++;
}

/* Skip whitespace, then take byte c if it is next. */
static int take(scanner *sc, char c)
{
    skip_ws(sc);
    if (sc->at < sc->len && sc->s[sc->at] == c) {
        sc->at++;
        return 1;
    }
    return 0;
}

/* Skip whitespace, then take the bytes of `word` if they are next. */
static int take_word(scanner *sc, const char *word, size_t n)
{
    skip_ws(sc);
    if (sc->len - sc->at >= n && memcmp(sc->s + sc->at, word, n) == 0) {
        sc->at += n;
        return 1;
    }
    return 0;
}

/* The index of the quote closing the string whose opening quote is at
 * s[i], or len if the text ends first.  A quote is the string's end
 * unless an odd run of backslashes precedes it (each "\\" is one escaped
 * backslash); memchr() finds the candidates. */
static size_t string_end(const char *s, size_t i, size_t len)
{
    const char *q;

    for (i++; i < len; i = (size_t)(q - s) + 1) {
        size_t k;
        if (!(q = memchr(s + i, '"', len - i)))
            return len;
        for (k = (size_t)(q - s); k > i && s[k - 1] == '\\'; k--)
            ;
        if (((size_t)(q - s) - k) % 2 == 0)
            return (size_t)(q - s);
    }
    return len;
}

/* The object at sc->at (its '{'), to just past its closing brace.
 * Strings are skipped whole (a backslash escapes the next byte);
 * brackets are counted, not matched by kind: jansson checks the slice.
 * -1 if the text ends first or nests deeper than DEPTH_MAX. */
static int object(scanner *sc)
{
    const char *s = sc->s;
    int depth = 0;

    for (size_t i = sc->at; i < sc->len; i++) {
        switch (s[i]) {
        case '"':
            if ((i = string_end(s, i, sc->len)) >= sc->len)
                return -1;
            break;
        case '{':
        case '[':
            if (++depth > DEPTH_MAX)
                return -1;
            break;
        case '}':
        case ']':
            if (--depth == 0) {
                sc->at = i + 1;
                return 0;
            }
            break;
        default:
            break;
        }
    }
    return -1;
}

static int add_slice(scanner *sc, size_t off, ptrdiff_t from)
{
    if (sc->n == RL_RULES_MAX)
        return -1;
    if (sc->n == sc->cap) {
        size_t cap = sc->cap ? sc->cap * 2 : 64;
        rule_slice *sl = realloc(sc->sl, cap * sizeof *sl);
        ptrdiff_t *fr = sl ? realloc(sc->from, cap * sizeof *fr) : NULL;
        if (sl)
            sc->sl = sl;
        if (!fr)
            return -1;
        sc->from = fr;
        sc->cap = cap;
    }
    sc->sl[sc->n] = (rule_slice){.off = off, .len = sc->at - off};
    sc->from[sc->n++] = from;
    return 0;
}

/* One rule: an object, whose end an unchanged rule's text gives at the
 * cost of a comparison; any other is read to its end, then looked for. */
static int element(scanner *sc)
{
    size_t off;
    ptrdiff_t j;

    skip_ws(sc);
    off = sc->at;
    if (off >= sc->len || sc->s[off] != '{')
        return -1;
    if ((j = in_place(sc->ru, sc->n, sc->s + off, sc->len - off)) >= 0)
        sc->at = off + sc->ru->prev->slices[j].len;
    else if (object(sc))
        return -1;
    else
        j = elsewhere(sc->ru, sc->n, sc->s + off, sc->at - off);
    return add_slice(sc, off, j);
}

/* [ ] or [ {...} , ... ]: one slice per object. */
static int rules_array(scanner *sc)
{
    if (!take(sc, '['))
        return -1;
    if (take(sc, ']'))
        return 0;
    do {
        if (element(sc))
            return -1;
    } while (take(sc, ','));
    return take(sc, ']') ? 0 : -1;
}

/* A plain non-negative integer that fits int64: [1-9][0-9]* or 0.  What
 * follows it is the caller's to check (a ',' or a '}'), which rules out a
 * fraction or an exponent. */
static int version_number(scanner *sc)
{
    size_t start;
    int64_t v = 0;

    skip_ws(sc);
    for (start = sc->at; sc->at < sc->len && sc->s[sc->at] >= '0' &&
                         sc->s[sc->at] <= '9';
         sc->at++) {
        int d = sc->s[sc->at] - '0';
        if (v > (INT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    if (sc->at == start || (sc->at - start > 1 && sc->s[start] == '0'))
        return -1;
    sc->version = v;
    return 0;
}

/* A generation's string: plain bytes (ruleset_gen_check()), no escape. */
static int generation_string(scanner *sc)
{
    size_t start;

    if (!take(sc, '"'))
        return -1;
    for (start = sc->at; sc->at < sc->len && sc->s[sc->at] != '"'; sc->at++)
        ;
    if (sc->at == sc->len ||
        ruleset_gen_check(sc->s + start, sc->at - start))
        return -1;
    memcpy(sc->generation, sc->s + start, sc->at - start);
    sc->at++;
    return 0;
}

/* {"version": N, "generation": G, "rules": [...]} (any order, version and
 * generation optional). */
static int top_object(scanner *sc)
{
    int rules = 0, version = 0, gen = 0;

    do {
        if (take_word(sc, "\"rules\"", 7)) {
            if (rules++ || !take(sc, ':') || rules_array(sc))
                return -1;
        } else if (take_word(sc, "\"version\"", 9)) {
            if (version++ || !take(sc, ':') || version_number(sc))
                return -1;
        } else if (take_word(sc, "\"generation\"", 12)) {
            if (gen++ || !take(sc, ':') || generation_string(sc))
                return -1;
        } else {
            return -1;
        }
    } while (take(sc, ','));
    return rules && take(sc, '}') ? 0 : -1;
}

/* Split the whole text, or -1: leave it to the full parse. */
static int scan(scanner *sc)
{
    if (memchr(sc->s, '\0', sc->len))
        return -1;
    skip_ws(sc);
    if (sc->at < sc->len && sc->s[sc->at] == '[') {
        if (rules_array(sc))
            return -1;
    } else if (!take(sc, '{') || top_object(sc)) {
        return -1;
    }
    skip_ws(sc);
    return sc->at == sc->len ? 0 : -1;
}

/* ---- the set ------------------------------------------------------------ */

/* One rule from its slice alone; no message (the full parse words it). */
static int parse_slice(const char *s, size_t len, rl_rule *r)
{
    char why[200];
    json_t *obj = json_loadb(s, len, JSON_REJECT_DUPLICATES, NULL);
    int rc = obj ? rule_from_json(obj, r, why, sizeof why) : -1;

    json_decref(obj);
    return rc;
}

/* The rules of the scanned text into rs: copied from prev, or parsed. */
static int fill(rl_ruleset *rs, const rl_ruleset *prev,
                const ptrdiff_t *from, delta_info *info)
{
    for (size_t i = 0; i < rs->n; i++) {
        const rule_slice *sl = &rs->slices[i];
        if (from[i] >= 0) {
            if (rule_copy(&rs->rules[i], &prev->rules[from[i]]))
                return -1;
            info->reused++;
        } else {
            if (parse_slice(rs->text + sl->off, sl->len, &rs->rules[i]))
                return -1;
            info->parsed++;
        }
    }
    return 0;
}

/* The set from the scanned text (taking sc's slices), or NULL: leave it
 * to the full parse. */
static rl_ruleset *assemble(scanner *sc, int64_t next_version,
                            const rl_ruleset *prev, delta_info *info)
{
    rl_ruleset *rs = ruleset_empty();
    char why[200];
    int ok;

    if (!rs) {
        free(sc->sl);
        return NULL;
    }
    rs->version = sc->version >= 0 ? sc->version : next_version;
    memcpy(rs->generation, sc->generation, sizeof rs->generation);
    rs->slices = sc->sl;
    ok = (rs->text = malloc(sc->len)) &&
         (!sc->n || (rs->rules = calloc(sc->n, sizeof *rs->rules)));
    if (ok) {
        memcpy(rs->text, sc->s, sc->len);
        rs->text_len = sc->len;
        rs->n = sc->n;
    }
    ok = ok && fill(rs, prev, sc->from, info) == 0 &&
         ruleset_index(rs, why, sizeof why) == RL_OK;
    if (!ok) {
        ruleset_free(rs);
        return NULL;
    }
    return rs;
}

int ruleset_parse_delta(const char *json, size_t len, int64_t next_version,
                        const rl_ruleset *prev, rl_ruleset **out,
                        delta_info *info, char *err, size_t errlen)
{
    reuse ru = {.prev = prev && prev->text ? prev : NULL};
    scanner sc = {.s = json, .len = len, .ru = &ru, .version = -1};
    delta_info none;

    if (!info)
        info = &none;
    *info = (delta_info){0};
    *out = NULL;
    if (scan(&sc) == 0) {
        info->scanned = 1;
        *out = assemble(&sc, next_version, ru.prev, info);
    } else {
        free(sc.sl);
    }
    free(sc.from);
    free(ru.table);
    free(ru.hash);
    if (*out)
        return RL_OK;
    *info = (delta_info){.scanned = info->scanned, .whole = 1};
    return ruleset_parse(json, len, next_version, out, err, errlen);
}
