/*
 * options.c -- rl_config_new/set/free over one table of the options.  Every
 * option is a string, so the same calls serve C code, a config file and a
 * language binding.  opt_table below is the one place an option is
 * described: its name, kind, bounds, default and a line of doc.  Parsing,
 * the error text (made from the bounds, so it cannot drift from them), the
 * defaults and the list in the "unknown option" message all come from it,
 * and tests/check_options.c holds the docs' lists to it.  Values are
 * checked here, when they are set, so rl_limiter_new() fails only for
 * reasons that need the options together (the store cannot open, the
 * rules do not parse).
 */
#include "options.h"
#include "error.h"
#include "log.h"
#include "redis_uri.h"
#include "siphash.h"
#include "store_shm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_store(const opt_def *o, const char *value);
static int check_fleet_name(const opt_def *o, const char *value);
static int check_rules_source(const opt_def *o, const char *value);
static int check_hash_key(const opt_def *o, const char *value)
{
    uint64_t key[2];

    if (siphash_key_parse(value, key) != 0)
        return rl_fail(NULL, RL_EOPTION, "%s: must be %d hex digits",
                       o->name, SIPHASH_KEY_HEX);
    return RL_OK;
}

static int check_rules_key(const opt_def *o, const char *value);
static int check_events_redis(const opt_def *o, const char *value);
static int check_hash_key(const opt_def *o, const char *value);

#define OFF(field) offsetof(struct rl_config, field)
#define STR_(x) #x
#define STR(x) STR_(x)
/* One row each: a number (OPT_INT, OPT_BYTES, OPT_BOOL, OPT_INT_AUTO),
 * a string, or a choice. */
#define NUM(n, k, f, l, h, d, doc_) \
    {.name = n, .kind = k, .off = OFF(f), .lo = l, .hi = h, .def = d, .doc = doc_}
#define TXT(n, f, l, h, v, c, d, doc_) \
    {.name = n, .kind = OPT_TEXT, .off = OFF(f), .lo = l, .hi = h, .values = v, \
     .check = c, .def = d, .doc = doc_}
#define ENUM(n, f, v, d, doc_) \
    {.name = n, .kind = OPT_ENUM, .off = OFF(f), .values = v, .def = d, .doc = doc_}

