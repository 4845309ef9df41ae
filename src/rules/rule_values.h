/*
 * rule_values.h -- per-value rules: a rule that applies only to some
 * values of its dimension ("match": {"value": ...}), a rule that stands in
 * for others ("replaces"), a rule that lifts limits ("unlimited").
 *
 * A value pattern is an exact value ("acme-key-1") or a glob where `*`
 * matches any run of bytes, none included ("partner-*", "*-test").  Its
 * specificity orders the rules of one slot (the same dimension, endpoint
 * pattern and tier, compared as written): a rule without match.value is
 * the least specific, a glob is more specific the more bytes it fixes, an
 * exact value is the most specific.
 *
 * Of the rules that apply to a request (endpoint, tier, a dimension it
 * carries, and for a per-value rule one of its patterns matching the
 * request's value), a rule Y in mode "enforce" takes out a rule X
 *   - if Y lists X's id in "replaces", or
 *   - if Y has no "replaces", has match.value, X is of Y's slot and X is
 *     less specific for this request than Y.
 * What is taken out charges nothing; every rule that applies takes out
 * what it names, whether or not it is taken out itself (the replacement
 * is not evaluated in rounds).  Of what is left, unlimited rules charge
 * nothing and never reach the store.  A rule in mode "log" replaces
 * nothing (a dry run of an override runs beside the rule it would
 * replace).  ratelimit.7 says the same for operators.
 *
 * The index: per-value rules are not in rule_index.h's buckets (a set of
 * 5000 per-customer overrides would make every request match them all);
 * they are found here by one hash probe per request dimension for exact
 * values, one per prefix length the set uses for globs of the form
 * "prefix*", and a list matched one by one for the other globs.
 */
#ifndef RL_RULE_VALUES_H
#define RL_RULE_VALUES_H

#include <stddef.h>
#include <stdint.h>

#include "rule.h"

#define RULE_VALUES_MAX 100000 /* patterns in one rule's match.value  */
#define RULE_REPLACES_MAX 64   /* rule ids in one rule's "replaces"    */

typedef struct rule_values rule_values;

/* 0 if s is a value pattern: 1..RL_KEY_MAX bytes, no control byte, not
 * only `*`; else -1 with the reason in err. */
int rule_value_check(const char *s, char *err, size_t errlen);

/* 1 if the pattern pat (`*` any run of bytes) matches v (vlen bytes). */
int rule_value_match(const char *pat, const char *v, size_t vlen);

/* The checks of one rule's new members that need no other rule: an
 * unlimited rule must match values or replace something, a rule may not
 * replace itself, a rule in mode "log" replaces nothing.  0, or -1 with
 * "field: reason" in err. */
int rule_values_rule_check(const rl_rule *r, char *err, size_t errlen);

/* The set's checks and index: every id in a "replaces" names a rule of
 * the set (find(ctx, id): the rule so named, or NULL), no chain of
 * "replaces" comes back to where it started.  *out NULL when no rule of
 * rules[0..n) uses the members (the request path then costs nothing
 * more).  RL_OK, RL_ERULE ("rules[i]: replaces: ...") or RL_ENOMEM, with
 * the reason in err.  The rules must be final: the index points into
 * them. */
typedef const rl_rule *(*rule_find_fn)(const void *ctx, const char *id);
int rule_values_build(const rl_rule *rules, size_t n, rule_find_fn find,
                      const void *ctx, rule_values **out, char *err,
                      size_t errlen);

void rule_values_free(rule_values *vx);

/*
 * A request's rules after the per-value ones: hit[0..nhit) are the
 * numbers rule_index_match() found (rules without match.value, in rule
 * order); the per-value rules this request matches (val[id]: the value
 * of dimension id when bit id of present is set, len[id] bytes, 0: up to
 * its NUL; the endpoint elen bytes, the tier tlen, neither read past
 * them, as rule_index_match() reads them) join them, replaced
 * rules and unlimited ones leave, and the rest go back into hit[] in
 * rule order.  hit has room for RULE_INDEX_MAX; more candidates than
 * that return RULE_INDEX_MAX (the caller's "matches too many rules").
 * Allocates nothing.  vx NULL: returns nhit.
 */
size_t rule_values_apply(const rule_values *vx, const rl_rule *rules,
                         const char *endpoint, size_t elen, const char *tier,
                         size_t tlen, uint64_t present,
                         const char *const *val, const size_t *len,
                         uint32_t *hit, size_t nhit);

#endif
