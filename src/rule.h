/*
 * rule.h -- the rule model: one rate limit, as operators write it in JSON
 * and as the request path reads it.
 *
 * A rule says: count requests per value of one dimension (user, api_key, ip,
 * custom, or global: one counter for everyone), for requests whose endpoint
 * matches a pattern and whose tier matches, allowing `limit` per
 * `window_seconds` by one algorithm; in mode "enforce" it rejects, in mode
 * "log" it only reports; if the store fails it follows its failure mode.
 */
#ifndef RL_RULE_H
#define RL_RULE_H

#include <jansson.h>
#include <stdint.h>

#include "algo.h"
#include "ratelimit.h"

enum rl_dimension { RL_DIM_USER, RL_DIM_API_KEY, RL_DIM_IP, RL_DIM_CUSTOM,
                    RL_DIM_GLOBAL };
enum rl_mode { RL_MODE_ENFORCE, RL_MODE_LOG };
enum rl_failure { RL_FAIL_FALLBACK, RL_FAIL_OPEN, RL_FAIL_CLOSED };

#define RL_TIER_MAX 63

struct dryrun; /* src/dryrun.h */

typedef struct rl_rule {
    char id[RL_RULE_ID_MAX + 1];
    int dimension;               /* enum rl_dimension                  */
    char *endpoint;              /* pattern; NULL matches any endpoint */
    char *tier;                  /* NULL matches any tier              */
    algo_params ap;
    int64_t window_s;
    int mode;                    /* enum rl_mode                       */
    int failure;                 /* enum rl_failure                    */
    int64_t version;
    char updated_at[40];         /* RFC 3339, "" if not given          */
    uint64_t state_seed;         /* hash of id, algorithm and window:
                                    the store keys state by it, so a
                                    rule that changes algorithm or
                                    window starts from fresh state     */
    struct dryrun *dry;          /* dry-run counters (mode "log", or
                                    kept from an earlier log mode);
                                    NULL: none                         */
} rl_rule;

/* Fill *r from one JSON rule object.  Strict: unknown fields, wrong types
 * and out-of-range values fail.  The camelCase aliases ruleId,
 * windowSeconds, failureMode and updatedAt are accepted for their
 * snake_case fields; both spellings of one field fail.  Returns 0, or -1
 * with "field: reason" in err (the field by its snake_case name).  On
 * failure *r holds nothing that needs freeing.  rule_json.h writes the
 * canonical form back. */
int rule_from_json(json_t *obj, rl_rule *r, char *err, size_t errlen);

/* Free what rule_from_json() allocated inside *r (not r itself). */
void rule_clear(rl_rule *r);

/* 0 if `id` is a valid rule id: 1..RL_RULE_ID_MAX of [A-Za-z0-9._:-], and
 * neither "." nor ".." (URL dot-segments: the id is a path segment of
 * ratelimitd's API). */
int rule_id_check(const char *id);

/* 1 if the rule applies to a request with this endpoint and tier. */
int rule_matches(const rl_rule *r, const char *endpoint, const char *tier);

/* The names JSON gives a dimension ("user", ...), a mode ("enforce",
 * "log") and a failure mode ("fallback", "open", "closed"); "?" if out of
 * range.  And the request's value for a dimension. */
const char *rule_dimension_name(int dim);
const char *rule_mode_name(int mode);
const char *rule_failure_name(int failure);
const char *rule_dimension_value(int dim, const rl_request *req);

#endif
