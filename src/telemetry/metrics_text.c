/*
 * metrics_text.c -- rl_metrics_write() and rl_metrics_write_cb(): the
 * limiter's metrics (metrics.h, the stores' shards, the rules' status)
 * as Prometheus text exposition format 0.0.4.
 *
 * First a snapshot: each rule's escaped id, limit, window and counters,
 * copied out under the RCU read lock, and the store's shards; then the
 * text, written family by family (a family's samples must be together)
 * through a 4 KiB buffer to the caller's function.  The read lock is
 * never held while the caller's function runs, so a slow scrape never
 * holds up a rule swap.  Label values are escaped as the format says
 * (backslash, double quote, newline), so no rule id or address can break
 * a line.
 */
#include "error.h"
#include "events.h"
#include "limiter.h"
#include "metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the writer ----------------------------------------------------------- */

#define MW_BUF 4096 /* longer than any one line (escaped ids, addresses) */

typedef struct mw {
    rl_metrics_write_fn *fn;
    void *arg;
    int failed;            /* fn returned non-zero: write nothing more */
    size_t used;
    char buf[MW_BUF];
} mw;

static void mw_flush(mw *w)
{
    if (w->used && !w->failed && w->fn(w->arg, w->buf, w->used) != 0)
        w->failed = 1;
    w->used = 0;
}

