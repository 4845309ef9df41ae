/*
 * rule_json.c -- the canonical writer of rules and rule sets (see
 * rule_json.h).  The reader is rule.c; the two are kept each other's
 * inverse by tests/check_rules.c (round trips) and the rule-body fuzz
 * target.
 */
#include "rule_json.h"

#include <string.h>

static int add(json_t *obj, const char *key, json_t *v)
{
    return json_object_set_new(obj, key, v); /* steals v, even on failure */
}

/* n NUL-ended strings one after another: one string, or an array when
 * there are several or none (as "replaces": [] is written back). */
static json_t *strings_to_json(const char *s, uint32_t n)
{
    json_t *a;

    if (n == 1)
        return json_string(s);
    if (!(a = json_array()))
        return NULL;
    for (uint32_t i = 0; i < n; i++, s += strlen(s) + 1)
        if (json_array_append_new(a, json_string(s))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static json_t *match_to_json(const rl_rule *r)
{
    json_t *m = json_object();

    if (m && ((r->endpoint && add(m, "endpoint", json_string(r->endpoint))) ||
              (r->tier && add(m, "tier", json_string(r->tier))) ||
              (r->values &&
               add(m, "value", strings_to_json(r->values, r->nvalues))))) {
        json_decref(m);
        return NULL;
    }
    return m;
}

/* The rest of an unlimited rule: no numbers, no mode (enforce). */
static json_t *unlimited_to_json(json_t *o, const rl_rule *r)
{
    if (add(o, "unlimited", json_true()) ||
        add(o, "version", json_integer(r->version)) ||
        (r->updated_at[0] &&
         add(o, "updated_at", json_string(r->updated_at)))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *rule_to_json(const rl_rule *r)
{
    int bucket = r->ap.algo == RL_ALGO_TOKEN_BUCKET ||
                 r->ap.algo == RL_ALGO_GCRA;
    json_t *o = json_object();
    int bad = !o;

    bad = bad || add(o, "rule_id", json_string(r->id)) ||
          add(o, "dimension", json_string(r->dimension));
    if (!bad && (r->endpoint || r->tier || r->values))
        bad = add(o, "match", match_to_json(r));
    if (!bad && r->has_replaces)
        bad = add(o, "replaces", strings_to_json(r->replaces, r->nreplaces));
    if (!bad && r->unlimited)
        return unlimited_to_json(o, r);
    bad = bad || add(o, "limit", json_integer(r->ap.limit)) ||
          add(o, "window_seconds", json_integer(r->window_s));
    if (!bad && bucket)
        bad = add(o, "burst", json_integer(r->ap.burst));
    bad = bad || add(o, "algorithm", json_string(algo_name(r->ap.algo))) ||
          add(o, "mode", json_string(rule_mode_name(r->mode))) ||
          add(o, "failure_mode",
              json_string(rule_failure_name(r->failure))) ||
          add(o, "version", json_integer(r->version));
    if (!bad && r->updated_at[0])
        bad = add(o, "updated_at", json_string(r->updated_at));
    if (!bad && r->lease)
        bad = add(o, "lease", json_integer(r->lease));
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *ruleset_to_json(const rl_ruleset *rs)
{
    json_t *o = json_object(), *rules = json_array();
    int bad = !o || !rules;

    for (size_t i = 0; !bad && i < rs->n; i++)
        bad = json_array_append_new(rules, rule_to_json(&rs->rules[i]));
    bad = bad || add(o, "version", json_integer(rs->version));
    bad = bad || (rs->generation[0] &&
                  add(o, "generation", json_string(rs->generation)));
    if (bad)
        json_decref(rules);
    if (bad || add(o, "rules", rules)) {
        json_decref(o);
        return NULL;
    }
    return o;
}
