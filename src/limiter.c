/*
 * limiter.c -- the handle: its lifecycle and what it answers about itself.
 *
 * rl_limiter_new() opens the store a URI names (and the local memory store
 * the fallback failure mode needs beside a remote one), then takes the
 * initial rules (a file, a string, or a rules source's thread);
 * rl_limiter_free() undoes it in reverse.  rl_stats_get() and the version
 * calls live here too.  The request path is request.c, its decision
 * policy decide.c; rule loading is rules_load.c and the rules source's
 * thread rules_source.c: this file creates and frees the handle they
 * work on.
 */
#include "limiter.h"
#include "events.h"
#include "log.h"
#include "deny_cache.h"
#include "lease.h"
#include "options.h"
#include "error.h"
#include "sized.h"
#include "rules_source.h"
#include "siphash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

RL_EXPORT int rl_version(void)
{
    return RL_VERSION_NUMBER;
}

#define STR_(x) #x
#define STR(x) STR_(x)

RL_EXPORT const char *rl_version_string(void)
{
    return STR(RL_VERSION_MAJOR) "." STR(RL_VERSION_MINOR) "." STR(
        RL_VERSION_PATCH);
}

rl_store *limiter_store(rl_limiter *lim)
{
    return lim->store;
}

/* ---- lifecycle -------------------------------------------------------- */

/* A sliding log is as long as its limit: the stores whose state per
 * client is fixed-size cannot keep it, and say so when a rule set holds
 * one (rules_load.c). */
static const char *log_refusal(const rl_store *s, const rl_config *cfg)
{
    if (strcmp(s->vt->name, "shm") == 0)
        return "shm:// keeps a fixed 32-byte state per client, and a log "
               "does not fit: use memory:// or a Redis store";
    if (!s->vt->local && cfg->redis_compact)
        return "redis_layout compact keeps a fixed state per client in "
               "shared hashes, and a log does not fit: use the plain "
               "layout";
    return NULL;
}

static int open_store(rl_limiter *lim, const rl_config *cfg)
{
    store_options opt = {
        .memory_max_bytes = cfg->memory_max_bytes,
        .timeout_ms = cfg->timeout_ms,
        .connect_timeout_ms = cfg->connect_timeout_ms,
        .redis_connections = (int)cfg->redis_connections,
        .degraded_start = (int)cfg->degraded_start,
        .breaker_failures = (int)cfg->breaker_failures,
        .breaker_cooldown_ms = cfg->breaker_cooldown_ms,
        /* fleet_size "auto": count the fleet by heartbeats */
        .fleet_name = cfg->fleet_size != 0 ? NULL
                      : cfg->fleet_name ? cfg->fleet_name : "default",
        .fleet_size = &lim->fleet_size,
        .compact = (int)cfg->redis_compact,
        .tls_ca_file = cfg->tls_ca_file,
        .tls_ca_dir = cfg->tls_ca_dir,
        .tls_cert_file = cfg->tls_cert_file,
        .tls_key_file = cfg->tls_key_file,
        .tls_verify = (int)cfg->tls_verify,
        .log_fn = cfg->log_fn,
        .log_arg = cfg->log_arg,
        .sentinel_password = cfg->sentinel_password,
        .shm_size = cfg->shm_size,
        .hash_key = lim->layout_key,
        .functions = (int)cfg->redis_functions,
        .command = (int)cfg->redis_command,
        .oldest = (int)cfg->redis_oldest_limiter,
    };
    const char *uri = cfg->store ? cfg->store : "memory://";
    char err[RL_ERRMSG_MAX - 40];
    int rc;

    /* checked when set (options.c) */
    lim->keyed_layout = cfg->hash_key &&
                        siphash_key_parse(cfg->hash_key, lim->layout_key) == 0;
    /* "auto" starts at fleet_size_unknown until the first heartbeat
     * counts the fleet (the memory stores count nothing: 1). */
    atomic_store(&lim->fleet_size,
                 cfg->fleet_size ? cfg->fleet_size : cfg->fleet_size_unknown);
    if (!lim->keyed_layout)
        opt.hash_key = NULL;
    rc = store_open(uri, &opt, &lim->store, err, sizeof err);
    /* A limiter with a last good copy of its rules starts while the store
     * is away, as the rules source does (rules_source.c): degraded, each
     * rule's failure mode deciding until the store answers. */
    if (rc == RL_ESTORE && !opt.degraded_start && cfg->rules_source &&
        cfg->rules_file) {
        log_emit(cfg->log_fn, cfg->log_arg, RL_LOG_WARN,
                 "store cannot be reached (%s): starting without it, as "
                 "rules_file (the last good copy) allows; each rule's "
                 "failure mode decides until it answers", err);
        opt.degraded_start = 1;
        rc = store_open(uri, &opt, &lim->store, err, sizeof err);
    }

    if (rc == RL_OK && lim->store->vt->local && !cfg->fleet_size)
        atomic_store(&lim->fleet_size, 1); /* no fleet to count */
    /* memory:// and shm:// decide locally: no fallback beside them */
    if (rc == RL_OK && !lim->store->vt->local)
        rc = store_open("memory://", &opt, &lim->fallback, err, sizeof err);
    if (rc == RL_OK)
        lim->log_refused = log_refusal(lim->store, cfg);
    return rc == RL_OK ? RL_OK : rl_fail(NULL, rc, "%s", err);
}

