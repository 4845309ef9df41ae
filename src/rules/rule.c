/*
 * rule.c -- one rule from JSON, validated strictly.
 *
 * Every error names the field and the reason ("limit: must be 1..1000000000,
 * got 0"), because the message reaches an operator who typed the rule.
 * Unknown fields are errors too: a misspelt "windowSecond" must not silently
 * become a default.  The design note's camelCase spellings (ruleId,
 * windowSeconds, failureMode, updatedAt) are accepted as aliases of the
 * snake_case names; a rule that gives both spellings of one field fails,
 * naming the field.  Errors name a field by its canonical (snake_case)
 * name, whichever spelling the rule used, so a client keys on one name.
 */
#include "rule.h"
#include "hash.h"
#include "pattern.h"
#include "rule_values.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const mode_names[] = {"enforce", "log"};
static const char *const failure_names[] = {"fallback", "open", "closed"};

/* The fields of a rule, in the canonical order (rule_json.c's), and of
 * its match; each with its input-only alias, if any.  A member name is
 * found by its length first, starting after the field found last, so a
 * rule written in the canonical order costs one comparison per member. */
enum { F_RULE_ID, F_DIMENSION, F_MATCH, F_REPLACES, F_UNLIMITED, F_LIMIT,
       F_WINDOW, F_BURST, F_ALGORITHM, F_MODE, F_FAILURE, F_VERSION,
       F_UPDATED, F_LEASE, RULE_FIELDS };
enum { M_ENDPOINT, M_TIER, M_VALUE, MATCH_FIELDS };

typedef struct field_name {
    const char *name, *alias;
    size_t len, alias_len;
} field_name;

#define NAME(s) s, NULL, sizeof s - 1, 0
#define NAMES(s, a) s, a, sizeof s - 1, sizeof a - 1

static const field_name rule_fields[RULE_FIELDS] = {
    [F_RULE_ID] = {NAMES("rule_id", "ruleId")},
    [F_DIMENSION] = {NAME("dimension")},
    [F_MATCH] = {NAME("match")},
    [F_REPLACES] = {NAME("replaces")},
    [F_UNLIMITED] = {NAME("unlimited")},
    [F_LIMIT] = {NAME("limit")},
    [F_WINDOW] = {NAMES("window_seconds", "windowSeconds")},
    [F_BURST] = {NAME("burst")},
    [F_ALGORITHM] = {NAME("algorithm")},
    [F_MODE] = {NAME("mode")},
    [F_FAILURE] = {NAMES("failure_mode", "failureMode")},
    [F_VERSION] = {NAME("version")},
    [F_UPDATED] = {NAMES("updated_at", "updatedAt")},
    [F_LEASE] = {NAME("lease")}};
static const field_name match_fields[MATCH_FIELDS] = {
    [M_ENDPOINT] = {NAME("endpoint")}, [M_TIER] = {NAME("tier")},
    [M_VALUE] = {NAME("value")}};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static int lookup(const char *const *names, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], s) == 0)
            return (int)i;
    return -1;
}

const char *rule_mode_name(int mode)
{
    return (mode >= 0 && (size_t)mode < COUNT(mode_names)) ? mode_names[mode]
                                                            : "?";
}

const char *rule_failure_name(int failure)
{
    return (failure >= 0 && (size_t)failure < COUNT(failure_names))
               ? failure_names[failure]
               : "?";
}

/* a-z 0-9 _ . : - */
static int dim_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == ':' || c == '-';
}

size_t rule_dim_name_len(const char *s)
{
    size_t n = 0;

    if (!s || !(*s >= 'a' && *s <= 'z'))
        return 0;
    while (n <= RL_DIM_NAME_MAX && s[n] && dim_byte((unsigned char)s[n]))
        n++;
    return n <= RL_DIM_NAME_MAX && !s[n] ? n : 0;
}

int rule_dim_builtin(const char *name, size_t len)
{
    switch (len) {
    case 2: return memcmp(name, "ip", 2) ? RULE_DIM_NAMED : RULE_DIM_IP;
    case 4: return memcmp(name, "user", 4) ? RULE_DIM_NAMED : RULE_DIM_USER;
    case 6:
        return memcmp(name, "global", 6) ? RULE_DIM_NAMED : RULE_DIM_GLOBAL;
    case 7:
        return memcmp(name, "api_key", 7) ? RULE_DIM_NAMED
                                          : RULE_DIM_API_KEY;
    default: return RULE_DIM_NAMED;
    }
}

