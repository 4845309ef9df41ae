/*
 * ruleset_compare.h -- is the incremental parse (ruleset_delta.h)
 * indistinguishable from the full one (ruleset_parse())?  Shared by
 * tests/check_ruleset_delta.c and the ruleset_delta fuzz target: one text
 * parsed both ways against the same set in force must give the same
 * return code, the same message, and sets equal field by field (every
 * rule's strings, numbers, shape and state seed; neither with what only
 * the swap adds).  The incremental set's kept text must hold each rule's
 * slice.
 */
#ifndef RL_TEST_RULESET_COMPARE_H
#define RL_TEST_RULESET_COMPARE_H

#include <stdio.h>
#include <string.h>

#include "ruleset.h"
#include "ruleset_delta.h"

#define CMP_MSG 600

static inline int cmp_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static inline int cmp_ap(const algo_params *a, const algo_params *b)
{
    return a->algo == b->algo && a->limit == b->limit &&
           a->burst == b->burst && a->window_ms == b->window_ms &&
           a->p == b->p && a->q == b->q;
}

/* Two blocks of NUL-ended strings (rule.h: values, replaces). */
static inline int cmp_strings(const char *a, uint32_t na, const char *b,
                              uint32_t nb)
{
    if (na != nb || !a != !b)
        return 0;
    for (uint32_t i = 0; i < na; i++, a += strlen(a) + 1, b += strlen(b) + 1)
        if (strcmp(a, b) != 0)
            return 0;
    return 1;
}

/* The first field in which two rules differ, or NULL. */
static inline const char *rule_diff(const rl_rule *a, const rl_rule *b)
{
    if (strcmp(a->id, b->id))
        return "rule_id";
    if (strcmp(a->dimension, b->dimension) != 0 || a->dim_id != b->dim_id)
        return "dimension";
    if (!cmp_str(a->endpoint, b->endpoint))
        return "match.endpoint";
    if (!cmp_str(a->tier, b->tier))
        return "match.tier";
    if (!cmp_ap(&a->ap, &b->ap) || a->window_s != b->window_s)
        return "numbers (limit, burst, window, algorithm)";
    if (a->mode != b->mode || a->failure != b->failure)
        return "mode or failure_mode";
    if (a->version != b->version || strcmp(a->updated_at, b->updated_at))
        return "version or updated_at";
    if (!cmp_ap(&a->shape.ap, &b->shape.ap) ||
        a->shape.state_seed != b->shape.state_seed ||
        a->shape.since_ms != b->shape.since_ms ||
        a->shape.until_ms != b->shape.until_ms ||
        a->shape.len != b->shape.len || strcmp(a->shape.name, b->shape.name))
        return "shape or state seed";
    if (!cmp_strings(a->values, a->nvalues, b->values, b->nvalues))
        return "match.value";
    if (a->has_replaces != b->has_replaces ||
        !cmp_strings(a->replaces, a->nreplaces, b->replaces, b->nreplaces))
        return "replaces";
    if (a->unlimited != b->unlimited)
        return "unlimited";
    if (a->prev || b->prev || a->nprev || b->nprev || a->dry || b->dry)
        return "swap-time fields (prev shapes, dry-run block) set";
    return NULL;
}

/* 0 if the delta set's kept text holds each rule's slice as an object. */
static inline int slices_sane(const rl_ruleset *d)
{
    if (!d->text)
        return d->slices ? -1 : 0;
    for (size_t i = 0; i < d->n; i++) {
        const rule_slice *s = &d->slices[i];
        if (s->len < 2 || s->off + s->len > d->text_len ||
            d->text[s->off] != '{' || d->text[s->off + s->len - 1] != '}')
            return -1;
    }
    return 0;
}

/* 0 if the two sets are equal, else 1 with the difference in why. */
static inline int ruleset_diff(const rl_ruleset *f, const rl_ruleset *d,
                               char *why, size_t n)
{
    if (strcmp(f->generation, d->generation))
        return snprintf(why, n, "generation \"%s\"/\"%s\"", f->generation,
                        d->generation), 1;
    if (f->version != d->version || f->n != d->n)
        return snprintf(why, n, "version %lld/%lld or count %zu/%zu",
                        (long long)f->version, (long long)d->version, f->n,
                        d->n), 1;
    for (size_t i = 0; i < f->n; i++) {
        const char *what = rule_diff(&f->rules[i], &d->rules[i]);
        if (what)
            return snprintf(why, n, "rules[%zu] (%s): %s differs", i,
                            f->rules[i].id, what), 1;
        if (ruleset_find(d, d->rules[i].id) != &d->rules[i])
            return snprintf(why, n, "rules[%zu]: not found by id", i), 1;
    }
    if (slices_sane(d))
        return snprintf(why, n, "a kept slice is not its rule's object"), 1;
    return 0;
}

/*
 * Parse text[0..len) both ways, the incremental one against `prev` (may
 * be NULL), with next_version 7.  0 if indistinguishable, else 1 with
 * the difference in why (CMP_MSG bytes).  *info: what the incremental
 * parse did.  *out (may be NULL): the incremental set, for the next
 * text to be parsed against (the caller frees it); NULL when refused.
 */
static inline int delta_compare(const char *text, size_t len,
                                const rl_ruleset *prev, delta_info *info,
                                rl_ruleset **out, char *why)
{
    char ef[512] = "", ed[512] = "";
    rl_ruleset *f = NULL, *d = NULL;
    int rf = ruleset_parse(text, len, 7, &f, ef, sizeof ef);
    int rd = ruleset_parse_delta(text, len, 7, prev, &d, info, ed, sizeof ed);
    int bad = 0;

    if (rf != rd)
        bad = snprintf(why, CMP_MSG, "full %d (%s), delta %d (%s)", rf, ef,
                       rd, ed) > 0;
    else if (rf != RL_OK && strcmp(ef, ed))
        bad = snprintf(why, CMP_MSG, "messages: full \"%s\", delta \"%s\"",
                       ef, ed) > 0;
    else if (rf != RL_OK && (f || d))
        bad = snprintf(why, CMP_MSG, "a refused parse gave a set") > 0;
    else if (rf == RL_OK)
        bad = ruleset_diff(f, d, why, CMP_MSG);
    ruleset_free(f);
    if (out)
        *out = d;
    else
        ruleset_free(d);
    return bad;
}

#endif
