/*
 * ruleset.c -- parse a whole rule set, check it as a whole (duplicate ids),
 * and index it by rule id.  Parsing is all-or-nothing: one bad rule rejects
 * the set, and the caller keeps the set it had.  When a new set replaces
 * the old one, ruleset_inherit() hands each rule what its predecessor of
 * the same id carried (the shapes it replaced).  Freeing a set lets go of
 * its rules' dry-run counters (src/telemetry/dryrun.c).
 */
#include "ruleset.h"
#include "dryrun.h"
#include "metrics.h"
#include "hash.h"
#include "rule_index.h"
#include "rule_values.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

rl_ruleset *ruleset_empty(void)
{
    return calloc(1, sizeof(rl_ruleset));
}

void ruleset_free(rl_ruleset *rs)
{
    if (!rs)
        return;
    dryrun_detach(rs);
    metrics_detach(rs);
    for (size_t i = 0; i < rs->n; i++)
        rule_clear(&rs->rules[i]);
    free(rs->rules);
    free(rs->index);
    rule_index_free(rs->match);
    rule_values_free(rs->values);
    free(rs->text);
    free(rs->slices);
    free(rs);
}

static uint64_t id_hash(const char *id)
{
    return hash_bytes(id, strlen(id), 0x1d);
}

const rl_rule *ruleset_find(const rl_ruleset *rs, const char *id)
{
    if (!rs->index)
        return NULL;
    for (size_t i = id_hash(id) & rs->mask;; i = (i + 1) & rs->mask) {
        uint32_t slot = rs->index[i];
        if (slot == 0)
            return NULL;
        if (strcmp(rs->rules[slot - 1].id, id) == 0)
            return &rs->rules[slot - 1];
    }
}

uint64_t ruleset_dim_hash(const char *name, size_t len)
{
    return hash_bytes(name, len, 0xd1);
}

int ruleset_dim_id(const rl_ruleset *rs, const char *name, size_t len,
                   uint64_t h)
{
    const ruleset_dims *d = &rs->dims;

    for (size_t i = h & (RULESET_DIM_SLOTS - 1);;
         i = (i + 1) & (RULESET_DIM_SLOTS - 1)) {
        int k = d->slot[i] - 1;
        if (k < 0)
            return -1;
        if (d->hash[k] == h && d->len[k] == len &&
            memcmp(d->name[k], name, len) == 0)
            return RULE_DIM_NAMED + k;
    }
}

/* Give rule r's named dimension its id, adding the name to the set's. */
static int intern_dim(rl_ruleset *rs, size_t r, char *err, size_t errlen)
{
    rl_rule *rule = &rs->rules[r];
    ruleset_dims *d = &rs->dims;
    uint64_t h;
    size_t i;
    int id;

    if (rule_dim_builtin(rule->dimension, rule->dim_len) != RULE_DIM_NAMED)
        return RL_OK; /* fixed by rule_from_json() */
    h = ruleset_dim_hash(rule->dimension, rule->dim_len);
    if ((id = ruleset_dim_id(rs, rule->dimension, rule->dim_len, h)) >= 0) {
        rule->dim_id = id;
        return RL_OK;
    }
    if (RULE_DIM_NAMED + d->n == RULESET_DIMS_MAX)
        return snprintf(err, errlen, "rules[%zu] (\"%s\"): dimension: a set "
                        "counts by at most %d named dimensions besides user, "
                        "api_key and ip", r, rule->id,
                        RULESET_DIMS_MAX - RULE_DIM_NAMED), RL_ERULE;
    for (i = h & (RULESET_DIM_SLOTS - 1); d->slot[i];
         i = (i + 1) & (RULESET_DIM_SLOTS - 1))
        ;
    d->slot[i] = (uint8_t)(d->n + 1);
    d->name[d->n] = rule->dimension;
    d->len[d->n] = rule->dim_len;
    d->hash[d->n] = h;
    rule->dim_id = RULE_DIM_NAMED + (int)d->n++;
    return RL_OK;
}

