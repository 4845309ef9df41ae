/*
 * request.h -- what ratelimitd reads from a request before anything else
 * sees it: the path (route.c), the PUT body (body.c) and the entity tags
 * of If-Match / If-None-Match (etag.c).  Pure functions over bytes, no
 * HTTP library and no I/O, so the fuzz targets (tests/fuzz/) call exactly
 * what the server calls.
 */
#ifndef RLD_REQUEST_H
#define RLD_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "rule.h"

enum route_kind {
    ROUTE_UNKNOWN,  /* no such path: 404                                 */
    ROUTE_BAD_ID,   /* /v1/rules/{id}[...] with an id that is not one: 400 */
    ROUTE_HEALTHZ,  /* /healthz                                          */
    ROUTE_RULES,    /* /v1/rules                                         */
    ROUTE_RULE,     /* /v1/rules/{id}                                    */
    ROUTE_HISTORY,  /* /v1/rules/{id}/history                            */
    ROUTE_METRICS,  /* /metrics                                          */
    ROUTE_KINDS     /* how many                                          */
};

typedef struct route {
    int kind;                      /* enum route_kind                    */
    char id[RL_RULE_ID_MAX + 1];   /* ROUTE_RULE, ROUTE_HISTORY; else "" */
} route;

/*
 * Route a request by its RAW path: as sent, before any %-decoding, without
 * the query string.  The id segment must pass rule_id_check() as it stands,
 * so "%2F", "%2e%2e", "..", bytes outside [A-Za-z0-9._:-] and ids over
 * RL_RULE_ID_MAX bytes are ROUTE_BAD_ID and never name a rule.  Returns
 * out->kind.
 */
int route_parse(const char *path, route *out);

/* The message a ROUTE_BAD_ID answer carries. */
#define ROUTE_STR_(x) #x
#define ROUTE_STR(x) ROUTE_STR_(x)
#define ROUTE_BAD_ID_MSG                                                     \
    "rule id: must be 1.." ROUTE_STR(RL_RULE_ID_MAX)                         \
    " bytes of A-Z a-z 0-9 . _ : - as sent (not . or .., no %-escapes)"

enum body_error {
    BODY_OK,
    BODY_BAD_JSON,  /* not JSON at all                   */
    BODY_INVALID    /* JSON, but not a valid rule        */
};

/*
 * A PUT /v1/rules/{id} body to a rule, validated by the library's parser
 * (rule_from_json(): one definition of a valid rule).  "rule_id" (or
 * "ruleId") may be left out; if given it must equal `id`.  The
 * server-managed "version" and "updated_at" are validated like any field,
 * then ignored: r->version is 0 and r->updated_at "" on return (the caller
 * sets both when it stores the rule), so a rule read with GET can be PUT
 * back unchanged.  Returns BODY_OK with *r filled (rule_clear() it), or
 * an error with the reason in err and the field it is about in field (""
 * when it is about no one field); *r then holds nothing to free.
 */
int body_parse(const char *body, size_t len, const char *id, rl_rule *r,
               char *err, size_t errlen, char *field, size_t fieldlen);

/*
 * Does an If-Match / If-None-Match header value name version `version`?
 * The header is "*" or a comma-separated list of entity tags; ratelimitd's
 * tags are "\"<version>\"".  Strong comparison (If-Match) ignores W/ tags;
 * weak comparison (If-None-Match) accepts them.  "*" matches when `exists`.
 * A malformed list matches nothing.  1 or 0.
 */
int etag_matches(const char *header, int64_t version, int exists, int weak);

/* 1 if the header is "*" (spaces around allowed). */
int etag_is_any(const char *header);

/* "\"<version>\"" into buf (at least ETAG_MAX bytes). */
#define ETAG_MAX 24
void etag_format(int64_t version, char *buf);

#endif
