/*
 * options.c -- rl_config_new/set/free.  Every option is a string, so the same
 * calls serve C code, a config file and a language binding; values are
 * checked here, when they are set, so rl_limiter_new() fails only for
 * reasons that need the options together (the store cannot open, the rules
 * do not parse).
 */
#include "options.h"
#include "error.h"
#include "log.h"
#include "redis_uri.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_STORE "memory://"
#define DEFAULT_TIMEOUT_MS 5
#define DEFAULT_MEMORY_MAX (1LL << 30)

void config_defaults(struct rl_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->timeout_ms = DEFAULT_TIMEOUT_MS;
    cfg->memory_max_bytes = DEFAULT_MEMORY_MAX;
    cfg->connect_timeout_ms = 1000;
    cfg->redis_connections = 2;
    cfg->degraded_start = 0;
    cfg->fleet_size = 1;
    cfg->breaker_failures = 5;
    cfg->breaker_cooldown_ms = 1000;
    cfg->rules_refresh_s = RULES_REFRESH_DEFAULT_S;
    cfg->rules_push = 1;
    cfg->log_fn = log_stderr;
}

RL_EXPORT rl_config *rl_config_new(void)
{
    rl_config *cfg = malloc(sizeof *cfg);

    if (cfg) {
        config_defaults(cfg);
        if (!(cfg->store = strdup(DEFAULT_STORE))) {
            free(cfg);
            return NULL;
        }
    }
    return cfg;
}

RL_EXPORT void rl_config_free(rl_config *cfg)
{
    if (!cfg)
        return;
    free(cfg->store);
    free(cfg->rules_file);
    free(cfg->rules);
    free(cfg->fleet_name);
    free(cfg->rules_source);
    free(cfg->rules_key);
    free(cfg);
}

/* A decimal integer with an optional K/M/G (x1024) suffix, in [lo, hi]. */
static int parse_size(const char *name, const char *v, int64_t lo, int64_t hi,
                      int suffixes, int64_t *out)
{
    char *end;
    long long n;
    int shift = 0;

    errno = 0;
    n = strtoll(v, &end, 10);
    if (end == v || errno || n < 0 || (*v < '0' || *v > '9'))
        return rl_fail(NULL, RL_EOPTION, "%s: \"%.40s\" is not a number",
                       name, v);
    if (suffixes && *end) {
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
                       name, v);
    if (n > (hi >> shift) || (n << shift) < lo)
        return rl_fail(NULL, RL_EOPTION, "%s: must be %lld..%lld", name,
                       (long long)lo, (long long)hi);
    *out = (int64_t)n << shift;
    return RL_OK;
}

static int set_string(char **slot, const char *value)
{
    char *copy = strdup(value);

    if (!copy)
        return rl_fail(NULL, RL_ENOMEM, "copying an option");
    free(*slot);
    *slot = copy;
    return RL_OK;
}

static int unknown(const char *name)
{
    return rl_fail(NULL, RL_EOPTION,
                   "unknown option \"%.40s\" (store, rules_file, rules, "
                   "timeout_ms, memory_max_bytes, connect_timeout_ms, "
                   "redis_connections, degraded_start, fleet_size, "
                   "fleet_name, breaker_failures, breaker_cooldown_ms, "
                   "redis_layout, rules_source, rules_key, rules_refresh_s, "
                   "rules_push, rules_file_save)",
                   name);
}

/* rules_source: "store", one Redis server's URI, or "file:PATH".  A URI
 * is parsed now so that a typo fails here; "store" is resolved by
 * rl_limiter_new(), which knows the store. */
static int set_rules_source(rl_config *cfg, const char *value)
{
    redis_uri u;
    char why[200];

    if (strncmp(value, "file:", 5) == 0) {
        if (!value[5])
            return rl_fail(NULL, RL_EOPTION, "rules_source: file: needs a "
                           "path (file:/etc/myapp/rules.json)");
        return set_string(&cfg->rules_source, value);
    }
    if (strcmp(value, "store") != 0 &&
        redis_uri_parse(value, &u, why, sizeof why) != 0)
        return rl_fail(NULL, RL_EOPTION, "rules_source: %s (expected "
                       "store, redis://, unix:// or file:PATH)", why);
    return set_string(&cfg->rules_source, value);
}

/* Redis key and channel name: printable, no spaces, so it reads the same
 * in a log line and in redis-cli. */