/* Option events_redis: the ring and its sender thread. */
static int start_events(rl_limiter *lim, const rl_config *cfg)
{
    events_opts o = {
        .uri = cfg->events_redis,
        .stream = cfg->events_stream ? cfg->events_stream
                                     : EVENTS_STREAM_DEFAULT,
        .maxlen = cfg->events_maxlen,
        .ring = cfg->events_ring,
        .key_mode = (int)cfg->events_key,
        .sample = cfg->events_sample,
        .hash_key = lim->keyed_layout ? lim->layout_key : NULL,
        .timeout_ms = cfg->connect_timeout_ms,
    };

    if (!cfg->events_redis)
        return RL_OK;
    return events_start(&lim->events, &o);
}

static int load_initial_rules(rl_limiter *lim, const rl_config *cfg)
{
    int rc = RL_OK;

    if (cfg->rules_source)
        return rules_source_start(lim, cfg);
    if (cfg->rules_file)
        rc = rl_rules_load_file(lim, cfg->rules_file);
    if (rc == RL_OK && cfg->rules)
        rc = rl_rules_load_string(lim, cfg->rules);
    if (rc != RL_OK) { /* re-tag the message: the caller has no handle */
        char msg[RL_ERRMSG_MAX];
        const char *colon = strchr(rl_errmsg(lim), ':');
        snprintf(msg, sizeof msg, "%s", colon ? colon + 2 : rl_errmsg(lim));
        rl_fail_msg(NULL, rc, msg);
    }
    return rc;
}

RL_EXPORT int rl_limiter_new(rl_limiter **out, const rl_config *cfg)
{
    struct rl_config defaults;
    rl_limiter *lim;
    rl_ruleset *empty;
    int rc;

    if (!out)
        return rl_fail(NULL, RL_EINVAL, "rl_limiter_new: out is NULL");
    *out = NULL;
    if (!cfg) {
        config_defaults(&defaults);
        cfg = &defaults;
    }
    /* 64-byte aligned: the rule-set readers' and the counters' shards
     * each own a cache line. */
    lim = aligned_alloc(64, (sizeof *lim + 63) / 64 * 64);
    if (lim)
        memset(lim, 0, sizeof *lim);
    if (!lim || !(empty = ruleset_empty())) {
        free(lim);
        return rl_fail(NULL, RL_ENOMEM, "creating a limiter");
    }
    rcu_init(&lim->rules, empty);
    pthread_mutex_init(&lim->load_lock, NULL);
    rules_state_init(&lim->rstate);
    lim->log_fn = cfg->log_fn;
    lim->log_arg = cfg->log_arg;
    lim->mconf = (metrics_conf){.on = cfg->metrics != 0,
                                .near_pct = cfg->near_limit_pct};
    if (lim->mconf.on && !(lim->latency = metrics_hist_new()))
        rc = rl_fail(NULL, RL_ENOMEM, "creating the latency histogram");
    else if ((rc = open_store(lim, cfg)) == RL_OK && lim->store->vt->local)
        lim->mconf.sample_mask = METRICS_SAMPLE_MEMORY - 1;
    if (rc == RL_OK && cfg->deny_cache && !lim->store->vt->local &&
        !(lim->deny = deny_cache_new((size_t)cfg->deny_cache)))
        rc = rl_fail(NULL, RL_ENOMEM, "creating the deny cache");
    if (rc == RL_OK && cfg->lease_entries && lim->store->vt->give_back &&
        !(lim->lease = lease_new((size_t)cfg->lease_entries, lim->store)))
        rc = rl_fail(NULL, RL_ENOMEM, "creating the lease table");
    if (rc != RL_OK || (rc = start_events(lim, cfg)) != RL_OK ||
        (rc = load_initial_rules(lim, cfg)) != RL_OK) {
        rl_limiter_free(lim);
        return rc;
    }
    *out = lim;
    return RL_OK;
}

RL_EXPORT void rl_limiter_free(rl_limiter *lim)
{
    if (!lim)
        return;
    rules_source_stop(lim); /* first: its thread swaps rules in */
    events_stop(lim->events);
    deny_cache_free(lim->deny);
    lease_free(lim->lease); /* gives back what grants hold: before the store */
    store_free(lim->store);
    store_free(lim->fallback);
    ruleset_free(rcu_peek(&lim->rules));
    rcu_destroy(&lim->rules);
    pthread_mutex_destroy(&lim->load_lock);
    rules_state_destroy(&lim->rstate);
    metrics_hist_free(lim->latency);
    free(lim);
}

RL_EXPORT int rl_stats_get(const rl_limiter *lim, rl_stats *out)
{
    rl_stats st = {0};
    int64_t opens = 0, closes = 0;
    size_t span;

    if (!lim || !out)
        return rl_fail(lim, RL_EINVAL, "rl_stats_get: NULL argument");
    if (!(span = sized_span(lim, "rl_stats_get: out->size", &sized_stats,
                            out->size)))
        return RL_EINVAL;
    st.checks = stats_sum(&lim->counts, ST_CHECKS);
    st.allowed = stats_sum(&lim->counts, ST_ALLOWED);
    st.denied = stats_sum(&lim->counts, ST_DENIED);
    st.soft = stats_sum(&lim->counts, ST_SOFT);
    st.fail_open = stats_sum(&lim->counts, ST_FAIL_OPEN);
    st.fallback = stats_sum(&lim->counts, ST_FALLBACK);
    st.fail_closed = stats_sum(&lim->counts, ST_FAIL_CLOSED);
    st.store_errors = stats_sum(&lim->counts, ST_STORE_ERRORS);
    st.breaker_state = RL_BREAKER_NONE;
    if (lim->store->vt->breaker)
        st.breaker_state = lim->store->vt->breaker(lim->store, &opens,
                                                   &closes);
    st.fleet_size = (uint64_t)atomic_load(&((rl_limiter *)lim)->fleet_size);
    st.breaker_opens = (uint64_t)opens;
    st.breaker_closes = (uint64_t)closes;
    sized_fill(out, &st, span);
    return RL_OK;
}
