/*
 * snapshot.c -- one committed version of the rule set, shared by the
 * handlers that read it and the publisher that sends it (see ratelimitd.h).
 * Built once, never changed; the last reference frees it.
 */
#include "ratelimitd.h"
#include "rule_json.h"

#include <stdlib.h>
#include <string.h>

snapshot *snapshot_new(rl_ruleset *rs)
{
    snapshot *s = calloc(1, sizeof *s);
    json_t *j = s ? ruleset_to_json(rs) : NULL;

    if (j)
        s->json = json_dumps(j, RULE_JSON_DUMP_FLAGS);
    json_decref(j);
    if (!s || !s->json) {
        free(s);
        ruleset_free(rs);
        return NULL;
    }
    atomic_init(&s->refs, 1);
    s->version = rs->version;
    s->rs = rs;
    s->len = strlen(s->json);
    return s;
}

snapshot *snapshot_ref(snapshot *s)
{
    atomic_fetch_add(&s->refs, 1);
    return s;
}

void snapshot_unref(snapshot *s)
{
    if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    ruleset_free(s->rs);
    free(s->json);
    free(s);
}
