/*
 * rule.h -- the rule model: one rate limit, as operators write it in JSON
 * and as the request path reads it.
 *
 * A rule says: count requests per value of one dimension (user, api_key, ip,
 * any other name a request may carry, e.g. "tenant", or global: one
 * counter for everyone), for requests whose endpoint
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

/*
 * A dimension's id in its rule set: user, api_key and ip (the request's
 * shortcuts) have fixed ids; every other name a set's rules count by is
 * given one at load (ruleset_index(), RULE_DIM_NAMED up, fewer than
 * RULESET_DIMS_MAX in all), so the request path matches a rule's
 * dimension to the request by id, never by name.  "global" has none: it
 * needs no value.
 */
enum { RULE_DIM_USER, RULE_DIM_API_KEY, RULE_DIM_IP, RULE_DIM_NAMED };
#define RULE_DIM_GLOBAL (-1)
#define RULESET_DIMS_MAX 64 /* ids in a set: a request's dims fit a mask */
enum rl_mode { RL_MODE_ENFORCE, RL_MODE_LOG };
enum rl_failure { RL_FAIL_FALLBACK, RL_FAIL_OPEN, RL_FAIL_CLOSED };

#define RL_TIER_MAX 63
#define RULE_LEASE_MIN 2 /* a lease of 1 unit saves no call */

struct dryrun; /* src/telemetry/dryrun.h */
struct rule_metrics; /* src/telemetry/metrics.h */
/*
 * A rule's shape: the numbers that give its stored state its units, named.
 * A window's counts mean the same under any limit, so its shape is the
 * algorithm's letter and the window in seconds ("s60"); a bucket's level
 * and times are in units of its rate and size, so its shape adds the limit
 * and the burst ("t60:100:20").  A sliding log's times too mean the same
 * under any limit ("l60").  Stores name a client's state by the rule
 * id and the shape: a state is never read in another shape's units.
 */
#define RULE_SHAPE_MAX 32      /* "g2678400:1000000000:1000000000" + NUL */
#define RULE_PREV_MAX 4        /* replaced shapes a rule remembers       */
/* How long after a change old-shape states are still looked for, beyond
 * their own life: limiters of a fleet take up a new rule set within
 * seconds of each other (a pull every rules_refresh_s at the latest),
 * and meanwhile the others still write the old shape. */
#define RULE_SHAPE_GRACE_MS 60000

typedef struct rule_shape {
    algo_params ap;              /* the numbers                        */
    uint64_t state_seed;         /* the memory store's: id and name    */
    int64_t since_ms;            /* replaced at (epoch ms); previous
                                    shapes only                        */
    int64_t until_ms;            /* no state of this shape is unlike a
                                    fresh one after this (epoch ms)    */
    char name[RULE_SHAPE_MAX];   /* "s60", "t60:100:20"                */
    size_t len;
} rule_shape;

typedef struct rl_rule {
    char id[RL_RULE_ID_MAX + 1];
    char dimension[RL_DIM_NAME_MAX + 1]; /* its name, e.g. "user"    */
    size_t dim_len;
    int dim_id;                  /* RULE_DIM_*, or set by ruleset_index */
    char *endpoint;              /* pattern; NULL matches any endpoint */
    char *tier;                  /* NULL matches any tier              */
    algo_params ap;
    int64_t window_s;
    int mode;                    /* enum rl_mode                       */
    int failure;                 /* enum rl_failure                    */
    int64_t version;
    char updated_at[40];         /* RFC 3339, "" if not given          */
    rule_shape shape;            /* the current one; the memory store
                                    keys state by shape.state_seed     */
    rule_shape *prev;            /* the shapes it replaced, newest
                                    first (ruleset_inherit), or NULL   */
    int nprev;
    struct dryrun *dry;          /* dry-run counters (mode "log", or
                                    kept from an earlier log mode);
                                    NULL: none                         */
    struct rule_metrics *met;    /* its metrics (metrics.h); NULL with
                                    the option metrics=0               */
    int64_t lease;               /* units a limiter leases at once on a
                                    Redis store (lease.h); 0: none     */
    /* Per-value rules (rule_values.h): NULL / 0 / 0 when not given. */
    char *values;                /* match.value: its patterns, each NUL
                                    ended, one after another; NULL: the
                                    rule matches any value             */
    uint32_t nvalues;
    uint32_t nreplaces;          /* "replaces": rule ids, NUL ended,
                                    one after another in *replaces     */
    char *replaces;              /* NULL with has_replaces 0: absent   */
    int has_replaces;            /* 1: given (an empty list too)       */
    int unlimited;               /* 1: the rule lifts the limits it
                                    replaces and charges nothing       */
} rl_rule;

/* Fill *r from one JSON rule object.  Strict: unknown fields, wrong types
 * and out-of-range values fail.  The camelCase aliases ruleId,
 * windowSeconds, failureMode and updatedAt are accepted for their
 * snake_case fields; both spellings of one field fail.  Returns 0, or -1
 * with "field: reason" in err (the field by its snake_case name).  On
 * failure *r holds nothing that needs freeing.  rule_json.h writes the
 * canonical form back. */
int rule_from_json(json_t *obj, rl_rule *r, char *err, size_t errlen);

/* *dst = a copy of the rule rule_from_json() made in *src, with strings
 * of its own: what the same JSON would give again.  Not what the swap
 * adds (the shapes it replaced, its dry-run block): dst has none.
 * Returns 0, or -1 out of memory with *dst holding nothing to free. */
int rule_copy(rl_rule *dst, const rl_rule *src);

/* Free what rule_from_json() and ruleset_inherit() allocated inside *r
 * (not r itself). */
void rule_clear(rl_rule *r);

/* The shape of rule `id` with the numbers `ap`: its name and state seed
 * (since_ms and until_ms are left 0). */
void rule_shape_init(rule_shape *s, const char *id, const algo_params *ap);

/* 0 if `id` is a valid rule id: 1..RL_RULE_ID_MAX of [A-Za-z0-9._:-], and
 * neither "." nor ".." (URL dot-segments: the id is a path segment of
 * ratelimitd's API). */
int rule_id_check(const char *id);

/* 1 if the rule applies to a request with this endpoint and tier. */
int rule_matches(const rl_rule *r, const char *endpoint, const char *tier);

/* The same for a counted endpoint (elen bytes) and tier (tlen bytes),
 * read where the request holds them (no NUL read); NULL or 0 bytes: the
 * request does not say. */
int rule_matches_n(const rl_rule *r, const char *endpoint, size_t elen,
                   const char *tier, size_t tlen);

/* The names JSON gives a mode ("enforce", "log") and a failure mode
 * ("fallback", "open", "closed"); "?" if out of range. */
const char *rule_mode_name(int mode);
const char *rule_failure_name(int failure);

/* The length of the dimension name s (NULL-safe): 1..RL_DIM_NAME_MAX
 * bytes of a-z 0-9 _ . : -, the first a letter; 0 if s is not one.
 * Reads at most RL_DIM_NAME_MAX + 1 bytes. */
size_t rule_dim_name_len(const char *s);

/* The fixed id of a dimension name of len bytes: RULE_DIM_USER,
 * RULE_DIM_API_KEY, RULE_DIM_IP, RULE_DIM_GLOBAL; RULE_DIM_NAMED for any
 * other name. */
int rule_dim_builtin(const char *name, size_t len);

#endif