static const opt_def opt_table[] = {
    TXT("store", store, 0, 0, "store URI", check_store, STORE_DEFAULT, "where the state lives"),
    TXT("rules_file", rules_file, 0, 0, "path", NULL, NULL, "rule file loaded at create"),
    TXT("rules", rules, 0, 0, "JSON text", NULL, NULL, "rule set (JSON) loaded at create"),
    NUM("timeout_ms", OPT_INT, timeout_ms, 1, 60000, "50", "longest a check waits for Redis"),
    NUM("memory_max_bytes", OPT_BYTES, memory_max_bytes, 1 << 20, INT64_MAX / 2, "1073741824",
        "cap on the memory store"),
    NUM("shm_size", OPT_BYTES, shm_size, STORE_SHM_SIZE_MIN, STORE_SHM_SIZE_MAX,
        STR(STORE_SHM_SIZE_DEFAULT), "shm://NAME: the shared region's size"),
    NUM("connect_timeout_ms", OPT_INT, connect_timeout_ms, 1, 60000, "1000", "a Redis (re)connect"),
    NUM("redis_connections", OPT_INT, redis_connections, 1, 16, "2", "connections per server"),
    NUM("degraded_start", OPT_BOOL, degraded_start, 0, 1, "0", "1: start while Redis is away"),
    NUM("fleet_size", OPT_INT_AUTO, fleet_size, 1, 100000, "auto", "limiters sharing the limits"),
    TXT("fleet_name", fleet_name, 1, 64, NULL, check_fleet_name, FLEET_NAME_DEFAULT,
        "which fleet \"auto\" counts"),
    NUM("fleet_size_unknown", OPT_INT, fleet_size_unknown, 1, 100000, "8",
        "\"auto\": the fallback's divisor until the fleet is first counted"),
    NUM("breaker_failures", OPT_INT, breaker_failures, 1, 1000, "5", "failures that open the breaker"),
    NUM("breaker_cooldown_ms", OPT_INT, breaker_cooldown_ms, 10, 600000, "1000",
        "the breaker's time open before a probe"),
    ENUM("redis_layout", redis_compact, "plain|compact", "plain", "how state is kept in Redis"),
    TXT("hash_key", hash_key, 0, 0, "32 hex digits", check_hash_key,
        NULL, "the client hash key (compact layout, a new shm:// region), the same on every limiter of a fleet"),
    TXT("rules_source", rules_source, 0, 0, "store, redis://, rediss://, unix://, file:path",
        check_rules_source, NULL, "where live rules come from"),
    TXT("rules_key", rules_key, 1, RULES_KEY_MAX, NULL, check_rules_key, RULES_KEY_DEFAULT,
        "the rule set's Redis key and channel"),
    NUM("rules_refresh_s", OPT_INT, rules_refresh_s, 1, 86400, STR(RULES_REFRESH_DEFAULT_S),
        "the timed read of the rules source"),
    NUM("rules_push", OPT_BOOL, rules_push, 0, 1, "1", "0: no SUBSCRIBE, timed reads only"),
    NUM("rules_file_save", OPT_BOOL, rules_file_save, 0, 1, "0", "1: keep rules_file current"),
    TXT("tls_ca_file", tls_ca_file, 0, 0, "path", NULL, NULL, "rediss://: the CAs trusted (PEM)"),
    TXT("tls_ca_dir", tls_ca_dir, 0, 0, "path", NULL, NULL, "rediss://: a directory of CAs"),
    TXT("tls_cert_file", tls_cert_file, 0, 0, "path", NULL, NULL,
        "rediss://: client certificate (mutual TLS)"),
    TXT("tls_key_file", tls_key_file, 0, 0, "path", NULL, NULL, "rediss://: its private key"),
    NUM("tls_verify", OPT_BOOL, tls_verify, 0, 1, "1",
        "0: do not verify the server (insecure)"),
    TXT("sentinel_password", sentinel_password, 1, 255, NULL, NULL, NULL,
        "redis-sentinel://: the sentinels' AUTH password"),
    NUM("metrics", OPT_BOOL, metrics, 0, 1, "1", "0: count nothing for rl_metrics_write"),
    NUM("near_limit_pct", OPT_INT, near_limit_pct, 0, 100, "20",
        "a pass with less than this % of the limit left is near-limit"),
    TXT("events_redis", events_redis, 0, 0, "redis://, unix://", check_events_redis, NULL,
        "where rejection events go (a Redis Stream); not set: none"),
    TXT("events_stream", events_stream, 1, RULES_KEY_MAX, NULL, check_rules_key,
        EVENTS_STREAM_DEFAULT, "the stream's key"),
    NUM("events_maxlen", OPT_INT, events_maxlen, 1, 1000000000, "100000",
        "the stream's length cap (XADD MAXLEN ~)"),
    NUM("events_ring", OPT_INT, events_ring, 64, 1048576, "4096",
        "events queued for the sender at most"),
    NUM("events_sample", OPT_INT, events_sample, 1, 1000000, "1",
        "one denial in this many (per thread) becomes an event"),
    ENUM("events_key", events_key, "plain|hashed|none", "hashed",
         "the client key in an event: as is, hashed, or left out"),
    NUM("deny_cache", OPT_INT, deny_cache, 0, 16777216, "4096",
        "Redis denials answered locally until they end (entries); 0: off"),
    NUM("lease_entries", OPT_INT, lease_entries, 0, 16777216, "1024",
        "grants of rules' leases kept (entries, one per client and rule); "
        "0: leases off"),
    NUM("redis_functions", OPT_BOOL, redis_functions, 0, 1, "1",
        "1: FUNCTION LOAD the script as a library and FCALL it (EVALSHA where "
        "refused); 0: EVALSHA always"),
    ENUM("redis_command", redis_command, "auto|module|lua", "auto",
         "RL.CHECK (ratelimit.so) where a server has it, always, or never"),
    ENUM("redis_oldest_limiter", redis_oldest_limiter, "1.0|1.1", "1.0",
         "the oldest libratelimit sharing the Redis keys; 1.1: the lean "
         "token bucket writes its expiry alone"),
};

