/*
 * fuzz_ruleid.c -- the raw request path, as ratelimitd routes it
 * (route_parse()), and If-Match / If-None-Match values (etag_matches()).
 * A path that names a rule must be exactly /v1/rules/<id>[/history] with
 * an id in the rule-id alphabet, no escape, no dot-segment; anything else
 * names no rule.  A tag the server wrote always matches its version.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "../../tools/ratelimitd/request.h" /* not src/request.h */

static void check_route(const char *path)
{
    char expect[RL_RULE_ID_MAX + 64];
    route rt;
    int kind = route_parse(path, &rt);

    FUZZ_CHECK(kind == rt.kind);
    switch (kind) {
    case ROUTE_RULE:
    case ROUTE_HISTORY:
        FUZZ_CHECK(rule_id_check(rt.id) == 0);
        FUZZ_CHECK(!strchr(rt.id, '%') && !strchr(rt.id, '/'));
        FUZZ_CHECK(strcmp(rt.id, ".") != 0 && strcmp(rt.id, "..") != 0);
        snprintf(expect, sizeof expect, "/v1/rules/%s%s", rt.id,
                 kind == ROUTE_HISTORY ? "/history" : "");
        FUZZ_CHECK(strcmp(expect, path) == 0);
        break;
    case ROUTE_HEALTHZ:
        FUZZ_CHECK(strcmp(path, "/healthz") == 0 && rt.id[0] == '\0');
        break;
    case ROUTE_RULES:
        FUZZ_CHECK(strcmp(path, "/v1/rules") == 0 && rt.id[0] == '\0');
        break;
    default:
        FUZZ_CHECK(kind == ROUTE_UNKNOWN || kind == ROUTE_BAD_ID);
        FUZZ_CHECK(rt.id[0] == '\0');
    }
}

static void check_etags(const char *header, int64_t version)
{
    char tag[ETAG_MAX], weak[ETAG_MAX + 2];

    /* Any header: no crash, and nothing, "*" included, matches a rule
     * that is not there (If-Match "*" is unconditional by etag_is_any()). */
    FUZZ_CHECK(!etag_matches(header, version, 0, 1));
    FUZZ_CHECK(!etag_matches(header, version, 0, 0));
    if (etag_is_any(header))
        FUZZ_CHECK(etag_matches(header, version, 1, 0));
    etag_format(version, tag);
    FUZZ_CHECK(etag_matches(tag, version, 1, 0));
    FUZZ_CHECK(!etag_matches(tag, version + 1, 1, 1));
    snprintf(weak, sizeof weak, "W/%s", tag);
    FUZZ_CHECK(etag_matches(weak, version, 1, 1));
    FUZZ_CHECK(!etag_matches(weak, version, 1, 0));
}

int fuzz_ruleid(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    int64_t version = 0;

    FUZZ_CHECK(s != NULL);
    memcpy(s, data, size);
    s[size] = '\0';          /* the server sees up to the first NUL */
    check_route(s);
    for (size_t i = 0; i < size && i < 8; i++)
        version = version * 31 + data[i];
    check_etags(s, version < 0 ? -version : version);
    free(s);
    return 0;
}

#ifdef FUZZ_TARGET_ruleid
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_ruleid(data, size);
}
#endif