static int set_rules_key(rl_config *cfg, const char *value)
{
    size_t n = strlen(value);

    if (n == 0 || n > RULES_KEY_MAX)
        return rl_fail(NULL, RL_EOPTION, "rules_key: 1..%d bytes",
                       RULES_KEY_MAX);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)value[i] <= 0x20 || (unsigned char)value[i] >= 0x7f)
            return rl_fail(NULL, RL_EOPTION, "rules_key: printable ASCII "
                           "without spaces only");
    return set_string(&cfg->rules_key, value);
}

static int set_rules_option(rl_config *cfg, const char *name,
                            const char *value)
{
    if (strcmp(name, "rules_source") == 0)
        return set_rules_source(cfg, value);
    if (strcmp(name, "rules_key") == 0)
        return set_rules_key(cfg, value);
    if (strcmp(name, "rules_refresh_s") == 0)
        return parse_size(name, value, 1, 86400, 0, &cfg->rules_refresh_s);
    if (strcmp(name, "rules_push") == 0)
        return parse_size(name, value, 0, 1, 0, &cfg->rules_push);
    if (strcmp(name, "rules_file_save") == 0)
        return parse_size(name, value, 0, 1, 0, &cfg->rules_file_save);
    return unknown(name);
}

RL_EXPORT int rl_config_set(rl_config *cfg, const char *name,
                            const char *value)
{
    if (!cfg || !name || !value)
        return rl_fail(NULL, RL_EINVAL, "rl_config_set: NULL argument");
    if (strcmp(name, "store") == 0) {
        if (!*value)
            return rl_fail(NULL, RL_EOPTION, "store: empty URI");
        return set_string(&cfg->store, value);
    }
    if (strcmp(name, "rules_file") == 0)
        return set_string(&cfg->rules_file, value);
    if (strcmp(name, "rules") == 0)
        return set_string(&cfg->rules, value);
    if (strcmp(name, "timeout_ms") == 0)
        return parse_size(name, value, 1, 60000, 0, &cfg->timeout_ms);
    if (strcmp(name, "memory_max_bytes") == 0)
        return parse_size(name, value, 1 << 20, INT64_MAX / 2, 1,
                          &cfg->memory_max_bytes);
    if (strcmp(name, "connect_timeout_ms") == 0)
        return parse_size(name, value, 1, 60000, 0, &cfg->connect_timeout_ms);
    if (strcmp(name, "redis_connections") == 0)
        return parse_size(name, value, 1, 16, 0, &cfg->redis_connections);
    if (strcmp(name, "degraded_start") == 0)
        return parse_size(name, value, 0, 1, 0, &cfg->degraded_start);
    if (strcmp(name, "fleet_size") == 0) {
        if (strcmp(value, "auto") == 0) {
            cfg->fleet_size = 0;
            return RL_OK;
        }
        return parse_size(name, value, 1, 100000, 0, &cfg->fleet_size);
    }
    if (strcmp(name, "fleet_name") == 0) {
        size_t n = strlen(value);
        if (n == 0 || n > 64 || strpbrk(value, "{} \t\r\n"))
            return rl_fail(NULL, RL_EOPTION, "fleet_name: 1..64 bytes, no "
                           "braces or spaces");
        return set_string(&cfg->fleet_name, value);
    }
    if (strcmp(name, "breaker_failures") == 0)
        return parse_size(name, value, 1, 1000, 0, &cfg->breaker_failures);
    if (strcmp(name, "breaker_cooldown_ms") == 0)
        return parse_size(name, value, 10, 600000, 0,
                          &cfg->breaker_cooldown_ms);
    if (strcmp(name, "redis_layout") == 0) {
        if (strcmp(value, "plain") != 0 && strcmp(value, "compact") != 0)
            return rl_fail(NULL, RL_EOPTION, "redis_layout: \"plain\" or "
                           "\"compact\", not \"%.40s\"", value);
        cfg->redis_compact = strcmp(value, "compact") == 0;
        return RL_OK;
    }
    if (strncmp(name, "rules_", 6) == 0)
        return set_rules_option(cfg, name, value);
    return unknown(name);
}

RL_EXPORT int rl_config_set_log(rl_config *cfg, rl_log_fn *fn, void *arg)
{
    if (!cfg)
        return rl_fail(NULL, RL_EINVAL, "rl_config_set_log: cfg is NULL");
    cfg->log_fn = fn;
    cfg->log_arg = arg;
    return RL_OK;
}