int rule_id_check(const char *id)
{
    size_t n = strlen(id);

    /* "." and ".." are URL dot-segments: clients and proxies rewrite them,
     * so a rule so named could not be addressed as /v1/rules/{id}. */
    if (n == 0 || n > RL_RULE_ID_MAX || strcmp(id, ".") == 0 ||
        strcmp(id, "..") == 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)id[i]) && !strchr("._:-", id[i]))
            return -1;
    return 0;
}

int rule_matches(const rl_rule *r, const char *endpoint, const char *tier)
{
    return rule_matches_n(r, endpoint, endpoint ? strlen(endpoint) : 0, tier,
                          tier ? strlen(tier) : 0);
}

int rule_matches_n(const rl_rule *r, const char *endpoint, size_t elen,
                   const char *tier, size_t tlen)
{
    /* NULL and "" both mean the request does not say. */
    /* The rule's tier read no further than tlen + 1 bytes: a counted
     * tier may hold a NUL (outside rl_request's contract) where strncmp
     * would stop equal short of the rule's end. */
    if (r->tier && (!tier || strnlen(r->tier, tlen + 1) != tlen ||
                    memcmp(r->tier, tier, tlen) != 0))
        return 0;
    if (r->endpoint && (!endpoint || !elen ||
                        !pattern_match_n(r->endpoint, endpoint, elen)))
        return 0;
    return 1;
}

/* r's endpoint and tier (either may be NULL) in one allocation, which
 * the first of them owns (rule_clear()). */
static int set_match(rl_rule *r, const char *endpoint, const char *tier)
{
    size_t le = endpoint ? strlen(endpoint) + 1 : 0;
    size_t lt = tier ? strlen(tier) + 1 : 0;
    char *block;

    if (!le && !lt)
        return 0;
    if (!(block = malloc(le + lt)))
        return -1;
    if (endpoint)
        r->endpoint = memcpy(block, endpoint, le);
    if (tier)
        r->tier = memcpy(block + le, tier, lt);
    return 0;
}

void rule_clear(rl_rule *r)
{
    free(r->endpoint ? r->endpoint : r->tier); /* one block: set_match() */
    free(r->prev);
    free(r->values);
    free(r->replaces);
    r->endpoint = r->tier = NULL;
    r->prev = NULL;
    r->nprev = 0;
    r->values = r->replaces = NULL;
    r->nvalues = r->nreplaces = 0;
}

/* A copy of a block of n NUL-ended strings (NULL: none); -1 out of
 * memory. */
static int copy_strings(char **dst, const char *src, uint32_t n)
{
    size_t len = 0;

    *dst = NULL;
    if (!src)
        return 0;
    for (uint32_t i = 0; i < n; i++)
        len += strlen(src + len) + 1;
    if (!(*dst = malloc(len ? len : 1)))
        return -1;
    memcpy(*dst, src, len);
    return 0;
}

int rule_copy(rl_rule *dst, const rl_rule *src)
{
    *dst = *src;
    dst->endpoint = dst->tier = NULL;
    dst->prev = NULL;
    dst->nprev = 0;
    dst->dry = NULL;
    dst->met = NULL;
    dst->values = dst->replaces = NULL;
    if (set_match(dst, src->endpoint, src->tier) ||
        copy_strings(&dst->values, src->values, src->nvalues) ||
        copy_strings(&dst->replaces, src->replaces, src->nreplaces)) {
        rule_clear(dst);
        return -1;
    }
    return 0;
}

void rule_shape_init(rule_shape *s, const char *id, const algo_params *ap)
{
    static const char letter[] = "stfgl"; /* enum rl_algo order */
    int n = snprintf(s->name, sizeof s->name, "%c%lld",
                     letter[(unsigned)ap->algo % (sizeof letter - 1)],
                     (long long)(ap->window_ms / 1000));

    if (ap->algo == RL_ALGO_TOKEN_BUCKET || ap->algo == RL_ALGO_GCRA)
        n += snprintf(s->name + n, sizeof s->name - (size_t)n, ":%lld:%lld",
                      (long long)ap->limit, (long long)ap->burst);
    s->len = (size_t)n;
    s->ap = *ap;
    s->since_ms = s->until_ms = 0;
    s->state_seed = hash_bytes(s->name, s->len,
                               hash_bytes(id, strlen(id), 0x5eed));
}

static int num2(const char *s)
{
    return (s[0] - '0') * 10 + (s[1] - '0');
}