#define NOPTS (sizeof opt_table / sizeof opt_table[0])

const opt_def *options_table(size_t *n)
{
    *n = NOPTS;
    return opt_table;
}

const opt_def *options_find(const char *name)
{
    for (size_t i = 0; i < NOPTS; i++)
        if (strcmp(opt_table[i].name, name) == 0)
            return &opt_table[i];
    return NULL;
}

static int64_t *num_slot(struct rl_config *cfg, const opt_def *o)
{
    return (int64_t *)((char *)cfg + o->off);
}

static char **text_slot(struct rl_config *cfg, const opt_def *o)
{
    return (char **)((char *)cfg + o->off);
}

/* ---- parsing ----------------------------------------------------------- */

/* A decimal integer in [o->lo, o->hi], with an optional K/M/G (x1024)
 * suffix for OPT_BYTES. */
static int parse_num(const opt_def *o, const char *v, int64_t *out)
{
    char *end;
    long long n;
    int shift = 0;

    errno = 0;
    n = strtoll(v, &end, 10);
    if (end == v || errno || n < 0 || (*v < '0' || *v > '9'))
        return rl_fail(NULL, RL_EOPTION, "%s: \"%.40s\" is not a number",
                       o->name, v);
    if (o->kind == OPT_BYTES && *end) {
        switch (*end) {
        case 'K': case 'k': shift = 10; break;
        case 'M': case 'm': shift = 20; break;
        case 'G': case 'g': shift = 30; break;
        default: shift = -1;
        }
        end++;
    }
    if (*end || shift < 0)
        return rl_fail(NULL, RL_EOPTION, "%s: \"%.40s\" has trailing text",
                       o->name, v);
    if (n > (o->hi >> shift) || (n << shift) < o->lo)
        return rl_fail(NULL, RL_EOPTION, "%s: must be %lld..%lld, got %.40s",
                       o->name, (long long)o->lo, (long long)o->hi, v);
    *out = (int64_t)n << shift;
    return RL_OK;
}

/* The index of v among o->values ("a|b|c"), or -1. */
static int enum_index(const opt_def *o, const char *v)
{
    size_t vlen = strlen(v);
    int i = 0;

    for (const char *p = o->values; *p; i++) {
        size_t len = strcspn(p, "|");
        if (len == vlen && strncmp(p, v, len) == 0)
            return i;
        p += len + (p[len] == '|');
    }
    return -1;
}

/* `"a" or "b"` (or `"a", "b" or "c"`) from o->values, into buf. */
static void enum_list(const opt_def *o, int quote, char *buf, size_t len)
{
    const char *q = quote ? "\"" : "";
    size_t used = 0;

    buf[0] = '\0';
    for (const char *p = o->values; *p && used < len;) {
        size_t n = strcspn(p, "|");
        const char *sep = used == 0 ? "" : p[n] ? ", " : " or ";
        int w = snprintf(buf + used, len - used, "%s%s%.*s%s", sep, q,
                         (int)n, p, q);
        used += w > 0 ? (size_t)w : 0;
        p += n + (p[n] == '|');
    }
}

