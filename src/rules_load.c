/*
 * rules_load.c -- rule loading: rl_rules_load_file(), rl_rules_load_string(),
 * rl_rules_version(), rl_rules_status_get(), and the one way every path
 * takes a set (rules_take_json(): the API calls, the options at start,
 * the rules source).
 *
 * A new set's text is parsed under the load lock against the set in
 * force, whose unchanged rules are copied rather than parsed again
 * (ruleset_delta.h), never under a lock the request path takes; only a
 * set that parsed and validated whole, and whose version passes the
 * checks its path asks for, is swapped in (rcu.h: readers never wait and
 * never see half a set).  The
 * old set is freed once its last reader has left.  Every take and every
 * refusal is counted for rl_rules_status_get(); those the library makes
 * on its own (the rules source) also go to the log hook, while the
 * program's own calls report through their return value.
 */
#include "limiter.h"
#include "rules_load.h"
#include "dryrun.h"
#include "metrics.h"
#include "lease.h"
#include "rules_file.h"
#include "ruleset_delta.h"
#include "clock.h"
#include "error.h"
#include "log.h"
#include "sized.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERR_MAX (RL_ERRMSG_MAX - 40) /* room for rl_fail's own prefix */
/* The log hears of refused sets at most REFUSAL_LOG_BURST at once, then
 * one a REFUSAL_LOG_MS (GCRA); the line after a quiet spell counts the
 * refusals it did not name.  (A text refused once is not refused again
 * until the source holds another: rules_source.c.) */
#define REFUSAL_LOG_MS 1000
#define REFUSAL_LOG_BURST 10

int rules_state_init(rules_state *st)
{
    memset(st, 0, sizeof *st);
    st->origin = RL_RULES_FROM_NONE;
    st->source = RL_SOURCE_NONE;
    return pthread_mutex_init(&st->mu, NULL);
}

void rules_state_destroy(rules_state *st)
{
    pthread_mutex_destroy(&st->mu);
}

void rules_refused(rl_limiter *lim, const swap_how *how, int stale,
                   const char *why)
{
    rules_state *st = &lim->rstate;
    uint64_t unlogged = 0;
    int64_t now;
    int quiet = 0;

    pthread_mutex_lock(&st->mu);
    if (stale)
        st->refused_stale++;
    else
        st->refused_bad++;
    snprintf(st->last_refusal, sizeof st->last_refusal, "%s: %s", how->what,
             why);
    log_sanitize(st->last_refusal);
    now = clock_mono_ms();
    if (how->log && st->refusal_log_tat - now >
                        (int64_t)(REFUSAL_LOG_BURST - 1) * REFUSAL_LOG_MS) {
        st->refusals_unlogged++;
        quiet = 1;
    } else if (how->log) {
        unlogged = st->refusals_unlogged;
        st->refusals_unlogged = 0;
        st->refusal_log_tat = (st->refusal_log_tat > now
                                   ? st->refusal_log_tat : now) +
                              REFUSAL_LOG_MS;
    }
    pthread_mutex_unlock(&st->mu);
    if (how->log && !quiet)
        log_emit(lim->log_fn, lim->log_arg, RL_LOG_WARN,
                 "rules from %s refused, version %lld stays in force: %s"
                 "%s%.0llu%s", how->what, (long long)rl_rules_version(lim),
                 why, unlogged ? " (" : "", (unsigned long long)unlogged,
                 unlogged ? " more refused since the last line)" : "");
}

void rules_source_seen(rl_limiter *lim, int up, int64_t now_ms)
{
    rules_state *st = &lim->rstate;

    pthread_mutex_lock(&st->mu);
    st->source = up ? RL_SOURCE_UP : RL_SOURCE_DOWN;
    if (up)
        st->last_read_ms = now_ms;
    else
        st->source_errors++;
    pthread_mutex_unlock(&st->mu);
}

void rules_origin_confirm(rl_limiter *lim, int from, int to)
{
    pthread_mutex_lock(&lim->rstate.mu);
    if (lim->rstate.origin == from)
        lim->rstate.origin = to;
    pthread_mutex_unlock(&lim->rstate.mu);
}

/* The version `next` will run under, or -1 (reason in err).  `first`:
 * no set was taken yet, so the empty set in force (version 0) gives way
 * to any numbered set, version 0 included (a new rules service holds an
 * empty set numbered 0). */