/* Are the digits of "YYYY-MM-DDTHH:MM:SS" a real date and time? */
static int date_valid(const char *s)
{
    static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int year = num2(s) * 100 + num2(s + 2), month = num2(s + 5);
    int day = num2(s + 8), leap, max;

    if (month < 1 || month > 12 || day < 1)
        return 0;
    leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    max = mdays[month - 1] + (month == 2 && leap);
    /* Seconds may be 60: RFC 3339 allows a leap second. */
    return day <= max && num2(s + 11) <= 23 && num2(s + 14) <= 59 &&
           num2(s + 17) <= 60;
}

/* "YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM)", RFC 3339 section 5.6;
 * 't' and 'z' may be lower case (section 5.6, note). */
static int rfc3339_check(const char *s)
{
    static const char shape[] = "dddd-dd-ddTdd:dd:dd";
    size_t i;

    for (i = 0; shape[i]; i++) {
        if (shape[i] == 'd' ? !isdigit((unsigned char)s[i])
                            : (s[i] != shape[i] && !(i == 10 && s[i] == 't')))
            return -1;
    }
    if (!date_valid(s))
        return -1;
    if (s[i] == '.') {
        if (!isdigit((unsigned char)s[++i]))
            return -1;
        while (isdigit((unsigned char)s[i]))
            i++;
    }
    if (s[i] == 'Z' || s[i] == 'z')
        return s[i + 1] ? -1 : 0;
    if ((s[i] == '+' || s[i] == '-') && isdigit((unsigned char)s[i + 1]) &&
        isdigit((unsigned char)s[i + 2]) && s[i + 3] == ':' &&
        isdigit((unsigned char)s[i + 4]) && isdigit((unsigned char)s[i + 5]) &&
        !s[i + 6] && num2(s + i + 1) <= 23 && num2(s + i + 4) <= 59)
        return 0;
    return -1;
}

/* The field of `fields` (n) a member name of len bytes spells, from
 * *hint on; *alias: under its alias.  -1 if none. */
static int field_of(const field_name *fields, int n, const char *key,
                    size_t len, int *hint, int *alias)
{
    for (int k = 0; k < n; k++) {
        int f = (*hint + k) % n;
        const field_name *d = &fields[f];
        if ((*alias = d->alias && d->alias_len == len &&
                      memcmp(d->alias, key, len) == 0) ||
            (d->len == len && memcmp(d->name, key, len) == 0)) {
            *hint = (f + 1) % n;
            return f;
        }
    }
    return -1;
}

/*
 * The members of obj by field (v[f]: under either spelling; NULL if
 * absent).  Every member must be a known field given under one spelling
 * only; the first member in order that is not fails: an unknown one by
 * its name as spelt, a field given twice at its canonical spelling.
 */
static int members(json_t *obj, const field_name *fields, int n,
                   json_t **v, const char *path, char *err, size_t errlen)
{
    json_t *alias_v[RULE_FIELDS] = {NULL}, *m;
    int pos[RULE_FIELDS], at = 0, hint = 0, unknown_at = -1, twice = -1;
    const char *key, *unknown = NULL;

    for (int f = 0; f < n; f++)
        v[f] = NULL;
    json_object_foreach(obj, key, m) {
        int alias, f = field_of(fields, n, key, strlen(key), &hint, &alias);
        if (f < 0 && !unknown) {
            unknown = key;
            unknown_at = at;
        } else if (f >= 0 && alias) {
            alias_v[f] = m;
        } else if (f >= 0) {
            v[f] = m;
            pos[f] = at;
        }
        at++;
    }
    for (int f = 0; f < n; f++) {
        if (v[f] && alias_v[f] && (twice < 0 || pos[f] < pos[twice]))
            twice = f;
        if (!v[f])
            v[f] = alias_v[f];
    }
    if (unknown && (twice < 0 || unknown_at < pos[twice]))
        return snprintf(err, errlen, "%s%s: unknown field", path, unknown),
               -1;
    if (twice >= 0)
        return snprintf(err, errlen, "%s%s: given twice, as %s and as %s",
                        path, fields[twice].name, fields[twice].name,
                        fields[twice].alias), -1;
    return 0;
}