static int set_text(struct rl_config *cfg, const opt_def *o, const char *v)
{
    size_t n = strlen(v);
    char *copy;

    if (o->hi > 0 && (n < (size_t)o->lo || n > (size_t)o->hi))
        return rl_fail(NULL, RL_EOPTION, "%s: must be %lld..%lld bytes, "
                       "got %zu", o->name, (long long)o->lo,
                       (long long)o->hi, n);
    if (o->check) {
        int rc = o->check(o, v);
        if (rc != RL_OK)
            return rc;
    }
    if (!(copy = strdup(v)))
        return rl_fail(NULL, RL_ENOMEM, "copying an option");
    free(*text_slot(cfg, o));
    *text_slot(cfg, o) = copy;
    return RL_OK;
}

static int set_option(struct rl_config *cfg, const opt_def *o, const char *v)
{
    char choices[128];
    int i;

    switch (o->kind) {
    case OPT_TEXT:
        return set_text(cfg, o, v);
    case OPT_ENUM:
        if ((i = enum_index(o, v)) < 0) {
            enum_list(o, 1, choices, sizeof choices);
            return rl_fail(NULL, RL_EOPTION, "%s: %s, not \"%.40s\"",
                           o->name, choices, v);
        }
        *num_slot(cfg, o) = i;
        return RL_OK;
    case OPT_INT_AUTO:
        if (strcmp(v, "auto") == 0) {
            *num_slot(cfg, o) = 0;
            return RL_OK;
        }
        /* fall through */
    default:
        return parse_num(o, v, num_slot(cfg, o));
    }
}

/* ---- the string options' own checks ----------------------------------- */

static int check_store(const opt_def *o, const char *value)
{
    char why[160];

    if (!*value)
        return rl_fail(NULL, RL_EOPTION, "%s: empty URI", o->name);
    if (strncmp(value, STORE_SHM_SCHEME, strlen(STORE_SHM_SCHEME)) == 0 &&
        store_shm_name_check(value + strlen(STORE_SHM_SCHEME), why,
                             sizeof why) != 0)
        return rl_fail(NULL, RL_EOPTION, "%s: %s", o->name, why);
    return RL_OK;
}

static int check_fleet_name(const opt_def *o, const char *value)
{
    if (strpbrk(value, "{} \t\r\n"))
        return rl_fail(NULL, RL_EOPTION, "%s: no braces, spaces or line "
                       "breaks", o->name);
    return RL_OK;
}

/* "store", one Redis server's URI, or "file:PATH".  A URI is parsed now
 * so that a typo fails here; "store" is resolved by rl_limiter_new(),
 * which knows the store. */
static int check_rules_source(const opt_def *o, const char *value)
{
    redis_uri u;
    char why[200];

    if (strncmp(value, "file:", 5) == 0) {
        if (!value[5])
            return rl_fail(NULL, RL_EOPTION, "%s: file: needs a path "
                           "(file:/etc/myapp/rules.json)", o->name);
        return RL_OK;
    }
    if (strcmp(value, "store") != 0 &&
        redis_uri_parse(value, &u, why, sizeof why) != 0)
        return rl_fail(NULL, RL_EOPTION, "%s: %s (expected store, "
                       "redis://, rediss://, unix:// or file:PATH)", o->name,
                       why);
    return RL_OK;
}

/* Where the events go: a plain Redis server (the sender has no TLS). */
static int check_events_redis(const opt_def *o, const char *value)
{
    redis_uri u;
    char why[200];

    if (redis_uri_parse(value, &u, why, sizeof why) != 0)
        return rl_fail(NULL, RL_EOPTION, "%s: %s (expected redis:// or "
                       "unix://)", o->name, why);
    if (u.tls)
        return rl_fail(NULL, RL_EOPTION, "%s: rediss:// (TLS) is not "
                       "supported for events; use redis:// or unix://",
                       o->name);
    return RL_OK;
}

/* A Redis key and channel name: printable, no spaces, so it reads the
 * same in a log line and in redis-cli. */
static int check_rules_key(const opt_def *o, const char *value)
{
    for (const char *p = value; *p; p++)
        if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
            return rl_fail(NULL, RL_EOPTION, "%s: printable ASCII without "
                           "spaces only", o->name);
    return RL_OK;
}