static int64_t number(const rl_ruleset *next, const rl_ruleset *old,
                      const swap_how *how, int first, int *stale, char *err,
                      size_t errlen)
{
    *stale = 0;
    if (next->version < 0 && how->need_version)
        return snprintf(err, errlen, "version: required"), -1;
    if (next->version < 0 && old->version == INT64_MAX)
        return snprintf(err, errlen, "no \"version\", and version %lld in "
                        "force cannot be counted past: give the set a "
                        "version", (long long)INT64_MAX), -1;
    if (next->version < 0)
        return old->version + 1;
    /* A set of another generation was numbered by another database (or
     * another start of ratelimitd, see ratelimitd(8)): its version cannot
     * be compared with the one in force, and it replaces it whatever its
     * number.  Within a generation, only newer. */
    if (how->newer_only && next->generation[0] &&
        strcmp(next->generation, old->generation) != 0)
        return next->version;
    if (how->newer_only && next->version <= old->version &&
        !(first && next->version == old->version)) {
        *stale = 1;
        return snprintf(err, errlen, "version %lld is %s the version %lld "
                        "in force%s%s", (long long)next->version,
                        next->version == old->version ? "the same as"
                                                      : "older than",
                        (long long)old->version,
                        old->generation[0] ? ", both of generation " : "",
                        old->generation), -1;
    }
    return next->version;
}

/* What swap_locked() did, for swap_done(). */
typedef struct swap_out {
    rl_ruleset *old;  /* the set replaced, to free                  */
    int64_t version;  /* the version taken                          */
    size_t n;         /* its rules                                  */
    int stale;        /* refused as not newer                       */
    char generation[RULESET_GEN_MAX + 1];
} swap_out;

/* A rule the store cannot keep (limiter.c's log_refused): refuse the
 * set, naming the rule and why.  0: every rule can be kept. */
static int store_refuses(const rl_limiter *lim, const rl_ruleset *next,
                         char *err, size_t errlen)
{
    for (size_t i = 0; lim->log_refused && i < next->n; i++)
        if (next->rules[i].ap.algo == RL_ALGO_SLIDING_LOG)
            return snprintf(err, errlen,
                            "rule \"%s\": algorithm sliding_log: %s",
                            next->rules[i].id, lim->log_refused), -1;
    return 0;
}

/* The swap proper, under the load lock: number `next`, let it inherit
 * from the set in force and swap it in.  RL_OK with out->old the set
 * replaced (free it once the lock is released: rcu_swap() has waited
 * for its readers), or a refusal with `next` freed. */
static int swap_locked(rl_limiter *lim, rl_ruleset *next, const swap_how *how,
                       swap_out *out, char *err, size_t errlen)
{
    rl_ruleset *cur = rcu_peek(&lim->rules);
    int64_t version;
    int first;

    pthread_mutex_lock(&lim->rstate.mu);
    first = lim->rstate.loads == 0;
    pthread_mutex_unlock(&lim->rstate.mu);
    out->n = next->n;
    if (store_refuses(lim, next, err, errlen) ||
        (version = number(next, cur, how, first, &out->stale, err,
                          errlen)) < 0) {
        ruleset_free(next);
        return RL_ERULE;
    }
    next->version = version;
    /* Rules with the same rule_id carry over what their predecessors
     * had: the shapes they replaced (so each client's state is converted,
     * not lost) and their dry-run counters. */
    ruleset_inherit(next, cur);
    if (dryrun_inherit(next, cur) != RL_OK ||
        (lim->mconf.on && metrics_inherit(next, cur) != RL_OK)) {
        ruleset_free(next);
        return snprintf(err, errlen, "out of memory for rule counters"),
               RL_ENOMEM;
    }
    out->version = version;
    memcpy(out->generation, next->generation, sizeof out->generation);
    out->old = rcu_swap(&lim->rules, next);
    if (lim->lease) /* no check reads the old set now */
        lease_drop_changed(lim->lease, next);
    pthread_mutex_lock(&lim->rstate.mu);
    lim->rstate.version = version;
    lim->rstate.origin = how->origin;
    lim->rstate.loads++;
    lim->rstate.last_load_ms = clock_wall_ms();
    pthread_mutex_unlock(&lim->rstate.mu);
    return RL_OK;
}

/* After the load lock is released: free the set replaced, count and log
 * the outcome of swap_locked(). */
static int swap_done(rl_limiter *lim, int rc, const swap_out *out,
                     const swap_how *how, const char *err)
{
    if (rc == RL_ERULE)
        rules_refused(lim, how, out->stale, err);
    if (rc != RL_OK)
        return rc;
    ruleset_free(out->old);
    if (how->log)
        log_emit(lim->log_fn, lim->log_arg, RL_LOG_INFO,
                 "rules version %lld (%zu rules%s%s) taken from %s",
                 (long long)out->version, out->n,
                 out->generation[0] ? ", generation " : "", out->generation,
                 how->what);
    return RL_OK;
}

