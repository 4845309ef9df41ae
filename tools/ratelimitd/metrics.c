/*
 * metrics.c -- ratelimitd's /metrics (see ratelimitd(8)): the requests it
 * answered, by route and status, counted with one atomic add each (a
 * fixed table, no lock, nothing allocated on the request path), and, read
 * when the page is asked for, the publisher's counts, the versions and
 * the state of Redis.  Prometheus text format 0.0.4.
 */
#include "ratelimitd.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STATUS_MIN 100
#define STATUS_MAX 599
#define TEXT_MAX 65536 /* the page, at most: ROUTE_KINDS x the statuses seen */

static const char *const route_names[ROUTE_KINDS] = {
    [ROUTE_UNKNOWN] = "unknown",   [ROUTE_BAD_ID] = "bad_id",
    [ROUTE_HEALTHZ] = "healthz",   [ROUTE_RULES] = "rules",
    [ROUTE_RULE] = "rule",         [ROUTE_HISTORY] = "history",
    [ROUTE_METRICS] = "metrics",
};

static atomic_uint_fast64_t requests[ROUTE_KINDS]
                                    [STATUS_MAX - STATUS_MIN + 1];

void metrics_count(int kind, int status)
{
    if (kind < 0 || kind >= ROUTE_KINDS || status < STATUS_MIN ||
        status > STATUS_MAX)
        return;
    atomic_fetch_add_explicit(&requests[kind][status - STATUS_MIN], 1,
                              memory_order_relaxed);
}

typedef struct text {
    char *buf;
    size_t len;
} text;

static void put(text *t, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(t->buf + t->len, TEXT_MAX - t->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->len = t->len + (size_t)n < TEXT_MAX ? t->len + (size_t)n
                                               : TEXT_MAX - 1;
}

static void family(text *t, const char *name, const char *type,
                   const char *help)
{
    put(t, "# HELP ratelimitd_%s %s\n# TYPE ratelimitd_%s %s\n", name, help,
        name, type);
}

int metrics_text(const http_opts *o, char **out, size_t *len)
{
    text t = {.buf = malloc(TEXT_MAX)};
    snapshot *s;
    uint64_t published, failed;
    int64_t key_version;
    char why[API_MSG_MAX];

    if (!t.buf)
        return -1;
    family(&t, "requests_total", "counter",
           "HTTP requests answered, by route and status.");
    for (int k = 0; k < ROUTE_KINDS; k++)
        for (int st = STATUS_MIN; st <= STATUS_MAX; st++) {
            uint64_t n = atomic_load_explicit(&requests[k][st - STATUS_MIN],
                                              memory_order_relaxed);
            if (n)
                put(&t, "ratelimitd_requests_total{route=\"%s\","
                    "status=\"%d\"} %llu\n", route_names[k], st,
                    (unsigned long long)n);
        }
    publisher_counts(o->pub, &published, &failed, &key_version);
    family(&t, "publishes_total", "counter",
           "Rule sets written to the Redis key.");
    put(&t, "ratelimitd_publishes_total %llu\n",
        (unsigned long long)published);
    family(&t, "publish_failures_total", "counter",
           "Calls to Redis that failed (connect, auth, publish, heartbeat).");
    put(&t, "ratelimitd_publish_failures_total %llu\n",
        (unsigned long long)failed);
    s = service_snapshot(o->svc);
    family(&t, "rules_version", "gauge",
           "The version of the rule set in the database.");
    put(&t, "ratelimitd_rules_version %lld\n", (long long)s->version);
    snapshot_unref(s);
    family(&t, "published_version", "gauge",
           "The version the Redis key was last seen holding; -1: not known.");
    put(&t, "ratelimitd_published_version %lld\n", (long long)key_version);
    family(&t, "redis_up", "gauge",
           "1 when the last call to Redis worked; 0 down or no --redis.");
    put(&t, "ratelimitd_redis_up %d\n",
        strcmp(publisher_state(o->pub), "up") == 0);
    family(&t, "healthy", "gauge", "1 when /healthz answers 200.");
    put(&t, "ratelimitd_healthy %d\n",
        publisher_health(o->pub, why, sizeof why) == 0);
    *out = t.buf;
    *len = t.len;
    return 0;
}
