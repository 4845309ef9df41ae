/*
 * ruleset.h -- an immutable, versioned set of rules: what the request path
 * reads.  Built once from JSON, never changed after; a new set replaces the
 * old one as a whole (see rcu.h), so readers never see half an update.
 */
#ifndef RL_RULESET_H
#define RL_RULESET_H

#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "rule.h"

#define RL_RULES_MAX 100000 /* rules in one set */

/* Where a rule's JSON sits in the text its set was parsed from. */
typedef struct rule_slice {
    size_t off, len;
} rule_slice;

/* The names a set's rules count by beyond user, api_key and ip, each
 * given an id (RULE_DIM_NAMED + index) at load, and found by hash. */
#define RULESET_DIM_SLOTS (2 * RULESET_DIMS_MAX) /* a power of two */
typedef struct ruleset_dims {
    size_t n;
    const char *name[RULESET_DIMS_MAX]; /* a rule's dimension (owned by it) */
    size_t len[RULESET_DIMS_MAX];
    uint64_t hash[RULESET_DIMS_MAX];
    uint8_t slot[RULESET_DIM_SLOTS];    /* by hash: index + 1, 0 = empty  */
} ruleset_dims;

/* A set's generation: who numbered its versions (ratelimitd makes one per
 * database and start, see ratelimitd(8)); 1..64 of [0-9A-Za-z._-]. */
#define RULESET_GEN_MAX 64

typedef struct rl_ruleset {
    int64_t version;
    char generation[RULESET_GEN_MAX + 1]; /* "" when the text has none */
    size_t n;
    rl_rule *rules;      /* in file order                          */
    uint32_t *index;     /* by id hash: rule index + 1, 0 = empty  */
    size_t mask;         /* index size - 1 (a power of two)        */
    char *text;          /* a copy of the text it was parsed from,
                            for the next parse to reuse rules from
                            (ruleset_delta.h); NULL: not kept      */
    size_t text_len;
    rule_slice *slices;  /* rules[i]'s JSON: text + slices[i].off  */
    ruleset_dims dims;   /* the named dimensions its rules use     */
    struct rule_index *match; /* which rules a request matches
                            (rule_index.h); NULL: no rules         */
    struct rule_values *values; /* per-value rules, replaces and
                            unlimited (rule_values.h); NULL: the
                            set uses none of them                  */
} rl_ruleset;

/* 0 if s (len bytes) is a generation: 1..RULESET_GEN_MAX bytes of
 * [0-9A-Za-z._-]; else -1. */
int ruleset_gen_check(const char *s, size_t len);

/* Parse {"version": N, "generation": G, "rules": [...]} (version and
 * generation optional) or a bare array of rules.  Without a
 * "version" the set gets `next_version`.  Returns RL_OK, or RL_EPARSE /
 * RL_ERULE / RL_ENOMEM with the reason (and the failing rule) in err. */
int ruleset_parse(const char *json, size_t len, int64_t next_version,
                  rl_ruleset **out, char *err, size_t errlen);

/* Index rs->rules[0..n) by id and by what they match (rule_index.h), and
 * give each named dimension its id (rule.h); RL_ERULE on a duplicate id ("rules[i]: rule_id \"x\" appears
 * twice") or on more named dimensions than RULESET_DIMS_MAX allows,
 * RL_ENOMEM.  The parsers' last step. */
int ruleset_index(rl_ruleset *rs, char *err, size_t errlen);

/* The hash ruleset_dim_id() finds a dimension name of len bytes by. */
uint64_t ruleset_dim_hash(const char *name, size_t len);

/* The id in rs of the named dimension (not user, api_key, ip, global) of
 * len bytes and hash h (ruleset_dim_hash()), or -1: no rule counts by it.
 * One probe sequence and one compare; no allocation. */
int ruleset_dim_id(const rl_ruleset *rs, const char *name, size_t len,
                   uint64_t h);

/* An empty set (version 0), for a limiter that has no rules yet. */
rl_ruleset *ruleset_empty(void);

const rl_rule *ruleset_find(const rl_ruleset *rs, const char *id);
void ruleset_free(rl_ruleset *rs);

/*
 * `next` is about to replace `old`: each rule of `next` takes over what
 * its predecessor of the same rule_id carried: the shapes
 * it replaced (rule.h): when the predecessor's shape differs, it becomes
 * the newest previous shape, stamped now (since_ms) with until_ms = now +
 * RULE_SHAPE_GRACE_MS + the longer of its states' life and the new
 * shape's (a level taken at the change refills at the new rate); the
 * predecessor's own previous shapes follow, less those whose until_ms has passed and the one equal
 * to the new shape, at most RULE_PREV_MAX in all.  The stores look a
 * client's state up in those shapes when it has none in the current one
 * (lazy migration, algo_convert()).  Call it under the load lock, right
 * before the swap; `old` is only read.  It cannot fail: a rule whose list
 * cannot be allocated remembers nothing, and its clients start afresh, as
 * a new rule's would.
 */
void ruleset_inherit(rl_ruleset *next, const rl_ruleset *old);

/* Tests: the clock ruleset_inherit() stamps changes with (epoch ms);
 * NULL: the real time (CLOCK_REALTIME).  Process-wide. */
void ruleset_set_clock(rl_clock_fn fn, void *arg);

#endif
