/*
 * service.c -- ShouldRateLimit: a RateLimitRequest's bytes in, a
 * RateLimitResponse's bytes (or a gRPC status) out, the checks made
 * through the library's rl_check_start() on the calling worker's loop
 * context (so the store, its failure modes, breaker, fallback, deny cache,
 * leases and metrics are the library's, and a call waiting for Redis does
 * not hold its worker).
 *
 * The order of one call: decode within a memory budget; check every bound
 * (nothing is counted for a request refused); find each descriptor's
 * limit in the configuration as envoyproxy/ratelimit does (an override
 * first, then the tree), drop the limits another matched limit
 * `replaces`; then one check per counted descriptor, each on its own as
 * upstream counts them, all started at once (RL_ASYNC_NOW: a store that
 * answers at once, shm://, answers inside the start); when the last one
 * is decided, the response, with X-RateLimit-* and Retry-After from the
 * descriptor that decides (the longest wait among those over the limit,
 * else the least remaining).  A YAML limit's rule matches the endpoint
 * "/<rule id>" and counts the descriptor's client key (config.c); with
 * the rules_source (no YAML) a descriptor is the request "/<domain>" with
 * its entries as dimensions, and the rule set decides.  The configuration
 * and the library's rule set change together under the service's write
 * lock; a call holds the read lock while it finds its limits and a
 * reference on the configuration until it is answered.
 */
#include <grpc/status.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "envoy_rls.h"
#include "envoy/service/ratelimit/v3/rls.pb-c.h"

typedef Envoy__Service__Ratelimit__V3__RateLimitRequest Request;
typedef Envoy__Service__Ratelimit__V3__RateLimitResponse Response;
typedef Envoy__Service__Ratelimit__V3__RateLimitResponse__DescriptorStatus
    Status;
typedef Envoy__Service__Ratelimit__V3__RateLimitResponse__RateLimit Limit;
typedef Envoy__Extensions__Common__Ratelimit__V3__RateLimitDescriptor
    Descriptor;
typedef Envoy__Config__Core__V3__HeaderValue Header;
#define CODE_OK ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__CODE__OK
#define CODE_OVER                                                           \
    ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__CODE__OVER_LIMIT

int64_t rls_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- decoding within a budget ------------------------------------------- */

typedef struct budget {
    size_t used, max;
} budget;

#define CHUNK_HEAD 16
static void *budget_alloc(void *data, size_t n)
{
    budget *b = data;
    size_t *p;

    if (n > b->max - b->used || n + CHUNK_HEAD > b->max - b->used)
        return NULL;
    if (!(p = malloc(n + CHUNK_HEAD)))
        return NULL;
    p[0] = n + CHUNK_HEAD;
    b->used += p[0];
    return (char *)p + CHUNK_HEAD;
}

static void budget_free(void *data, void *ptr)
{
    size_t *p;

    if (!ptr)
        return;
    p = (size_t *)(void *)((char *)ptr - CHUNK_HEAD);
    ((budget *)data)->used -= p[0];
    free(p);
}

/* ---- one call's state --------------------------------------------------- */

typedef struct call call;
typedef struct verdict {
    const ecfg_limit *limit; /* from the configuration, or NULL       */
    int override;            /* 1 + index in overrides, or 0          */
    uint32_t rpu;
    int unit, shadow, unlimited;
    const char *rule_id, *name;
    int64_t cost;
    int counted; /* a limit applies: check it          */
    int checked; /* res holds its answer               */
    int code;
    rl_result res;
    rl_async_check chk; /* its check while in flight          */
    call *c;
} verdict;

struct call {
    rls_service *s;
    Request *req;
    budget b;
    ProtobufCAllocator alloc;
    ecfg *cfg; /* the configuration its limits are in (a reference) */
    rls_answer *a;
    rls_done_fn *done;
    void *arg;
    verdict v[RLS_DESCRIPTORS_MAX];
    size_t n, pending; /* descriptors; checks in flight */
    int failed;        /* *a holds a refusal            */
    int64_t deadline_ms;
};

