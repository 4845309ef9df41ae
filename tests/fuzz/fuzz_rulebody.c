/*
 * fuzz_rulebody.c -- a PUT /v1/rules/{id} body, as ratelimitd reads it
 * (body_parse(): the library's parser behind it).  Input: an optional id
 * line, then the body.  Whatever is accepted must be a rule for that id
 * with no server-managed fields, whose canonical JSON parses back to the
 * same rule and writes the same bytes again, and which a rule set holds as
 * ratelimitd stores it; whatever is refused says why.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "../../tools/ratelimitd/request.h" /* not src/request.h */
#include "rule_json.h"
#include "ruleset.h"

static int same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static void check_same(const rl_rule *a, const rl_rule *b)
{
    FUZZ_CHECK(strcmp(a->id, b->id) == 0);
    FUZZ_CHECK(strcmp(a->dimension, b->dimension) == 0);
    FUZZ_CHECK(same_str(a->endpoint, b->endpoint));
    FUZZ_CHECK(same_str(a->tier, b->tier));
    FUZZ_CHECK(a->ap.algo == b->ap.algo && a->ap.limit == b->ap.limit);
    FUZZ_CHECK(a->ap.burst == b->ap.burst);
    FUZZ_CHECK(a->ap.window_ms == b->ap.window_ms);
    FUZZ_CHECK(a->ap.p == b->ap.p && a->ap.q == b->ap.q);
    FUZZ_CHECK(a->window_s == b->window_s && a->mode == b->mode);
    FUZZ_CHECK(a->failure == b->failure && a->version == b->version);
    FUZZ_CHECK(strcmp(a->updated_at, b->updated_at) == 0);
    FUZZ_CHECK(a->shape.state_seed == b->shape.state_seed);
    FUZZ_CHECK(a->nvalues == b->nvalues && a->nreplaces == b->nreplaces);
    FUZZ_CHECK(a->has_replaces == b->has_replaces);
    FUZZ_CHECK(a->unlimited == b->unlimited);
    for (uint32_t i = 0, at = 0; i < a->nvalues; i++) {
        FUZZ_CHECK(strcmp(a->values + at, b->values + at) == 0);
        at += (uint32_t)strlen(a->values + at) + 1;
    }
}

static char *canonical(const rl_rule *r)
{
    json_t *j = rule_to_json(r);
    char *s;

    FUZZ_CHECK(j != NULL);
    s = json_dumps(j, RULE_JSON_DUMP_FLAGS);
    json_decref(j);
    FUZZ_CHECK(s != NULL);
    return s;
}

/* As ratelimitd stores it: versioned, timed, in a set of its own. */
static void check_stored(rl_rule *r)
{
    char *text, set[4096 + 64], err[256];
    rl_ruleset *rs = NULL;

    r->version = 5;
    strcpy(r->updated_at, "2026-12-01T13:20:00Z");
    text = canonical(r);
    if (strlen(text) < 4096) {
        int n = snprintf(set, sizeof set, "{\"version\":5,\"rules\":[%s]}",
                         text);
        int rc = ruleset_parse(set, (size_t)n, 0, &rs, err, sizeof err);
        /* Alone in a set, a rule replacing another names a missing one. */
        if (r->nreplaces) {
            FUZZ_CHECK(rc == RL_ERULE && strstr(err, "replaces"));
            free(text);
            return;
        }
        FUZZ_CHECK(rc == RL_OK);
        FUZZ_CHECK(rs->version == 5 && rs->n == 1);
        check_same(r, &rs->rules[0]);
        ruleset_free(rs);
    }
    free(text);
}

static void check_accepted(rl_rule *r, const char *id)
{
    char *first, *second, err[256], field[80];
    rl_rule again;

    FUZZ_CHECK(strcmp(r->id, id) == 0);
    FUZZ_CHECK(r->version == 0 && r->updated_at[0] == '\0');
    first = canonical(r);
    FUZZ_CHECK(body_parse(first, strlen(first), id, &again, err, sizeof err,
                          field, sizeof field) == BODY_OK);
    check_same(r, &again);
    second = canonical(&again);
    FUZZ_CHECK(strcmp(first, second) == 0);
    free(first);
    free(second);
    rule_clear(&again);
    check_stored(r);
}

int fuzz_rulebody(const uint8_t *data, size_t size)
{
    const char *nl = memchr(data, '\n', size < 80 ? size : 80);
    char id[RL_RULE_ID_MAX + 1] = "r1", err[512], field[80];
    rl_rule r;
    int rc;

    if (nl && (size_t)(nl - (const char *)data) <= RL_RULE_ID_MAX) {
        size_t n = (size_t)(nl - (const char *)data);
        char cand[RL_RULE_ID_MAX + 1];
        memcpy(cand, data, n);
        cand[n] = '\0';
        if (strlen(cand) == n && rule_id_check(cand) == 0)
            strcpy(id, cand);
        size -= n + 1;
        data = (const uint8_t *)nl + 1;
    }
    err[0] = '\0';
    rc = body_parse((const char *)data, size, id, &r, err, sizeof err, field,
                    sizeof field);
    if (rc != BODY_OK) {
        FUZZ_CHECK(rc == BODY_BAD_JSON || rc == BODY_INVALID);
        FUZZ_CHECK(err[0] != '\0');
        FUZZ_CHECK(rc == BODY_INVALID || field[0] == '\0');
        FUZZ_CHECK(r.endpoint == NULL && r.tier == NULL);
        return 0;
    }
    check_accepted(&r, id);
    rule_clear(&r);
    return 0;
}

#ifdef FUZZ_TARGET_rulebody
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_rulebody(data, size);
}
#endif
