/*
 * rule_json.h -- the canonical JSON form of a rule and of a rule set: the
 * one form ratelimitd answers with, publishes to Redis and stores, and the
 * form rule files are best written in (contracts.md, section 1).
 *
 * A set is {"version": N, "rules": [RULE, ...]}.  A rule's members come in
 * this order, optional ones left out when absent: rule_id, dimension, match
 * {endpoint, tier} (left out when it matches everything), limit,
 * window_seconds, burst (token_bucket and gcra only, always: the effective
 * bucket size), algorithm, mode, failure_mode, version, updated_at (when
 * known).  Names are snake_case; the parser (rule.h) also reads the
 * camelCase aliases, the writer never writes them.
 *
 * What the writer gives, the parser reads back as the same rule:
 * rule_from_json(rule_to_json(r)) equals r field by field.
 */
#ifndef RL_RULE_JSON_H
#define RL_RULE_JSON_H

#include <jansson.h>

#include "rule.h"
#include "ruleset.h"

/* The flags to json_dumps() the canonical text with: compact, members in
 * the order they were added (the order above). */
#define RULE_JSON_DUMP_FLAGS (JSON_COMPACT | JSON_PRESERVE_ORDER)

/* A new JSON object for one rule; the caller owns the reference.  NULL
 * only when out of memory.  Any thread; reads *r only. */
json_t *rule_to_json(const rl_rule *r);

/* A new JSON object for the whole set, rules in the set's order; NULL only
 * when out of memory. */
json_t *ruleset_to_json(const rl_ruleset *rs);

#endif