static void mw_printf(mw *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void mw_printf(mw *w, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(w->buf + w->used, MW_BUF - w->used, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n >= MW_BUF - w->used) {
        mw_flush(w);
        va_start(ap, fmt);
        n = vsnprintf(w->buf, MW_BUF, fmt, ap);
        va_end(ap);
    }
    if (n > 0)
        w->used += (size_t)n < MW_BUF ? (size_t)n : MW_BUF - 1;
}

/* A label value escaped: \ as \\, " as \", newline as \n.  out has room
 * for twice the input and a NUL. */
static void escape_label(char *out, const char *in)
{
    for (; *in; in++) {
        if (*in == '\\' || *in == '"')
            *out++ = '\\', *out++ = *in;
        else if (*in == '\n')
            *out++ = '\\', *out++ = 'n';
        else
            *out++ = *in;
    }
    *out = '\0';
}

static void family(mw *w, const char *name, const char *type,
                   const char *help)
{
    mw_printf(w, "# HELP ratelimit_%s %s\n# TYPE ratelimit_%s %s\n", name,
              help, name, type);
}

/* ---- the snapshot ---------------------------------------------------------- */

typedef struct rule_snap {
    char id[2 * RL_RULE_ID_MAX + 1];   /* escaped                    */
    int64_t limit, window_s;
    int counted;                       /* has a metrics block        */
    int unlimited;                     /* "unlimited": no numbers    */
    uint64_t n[RM_COUNT];
} rule_snap;

typedef struct snap {
    rule_snap *rules;
    size_t nrules;
    store_shard *shards;
    size_t nshards;
    int64_t version, fleet_size;
    uint64_t loads, refused_bad, refused_stale, source_errors;
    uint64_t hist[METRICS_BUCKETS + 1], sum_ns;
    uint64_t ev_sent, ev_dropped[EV_DROP_COUNT]; /* rejection events */
} snap;

static int snap_rules(const rl_limiter *lim, snap *s)
{
    rcu_token t;
    const rl_ruleset *rs = rcu_read_lock((rcu *)&lim->rules, &t);

    s->nrules = rs->n;
    s->rules = calloc(rs->n ? rs->n : 1, sizeof *s->rules);
    for (size_t i = 0; s->rules && i < rs->n; i++) {
        const rl_rule *r = &rs->rules[i];
        rule_snap *o = &s->rules[i];
        escape_label(o->id, r->id);
        o->limit = r->ap.limit;
        o->window_s = r->window_s;
        o->unlimited = r->unlimited;
        if ((o->counted = r->met != NULL))
            metrics_read(r->met, o->n);
    }
    rcu_read_unlock((rcu *)&lim->rules, t);
    return s->rules ? RL_OK : RL_ENOMEM;
}

static int snap_take(const rl_limiter *lim, snap *s)
{
    rl_limiter *l = (rl_limiter *)lim;
    rl_store *st = lim->store;

    memset(s, 0, sizeof *s);
    if (snap_rules(lim, s) != RL_OK)
        return RL_ENOMEM;
    if (st->vt->shards) {
        if (!(s->shards = calloc(STORE_SHARDS_MAX, sizeof *s->shards)))
            return RL_ENOMEM;
        s->nshards = st->vt->shards(st, s->shards, STORE_SHARDS_MAX);
        if (s->nshards > STORE_SHARDS_MAX)
            s->nshards = STORE_SHARDS_MAX;
    }
    pthread_mutex_lock(&l->rstate.mu);
    s->version = l->rstate.version;
    s->loads = l->rstate.loads;
    s->refused_bad = l->rstate.refused_bad;
    s->refused_stale = l->rstate.refused_stale;
    s->source_errors = l->rstate.source_errors;
    pthread_mutex_unlock(&l->rstate.mu);
    s->fleet_size = atomic_load(&l->fleet_size);
    metrics_hist_read(lim->latency, s->hist, &s->sum_ns);
    if (lim->events)
        events_counts(lim->events, &s->ev_sent, s->ev_dropped);
    return RL_OK;
}

static void snap_free(snap *s)
{
    free(s->rules);
    free(s->shards);
}

/* ---- the families ---------------------------------------------------------- */

/* Per rule: RM_* counters; CHECKS is their verdicts' sum. */
#define CHECKS (-1)
static const struct {
    int k;
    const char *name, *help;
} rule_counters[] = {
    {CHECKS, "rule_checks_total", "Charges of the rule checked."},
    {RM_ALLOWED, "rule_allowed_total", "Charges the rule let pass."},
    {RM_DENIED, "rule_denied_total", "Charges the rule denied (mode enforce)."},
    {RM_WOULD_DENY, "rule_would_deny_total",
     "Charges the rule would have denied (mode log)."},
    {RM_NEAR, "rule_near_limit_total",
     "Charges that passed with less than near_limit_pct % of the limit left."},
    {RM_FAIL_OPEN, "rule_fail_open_total",
     "Charges decided by failure mode open (the store failed)."},
    {RM_FALLBACK, "rule_fallback_total",
     "Charges decided by the local fallback (the store failed)."},
    {RM_FAIL_CLOSED, "rule_fail_closed_total",
     "Charges decided by failure mode closed (the store failed)."},
    {RM_CACHED, "rule_cached_total",
     "Denials answered by the local deny cache, Redis not asked."},
    {RM_LEASED, "rule_leased_total",
     "Charges admitted from units leased from Redis, Redis not asked."},
    {RM_LEASE_FULL, "rule_lease_full_total",
     "Charges of a leased rule sent to Redis plainly: the lease table's "
     "slot was another's."},
};

/* One rule's gauge: v, or +Inf for an unlimited rule (it has no limit and
 * no window; 0 would read as "nothing allowed"). */
static void gauge_or_inf(mw *w, const char *name, const rule_snap *r,
                         int64_t v)
{
    if (r->unlimited)
        mw_printf(w, "ratelimit_%s{rule=\"%s\"} +Inf\n", name, r->id);
    else
        mw_printf(w, "ratelimit_%s{rule=\"%s\"} %lld\n", name, r->id,
                  (long long)v);
}

static void write_rules(mw *w, const snap *s)
{
    for (size_t f = 0; f < sizeof rule_counters / sizeof rule_counters[0];
         f++) {
        int k = rule_counters[f].k;
        family(w, rule_counters[f].name, "counter", rule_counters[f].help);
        for (size_t i = 0; i < s->nrules; i++) {
            const rule_snap *r = &s->rules[i];
            uint64_t v = k != CHECKS ? r->n[k]
                                     : r->n[RM_ALLOWED] + r->n[RM_DENIED] +
                                           r->n[RM_WOULD_DENY];
            if (r->counted)
                mw_printf(w, "ratelimit_%s{rule=\"%s\"} %llu\n",
                          rule_counters[f].name, r->id, (unsigned long long)v);
        }
    }
    family(w, "rule_limit", "gauge", "The rule's limit per window.");
    for (size_t i = 0; i < s->nrules; i++) /* unlimited: +Inf */
        gauge_or_inf(w, "rule_limit", &s->rules[i], s->rules[i].limit);
    family(w, "rule_window_seconds", "gauge", "The rule's window.");
    for (size_t i = 0; i < s->nrules; i++)
        gauge_or_inf(w, "rule_window_seconds", &s->rules[i],
                     s->rules[i].window_s);
}

#define SHARD_FIELD(f) offsetof(store_shard, f)
static const struct {
    size_t off;
    const char *name, *type, *help;
} shard_values[] = {
    {SHARD_FIELD(opens), "store_breaker_opens_total", "counter",
     "Times the shard's circuit breaker opened."},
    {SHARD_FIELD(closes), "store_breaker_closes_total", "counter",
     "Times it closed again after a probe."},
    {SHARD_FIELD(errors), "store_errors_total", "counter",
     "Calls failed with no connection up or on a stuck connection."},
    {SHARD_FIELD(timeouts), "store_timeouts_total", "counter",
     "Calls given up at their deadline."},
    {SHARD_FIELD(redirects), "store_redirects_total", "counter",
     "MOVED and ASK redirects followed."},
    {SHARD_FIELD(reconnects), "store_reconnects_total", "counter",
     "Connections replaced."},
};

/* A shard's state for the operator: "open" while its breaker is open or
 * half-open (checks follow the failure modes), "degraded" while it is
 * closed but no connection is up or a run of failures is being counted,
 * else "up". */
static const char *const shard_states[] = {"up", "degraded", "open"};

static int shard_state(const store_shard *sh)
{
    if (sh->breaker_state != RL_BREAKER_CLOSED)
        return 2;
    return !sh->up || sh->failing ? 1 : 0;
}

static void write_shard_states(mw *w, const snap *s)
{
    char addr[2 * STORE_ADDR_MAX + 1];

    family(w, "store_up", "gauge",
           "1 while the shard answers checks (a connection up, its breaker "
           "closed), else 0: checks follow the rules' failure modes.");
    for (size_t i = 0; i < s->nshards; i++) {
        escape_label(addr, s->shards[i].addr);
        mw_printf(w, "ratelimit_store_up{shard=\"%s\"} %d\n", addr,
                  shard_state(&s->shards[i]) != 2 && s->shards[i].up);
    }
    family(w, "store_state", "gauge",
           "The shard's state, one sample per state, 1 for the one it is "
           "in: up; degraded (no connection up, or failures counting "
           "toward its breaker); open (the breaker open or probing).");
    for (size_t i = 0; i < s->nshards; i++) {
        escape_label(addr, s->shards[i].addr);
        for (int k = 0; k < 3; k++)
            mw_printf(w, "ratelimit_store_state{shard=\"%s\",state=\"%s\"}"
                      " %d\n", addr, shard_states[k],
                      shard_state(&s->shards[i]) == k);
    }
}

static void write_shards(mw *w, const snap *s)
{
    char addr[2 * STORE_ADDR_MAX + 1];

    write_shard_states(w, s);

    family(w, "store_breaker_state", "gauge",
           "The shard's circuit breaker: 0 closed, 1 open, 2 half-open.");
    for (size_t i = 0; i < s->nshards; i++) {
        escape_label(addr, s->shards[i].addr);
        mw_printf(w, "ratelimit_store_breaker_state{shard=\"%s\"} %d\n",
                  addr, s->shards[i].breaker_state);
    }
    for (size_t f = 0; f < sizeof shard_values / sizeof shard_values[0];
         f++) {
        family(w, shard_values[f].name, shard_values[f].type,
               shard_values[f].help);
        for (size_t i = 0; i < s->nshards; i++) {
            int64_t v;
            memcpy(&v, (const char *)&s->shards[i] + shard_values[f].off,
                   sizeof v);
            escape_label(addr, s->shards[i].addr);
            mw_printf(w, "ratelimit_%s{shard=\"%s\"} %lld\n",
                      shard_values[f].name, addr, (long long)v);
        }
    }
}

static void write_latency(mw *w, const snap *s, const char *store)
{
    uint64_t cum = 0;
    const char *h = "ratelimit_check_duration_seconds";

    mw_printf(w, "# HELP %s Time a check took, store and decision "
              "(rl_allow, rl_check, rl_check_many); on the memory store one "
              "check in %d per thread is timed.\n# TYPE %s histogram\n", h,
              METRICS_SAMPLE_MEMORY, h);
    for (int b = 0; b < METRICS_BUCKETS; b++) {
        cum += s->hist[b];
        mw_printf(w, "%s_bucket{store=\"%s\",le=\"%g\"} %llu\n", h, store,
                  (double)metrics_bucket_ns[b] / 1e9,
                  (unsigned long long)cum);
    }
    cum += s->hist[METRICS_BUCKETS];
    mw_printf(w, "%s_bucket{store=\"%s\",le=\"+Inf\"} %llu\n", h, store,
              (unsigned long long)cum);
    mw_printf(w, "%s_sum{store=\"%s\"} %.9f\n", h, store,
              (double)s->sum_ns / 1e9);
    mw_printf(w, "%s_count{store=\"%s\"} %llu\n", h, store,
              (unsigned long long)cum);
}

static void write_limiter(mw *w, const snap *s)
{
    family(w, "rules_version", "gauge", "The version of the rule set in force.");
    mw_printf(w, "ratelimit_rules_version %lld\n", (long long)s->version);
    family(w, "rules_loads_total", "counter", "Rule sets taken.");
    mw_printf(w, "ratelimit_rules_loads_total %llu\n",
              (unsigned long long)s->loads);
    family(w, "rules_load_failures_total", "counter",
           "Rule sets refused (invalid, stale: not newer) and failed reads "
           "of the rules source (source).");
    mw_printf(w, "ratelimit_rules_load_failures_total{reason=\"invalid\"} "
              "%llu\n", (unsigned long long)s->refused_bad);
    mw_printf(w, "ratelimit_rules_load_failures_total{reason=\"stale\"} "
              "%llu\n", (unsigned long long)s->refused_stale);
    mw_printf(w, "ratelimit_rules_load_failures_total{reason=\"source\"} "
              "%llu\n", (unsigned long long)s->source_errors);
    family(w, "fleet_size", "gauge",
           "Limiters sharing the limits (the fallback's divisor).");
    mw_printf(w, "ratelimit_fleet_size %lld\n", (long long)s->fleet_size);
}

static void write_events(mw *w, const snap *s)
{
    static const char *const reason[EV_DROP_COUNT] = {"ring_full",
                                                      "redis_away",
                                                      "rejected"};

    family(w, "events_sent_total", "counter",
           "Rejection events added to the stream (option events_redis).");
    mw_printf(w, "ratelimit_events_sent_total %llu\n",
              (unsigned long long)s->ev_sent);
    family(w, "events_dropped_total", "counter",
           "Rejection events lost: the ring was full, Redis was away, or "
           "it refused the entry.");
    for (int k = 0; k < EV_DROP_COUNT; k++)
        mw_printf(w, "ratelimit_events_dropped_total{reason=\"%s\"} %llu\n",
                  reason[k], (unsigned long long)s->ev_dropped[k]);
}

/* ---- the calls ------------------------------------------------------------- */

RL_EXPORT int rl_metrics_write_cb(const rl_limiter *lim,
                                  rl_metrics_write_fn *fn, void *arg)
{
    snap s;
    mw *w;

    if (!lim || !fn)
        return rl_fail(lim, RL_EINVAL, "rl_metrics_write_cb: NULL argument");
    if (!(w = malloc(sizeof *w)) || snap_take(lim, &s) != RL_OK) {
        if (w)
            snap_free(&s);
        free(w);
        return rl_fail(lim, RL_ENOMEM, "rl_metrics_write: out of memory");
    }
    *w = (mw){.fn = fn, .arg = arg};
    write_rules(w, &s);
    write_shards(w, &s);
    write_latency(w, &s, lim->store->vt->name);
    write_limiter(w, &s);
    write_events(w, &s);
    mw_flush(w);
    snap_free(&s);
    if (w->failed) {
        free(w);
        return rl_fail(lim, RL_EIO, "rl_metrics_write_cb: the write "
                       "function stopped it");
    }
    free(w);
    return RL_OK;
}

/* rl_metrics_write()'s function: copy what fits, count it all. */
typedef struct into_buf {
    char *buf;
    size_t cap, total;
} into_buf;

static int copy_out(void *arg, const char *p, size_t n)
{
    into_buf *b = arg;

    if (b->total < b->cap) {
        size_t room = b->cap - b->total;
        memcpy(b->buf + b->total, p, n < room ? n : room);
    }
    b->total += n;
    return 0;
}

RL_EXPORT int rl_metrics_write(const rl_limiter *lim, char *buf, size_t cap,
                               size_t *len)
{
    into_buf b = {.buf = buf, .cap = cap};
    int rc;

    if (!lim || !len || (!buf && cap))
        return rl_fail(lim, RL_EINVAL, "rl_metrics_write: NULL argument");
    if ((rc = rl_metrics_write_cb(lim, copy_out, &b)) != RL_OK)
        return rc;
    if (b.total < cap) {
        buf[b.total] = '\0';
        *len = b.total;
        return RL_OK;
    }
    if (cap)
        buf[cap - 1] = '\0';
    *len = b.total + 1;
    return rl_fail(lim, RL_ERANGE, "rl_metrics_write: %zu bytes needed, "
                   "%zu given", b.total + 1, cap);
}