/* ruleset_find() as rule_values_build() calls it. */
static const rl_rule *find_in(const void *rs, const char *id)
{
    return ruleset_find(rs, id);
}

int ruleset_index(rl_ruleset *rs, char *err, size_t errlen)
{
    size_t size = 4;

    while (size < rs->n * 2)
        size <<= 1;
    if (!(rs->index = calloc(size, sizeof *rs->index)))
        return snprintf(err, errlen, "out of memory"), RL_ENOMEM;
    rs->mask = size - 1;
    for (size_t r = 0; r < rs->n; r++) {
        const char *id = rs->rules[r].id;
        size_t i = id_hash(id) & rs->mask;
        for (; rs->index[i]; i = (i + 1) & rs->mask) {
            if (strcmp(rs->rules[rs->index[i] - 1].id, id) == 0)
                return snprintf(err, errlen,
                                "rules[%zu]: rule_id \"%s\" appears twice", r,
                                id), RL_ERULE;
        }
        rs->index[i] = (uint32_t)(r + 1);
        if (intern_dim(rs, r, err, errlen) != RL_OK)
            return RL_ERULE;
    }
    if (!(rs->match = rule_index_build(rs->rules, rs->n)))
        return snprintf(err, errlen, "out of memory"), RL_ENOMEM;
    return rule_values_build(rs->rules, rs->n, find_in, rs, &rs->values,
                             err, errlen);
}

int ruleset_gen_check(const char *s, size_t len)
{
    if (len == 0 || len > RULESET_GEN_MAX)
        return -1;
    for (size_t i = 0; i < len; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'z') ||
              (s[i] >= 'A' && s[i] <= 'Z') || s[i] == '.' || s[i] == '_' ||
              s[i] == '-'))
            return -1;
    return 0;
}

/* Find the rule array, the version and the generation in the document's
 * top level. */
static int top_level(json_t *doc, json_t **rules, rl_ruleset *rs,
                     char *err, size_t errlen)
{
    const char *key;
    json_t *v;

    if (json_is_array(doc)) {
        *rules = doc;
        return RL_OK;
    }
    if (!json_is_object(doc))
        return snprintf(err, errlen,
                        "top level: must be an object or an array"), RL_ERULE;
    json_object_foreach(doc, key, v) {
        if (strcmp(key, "rules") && strcmp(key, "version") &&
            strcmp(key, "generation"))
            return snprintf(err, errlen, "%s: unknown field", key), RL_ERULE;
    }
    if ((v = json_object_get(doc, "version"))) {
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return snprintf(err, errlen,
                            "version: must be an integer >= 0"), RL_ERULE;
        rs->version = (int64_t)json_integer_value(v);
    }
    if ((v = json_object_get(doc, "generation"))) {
        if (!json_is_string(v) ||
            ruleset_gen_check(json_string_value(v), json_string_length(v)))
            return snprintf(err, errlen, "generation: must be 1..%d of "
                            "[0-9A-Za-z._-]", RULESET_GEN_MAX), RL_ERULE;
        memcpy(rs->generation, json_string_value(v), json_string_length(v));
    }
    *rules = json_object_get(doc, "rules");
    if (!json_is_array(*rules))
        return snprintf(err, errlen, "rules: required, an array"), RL_ERULE;
    return RL_OK;
}

static int parse_rules(json_t *arr, rl_ruleset *rs, char *err, size_t errlen)
{
    size_t n = json_array_size(arr);
    char why[200];

    if (n > RL_RULES_MAX)
        return snprintf(err, errlen, "rules: more than %d", RL_RULES_MAX),
               RL_ERULE;
    if (n && !(rs->rules = calloc(n, sizeof *rs->rules)))
        return snprintf(err, errlen, "out of memory"), RL_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        json_t *obj = json_array_get(arr, i), *id;
        if (rule_from_json(obj, &rs->rules[i], why, sizeof why)) {
            /* the message names the rule by its id, if it has one */
            id = json_is_object(obj) ? json_object_get(obj, "rule_id") : NULL;
            if (json_is_object(obj) && !id)
                id = json_object_get(obj, "ruleId");
            if (json_is_string(id))
                snprintf(err, errlen, "rules[%zu] (\"%.64s\"): %s", i,
                         json_string_value(id), why);
            else
                snprintf(err, errlen, "rules[%zu]: %s", i, why);
            return RL_ERULE;
        }
        rs->n = i + 1;
    }
    return ruleset_index(rs, err, errlen);
}