/* Read an optional string member v (NULL: absent); -1 on a wrong type. */
static int get_str(json_t *v, const char *key, const char **out,
                   char *err, size_t errlen, const char *path)
{
    *out = NULL;
    if (!v)
        return 0;
    if (!json_is_string(v))
        return snprintf(err, errlen, "%s%s: must be a string", path, key), -1;
    if (strlen(json_string_value(v)) != json_string_length(v))
        return snprintf(err, errlen, "%s%s: holds a NUL byte", path, key), -1;
    *out = json_string_value(v);
    return 0;
}

/* An optional integer member: 1 read, 0 absent, -1 a wrong type. */
static int get_int(json_t *v, const char *key, int64_t *out, char *err,
                   size_t errlen)
{
    if (!v)
        return 0;
    if (!json_is_integer(v))
        return snprintf(err, errlen, "%s: must be an integer", key), -1;
    *out = (int64_t)json_integer_value(v);
    return 1;
}

/* A check of one string of a list: 0, or -1 with the reason in err. */
typedef int (*string_check)(const char *s, char *err, size_t errlen);

static int value_check(const char *s, char *err, size_t errlen)
{
    return rule_value_check(s, err, errlen);
}

static int id_check(const char *s, char *err, size_t errlen)
{
    if (rule_id_check(s) == 0)
        return 0;
    return snprintf(err, errlen, "must be a rule_id, 1..%d bytes of A-Z "
                    "a-z 0-9 . _ : -", RL_RULE_ID_MAX), -1;
}

/* One string or an array of 1..most strings (replaces: 0..most), each
 * passing check, into one block of NUL-ended strings (*out; *n of them).
 * v NULL: absent, *out NULL. */
static int parse_strings(json_t *v, const char *key, size_t most,
                         string_check check, char **out, uint32_t *n,
                         char *err, size_t errlen)
{
    size_t count = json_is_array(v) ? json_array_size(v) : 1, len = 0, at;
    char why[160];

    *out = NULL;
    *n = 0;
    if (!v)
        return 0;
    if (!json_is_array(v) && !json_is_string(v))
        return snprintf(err, errlen, "%s: must be a string or an array of "
                        "strings", key), -1;
    if (count > most || (count == 0 && check == value_check))
        return snprintf(err, errlen, "%s: must list 1..%zu strings, lists "
                        "%zu", key, most, count), -1;
    for (size_t i = 0; i < count; i++) {
        json_t *e = json_is_array(v) ? json_array_get(v, i) : v;
        const char *s = json_is_string(e) ? json_string_value(e) : NULL;
        if (!s || strlen(s) != json_string_length(e))
            return snprintf(err, errlen, "%s[%zu]: must be a string without "
                            "NUL bytes", key, i), -1;
        if (check(s, why, sizeof why))
            return snprintf(err, errlen, "%s[%zu]: %s", key, i, why), -1;
        len += strlen(s) + 1;
    }
    if (!(*out = malloc(len ? len : 1)))
        return snprintf(err, errlen, "out of memory"), -1;
    at = 0;
    for (size_t i = 0; i < count; i++) {
        const char *s = json_string_value(json_is_array(v)
                                              ? json_array_get(v, i) : v);
        size_t l = strlen(s) + 1;
        memcpy(*out + at, s, l);
        at += l;
    }
    *n = (uint32_t)count;
    return 0;
}

static int parse_match(json_t *m, rl_rule *r, char *err, size_t errlen)
{
    const char *endpoint, *tier;
    json_t *v[MATCH_FIELDS];

    if (!m)
        return 0;
    if (!json_is_object(m))
        return snprintf(err, errlen, "match: must be an object"), -1;
    if (members(m, match_fields, MATCH_FIELDS, v, "match.", err, errlen) ||
        get_str(v[M_ENDPOINT], "endpoint", &endpoint, err, errlen,
                "match.") ||
        get_str(v[M_TIER], "tier", &tier, err, errlen, "match.") ||
        parse_strings(v[M_VALUE], "match.value", RULE_VALUES_MAX,
                      value_check, &r->values, &r->nvalues, err, errlen))
        return -1;
    if (v[M_VALUE] && r->dim_id == RULE_DIM_GLOBAL)
        return snprintf(err, errlen, "match.value: not with dimension "
                        "\"global\" (it has no value)"), -1;
    if (endpoint && pattern_check(endpoint, err, errlen))
        return -1;
    for (size_t i = 0; tier && tier[i]; i++)
        if ((unsigned char)tier[i] < 0x20 || tier[i] == 0x7f)
            return snprintf(err, errlen, "match.tier: control byte at %zu",
                            i), -1;
    if (tier && (!*tier || strlen(tier) > RL_TIER_MAX))
        return snprintf(err, errlen, "match.tier: must be 1..%d bytes",
                        RL_TIER_MAX), -1;
    if (set_match(r, endpoint, tier))
        return snprintf(err, errlen, "out of memory"), -1;
    return 0;
}

