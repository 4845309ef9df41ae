/*
 * rule_index.h -- which rules of a set apply to a request, found without
 * walking them all.
 *
 * Built once when a rule set is loaded (ruleset_index()) and kept in the
 * immutable set, so it is swapped with it (rcu.h).  A rule is filed under
 * its tier (rules with no tier in a bucket of their own) and the kind of
 * its endpoint pattern (pattern.h):
 *   no endpoint       one list per tier
 *   exact "/search"   by hash of the endpoint
 *   prefix "/api/STARSTAR" (no other wildcard): by hash of the prefix; a
 *                     request probes each prefix length the set uses, with
 *                     a hash rolled over its endpoint's bytes
 *   any other glob    a trie over path segments (glob_index.h); walked
 *                     one by one only should an endpoint reach more of its
 *                     nodes at once than it keeps
 * A request probes its own tier's buckets and the no-tier ones (its own
 * only for the kinds of rules its tier has), and the
 * matching rules come out in rule order (their index in the set), as a
 * walk over every rule in order would find them: rule order decides.
 */
#ifndef RL_RULE_INDEX_H
#define RL_RULE_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "rule.h"

typedef struct rule_index rule_index;

#define RULE_INDEX_MAX 128 /* matches rule_index_match() returns at most */

/* Index rules[0..n) (their endpoint, tier and dimension id must be final:
 * the index keeps pointers into them).  Returns the index, or NULL out of
 * memory. */
rule_index *rule_index_build(const rl_rule *rules, size_t n);

void rule_index_free(rule_index *ix);

/* Bytes the index holds (its arrays and the glob trie; not the rules). */
size_t rule_index_bytes(const rule_index *ix);

/*
 * The indexes in rules[] (those rule_index_build() was given) of the rules
 * that apply to a request with this endpoint (elen bytes, or NULL) and
 * tier (tlen bytes, or NULL), neither read past its length (no NUL
 * needed), and that count by a dimension the request carries: bit
 * id of `present` set for dimension id (rule.h), global rules always.
 * The first `max` (at most RULE_INDEX_MAX) of them in ascending order into
 * out[]; returns how many were written.  Allocates nothing.  ix NULL: no rules.
 */
size_t rule_index_match(const rule_index *ix, const rl_rule *rules,
                        const char *endpoint, size_t elen, const char *tier,
                        size_t tlen, uint64_t present, uint32_t *out,
                        size_t max);

/* Does no rule of ix have an endpoint or a tier (rule_index_match then
 * reads neither)?  ix NULL: no rules, yes. */
int rule_index_any_only(const rule_index *ix);

#endif