/*
 * The text is parsed under the load lock, against the set in force
 * (ruleset_delta.h: its unchanged rules are copied, not parsed again).
 * The lock keeps that set alive and in force for the whole parse, so
 * what is reused from is exactly what is replaced; it only serialises
 * loads, which the swap serialised anyway, and the request path never
 * takes it.  An RCU read section (rcu_read_lock()) would keep the set
 * alive too, but held for the milliseconds of a parse it would make a
 * concurrent load's rcu_swap() wait on it with the load lock held, and
 * the set it pinned could be replaced meanwhile, so reused from in vain.
 */
int rules_take_json(rl_limiter *lim, const char *json, size_t len,
                    const swap_how *how, char *err, size_t errlen)
{
    rl_ruleset *next = NULL;
    swap_out out = {0};
    int rc, parsed;

    pthread_mutex_lock(&lim->load_lock);
    /* -1: "no version given"; swap_locked() numbers it against the set
     * then in force */
    rc = ruleset_parse_delta(json, len, -1, rcu_peek(&lim->rules), &next,
                             NULL, err, errlen);
    if ((parsed = rc == RL_OK))
        rc = swap_locked(lim, next, how, &out, err, errlen);
    pthread_mutex_unlock(&lim->load_lock);
    if (!parsed) {
        rules_refused(lim, how, 0, err);
        return rc;
    }
    return swap_done(lim, rc, &out, how, err);
}

/* ---- the API ----------------------------------------------------------- */

RL_EXPORT int rl_rules_load_file(rl_limiter *lim, const char *path)
{
    swap_how how = {.origin = RL_RULES_FROM_FILE, .what = path};
    char err[ERR_MAX], *buf = NULL;
    size_t len = 0;
    int rc, too_big;

    if (!lim || !path)
        return rl_fail(lim, RL_EINVAL, "rl_rules_load_file: NULL argument");
    rc = rules_file_read(path, &buf, &len, NULL, &too_big, err, sizeof err);
    if (rc != RL_OK) {
        if (too_big)
            rules_refused(lim, &how, 0, err);
        return rl_fail_msg(lim, rc, err);
    }
    rc = rules_take_json(lim, buf, len, &how, err, sizeof err);
    free(buf);
    return rc == RL_OK ? RL_OK : rl_fail(lim, rc, "%.200s: %s", path, err);
}

RL_EXPORT int rl_rules_load_string(rl_limiter *lim, const char *json)
{
    swap_how how = {.origin = RL_RULES_FROM_STRING, .what = "rules"};
    char err[ERR_MAX];
    size_t len;
    int rc;

    if (!lim || !json)
        return rl_fail(lim, RL_EINVAL, "rl_rules_load_string: NULL argument");
    if ((len = strnlen(json, (size_t)RL_RULES_TEXT_MAX + 1)) >
        RL_RULES_TEXT_MAX) {
        snprintf(err, sizeof err, "more than the %d MiB a rule set may have",
                 RL_RULES_TEXT_MAX >> 20);
        rules_refused(lim, &how, 0, err);
        return rl_fail(lim, RL_EINVAL, "rules: %s", err);
    }
    rc = rules_take_json(lim, json, len, &how, err, sizeof err);
    return rc == RL_OK ? RL_OK : rl_fail(lim, rc, "rules: %s", err);
}

RL_EXPORT int64_t rl_rules_version(const rl_limiter *lim)
{
    rcu_token t;
    int64_t v;

    if (!lim)
        return rl_fail(NULL, RL_EINVAL, "rl_rules_version: lim is NULL");
    v = ((const rl_ruleset *)rcu_read_lock((rcu *)&lim->rules, &t))->version;
    rcu_read_unlock((rcu *)&lim->rules, t);
    return v;
}

RL_EXPORT int rl_rules_status_get(const rl_limiter *lim, rl_rules_status *out)
{
    rl_rules_status st;
    rules_state *rs;
    size_t span;

    if (!lim || !out)
        return rl_fail(lim, RL_EINVAL, "rl_rules_status_get: NULL argument");
    if (!(span = sized_span(lim, "rl_rules_status_get: out->size",
                            &sized_rules_status, out->size)))
        return RL_EINVAL;
    rs = (rules_state *)&lim->rstate;
    memset(&st, 0, sizeof st);
    pthread_mutex_lock(&rs->mu);
    st.version = rs->version;
    st.origin = rs->origin;
    st.source = rs->source;
    st.loads = rs->loads;
    st.refused_bad = rs->refused_bad;
    st.refused_stale = rs->refused_stale;
    st.source_errors = rs->source_errors;
    st.last_read_ms = rs->last_read_ms;
    st.last_load_ms = rs->last_load_ms;
    memcpy(st.last_refusal, rs->last_refusal, sizeof st.last_refusal);
    pthread_mutex_unlock(&rs->mu);
    sized_fill(out, &st, span);
    return RL_OK;
}
