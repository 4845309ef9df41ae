/*
 * fuzz_globindex.c -- the rule index with its glob trie (input: lines;
 * the last is a request's endpoint, each other a rule's endpoint pattern,
 * of tier "t" if it starts with '@').  The patterns that pass
 * pattern_check() become rules; the index (rule_index.c, glob_index.c)
 * must find, for the endpoint with no tier and with tier "t", exactly the
 * rules the plain walk (rule_matches() on each, in order) finds, in the
 * same order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "pattern.h"
#include "rule.h"
#include "rule_index.h"

#define FUZZ_RULES 64

static char tier_t[] = "t";

static void same_as_walk(const rl_rule *rules, size_t n,
                         const rule_index *ix, const char *ep,
                         const char *tier)
{
    uint32_t got[RULE_INDEX_MAX];
    size_t k = 0, ng = rule_index_match(ix, rules, ep, strlen(ep), tier,
                                        tier ? strlen(tier) : 0, 0, got,
                                        RULE_INDEX_MAX);

    for (size_t i = 0; i < n; i++)
        if (rule_matches(&rules[i], ep, tier)) {
            FUZZ_CHECK(k < ng && got[k] == i);
            k++;
        }
    FUZZ_CHECK(k == ng);
}

int fuzz_globindex(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1), *line, *ep, err[128];
    rl_rule rules[FUZZ_RULES];
    size_t n = 0;
    rule_index *ix;

    FUZZ_CHECK(buf != NULL);
    memcpy(buf, data, size);
    buf[size] = '\0';
    if (!(ep = strrchr(buf, '\n')) || strlen(ep + 1) > 2048) {
        free(buf);
        return 0;
    }
    *ep++ = '\0';
    memset(rules, 0, sizeof rules);
    for (line = strtok(buf, "\n"); line && n < FUZZ_RULES;
         line = strtok(NULL, "\n")) {
        int tiered = line[0] == '@';
        if (pattern_check(line + tiered, err, sizeof err) != 0)
            continue;
        rules[n].dim_id = RULE_DIM_GLOBAL;
        rules[n].endpoint = line + tiered;
        rules[n].tier = tiered ? tier_t : NULL;
        n++;
    }
    ix = rule_index_build(rules, n);
    FUZZ_CHECK(ix != NULL);
    same_as_walk(rules, n, ix, ep, NULL);
    same_as_walk(rules, n, ix, ep, "t");
    rule_index_free(ix);
    free(buf);
    return 0;
}

#ifdef FUZZ_TARGET_globindex
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_globindex(data, size);
}
#endif
