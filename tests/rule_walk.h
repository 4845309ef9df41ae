/*
 * rule_walk.h -- what the rule index's suites (check_match.c,
 * check_glob_index.c) share: a rule set built by hand (the rules the index
 * reads, owned: set_free()), and the walk the request path did before any
 * index, rule_matches() on every rule in order, whose answer the index must
 * give rule for rule.  Static: each suite its own copy.
 */
#ifndef RL_TESTS_RULE_WALK_H
#define RL_TESTS_RULE_WALK_H

#include <stdint.h>
#include <stdlib.h>

#include "rule.h"

typedef struct set {
    rl_rule *rules;
    size_t n;
} set;

static inline void set_free(set *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->rules[i].endpoint);
        free(s->rules[i].tier);
    }
    free(s->rules);
}

/* The indexes of the first max rules that meet the request, in order. */
static inline size_t walk(const set *s, const char *ep, const char *tier,
                          uint64_t present, uint32_t *out, size_t max)
{
    size_t k = 0;

    for (size_t i = 0; i < s->n && k < max; i++) {
        const rl_rule *r = &s->rules[i];
        if (r->dim_id != RULE_DIM_GLOBAL && !(present >> r->dim_id & 1))
            continue;
        if (rule_matches(r, ep, tier))
            out[k++] = (uint32_t)i;
    }
    return k;
}

#endif