int ruleset_parse(const char *json, size_t len, int64_t next_version,
                  rl_ruleset **out, char *err, size_t errlen)
{
    json_error_t jerr;
    json_t *doc, *rules = NULL;
    rl_ruleset *rs;
    int rc;

    *out = NULL;
    doc = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!doc) {
        snprintf(err, errlen, "line %d, column %d: %s", jerr.line,
                 jerr.column, jerr.text);
        return RL_EPARSE;
    }
    if (!(rs = ruleset_empty())) {
        json_decref(doc);
        return snprintf(err, errlen, "out of memory"), RL_ENOMEM;
    }
    rs->version = next_version;
    rc = top_level(doc, &rules, rs, err, errlen);
    if (rc == RL_OK)
        rc = parse_rules(rules, rs, err, errlen);
    json_decref(doc);
    if (rc != RL_OK) {
        ruleset_free(rs);
        return rc;
    }
    *out = rs;
    return RL_OK;
}

/* ---- carrying over across a swap ---------------------------------------- */

static _Atomic(rl_clock_fn) inherit_clock;
static void *_Atomic inherit_arg;

void ruleset_set_clock(rl_clock_fn fn, void *arg)
{
    atomic_store(&inherit_arg, arg);
    atomic_store(&inherit_clock, fn);
}

static int64_t inherit_now(void)
{
    rl_clock_fn fn = atomic_load(&inherit_clock);
    struct timespec ts;

    if (fn)
        return fn(atomic_load(&inherit_arg));
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Is shape `s` already among list[0..n)? */
static int listed(const rule_shape *list, int n, const rule_shape *s)
{
    for (int i = 0; i < n; i++)
        if (list[i].state_seed == s->state_seed)
            return 1;
    return 0;
}

/* How long after a change from `old` to `now` a client's state under old
 * can differ from a fresh one: while old's state lives, and while the new
 * rule refills a level taken at the change (algo_convert_unknown: an
 * expired state's lower bound is one too). */
static int64_t shape_life_ms(const algo_params *old, const algo_params *now)
{
    int64_t a = algo_state_life_ms(old), b = algo_state_life_ms(now);

    return a > b ? a : b;
}

/* The previous shapes of r, whose predecessor is o, into list (newest
 * first); returns how many. */
static int shapes_of(const rl_rule *r, const rl_rule *o, int64_t now,
                     rule_shape *list)
{
    int n = 0;

    if (o->shape.state_seed != r->shape.state_seed) {
        list[n] = o->shape;
        list[n].since_ms = now;
        list[n].until_ms = now + RULE_SHAPE_GRACE_MS +
                           shape_life_ms(&o->shape.ap, &r->shape.ap);
        n++;
    }
    for (int i = 0; i < o->nprev && n < RULE_PREV_MAX; i++) {
        const rule_shape *p = &o->prev[i];
        if (p->until_ms > now && p->state_seed != r->shape.state_seed &&
            !listed(list, n, p))
            list[n++] = *p;
    }
    return n;
}

void ruleset_inherit(rl_ruleset *next, const rl_ruleset *old)
{
    int64_t now = inherit_now();
    rule_shape list[RULE_PREV_MAX];

    for (size_t i = 0; i < next->n; i++) {
        rl_rule *r = &next->rules[i];
        const rl_rule *o = ruleset_find(old, r->id);
        int n = o ? shapes_of(r, o, now, list) : 0;

        /* Out of memory: this rule remembers nothing, as a new rule. */
        if (n == 0 || !(r->prev = malloc((size_t)n * sizeof *r->prev)))
            continue;
        memcpy(r->prev, list, (size_t)n * sizeof *r->prev);
        r->nprev = n;
    }
}
