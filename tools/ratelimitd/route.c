/*
 * route.c -- the raw request path to a route (see request.h).
 *
 * Paths are matched byte for byte as the client sent them: ratelimitd
 * tells libmicrohttpd not to %-decode (http.c), so an id that needs an
 * escape, or a dot-segment a client library would have rewritten, is
 * refused here and never reaches the store.
 */
#include "request.h"

#include <string.h>

#define RULES_PREFIX "/v1/rules"
#define HISTORY_SUFFIX "/history"

int route_parse(const char *path, route *out)
{
    const char *id, *end;
    size_t n;

    out->id[0] = '\0';
    if (strcmp(path, "/healthz") == 0)
        return out->kind = ROUTE_HEALTHZ;
    if (strcmp(path, "/metrics") == 0)
        return out->kind = ROUTE_METRICS;
    if (strncmp(path, RULES_PREFIX, strlen(RULES_PREFIX)) != 0)
        return out->kind = ROUTE_UNKNOWN;
    id = path + strlen(RULES_PREFIX);
    if (*id == '\0')
        return out->kind = ROUTE_RULES;
    if (*id++ != '/')
        return out->kind = ROUTE_UNKNOWN;
    end = strchr(id, '/');
    n = end ? (size_t)(end - id) : strlen(id);
    if (n == 0 || n > RL_RULE_ID_MAX)
        return out->kind = ROUTE_BAD_ID;
    memcpy(out->id, id, n);
    out->id[n] = '\0';
    if (rule_id_check(out->id)) {
        out->id[0] = '\0';
        return out->kind = ROUTE_BAD_ID;
    }
    if (!end)
        return out->kind = ROUTE_RULE;
    if (strcmp(end, HISTORY_SUFFIX) == 0)
        return out->kind = ROUTE_HISTORY;
    out->id[0] = '\0';
    return out->kind = ROUTE_UNKNOWN;
}