static int refuse(rls_answer *a, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int refuse(rls_answer *a, int status, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(a->message, sizeof a->message, fmt, ap);
    va_end(ap);
    for (char *p = a->message; *p; p++) /* no control bytes in messages */
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    a->status = status;
    return -1;
}

/* A descriptor entry's key as a dimension's name (rl_dim's grammar). */
static int dim_name_ok(const char *k)
{
    size_t n = strlen(k);

    if (!n || n > RL_DIM_NAME_MAX || *k < 'a' || *k > 'z' ||
        !strcmp(k, "global"))
        return 0;
    return strspn(k, "abcdefghijklmnopqrstuvwxyz0123456789_.:-") == n;
}

/* With the rules_source every entry becomes a dimension: the bounds of a
 * library request, before anything is counted. */
static int validate_source(const Descriptor *d, size_t i, rls_answer *a)
{
    if (d->limit)
        return refuse(a, GRPC_STATUS_INVALID_ARGUMENT,
                      "descriptor %zu: limit overrides need a YAML "
                      "configuration (-c), not rules from rules_source", i);
    if (d->n_entries > RL_DIMS_MAX)
        return refuse(a, GRPC_STATUS_INVALID_ARGUMENT,
                      "descriptor %zu: at most %d entries with rules from "
                      "rules_source", i, RL_DIMS_MAX);
    for (size_t j = 0; j < d->n_entries; j++) {
        const char *k = d->entries[j]->key, *v = d->entries[j]->value;
        if (!dim_name_ok(k))
            return refuse(a, GRPC_STATUS_INVALID_ARGUMENT,
                          "descriptor %zu entry %zu: key must be 1..%d "
                          "bytes of a-z 0-9 _ . : -, starting with a "
                          "letter, not \"global\"", i, j, RL_DIM_NAME_MAX);
        if (strlen(k) + 1 + strlen(v) > RL_KEY_MAX)
            return refuse(a, GRPC_STATUS_INVALID_ARGUMENT,
                          "descriptor %zu entry %zu: key and value over %d "
                          "bytes", i, j, RL_KEY_MAX - 1);
        for (size_t m = 0; m < j; m++)
            if (!strcmp(k, d->entries[m]->key))
                return refuse(a, GRPC_STATUS_INVALID_ARGUMENT,
                              "descriptor %zu: key %zu given twice", i, j);
    }
    return 0;
}

/* Every bound, before anything is counted. */
static int validate(call *c)
{
    const Request *r = c->req;
    rls_answer *a = c->a;

    if (!*r->domain)
        return refuse(a, GRPC_STATUS_INVALID_ARGUMENT,
                      "rate limit domain must not be empty");
    if (strlen(r->domain) > RLS_DOMAIN_MAX)
        return refuse(a, GRPC_STATUS_INVALID_ARGUMENT,
                      "domain: at most %d bytes", RLS_DOMAIN_MAX);
    if (!r->n_descriptors)
        return refuse(a, GRPC_STATUS_INVALID_ARGUMENT,
                      "rate limit descriptor list must not be empty");
    if (r->n_descriptors > RLS_DESCRIPTORS_MAX)
        return refuse(a, GRPC_STATUS_INVALID_ARGUMENT,
                      "%zu descriptors: at most %d", r->n_descriptors,
                      RLS_DESCRIPTORS_MAX);
    for (size_t i = 0; i < r->n_descriptors; i++) {
        const Descriptor *d = r->descriptors[i];
        if (!d->n_entries || d->n_entries > RLS_ENTRIES_MAX)
            return refuse(a, GRPC_STATUS_INVALID_ARGUMENT,
                          "descriptor %zu: 1..%d entries, got %zu", i,
                          RLS_ENTRIES_MAX, d->n_entries);
        for (size_t j = 0; j < d->n_entries; j++) {
            const char *k = d->entries[j]->key, *v = d->entries[j]->value;
            if (!*k || strlen(k) > RLS_ENTRY_KEY_MAX)
                return refuse(a, GRPC_STATUS_INVALID_ARGUMENT,
                              "descriptor %zu entry %zu: key must be "
                              "1..%d bytes", i, j, RLS_ENTRY_KEY_MAX);
            if (strlen(v) > RLS_ENTRY_VALUE_MAX)
                return refuse(a, GRPC_STATUS_INVALID_ARGUMENT,
                              "descriptor %zu entry %zu: value over %d "
                              "bytes", i, j, RLS_ENTRY_VALUE_MAX);
        }
        if (d->hits_addend && d->hits_addend->value > (uint64_t)RL_COST_MAX)
            return refuse(a, GRPC_STATUS_INVALID_ARGUMENT,
                          "descriptor %zu: hits_addend over %lld", i,
                          (long long)RL_COST_MAX);
        if (d->limit && d->limit->requests_per_unit > RLS_RPU_MAX)
            return refuse(a, GRPC_STATUS_INVALID_ARGUMENT,
                          "descriptor %zu: limit override over %u per unit",
                          i, RLS_RPU_MAX);
        if (d->limit && !rls_unit_seconds((int)d->limit->unit))
            return refuse(a, GRPC_STATUS_INVALID_ARGUMENT,
                          "descriptor %zu: limit override unit %s not "
                          "supported (second..month)", i,
                          rls_unit_name((int)d->limit->unit));
        if (c->s->from_source && validate_source(d, i, a))
            return -1;
    }
    return 0;
}

/* ---- overrides ---------------------------------------------------------- */

static int find_override(const rls_service *s, uint32_t rpu, int unit)
{
    for (size_t i = 0; i < s->noverrides; i++)
        if (s->overrides[i].rpu == rpu && s->overrides[i].unit == unit)
            return (int)i + 1;
    return 0;
}

static int load_rules(rls_service *s, const ecfg *cfg, char *err,
                      size_t errlen)
{
    char *json = ecfg_rules_json(cfg, s->overrides, s->noverrides,
                                 s->algorithm, s->version + 1);
    int rc;

    if (!json)
        return snprintf(err, errlen, "out of memory"), -1;
    rc = rl_rules_load_string(s->lim, json);
    free(json);
    if (rc != RL_OK)
        return snprintf(err, errlen, "rules: %s", rl_errmsg(s->lim)), -1;
    s->version++;
    return 0;
}

/* A new override's rule, under the write lock (the read lock dropped and
 * taken again around it). */
static int add_override(call *c, uint32_t rpu, int unit)
{
    rls_service *s = c->s;
    char err[300];
    int rc = 0;

    pthread_rwlock_unlock(&s->lock);
    pthread_rwlock_wrlock(&s->lock);
    if (!find_override(s, rpu, unit)) {
        if (s->noverrides == RLS_OVERRIDES_MAX) {
            rc = refuse(c->a, GRPC_STATUS_RESOURCE_EXHAUSTED,
                        "more than %d distinct limit overrides",
                        RLS_OVERRIDES_MAX);
        } else {
            rls_override *o = &s->overrides[s->noverrides++];
            *o = (rls_override){.rpu = rpu, .unit = unit};
            snprintf(o->rule_id, sizeof o->rule_id, "o.%d.%" PRIu32, unit,
                     rpu);
            if (load_rules(s, s->cfg, err, sizeof err)) {
                s->noverrides--;
                rc = refuse(c->a, GRPC_STATUS_INTERNAL, "%s", err);
            }
        }
    }
    pthread_rwlock_unlock(&s->lock);
    pthread_rwlock_rdlock(&s->lock);
    return rc;
}

/* ---- finding the limits ------------------------------------------------- */

static void take_limit(verdict *v, const ecfg_limit *l)
{
    *v = (verdict){.limit = l, .rpu = l->rpu, .unit = l->unit,
                   .shadow = l->shadow, .unlimited = l->unlimited,
                   .rule_id = l->rule_id, .name = l->name,
                   .counted = !l->unlimited, .code = CODE_OK, .c = v->c};
}

/* Is a limit of this name replaced by another matched limit? */
static int replaced(const call *c, const char *name)
{
    for (size_t i = 0; i < c->n; i++) {
        const ecfg_limit *l = c->v[i].limit;
        for (size_t r = 0; l && r < l->nreplaces; r++)
            if (!strcmp(name, l->replaces[r]))
                return 1;
    }
    return 0;
}

/* Upstream's order: every matched limit's replaces first, then the
 * named limits among them dropped (a dropped limit's replaces still
 * count). */
static void drop_replaced(call *c)
{
    uint8_t drop[RLS_DESCRIPTORS_MAX] = {0};

    for (size_t j = 0; j < c->n; j++)
        drop[j] = c->v[j].limit && *c->v[j].limit->name &&
                  replaced(c, c->v[j].limit->name);
    for (size_t j = 0; j < c->n; j++)
        if (drop[j])
            c->v[j] = (verdict){.code = CODE_OK, .c = c};
}

static int find_limits(call *c)
{
    const ecfg_domain *d = ecfg_domain_find(c->s->cfg, c->req->domain);
    rls_entry e[RLS_ENTRIES_MAX];

    c->n = c->req->n_descriptors;
    for (size_t i = 0; i < c->n; i++) {
        const Descriptor *desc = c->req->descriptors[i];
        verdict *v = &c->v[i];
        *v = (verdict){.code = CODE_OK, .c = c};
        if (c->s->from_source) { /* the rule set decides, by request */
            *v = (verdict){.name = "", .counted = 1, .code = CODE_OK,
                           .c = c};
            continue;
        }
        if (!d) /* an unknown domain: OK, no limit, as upstream */
            continue;
        if (desc->limit) {
            uint32_t rpu = desc->limit->requests_per_unit;
            int unit = (int)desc->limit->unit;
            int o = find_override(c->s, rpu, unit);
            if (!o && rpu) {
                /* the lock was let go: the configuration may be another
                 * one now, so the whole search again (the override stays) */
                if (add_override(c, rpu, unit))
                    return -1;
                return find_limits(c);
            }
            *v = (verdict){.override = o, .rpu = rpu, .unit = unit,
                           .rule_id = o ? c->s->overrides[o - 1].rule_id
                                        : NULL,
                           .name = "", .counted = 1, .code = CODE_OK,
                           .c = c};
            continue;
        }
        for (size_t j = 0; j < desc->n_entries; j++)
            e[j] = (rls_entry){desc->entries[j]->key,
                               desc->entries[j]->value};
        const ecfg_limit *l = ecfg_match(d, e, desc->n_entries);
        if (l)
            take_limit(v, l);
    }
    drop_replaced(c);
    return 0;
}

/* ---- the checks --------------------------------------------------------- */

/* The client key: the domain and the entries, each length-prefixed (no
 * value can pass for two entries); past KEY_ROOM bytes (what a key
 * "descriptor:<value>" leaves) its head and a 128-bit hash of the whole. */
#define KEY_ROOM (RL_KEY_MAX - sizeof RLS_DIMENSION)
#define KEY_HEAD 200
typedef struct keyw {
    char k[RL_KEY_MAX + 1];
    size_t len;
    uint64_t h1, h2;
} keyw;

static void key_put(keyw *w, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        w->h1 = (w->h1 ^ (uint8_t)s[i]) * 1099511628211ULL;
        w->h2 = (w->h2 ^ (uint8_t)s[i]) * 0x100000001b3ULL + 0x9e3779b97f4a7c15ULL;
        if (w->len < KEY_ROOM)
            w->k[w->len] = s[i];
        w->len++;
    }
}

