/*
 * envoy_rls.h -- ratelimit-envoy's shared types: the configuration tree
 * read from envoyproxy/ratelimit's YAML (config_yaml.c), the descriptor
 * matching and rule-set text built from it (config.c), the
 * ShouldRateLimit handler (service.c) and the gRPC core server loop
 * (server.c), the metrics listener (metrics.c).  One program, linked
 * with the library's public API only;
 * see ratelimit-envoy(8) for what it serves and docs/GATEWAY.md for why
 * it is a program of its own.
 */
#ifndef ENVOY_RLS_H
#define ENVOY_RLS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "ratelimit.h"

/* Bounds on one ShouldRateLimit call: past any, INVALID_ARGUMENT, nothing
 * counted.  The message itself is capped by gRPC at RLS_MESSAGE_MAX
 * (RESOURCE_EXHAUSTED past it) and decoded within RLS_DECODE_BUDGET bytes
 * of memory. */
#define RLS_DESCRIPTORS_MAX 64
#define RLS_ENTRIES_MAX 32
#define RLS_DOMAIN_MAX 256
#define RLS_ENTRY_KEY_MAX 256
#define RLS_ENTRY_VALUE_MAX 4096
#define RLS_MESSAGE_MAX (4 << 20)
#define RLS_DECODE_BUDGET (16 << 20)
/* The largest requests_per_unit: the library's largest rule limit. */
#define RLS_RPU_MAX 1000000000U
/* Distinct (unit, requests_per_unit) overrides a server keeps rules for. */
#define RLS_OVERRIDES_MAX 256
/* The dimension every rule of a YAML configuration counts (config.c): a
 * descriptor's client key is its value. */
#define RLS_DIMENSION "descriptor"

/* RateLimitResponse.RateLimit.Unit's numbers (RateLimitUnit's are the
 * same, without WEEK). */
enum { RLS_UNIT_UNKNOWN = 0, RLS_UNIT_SECOND = 1, RLS_UNIT_MINUTE = 2,
       RLS_UNIT_HOUR = 3, RLS_UNIT_DAY = 4, RLS_UNIT_MONTH = 5,
       RLS_UNIT_YEAR = 6, RLS_UNIT_WEEK = 7, RLS_UNIT_COUNT = 8 };

/* One rate_limit of the configuration. */
typedef struct ecfg_limit {
    uint32_t rpu;          /* requests_per_unit (0: every request over) */
    int unit;              /* RLS_UNIT_*                                 */
    int unlimited;         /* unlimited: true: never counted             */
    int shadow;            /* shadow_mode: counted, never over (mode log) */
    int detailed;          /* detailed_metric: accepted, no effect       */
    const char *algorithm; /* the library's name; NULL: the default      */
    const char *failure;   /* failure_mode; NULL: the library's default  */
    char *name;            /* "" when unnamed                            */
    char **replaces;       /* names of limits this one replaces          */
    size_t nreplaces;
    char rule_id[RL_RULE_ID_MAX + 1]; /* its rule in the library's set   */
} ecfg_limit;

/* One descriptors entry: key, and value exact, a pattern with '*', or
 * none (a bare key: one counter per value). */
typedef struct ecfg_node {
    char *key, *value; /* value NULL: a bare key */
    int wildcard;      /* value holds a '*'      */
    ecfg_limit *limit; /* NULL: no rate_limit    */
    struct ecfg_node *kids;
    size_t nkids;
} ecfg_node;

typedef struct ecfg_domain {
    char *name;
    ecfg_node root; /* its descriptors are root.kids */
} ecfg_domain;

typedef struct ecfg {
    ecfg_domain *domains; /* sorted by name */
    size_t ndomains;
    int refs; /* service.c: 1 while in force, +1 per call using it */
} ecfg;

/* config_yaml.c: every *.yaml / *.yml file of a directory (or the one
 * file `path` names), one domain each.  0, or -1 with "file:line: what"
 * in err. */
int ecfg_load(const char *path, ecfg **out, char *err, size_t errlen);
/* The files' names, sizes and mtimes hashed: a change to look for. */
uint64_t ecfg_signature(const char *path);
void ecfg_free(ecfg *c);

/* config.c */
void ecfg_name_rules(ecfg *c); /* each limit's rule_id (ecfg_load's) */
const ecfg_domain *ecfg_domain_find(const ecfg *c, const char *name);
/* A descriptor's limit as envoyproxy/ratelimit finds it: entry by entry
 * down the tree, an exact value first, then wildcards in file order, then
 * the bare key; the limit of the node the last entry reached, or NULL. */
typedef struct rls_entry {
    const char *key, *value;
} rls_entry;
const ecfg_limit *ecfg_match(const ecfg_domain *d, const rls_entry *e,
                             size_t n);
