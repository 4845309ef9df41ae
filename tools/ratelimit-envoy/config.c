/*
 * config.c -- what ratelimit-envoy does with the configuration tree once
 * read (config_yaml.c reads it): find a domain, find a descriptor's limit
 * as envoyproxy/ratelimit does (src/config/config_impl.go, GetLimit),
 * match wildcard values, name each limit's rule in the library's set, and
 * write that set as the library's rule JSON.
 *
 * A limit's rule id is a hash of its domain and its path of entries in
 * the tree (not of its numbers), so a reload that changes a limit's
 * numbers keeps its id and the library carries each client's state over
 * to the new shape (rule.c's shapes); a limit moved elsewhere is a new
 * rule.  A (unit, requests_per_unit) override from a request is a rule of
 * its own, "o.<unit>.<rpu>", shared by every domain (the client key holds
 * the domain).  Each rule matches the endpoint "/<rule id>" exactly and
 * counts the dimension RLS_DIMENSION, so service.c checks a descriptor
 * with rl_check() (and so rl_check_start()) on that endpoint, the one
 * rule matching it found by one probe of the library's exact-endpoint
 * index.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envoy_rls.h"

static const int64_t unit_seconds[RLS_UNIT_COUNT] = {
    [RLS_UNIT_SECOND] = 1,       [RLS_UNIT_MINUTE] = 60,
    [RLS_UNIT_HOUR] = 3600,      [RLS_UNIT_DAY] = 86400,
    [RLS_UNIT_WEEK] = 7 * 86400, [RLS_UNIT_MONTH] = 30 * 86400,
    [RLS_UNIT_YEAR] = 0}; /* 365 days: past the library's 31-day window */

int64_t rls_unit_seconds(int unit)
{
    return unit > 0 && unit < RLS_UNIT_COUNT ? unit_seconds[unit] : 0;
}

const char *rls_unit_name(int unit)
{
    static const char *const names[RLS_UNIT_COUNT] = {
        "unknown", "second", "minute", "hour", "day", "month", "year", "week"};
    return unit >= 0 && unit < RLS_UNIT_COUNT ? names[unit] : "unknown";
}