static void key_str(keyw *w, const char *s)
{
    char n[24];
    size_t len = strlen(s);

    key_put(w, n, (size_t)snprintf(n, sizeof n, "%zu:", len));
    key_put(w, s, len);
}

static void client_key(keyw *w, const char *domain, const Descriptor *d)
{
    *w = (keyw){.h1 = 14695981039346656037ULL, .h2 = 0x84222325cbf29ce4ULL};
    key_str(w, domain);
    for (size_t i = 0; i < d->n_entries; i++) {
        key_put(w, "|", 1);
        key_str(w, d->entries[i]->key);
        key_put(w, "=", 1);
        key_str(w, d->entries[i]->value);
    }
    if (w->len > KEY_ROOM)
        w->len = KEY_HEAD + (size_t)snprintf(w->k + KEY_HEAD,
                                             sizeof w->k - KEY_HEAD,
                                             "#%016" PRIx64 "%016" PRIx64,
                                             w->h1, w->h2);
    w->k[w->len] = '\0';
}

/* 0 per unit: over the limit, nothing counted, a window to wait. */
static void zero_limit(verdict *v)
{
    int64_t w = rls_unit_seconds(v->unit), now = (int64_t)time(NULL);

    v->res = (rl_result){.size = sizeof(rl_result), .window = w,
                         .retry_after = w, .retry_after_ms = w * 1000,
                         .reset_at = now + w, .reset_at_ms = (now + w) * 1000};
    v->checked = 1;
    v->code = v->shadow ? CODE_OK : CODE_OVER;
    v->res.allowed = v->code == CODE_OK;
}