/* Strings naming one of a fixed set; `def` when absent. */
static int parse_enum(json_t *v, const char *key, const char *const *names,
                      size_t n, int def, int *out, char *err, size_t errlen)
{
    const char *s;

    if (get_str(v, key, &s, err, errlen, ""))
        return -1;
    if (!s) {
        *out = def;
        return 0;
    }
    if ((*out = lookup(names, n, s)) < 0) {
        int len = snprintf(err, errlen, "%s: unknown value \"%.40s\" (one of",
                           key, s);
        for (size_t i = 0; i < n && len > 0 && (size_t)len < errlen; i++)
            len += snprintf(err + len, errlen - (size_t)len, " %s", names[i]);
        if (len > 0 && (size_t)len < errlen)
            snprintf(err + len, errlen - (size_t)len, ")");
        return -1;
    }
    return 0;
}

/* The dimension's name; its id when fixed (ruleset_index() gives the
 * others theirs). */
static int parse_dimension(json_t *v, rl_rule *r, char *err, size_t errlen)
{
    const char *name;

    if (get_str(v, "dimension", &name, err, errlen, ""))
        return -1;
    if (!(r->dim_len = rule_dim_name_len(name)))
        return snprintf(err, errlen, "dimension: \"%.40s\" is not a name: "
                        "1..%d bytes of a-z 0-9 _ . : -, starting with a "
                        "letter (e.g. user, api_key, ip, global, tenant, "
                        "header:x-api-version)", name, RL_DIM_NAME_MAX), -1;
    memcpy(r->dimension, name, r->dim_len + 1);
    r->dim_id = rule_dim_builtin(name, r->dim_len);
    return 0;
}

static int parse_numbers(json_t **v, rl_rule *r, char *err, size_t errlen)
{
    static const char *const algos[] = {"sliding_window", "token_bucket",
                                        "fixed_window", "gcra",
                                        "sliding_log"};
    int64_t limit = 0, window = 0, burst = 0;
    int algo, got;

    if ((got = get_int(v[F_LIMIT], "limit", &limit, err, errlen)) < 0)
        return -1;
    if (!got)
        return snprintf(err, errlen, "limit: required"), -1;
    if ((got = get_int(v[F_WINDOW], "window_seconds", &window, err,
                       errlen)) < 0)
        return -1;
    if (!got)
        return snprintf(err, errlen, "window_seconds: required"), -1;
    if ((got = get_int(v[F_BURST], "burst", &burst, err, errlen)) < 0)
        return -1;
    if (got && burst <= 0)
        return snprintf(err, errlen, "burst: must be 1..%lld, got %lld",
                        (long long)RL_LIMIT_MAX, (long long)burst), -1;
    if (parse_enum(v[F_ALGORITHM], "algorithm", algos, COUNT(algos),
                   RL_ALGO_SLIDING_WINDOW, &algo, err, errlen))
        return -1;
    r->window_s = window;
    return algo_params_init(&r->ap, algo, limit, burst, window, err, errlen);
}

/* "lease": units a limiter takes from Redis at once (lease.h), at least
 * RULE_LEASE_MIN and at most half of what the rule admits at once (its
 * limit; a bucket's burst), so a fleet's leases never hold the whole of
 * it between two limiters.  Not on mode "log" rules (they charge
 * nothing that a lease could hold), and only on the four algorithms the
 * lease's bound is stated for (lease.h). */
static int parse_lease(json_t *v, rl_rule *r, char *err, size_t errlen)
{
    int64_t most = r->ap.burst ? r->ap.burst : r->ap.limit;
    int got = get_int(v, "lease", &r->lease, err, errlen);

    if (got <= 0)
        return got;
    most /= 2;
    if (most < RULE_LEASE_MIN || r->lease < RULE_LEASE_MIN ||
        r->lease > most)
        return snprintf(err, errlen, "lease: must be %d..%lld (at most half "
                        "the %s), got %lld", RULE_LEASE_MIN, (long long)most,
                        r->ap.burst ? "burst" : "limit",
                        (long long)r->lease), -1;
    if (r->ap.algo > RL_ALGO_GCRA) /* e.g. a log of timestamps: exact */
        return snprintf(err, errlen, "lease: not with algorithm %s",
                        algo_name(r->ap.algo)), -1;
    if (r->mode == RL_MODE_LOG)
        return snprintf(err, errlen, "lease: not with mode \"log\" (it "
                        "charges nothing to lease)"), -1;
    return 0;
}