const ecfg_domain *ecfg_domain_find(const ecfg *c, const char *name)
{
    size_t lo = 0, hi = c ? c->ndomains : 0;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int cmp = strcmp(name, c->domains[mid].name);
        if (!cmp)
            return &c->domains[mid];
        if (cmp < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

/* '*' matches any run of bytes (none included); the rest exactly.  The
 * fixed head and tail first, then each middle piece at its leftmost
 * place: linear in the value's length per piece. */
int ecfg_wildcard_match(const char *p, const char *v)
{
    const char *star = strchr(p, '*'), *last = strrchr(p, '*');
    size_t vl = strlen(v), head, tail;

    if (!star)
        return !strcmp(p, v);
    head = (size_t)(star - p);
    tail = strlen(last + 1);
    if (head + tail > vl || memcmp(v, p, head) ||
        memcmp(v + vl - tail, last + 1, tail))
        return 0;
    const char *at = v + head, *end = v + vl - tail;
    for (const char *s = star + 1; s <= last;) {
        const char *next = strchr(s, '*');
        size_t len = (size_t)(next - s);
        const char *hit = len ? memmem(at, (size_t)(end - at), s, len) : at;
        if (!hit)
            return 0;
        at = hit + len;
        s = next + 1;
    }
    return 1;
}

static const ecfg_node *step(const ecfg_node *at, const rls_entry *e)
{
    const ecfg_node *bare = NULL;

    for (size_t i = 0; i < at->nkids; i++) {
        const ecfg_node *k = &at->kids[i];
        if (strcmp(k->key, e->key))
            continue;
        if (!k->value)
            bare = k;
        else if (!k->wildcard && !strcmp(k->value, e->value))
            return k;
    }
    for (size_t i = 0; i < at->nkids; i++) {
        const ecfg_node *k = &at->kids[i];
        if (k->wildcard && !strcmp(k->key, e->key) &&
            ecfg_wildcard_match(k->value, e->value))
            return k;
    }
    return bare;
}

const ecfg_limit *ecfg_match(const ecfg_domain *d, const rls_entry *e,
                             size_t n)
{
    const ecfg_node *at = &d->root;

    for (size_t i = 0; i < n; i++) {
        const ecfg_node *next = step(at, &e[i]);
        if (!next)
            return NULL;
        if (i == n - 1)
            return next->limit;
        if (!next->nkids)
            return NULL; /* the request goes deeper than the config */
        at = next;
    }
    return NULL;
}

/* ---- rule ids ------------------------------------------------------------ */

static uint64_t fnv(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ULL;
    return h;
}

static void name_rules(ecfg_node *n, uint64_t h)
{
    for (size_t i = 0; i < n->nkids; i++) {
        ecfg_node *k = &n->kids[i];
        uint64_t kh = fnv(h, k->key, strlen(k->key) + 1);
        kh = k->value ? fnv(kh, k->value, strlen(k->value) + 1)
                      : fnv(kh, "\x01", 1);
        if (k->limit)
            snprintf(k->limit->rule_id, sizeof k->limit->rule_id,
                     "e.%016" PRIx64, kh);
        name_rules(k, kh);
    }
}

void ecfg_name_rules(ecfg *c)
{
    for (size_t i = 0; i < c->ndomains; i++) {
        ecfg_domain *d = &c->domains[i];
        name_rules(&d->root,
                   fnv(14695981039346656037ULL, d->name, strlen(d->name) + 1));
    }
}

/* ---- the rule set's JSON ------------------------------------------------- */

typedef struct buf {
    char *p;
    size_t len, cap;
    int oom, items;
} buf;

static void put(buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void put(buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (b->oom)
        return;
    va_start(ap, fmt);
    n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n >= b->cap - b->len) {
        size_t cap = (b->cap + (size_t)n) * 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p, b->cap = cap;
        va_start(ap, fmt);
        n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
    }
    if (n > 0)
        b->len += (size_t)n;
}

static void put_rule(buf *b, const char *id, uint32_t rpu, int unit,
                     const char *algo, const char *mode, const char *failure)
{
    put(b, "%s{\"rule_id\":\"%s\",\"dimension\":\"" RLS_DIMENSION "\","
        "\"match\":{\"endpoint\":\"/%s\"},"
        "\"limit\":%" PRIu32 ",\"window_seconds\":%" PRId64 ","
        "\"algorithm\":\"%s\",\"mode\":\"%s\"",
        b->items++ ? "," : "", id, id, rpu, rls_unit_seconds(unit), algo,
        mode);
    if (failure)
        put(b, ",\"failure_mode\":\"%s\"", failure);
    put(b, "}");
}

static void put_node(buf *b, const ecfg_node *n, const char *algo)
{
    for (size_t i = 0; i < n->nkids; i++) {
        const ecfg_limit *l = n->kids[i].limit;
        /* unlimited and 0 per unit are answered without the store */
        if (l && !l->unlimited && l->rpu)
            put_rule(b, l->rule_id, l->rpu, l->unit,
                     l->algorithm ? l->algorithm : algo,
                     l->shadow ? "log" : "enforce", l->failure);
        put_node(b, &n->kids[i], algo);
    }
}

char *ecfg_rules_json(const ecfg *c, const rls_override *o, size_t no,
                      const char *algorithm, int64_t version)
{
    buf b = {.cap = 4096};

    if (!(b.p = malloc(b.cap)))
        return NULL;
    put(&b, "{\"version\":%" PRId64 ",\"rules\":[", version);
    for (size_t i = 0; c && i < c->ndomains; i++)
        put_node(&b, &c->domains[i].root, algorithm);
    for (size_t i = 0; i < no; i++)
        if (o[i].rpu)
            put_rule(&b, o[i].rule_id, o[i].rpu, o[i].unit, algorithm,
                     "enforce", NULL);
    put(&b, "]}");
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

/* ---- free ---------------------------------------------------------------- */

static void free_node(ecfg_node *n)
{
    for (size_t i = 0; i < n->nkids; i++)
        free_node(&n->kids[i]);
    free(n->kids);
    free(n->key);
    free(n->value);
    if (n->limit) {
        for (size_t i = 0; i < n->limit->nreplaces; i++)
            free(n->limit->replaces[i]);
        free(n->limit->replaces);
        free(n->limit->name);
        free(n->limit);
    }
}

void ecfg_free(ecfg *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->ndomains; i++) {
        free(c->domains[i].name);
        free_node(&c->domains[i].root);
    }
    free(c->domains);
    free(c);
}