static int unit_of(int64_t window)
{
    for (int u = RLS_UNIT_SECOND; u < RLS_UNIT_COUNT; u++)
        if (rls_unit_seconds(u) == window)
            return u;
    return RLS_UNIT_UNKNOWN;
}

static void finish(call *c);

/* A descriptor's check decided (rc: RL_OK, or the error of its check). */
static void settle(verdict *v, int rc, const char *why)
{
    call *c = v->c;

    if (rc != RL_OK) {
        if (!c->failed)
            refuse(c->a, rc == RL_ESTORE   ? GRPC_STATUS_UNAVAILABLE
                         : rc == RL_EINVAL ? GRPC_STATUS_INVALID_ARGUMENT
                                           : GRPC_STATUS_INTERNAL,
                   "%s: %s", rc == RL_ESTORE ? "store" : "check", why);
        c->failed = 1;
        return;
    }
    if (c->s->from_source) { /* the numbers of the rule that decided */
        if (v->res.flags & RL_FLAG_NO_RULE)
            return; /* no rule: OK, no limit */
        v->rpu = v->res.limit > UINT32_MAX ? UINT32_MAX
                                            : (uint32_t)v->res.limit;
        v->unit = unit_of(v->res.window);
        v->name = v->res.rule_id;
    }
    v->checked = 1;
    v->code = v->res.allowed ? CODE_OK : CODE_OVER;
}