int ecfg_wildcard_match(const char *pattern, const char *value);
/* The rule-set JSON of every limit (and of the overrides' rules); NULL
 * when out of memory.  The caller frees it. */
typedef struct rls_override {
    uint32_t rpu;
    int unit;
    char rule_id[RL_RULE_ID_MAX + 1];
} rls_override;
char *ecfg_rules_json(const ecfg *c, const rls_override *o, size_t no,
                      const char *algorithm, int64_t version);
int64_t rls_unit_seconds(int unit); /* 0: not a unit the library can keep */
const char *rls_unit_name(int unit);

/* The service's own counters (metrics.c serves them), updated with
 * relaxed atomic adds. */
#define RLS_GRPC_CODES 17 /* grpc_status_code 0..16 */
typedef struct rls_counters {
    uint64_t calls;                  /* ShouldRateLimit calls answered  */
    uint64_t status[RLS_GRPC_CODES]; /* by gRPC status                  */
    uint64_t overall_ok, overall_over; /* answered OK: the overall code */
    uint64_t descriptors_ok, descriptors_over;
    uint64_t health;                 /* Health/Check calls              */
} rls_counters;

/* service.c: the state one server shares between its threads. */
typedef struct rls_service {
    rl_limiter *lim;
    pthread_rwlock_t lock; /* read: finding a call's limits; write: a
                              reload, an override */
    ecfg *cfg;             /* NULL with rules from the rules_source */
    int from_source;       /* the library's rules_source holds the rules */
    rls_counters counters;
    const char *config_path;
    const char *algorithm; /* default algorithm */
    unsigned headers;      /* RLS_HEADERS_* */
    rls_override overrides[RLS_OVERRIDES_MAX];
    size_t noverrides;
    int64_t version;
} rls_service;

#define RLS_HEADERS_NONE 0x100 /* no response_headers_to_add           */
/* otherwise the RL_HEADERS_* options of rl_headers(3)                 */

/* path NULL: the rules come from the limiter's rules_source (a descriptor
 * checked as a request: see service.c). */
int rls_service_init(rls_service *s, rl_limiter *lim, const char *path,
                     const char *algorithm, unsigned headers, char *err,
                     size_t errlen);
/* Read the configuration again; the last good one stays on an error. */
int rls_service_reload(rls_service *s, char *err, size_t errlen);
void rls_service_destroy(rls_service *s);

/* One ShouldRateLimit call: the request's bytes in, the response's bytes
 * (malloc'ed, *out) or a gRPC status and message out.  deadline_ms: the
 * call's deadline on CLOCK_MONOTONIC in ms (INT64_MAX: none).  Its checks
 * are started on `as` (the calling thread's loop context): 0 when the call
 * is answered already (*a filled: no check had to wait for its store), 1
 * when checks are in flight: done(arg) then runs once, from
 * rl_async_process(as) in this thread, with *a filled.  *a must stay
 * valid until then. */
typedef struct rls_answer {
    int status; /* grpc_status_code */
    char message[256];
    uint8_t *out;
    size_t outlen;
} rls_answer;
typedef void rls_done_fn(void *arg);
/* A ShouldRateLimit call the server refused before it reached the
 * service (no message, deadline passed), in the counters. */
void rls_count_refusal(rls_service *s, int status);
int rls_should_rate_limit(rls_service *s, rl_async *as, const uint8_t *in,
                          size_t inlen, int64_t deadline_ms, rls_answer *a,
                          rls_done_fn *done, void *arg);
/* The checks one loop context may have in flight (rl_async_new). */
#define RLS_ASYNC_MAX 1024

/* metrics.c: GET /metrics over plain HTTP/1.1 on addr ("host:port"; port
 * 0: any, printed), the library's metrics and the service's counters. */
typedef struct rls_metrics rls_metrics;
rls_metrics *rls_metrics_start(rls_service *svc, const char *addr, char *err,
                               size_t errlen);
void rls_metrics_stop(rls_metrics *m);

/* server.c */
typedef struct rls_server rls_server;
typedef struct rls_listen {
    const char *addr;
    int tls;
} rls_listen;
typedef struct rls_tls {
    const char *cert_file, *key_file, *client_ca_file;
} rls_tls;
rls_server *rls_server_start(rls_service *svc, const rls_listen *l, size_t nl,
                             const rls_tls *tls, int threads, char *err,
                             size_t errlen);
/* Stop taking calls, answer those in flight (cancelled after grace_ms),
 * join the threads, free. */
void rls_server_stop(rls_server *srv, int grace_ms);

int64_t rls_now_ms(void); /* CLOCK_MONOTONIC */

#endif
