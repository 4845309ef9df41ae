/*
 * snapshot.c -- one committed version of the rule set, shared by the
 * handlers that read it and the publisher that sends it (see ratelimitd.h).
 *
 * A snapshot is the set's canonical text plus an index of its rules, sorted
 * by id, each pointing at its own canonical text inside it: GET /v1/rules
 * sends the text, GET /v1/rules/{id} a slice found by binary search, the
 * publisher the text.  The first snapshot comes from the library's parse of
 * the stored set; each change makes the next one from the last and the one
 * rule written (already validated by the library and written by
 * rule_json.c), by copying, so a change costs a copy of the set's bytes
 * rather than a parse of every rule.  Built once, never changed; the last
 * reference frees it.
 */
#include "ratelimitd.h"
#include "rule_json.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEAD_MAX (48 + 16 + GEN_LEN) /* {"version":N,"generation":G,"rules":[ */

static int by_id(const void *key, const void *entry)
{
    return strcmp(key, ((const snap_rule *)entry)->id);
}

const snap_rule *snapshot_find(const snapshot *s, const char *id)
{
    return s->n ? bsearch(id, s->rules, s->n, sizeof *s->rules, by_id)
                : NULL;
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
    free(s->rules);
    free(s->json);
    free(s);
}

/* One rule as the builder takes it. */
typedef struct piece {
    const char *id, *json;
    size_t len;
    int64_t version;
} piece;

/* A snapshot of n rules in id order: the text laid out, the index set. */
static snapshot *build(int64_t version, const char *gen, const piece *p,
                       size_t n)
{
    snapshot *s = calloc(1, sizeof *s);
    size_t bytes = HEAD_MAX + 3, at;

    for (size_t i = 0; i < n; i++)
        bytes += p[i].len + 1;
    if (!s || !(s->json = malloc(bytes)) ||
        (n && !(s->rules = calloc(n, sizeof *s->rules)))) {
        if (s)
            free(s->json);
        free(s);
        return NULL;
    }
    snprintf(s->gen, sizeof s->gen, "%s", gen);
    at = (size_t)snprintf(s->json, HEAD_MAX,
                          "{\"version\":%" PRId64 ",\"generation\":\"%s\","
                          "\"rules\":[", version, s->gen);
    for (size_t i = 0; i < n; i++) {
        if (i)
            s->json[at++] = ',';
        snprintf(s->rules[i].id, sizeof s->rules[i].id, "%s", p[i].id);
        s->rules[i].version = p[i].version;
        s->rules[i].json = s->json + at;
        s->rules[i].len = p[i].len;
        memcpy(s->json + at, p[i].json, p[i].len);
        at += p[i].len;
    }
    memcpy(s->json + at, "]}", 3);
    s->len = at + 2;
    s->n = n;
    s->version = version;
    atomic_init(&s->refs, 1);
    return s;
}

snapshot *snapshot_of_set(const rl_ruleset *rs, const char *gen)
{
    piece *p = rs->n ? calloc(rs->n, sizeof *p) : NULL;
    snapshot *s = NULL;
    size_t i;

    if (rs->n && !p)
        return NULL;
    for (i = 0; i < rs->n; i++) {
        json_t *j = rule_to_json(&rs->rules[i]);
        char *text = j ? json_dumps(j, RULE_JSON_DUMP_FLAGS) : NULL;
        json_decref(j);
        if (!text)
            goto out;
        p[i] = (piece){.id = rs->rules[i].id, .json = text,
                       .len = strlen(text), .version = rs->rules[i].version};
        if (i && strcmp(p[i - 1].id, p[i].id) >= 0)
            goto out; /* not in id order: not the database's set */
    }
    s = build(rs->version, gen, p, rs->n);
out:
    for (size_t k = 0; k < rs->n && k <= i; k++)
        free((char *)p[k].json);
    free(p);
    return s;
}

snapshot *snapshot_with(const snapshot *old, int64_t version, const char *id,
                        int64_t rule_version, const char *json)
{
    piece *p = calloc(old->n + 1, sizeof *p);
    size_t n = 0, i = 0;
    snapshot *s;

    if (!p)
        return NULL;
    for (; i < old->n && strcmp(old->rules[i].id, id) < 0; i++)
        p[n++] = (piece){old->rules[i].id, old->rules[i].json,
                         old->rules[i].len, old->rules[i].version};
    if (json)
        p[n++] = (piece){id, json, strlen(json), rule_version};
    if (i < old->n && strcmp(old->rules[i].id, id) == 0)
        i++; /* replaced or deleted */
    for (; i < old->n; i++)
        p[n++] = (piece){old->rules[i].id, old->rules[i].json,
                         old->rules[i].len, old->rules[i].version};
    s = build(version, old->gen, p, n);
    free(p);
    return s;
}