static void on_checked(rl_async_check *chk, int rc)
{
    verdict *v = chk->data;
    call *c = v->c;

    settle(v, rc, rl_strerror(rc));
    if (!--c->pending)
        finish(c);
}

/* One descriptor as a request: with a YAML configuration, its rule's
 * endpoint and the client key; with the rules_source, the domain as
 * the endpoint "/<domain>" and each entry a dimension of its key. */
static int start_one(call *c, rl_async *as, size_t i)
{
    const Descriptor *d = c->req->descriptors[i];
    verdict *v = &c->v[i];
    char ep[RLS_DOMAIN_MAX + RL_RULE_ID_MAX + 2];
    rl_dim dims[RL_DIMS_MAX];
    rl_request req = RL_REQUEST_INIT;
    keyw w;
    int rc;

    req.endpoint = ep;
    req.cost = v->cost;
    req.dims = dims;
    if (c->s->from_source) {
        snprintf(ep, sizeof ep, "/%s", c->req->domain);
        for (size_t j = 0; j < d->n_entries; j++)
            dims[j] = (rl_dim){d->entries[j]->key, d->entries[j]->value};
        req.ndims = d->n_entries;
    } else {
        snprintf(ep, sizeof ep, "/%s", v->rule_id);
        client_key(&w, c->req->domain, d);
        dims[0] = (rl_dim){RLS_DIMENSION, w.k};
        req.ndims = 1;
    }
    v->res = (rl_result)RL_RESULT_INIT;
    v->chk = (rl_async_check)RL_ASYNC_CHECK_INIT;
    v->chk.cb = on_checked;
    v->chk.data = v;
    v->chk.result = &v->res;
    v->chk.flags = RL_ASYNC_NOW;
    rc = rl_check_start(as, &req, &v->chk);
    if (rc == RL_OK)
        return c->pending++, 0;
    if (rc == RL_EBUSY) /* the context is full: this one waits here */
        rc = rl_check(c->s->lim, &req, &v->res);
    settle(v, rc == RL_ASYNC_DONE ? RL_OK : rc, rl_errmsg(c->s->lim));
    return 0;
}