/* ---- the docs' wording -------------------------------------------------- */

/* v, or "2^k \- 1" (mdoc) when v is one below a large power of two. */
static void bound_text(int64_t v, char *buf, size_t len)
{
    int k = 0;

    if (v > 0 && v >= INT32_MAX && ((uint64_t)v & ((uint64_t)v + 1)) == 0) {
        for (uint64_t p = (uint64_t)v + 1; p > 1; p >>= 1)
            k++;
        snprintf(buf, len, "2^%d \\- 1", k);
    } else {
        snprintf(buf, len, "%lld", (long long)v);
    }
}

void options_values_text(const opt_def *o, char *buf, size_t len)
{
    char lo[32], hi[32];

    bound_text(o->lo, lo, sizeof lo);
    bound_text(o->hi, hi, sizeof hi);
    switch (o->kind) {
    case OPT_TEXT:
        if (o->hi > 0)
            snprintf(buf, len, "%s .. %s bytes", lo, hi);
        else
            snprintf(buf, len, "%s", o->values);
        break;
    case OPT_ENUM:
        enum_list(o, 0, buf, len);
        break;
    case OPT_BOOL:
        snprintf(buf, len, "%s or %s", lo, hi);
        break;
    case OPT_INT_AUTO:
        snprintf(buf, len, "%s .. %s, or auto", lo, hi);
        break;
    default:
        snprintf(buf, len, "%s .. %s", lo, hi);
    }
}

/* ---- the calls ---------------------------------------------------------- */

void config_defaults(struct rl_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < NOPTS; i++)
        if (opt_table[i].kind != OPT_TEXT && opt_table[i].def)
            (void)set_option(cfg, &opt_table[i], opt_table[i].def);
    cfg->log_fn = log_stderr;
}

RL_EXPORT void rl_config_free(rl_config *cfg)
{
    if (!cfg)
        return;
    for (size_t i = 0; i < NOPTS; i++)
        if (opt_table[i].kind == OPT_TEXT)
            free(*text_slot(cfg, &opt_table[i]));
    free(cfg);
}

RL_EXPORT rl_config *rl_config_new(void)
{
    rl_config *cfg = malloc(sizeof *cfg);

    if (!cfg)
        return NULL;
    config_defaults(cfg);
    for (size_t i = 0; i < NOPTS; i++) {
        const opt_def *o = &opt_table[i];
        if (o->kind == OPT_TEXT && o->def &&
            !(*text_slot(cfg, o) = strdup(o->def))) {
            rl_config_free(cfg);
            return NULL;
        }
    }
    return cfg;
}

static int unknown(const char *name)
{
    char list[RL_ERRMSG_MAX];
    size_t used = 0;

    list[0] = '\0';
    for (size_t i = 0; i < NOPTS && used < sizeof list; i++) {
        int w = snprintf(list + used, sizeof list - used, "%s%s",
                         i ? ", " : "", opt_table[i].name);
        used += w > 0 ? (size_t)w : 0;
    }
    return rl_fail(NULL, RL_EOPTION, "unknown option \"%.40s\" (%s)", name,
                   list);
}

RL_EXPORT int rl_config_set(rl_config *cfg, const char *name,
                            const char *value)
{
    const opt_def *o;

    if (!cfg || !name || !value)
        return rl_fail(NULL, RL_EINVAL, "rl_config_set: NULL argument");
    if (!(o = options_find(name)))
        return unknown(name);
    return set_option(cfg, o, value);
}

RL_EXPORT int rl_config_set_log(rl_config *cfg, rl_log_fn *fn, void *arg)
{
    if (!cfg)
        return rl_fail(NULL, RL_EINVAL, "rl_config_set_log: cfg is NULL");
    cfg->log_fn = fn;
    cfg->log_arg = arg;
    return RL_OK;
}
