/*
 * rules_load.h -- how a new rule set replaces the one in force.  Every
 * path goes through rules_take_json(): rl_rules_load_file(),
 * rl_rules_load_string(), the options rules_file and rules, and the
 * rules source's background thread.  Also the bookkeeping behind
 * rl_rules_status_get().
 */
#ifndef RL_RULES_LOAD_H
#define RL_RULES_LOAD_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "ratelimit.h"
#include "ruleset.h"

/* What rl_rules_status_get() reports, kept under its own lock (never one
 * the request path takes). */
typedef struct rules_state {
    pthread_mutex_t mu;
    int64_t version;           /* the set in force (kept with origin)   */
    int origin;                /* RL_RULES_FROM_*                       */
    int source;                /* RL_SOURCE_*                           */
    uint64_t loads, refused_bad, refused_stale, source_errors;
    int64_t last_read_ms, last_load_ms;
    char last_refusal[RL_RULES_REFUSAL_MAX];
    int64_t refusal_log_tat;      /* mono ms: the refusal log's GCRA  */
    uint64_t refusals_unlogged;   /* refused since, not logged        */
} rules_state;

/* How a set is to be taken. */
typedef struct swap_how {
    int origin;      /* RL_RULES_FROM_*, for the status                  */
    int newer_only;  /* refuse a version not greater than the one in
                        force (the rules source: contract, section 2)    */
    int need_version;/* refuse a set without "version" (Redis snapshots) */
    int log;         /* report takes and refusals to the log hook: the
                        library acting on its own, not the caller's call */
    const char *what;/* names the set in messages: a path, "rules", the
                        source (never a URI: no secrets)                 */
} swap_how;

/*
 * Make the rule set json[0..len) the limiter's: parse it (under the load
 * lock, against the set in force, whose unchanged rules are copied rather
 * than parsed again: ruleset_delta.h), number it (a set without "version"
 * gets the current version + 1, refused if that would pass INT64_MAX),
 * check its version as `how` asks, carry what rules inherit from their
 * predecessors, swap it in atomically, wait for the old set's readers to
 * leave and free it; count and log.  A set that does not parse, validate
 * or pass the version check is refused (counted, logged as `how` says)
 * and the set in force stays.  Serialised with every other load.
 * Returns RL_OK, RL_EPARSE, RL_ERULE or RL_ENOMEM with the reason in err.
 */
int rules_take_json(rl_limiter *lim, const char *json, size_t len,
                    const swap_how *how, char *err, size_t errlen);

/* Count and log a set refused before it could be parsed (too large,
 * say); `why` names it. */
void rules_refused(rl_limiter *lim, const swap_how *how, int stale,
                   const char *why);

/* The rules source's health, for the status: RL_SOURCE_UP with the time
 * of a good read, or RL_SOURCE_DOWN (counted as a source error). */
void rules_source_seen(rl_limiter *lim, int up, int64_t now_ms);

/* When the set in force came from the last good file and the source now
 * holds the same text, it is the source's: say so in the status. */
void rules_origin_confirm(rl_limiter *lim, int from, int to);

int rules_state_init(rules_state *st);
void rules_state_destroy(rules_state *st);

#endif