/* Start every counted descriptor's check; stop at the first refusal. */
static void start_all(call *c, rl_async *as)
{
    int64_t hits = c->req->hits_addend ? c->req->hits_addend : 1;

    for (size_t i = 0; i < c->n && !c->failed; i++) {
        verdict *v = &c->v[i];
        const Descriptor *d = c->req->descriptors[i];
        if (!v->counted)
            continue;
        if (!v->rpu && !c->s->from_source) {
            zero_limit(v);
            continue;
        }
        if (rls_now_ms() > c->deadline_ms) {
            refuse(c->a, GRPC_STATUS_DEADLINE_EXCEEDED,
                   "deadline passed before descriptor %zu", i);
            c->failed = 1;
            break;
        }
        v->cost = d->hits_addend ? (int64_t)d->hits_addend->value : hits;
        start_one(c, as, i);
    }
}

/* ---- the response ------------------------------------------------------- */

/* The descriptor whose numbers go into the headers: the longest wait of
 * those over the limit, else the least remaining; NULL when none was
 * counted. */
static const verdict *deciding(const call *c)
{
    const verdict *best = NULL;
    int best_over = 0;

    for (size_t i = 0; i < c->n; i++) {
        const verdict *v = &c->v[i];
        int over = v->code == CODE_OVER;
        if (!v->checked)
            continue;
        if (!best || (over && !best_over) ||
            (over && v->res.retry_after_ms > best->res.retry_after_ms) ||
            (!over && !best_over && v->res.remaining < best->res.remaining))
            best = v, best_over = over;
    }
    return best;
}

/* The headers of the deciding descriptor; the IETF policy is named by the
 * limit's name when it has one (a YAML limit's rule id is a hash). */
static int headers_of(const call *c, const verdict *v, rl_header *h)
{
    rl_result r = v->res;

    if (v->name && *v->name && strlen(v->name) <= RL_RULE_ID_MAX)
        memcpy(r.rule_id, v->name, strlen(v->name) + 1);
    return rl_headers(&r, c->s->headers, h, RL_HEADERS_MAX);
}

typedef struct reply {
    Status st[RLS_DESCRIPTORS_MAX], *stp[RLS_DESCRIPTORS_MAX];
    Limit lim[RLS_DESCRIPTORS_MAX];
    Google__Protobuf__Duration dur[RLS_DESCRIPTORS_MAX];
    rl_header h[RL_HEADERS_MAX];
    Header hv[RL_HEADERS_MAX], *hvp[RL_HEADERS_MAX];
} reply;

