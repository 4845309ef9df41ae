/*
 * ruleset_delta.h -- parse a new rule set at the cost of what changed
 * since the set in force: rules whose JSON text is byte for byte the text
 * of a rule of that set are copied, not parsed again.  The outcome, the
 * rules and the error messages are ruleset_parse()'s (see
 * ruleset_delta.c for why).
 */
#ifndef RL_RULESET_DELTA_H
#define RL_RULESET_DELTA_H

#include <stddef.h>
#include <stdint.h>

#include "ruleset.h"

/* What one ruleset_parse_delta() call did, for tests and benches. */
typedef struct delta_info {
    int scanned;     /* the scanner split the text into rule slices     */
    int whole;       /* ruleset_parse() decided (the scanner declined,
                        or a slice, the ids or memory failed)           */
    size_t reused;   /* rules copied from `prev` (when not whole)       */
    size_t parsed;   /* rules parsed from their slices (when not whole) */
} delta_info;

/*
 * ruleset_parse(json, len, next_version, out, err, errlen), reusing the
 * rules of `prev` (the set in force; NULL or a set without kept text:
 * nothing to reuse) whose text is identical.  Same return codes, same
 * set, same messages.  A set it returns keeps a copy of its text and each
 * rule's slice (rl_ruleset.text, .slices) for the next call; `prev` is
 * only read, and must stay alive and unchanged during the call.  info may
 * be NULL.
 */
int ruleset_parse_delta(const char *json, size_t len, int64_t next_version,
                        const rl_ruleset *prev, rl_ruleset **out,
                        delta_info *info, char *err, size_t errlen);

#endif
