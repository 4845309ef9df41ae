/*
 * options.c -- rl_config_new/set/free.  Every option is a string, so the same
 * calls serve C code, a config file and a language binding; values are
 * checked here, when they are set, so rl_limiter_new() fails only for
 * reasons that need the options together (the store cannot open, the rules
 * do not parse).
 */
#include "options.h"
#include "error.h"

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
    return rl_fail(NULL, RL_EOPTION,
                   "unknown option \"%.40s\" (store, rules_file, rules, "
                   "timeout_ms, memory_max_bytes, connect_timeout_ms, "
                   "redis_connections, degraded_start, fleet_size, "
                   "fleet_name, breaker_failures, breaker_cooldown_ms, "
                   "redis_layout)",
                   name);
}