static void fill_status(const verdict *v, Status *st, Limit *l,
                        Google__Protobuf__Duration *dur)
{
    int64_t wall_ms = (int64_t)time(NULL) * 1000, left;

    envoy__service__ratelimit__v3__rate_limit_response__descriptor_status__init(st);
    st->code = v->code;
    if (v->unlimited) {
        st->limit_remaining = UINT32_MAX;
        return;
    }
    if (!v->checked)
        return;
    envoy__service__ratelimit__v3__rate_limit_response__rate_limit__init(l);
    l->name = (char *)(v->name ? v->name : "");
    l->requests_per_unit = v->rpu;
    l->unit = v->unit;
    st->current_limit = l;
    st->limit_remaining = v->res.remaining > UINT32_MAX
                              ? UINT32_MAX : (uint32_t)v->res.remaining;
    google__protobuf__duration__init(dur);
    left = v->res.reset_at_ms - wall_ms;
    if (left < 0)
        left = 0;
    dur->seconds = left / 1000;
    dur->nanos = (int32_t)(left % 1000) * 1000000;
    st->duration_until_reset = dur;
}

static int pack(call *c)
{
    reply *r = calloc(1, sizeof *r);
    Response resp = ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__INIT;
    const verdict *best = deciding(c);
    int nh = 0;

    if (!r)
        return refuse(c->a, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
    resp.overall_code = CODE_OK;
    for (size_t i = 0; i < c->n; i++) {
        fill_status(&c->v[i], &r->st[i], &r->lim[i], &r->dur[i]);
        r->stp[i] = &r->st[i];
        if (c->v[i].code == CODE_OVER)
            resp.overall_code = CODE_OVER;
    }
    resp.n_statuses = c->n;
    resp.statuses = r->stp;
    if (best && !(c->s->headers & RLS_HEADERS_NONE))
        nh = headers_of(c, best, r->h);
    for (int i = 0; i < nh; i++) {
        envoy__config__core__v3__header_value__init(&r->hv[i]);
        r->hv[i].key = r->h[i].name;
        r->hv[i].value = r->h[i].value;
        r->hvp[i] = &r->hv[i];
    }
    resp.n_response_headers_to_add = nh > 0 ? (size_t)nh : 0;
    resp.response_headers_to_add = r->hvp;
    c->a->outlen = envoy__service__ratelimit__v3__rate_limit_response__get_packed_size(&resp);
    if ((c->a->out = malloc(c->a->outlen ? c->a->outlen : 1)))
        envoy__service__ratelimit__v3__rate_limit_response__pack(&resp, c->a->out);
    free(r);
    if (!c->a->out)
        return refuse(c->a, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
    c->a->status = GRPC_STATUS_OK;
    return 0;
}

static void cfg_unref(ecfg *cfg)
{
    if (cfg && __atomic_sub_fetch(&cfg->refs, 1, __ATOMIC_ACQ_REL) == 0)
        ecfg_free(cfg);
}

/* A call answered with status st; c: its descriptors, or NULL. */
static void count(rls_service *s, int st, const call *c)
{
    rls_counters *k = &s->counters;

    __atomic_add_fetch(&k->calls, 1, __ATOMIC_RELAXED);
    if (st >= 0 && st < RLS_GRPC_CODES)
        __atomic_add_fetch(&k->status[st], 1, __ATOMIC_RELAXED);
    if (st != GRPC_STATUS_OK || !c)
        return;
    for (size_t i = 0; i < c->n; i++)
        __atomic_add_fetch(c->v[i].code == CODE_OVER ? &k->descriptors_over
                                                     : &k->descriptors_ok,
                           1, __ATOMIC_RELAXED);
}

void rls_count_refusal(rls_service *s, int status)
{
    count(s, status, NULL);
}

/* Every check decided: the response (or the refusal), then the call's
 * memory, then done. */
static void finish(call *c)
{
    rls_done_fn *done = c->done;
    void *arg = c->arg;
    rls_service *s = c->s;

    if (!c->failed && !pack(c)) {
        int over = 0;
        for (size_t i = 0; i < c->n; i++)
            over |= c->v[i].code == CODE_OVER;
        __atomic_add_fetch(over ? &s->counters.overall_over
                                : &s->counters.overall_ok,
                           1, __ATOMIC_RELAXED);
    }
    count(s, c->a->status, c);
    cfg_unref(c->cfg);
    if (c->req)
        envoy__service__ratelimit__v3__rate_limit_request__free_unpacked(
            c->req, &c->alloc);
    free(c);
    if (done)
        done(arg);
}

int rls_should_rate_limit(rls_service *s, rl_async *as, const uint8_t *in,
                          size_t inlen, int64_t deadline_ms, rls_answer *a,
                          rls_done_fn *done, void *arg)
{
    call *c = calloc(1, sizeof *c);

    *a = (rls_answer){.status = GRPC_STATUS_OK};
    if (!c) {
        refuse(a, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        return 0;
    }
    *c = (call){.s = s, .a = a, .deadline_ms = deadline_ms,
                .b = {.max = RLS_DECODE_BUDGET}};
    c->alloc = (ProtobufCAllocator){.alloc = budget_alloc,
                                    .free = budget_free,
                                    .allocator_data = &c->b};
    c->req = envoy__service__ratelimit__v3__rate_limit_request__unpack(
        &c->alloc, inlen, in);
    if (!c->req) {
        refuse(a, GRPC_STATUS_INVALID_ARGUMENT,
               c->b.used ? "RateLimitRequest does not decode (malformed or "
                           "over the decoding budget)"
                         : "RateLimitRequest does not decode");
        c->failed = 1;
    } else if (validate(c)) {
        c->failed = 1;
    } else {
        pthread_rwlock_rdlock(&s->lock);
        if (find_limits(c))
            c->failed = 1;
        else if ((c->cfg = s->cfg)) /* its limits stay while it runs */
            __atomic_add_fetch(&c->cfg->refs, 1, __ATOMIC_ACQ_REL);
        pthread_rwlock_unlock(&s->lock);
        if (!c->failed)
            start_all(c, as);
    }
    if (c->pending) { /* the last check's callback finishes it */
        c->done = done;
        c->arg = arg;
        return 1;
    }
    finish(c);
    return 0;
}

/* ---- lifecycle ---------------------------------------------------------- */

int rls_service_init(rls_service *s, rl_limiter *lim, const char *path,
                     const char *algorithm, unsigned headers, char *err,
                     size_t errlen)
{
    pthread_rwlockattr_t attr;

    *s = (rls_service){.lim = lim, .config_path = path, .from_source = !path,
                       .algorithm = algorithm, .headers = headers};
    pthread_rwlockattr_init(&attr);
    /* a reload waits for the calls in flight, not for every later one */
    pthread_rwlockattr_setkind_np(&attr,
                                  PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&s->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    return s->from_source ? 0 : rls_service_reload(s, err, errlen);
}

int rls_service_reload(rls_service *s, char *err, size_t errlen)
{
    ecfg *cfg, *old;

    if (s->from_source)
        return 0; /* the library's rules_source keeps the rules */
    if (ecfg_load(s->config_path, &cfg, err, errlen))
        return -1;
    cfg->refs = 1;
    pthread_rwlock_wrlock(&s->lock);
    if (load_rules(s, cfg, err, errlen)) {
        pthread_rwlock_unlock(&s->lock);
        ecfg_free(cfg);
        return -1;
    }
    old = s->cfg;
    s->cfg = cfg;
    pthread_rwlock_unlock(&s->lock);
    cfg_unref(old); /* freed when its last call ends */
    return 0;
}

void rls_service_destroy(rls_service *s)
{
    cfg_unref(s->cfg);
    pthread_rwlock_destroy(&s->lock);
}