static int parse_meta(json_t **v, rl_rule *r, char *err, size_t errlen)
{
    const char *updated;
    int got;

    r->version = 1;
    if ((got = get_int(v[F_VERSION], "version", &r->version, err, errlen)) < 0)
        return -1;
    if (got && r->version < 0)
        return snprintf(err, errlen, "version: must be >= 0"), -1;
    if (get_str(v[F_UPDATED], "updated_at", &updated, err, errlen, ""))
        return -1;
    if (updated) {
        if (strlen(updated) >= sizeof r->updated_at || rfc3339_check(updated))
            return snprintf(err, errlen,
                            "updated_at: must be RFC 3339, e.g. "
                            "2026-11-29T10:00:00Z"), -1;
        strcpy(r->updated_at, updated);
    }
    return 0;
}

/* "unlimited": true instead of the numbers (rule_values.h): a rule that
 * charges nothing takes none of the members that say how it charges. */
static int parse_limits(json_t **v, rl_rule *r, char *err, size_t errlen)
{
    static const int numbers[] = {F_LIMIT, F_WINDOW, F_BURST, F_ALGORITHM,
                                  F_FAILURE, F_LEASE};

    if (!v[F_UNLIMITED])
        return parse_numbers(v, r, err, errlen);
    if (!json_is_boolean(v[F_UNLIMITED]))
        return snprintf(err, errlen, "unlimited: must be true or false"), -1;
    if (json_is_false(v[F_UNLIMITED]))
        return parse_numbers(v, r, err, errlen);
    for (size_t i = 0; i < COUNT(numbers); i++)
        if (v[numbers[i]])
            return snprintf(err, errlen, "unlimited: not with %s (an "
                            "unlimited rule charges nothing)",
                            rule_fields[numbers[i]].name), -1;
    if (r->mode == RL_MODE_LOG)
        return snprintf(err, errlen, "unlimited: not with mode \"log\" (an "
                        "unlimited rule charges nothing to report)"), -1;
    r->unlimited = 1;
    return 0;
}

static int parse_rule(json_t *obj, rl_rule *r, char *err, size_t errlen)
{
    json_t *v[RULE_FIELDS];
    const char *id;

    if (!json_is_object(obj))
        return snprintf(err, errlen, "rule: must be an object"), -1;
    if (members(obj, rule_fields, RULE_FIELDS, v, "", err, errlen) ||
        get_str(v[F_RULE_ID], "rule_id", &id, err, errlen, ""))
        return -1;
    if (!id)
        return snprintf(err, errlen, "rule_id: required"), -1;
    if (rule_id_check(id))
        return snprintf(err, errlen,
                        "rule_id: must be 1..%d bytes of A-Z a-z 0-9 . _ : -"
                        ", not . or ..", RL_RULE_ID_MAX), -1;
    strcpy(r->id, id);
    if (!v[F_DIMENSION])
        return snprintf(err, errlen, "dimension: required"), -1;
    if (parse_dimension(v[F_DIMENSION], r, err, errlen) ||
        parse_enum(v[F_MODE], "mode", mode_names, COUNT(mode_names),
                   RL_MODE_ENFORCE, &r->mode, err, errlen) ||
        parse_enum(v[F_FAILURE], "failure_mode", failure_names,
                   COUNT(failure_names), RL_FAIL_FALLBACK, &r->failure, err,
                   errlen) ||
        parse_limits(v, r, err, errlen) ||
        parse_match(v[F_MATCH], r, err, errlen) ||
        parse_strings(v[F_REPLACES], "replaces", RULE_REPLACES_MAX,
                      id_check, &r->replaces, &r->nreplaces, err, errlen) ||
        parse_meta(v, r, err, errlen) ||
        parse_lease(v[F_LEASE], r, err, errlen))
        return -1;
    r->has_replaces = v[F_REPLACES] != NULL;
    return rule_values_rule_check(r, err, errlen);
}

int rule_from_json(json_t *obj, rl_rule *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    if (parse_rule(obj, r, err, errlen)) {
        rule_clear(r);
        return -1;
    }
    rule_shape_init(&r->shape, r->id, &r->ap);
    return 0;
}
