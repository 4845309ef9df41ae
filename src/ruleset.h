/*
 * ruleset.h -- an immutable, versioned set of rules: what the request path
 * reads.  Built once from JSON, never changed after; a new set replaces the
 * old one as a whole (see rcu.h), so readers never see half an update.
 */
#ifndef RL_RULESET_H
#define RL_RULESET_H

#include <stddef.h>
#include <stdint.h>

#include "rule.h"

#define RL_RULES_MAX 100000 /* rules in one set */

typedef struct rl_ruleset {
    int64_t version;
    size_t n;
    rl_rule *rules;      /* in file order                          */
    uint32_t *index;     /* by id hash: rule index + 1, 0 = empty  */
    size_t mask;         /* index size - 1 (a power of two)        */
} rl_ruleset;

/* Parse {"version": N, "rules": [...]} or a bare array of rules.  Without a
 * "version" the set gets `next_version`.  Returns RL_OK, or RL_EPARSE /
 * RL_ERULE / RL_ENOMEM with the reason (and the failing rule) in err. */
int ruleset_parse(const char *json, size_t len, int64_t next_version,
                  rl_ruleset **out, char *err, size_t errlen);

/* An empty set (version 0), for a limiter that has no rules yet. */
rl_ruleset *ruleset_empty(void);

const rl_rule *ruleset_find(const rl_ruleset *rs, const char *id);
void ruleset_free(rl_ruleset *rs);

#endif
